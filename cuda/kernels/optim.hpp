// The fused AdamW update of the kernel backends (kernel in cuda/kernels/optim.cuh), for host code
// in either compiler: the same update as train::adamw_update on the CPU (train/optim.hpp), on
// tensors that live on the backend's target.
//
// cotan::emu::launch runs the kernel in the SIMT emulator on host memory (tests and
// COTAN_CUDA_EMULATOR); cotan::cuda::launch on the current CUDA device and stream.
#pragma once

#include "cotan_config.h"
#include "tensor/tensor.hpp"
#include "train/adamw_element.hpp"

// Arguments: p, g, m, v contiguous, one shape, all f32 (s in float) or all f64 (s in double), on
// the target. Returns fresh p, m, v.
namespace cotan::emu::launch {
void adamw_update(const Tensor& p, const Tensor& g, const Tensor& m, const Tensor& v,
                  const train::AdamWScalars<double>& s, Tensor& p_out, Tensor& m_out, Tensor& v_out);
}  // namespace cotan::emu::launch

#ifdef COTAN_HAVE_CUDA
namespace cotan::cuda::launch {
void adamw_update(const Tensor& p, const Tensor& g, const Tensor& m, const Tensor& v,
                  const train::AdamWScalars<double>& s, Tensor& p_out, Tensor& m_out, Tensor& v_out);
}  // namespace cotan::cuda::launch
#endif
