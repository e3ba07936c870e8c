// The emulated kernel backend: every CUDA kernel (cuda/kernels/) compiled by g++ and run by the
// SIMT emulator (cuda/simt/), on host memory. Its tensors report Device::cpu() by default, so
// tests compare emu::backend().op(...) with cpu_backend().op(...) on the same inputs and read both
// results directly; serving cuda:0 (serve_device) it stands in for a GPU. Always built, also
// without CUDA.
#pragma once

#include "tensor/op_table.hpp"

namespace cotan::emu {

Backend& backend();

// Makes the emulated backend's tensors report `device` (still host memory), so that it can serve
// backend(Device::cuda(0)) (see kCudaEmulatorVariable); Device::cpu() by default. Call before
// the first tensor is made: tensors made before keep the device they reported.
void serve_device(Device device);

}  // namespace cotan::emu
