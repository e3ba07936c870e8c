#include "autograd/autograd.hpp"
