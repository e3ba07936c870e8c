// placeholder
#include "tensor/tensor.hpp"
