// The fused distillation loss of the kernel backends (kernels in cuda/kernels/kd_loss.cuh), for
// host code in either compiler (no SIMT headers): the same losses, reductions and gradient as
// train::distill_loss (train/losses.hpp), on logits that live on the backend's target.
//
// cotan::emu::launch runs the kernels in the SIMT emulator on host memory (tests);
// cotan::cuda::launch on the current CUDA device and stream, where train::distill_loss sends
// student logits that are on a CUDA device.
#pragma once

#include <cstdint>

#include "cotan_config.h"
#include "tensor/tensor.hpp"
#include "train/losses.hpp"

namespace cotan::kd_loss {

// Means over the counted (not ignored) tokens, as train::LossParts reports them: kd includes
// tau^2, teacher_entropy is H(softmax(u / tau)); parts that are not computed are 0.
struct KdLossResult {
  double total = 0, kd = 0, ce = 0, teacher_entropy = 0;
  int64_t tokens = 0;  // counted tokens
  Tensor grad;         // d total / d student, student's shape and dtype, on the target; or undefined
};

}  // namespace cotan::kd_loss

// Arguments, all on the target (checked by the caller as train::distill_loss does):
//   student   [N, V] floating (f64, f32, bf16; f64 computes in f64, the others in f32)
//   teacher   [N, Vt >= V] floating, its first V columns used; undefined when kd_ratio = 0
//   targets   [N] i32 or i64, each in [0, V) or -100 (ignored); undefined: every row counts
//             (then kd_ratio must be 1)
//   want_grad whether to write the gradient (one [N, V] buffer, scaled by kd_ratio / count and
//             (1 - kd_ratio) / count, rows of ignored tokens 0)
//   grad_into where to write it (contiguous, the student's shape and dtype, on the target), or
//             undefined for a new buffer. It may be the student logits themselves: each row is
//             read before any of its columns is overwritten, so no [N, V] buffer is allocated.
// Non-contiguous logits are copied to a contiguous layout first. Returns after the loss values
// have been copied to the host (the gradient is ordered on the current stream).
namespace cotan::emu::launch {
kd_loss::KdLossResult kd_loss_forward_backward(const Tensor& student, const Tensor& teacher, const Tensor& targets,
                                               const train::LossConfig& config, bool want_grad,
                                               const Tensor& grad_into = Tensor());
}  // namespace cotan::emu::launch

#ifdef COTAN_HAVE_CUDA
namespace cotan::cuda::launch {
kd_loss::KdLossResult kd_loss_forward_backward(const Tensor& student, const Tensor& teacher, const Tensor& targets,
                                               const train::LossConfig& config, bool want_grad,
                                               const Tensor& grad_into = Tensor());
}  // namespace cotan::cuda::launch
#endif
