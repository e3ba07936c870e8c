// The row kernels of the fused layers on the kernel backends (kernels in cuda/kernels/rows.cuh),
// for host code in either compiler (no SIMT headers): rms_norm, swiglu and rope, forward and
// backward, with the contract and the results of the CPU's kernels (nn/fused_rows.hpp), on
// tensors that live on the backend's target.
//
// cotan::emu::launch runs the kernels in the SIMT emulator on host memory (tests, and the
// emulator serving cuda:0); cotan::cuda::launch on the current CUDA device and stream, where
// nn::rms_norm, nn::swiglu and nn::rope send tensors on a CUDA device.
#pragma once

#include "cotan_config.h"
#include "nn/fused_rows.hpp"
#include "tensor/tensor.hpp"

// Arguments as in nn/fused_rows.hpp (checked by the nn/fused.hpp ops): f64, f32 or bf16, on the
// target. rms_norm and swiglu copy non-contiguous inputs to a contiguous layout first; rope reads
// rows with any strides but a unit last stride. Results are ordered on the current stream.
namespace cotan::emu::launch {
rows::RmsNormForward rms_norm_forward(const Tensor& x, const Tensor& weight, double eps);
rows::RmsNormGrads rms_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& rstd);
Tensor swiglu_forward(const Tensor& g, const Tensor& u);
rows::SwigluGrads swiglu_backward(const Tensor& dy, const Tensor& g, const Tensor& u);
Tensor rope_forward(const Tensor& x, const Tensor& cos, const Tensor& sin);
Tensor rope_backward(const Tensor& dy, const Tensor& cos, const Tensor& sin);
}  // namespace cotan::emu::launch

#ifdef COTAN_HAVE_CUDA
namespace cotan::cuda::launch {
rows::RmsNormForward rms_norm_forward(const Tensor& x, const Tensor& weight, double eps);
rows::RmsNormGrads rms_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& rstd);
Tensor swiglu_forward(const Tensor& g, const Tensor& u);
rows::SwigluGrads swiglu_backward(const Tensor& dy, const Tensor& g, const Tensor& u);
Tensor rope_forward(const Tensor& x, const Tensor& cos, const Tensor& sin);
Tensor rope_backward(const Tensor& dy, const Tensor& cos, const Tensor& sin);
}  // namespace cotan::cuda::launch
#endif
