// placeholder: replaced by the kernel implementation
#include "tensor/cpu/backend.hpp"
