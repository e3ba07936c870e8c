// The emulated kernel backend: every CUDA kernel (cuda/kernels/) compiled by g++ and run by the
// SIMT emulator (cuda/simt/), on host memory. Its tensors report Device::cpu(), so tests compare
// emu::backend().op(...) with cpu_backend().op(...) on the same inputs and read both results
// directly. Always built, also without CUDA.
#pragma once

#include "tensor/op_table.hpp"

namespace cotan::emu {

Backend& backend();

}  // namespace cotan::emu
