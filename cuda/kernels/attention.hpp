// The fused attention core of the kernel backends (kernels in cuda/kernels/attention.cuh), for
// host code in either compiler (no SIMT headers): softmax, sink and affine (DESIGN.md 1.1) on
// an nn::AttentionCore whose tensors live on the backend's target, with the result of the CPU's
// nn::attention_fused.
//
// cotan::emu::launch runs the kernels in the SIMT emulator on host memory (tests);
// cotan::cuda::launch on the current CUDA device and stream.
#pragma once

#include "cotan_config.h"
#include "nn/attention.hpp"
#include "tensor/tensor.hpp"

namespace cotan::attention_kernels {

// What the forward pass returns and the backward pass reads. All contiguous, on the target.
struct Forward {
  Tensor o;    // [B, H, T, d], q's dtype: alpha S + beta U (affine), else the same tensor as s
  Tensor s;    // [B, H, T, d], q's dtype: sum_j P_ij v_j
  Tensor lse;  // [B, H, T] f32: L_i, including exp(sigma_h) for the sink
};

// Cotangents of the core's differentiable inputs, each in its input's shape and dtype; dalpha
// (affine) and dsigma (sink) are undefined for the other kinds. alpha_ma gets none.
struct Grads {
  Tensor dq, dk, dv, dalpha, dsigma;
};

}  // namespace cotan::attention_kernels

// Arguments: the core (checked by nn::check_attention_core; f32 or bf16, head dim d <= 128,
// any strides), the forward result of the same core, and d_out = dLoss/dO [B, H, T, d].
// Non-contiguous inputs are copied to a contiguous layout first.
namespace cotan::emu::launch {
attention_kernels::Forward attention_forward(const nn::AttentionCore& core);
attention_kernels::Grads attention_backward(const nn::AttentionCore& core, const attention_kernels::Forward& saved,
                                            const Tensor& d_out);
// Whether bf16 cores of head dim 64 or 128 run the tensor-core kernels (on the GPU only on sm_80
// and newer); on by default, off runs the SIMT kernels for every core (tests compare the two).
void set_attention_tensor_cores(bool enabled);
}  // namespace cotan::emu::launch

#ifdef COTAN_HAVE_CUDA
namespace cotan::cuda::launch {
attention_kernels::Forward attention_forward(const nn::AttentionCore& core);
attention_kernels::Grads attention_backward(const nn::AttentionCore& core, const attention_kernels::Forward& saved,
                                            const Tensor& d_out);
// Whether bf16 cores of head dim 64 or 128 run the tensor-core kernels (on the GPU only on sm_80
// and newer); on by default, off runs the SIMT kernels for every core (tests compare the two).
void set_attention_tensor_cores(bool enabled);
}  // namespace cotan::cuda::launch
#endif
