// The CUDA backend as tensor/backend.cpp finds it: backend(Device::cuda(i)) asks for it on first
// use (a registration from a static initializer would be dropped by the linker with the rest of
// an unreferenced object file of the static library).
#pragma once

#include "tensor/op_table.hpp"

namespace cotan {

// The kernel backend compiled by nvcc, or null when CUDA is not compiled in or no device is
// present (cuda_status() in cuda/runtime.hpp says why).
Backend* cuda_device_backend();

}  // namespace cotan
