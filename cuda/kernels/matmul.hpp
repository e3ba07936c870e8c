// Matmul entry points beyond the op table, for host code in either compiler (no SIMT headers):
// the TF32 switch of the cuBLAS path and the hand-written GEMM kernels of cuda/kernels/matmul.cuh.
//
// backend(Device::cuda()).matmul runs cuBLAS; matmul_kernel runs the hand-written kernels on the
// same arguments (batched, broadcast and transposed operands alike), so that a GPU test can
// compare the two. cotan::emu's matmul is always the kernel.
#pragma once

#include "cotan_config.h"
#include "tensor/tensor.hpp"

namespace cotan::emu::launch {
Tensor matmul_kernel(const Tensor& a, const Tensor& b);
}  // namespace cotan::emu::launch

#ifdef COTAN_HAVE_CUDA
namespace cotan::cuda {

// Whether f32 matmuls may round their operands to TF32 on tensor cores (cuBLAS
// CUBLAS_COMPUTE_32F_FAST_TF32: about 10 mantissa bits, f32 accumulation). Off by default;
// process-wide, read at each matmul.
void set_tf32(bool enabled);
bool tf32_enabled();

namespace launch {
Tensor matmul_kernel(const Tensor& a, const Tensor& b);
}  // namespace launch

}  // namespace cotan::cuda
#endif
