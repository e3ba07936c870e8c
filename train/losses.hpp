// Distillation losses (docs/losses.md) and next-token cross-entropy.
//
// Per token t, with teacher logits u, student logits s over the student's vocabulary V and
// temperature tau, p = softmax(u / tau) (teacher), q = softmax(s / tau) (student):
//
//   fkl        tau^2 sum_v p_v (log p_v - log q_v)               dL/ds_v = tau (q_v - p_v)
//   rkl        tau^2 sum_v q_v (log q_v - log p_v)               dL/ds_v = tau q_v [d_v - sum_w q_w d_w],
//                                                                 d = log q - log p
//   jsd(beta)  M = beta p + (1 - beta) q,
//              tau^2 [beta KL(p || M) + (1 - beta) KL(q || M)]   dL/ds_v = tau (1 - beta) q_v [e_v - sum_w q_w e_w],
//                                                                 e = log q - log M
//   CE         log sum_v exp(s_v) - s_target   (temperature 1)   dL/ds_v = softmax(s)_v - [v = target]
//
//   total = kd_ratio * KD + (1 - kd_ratio) * CE
//
// Shapes: logits are [N, V] or [B, T, V] (B * T = N tokens); targets are [N] or [B, T], i32 or
// i64. A target of -100 (kIgnoreIndex, the HF / torch convention) marks a token that takes no part
// in any loss: not in KD, not in CE, not in the teacher entropy; its gradient row is 0. Every part
// is a mean over the counted (not ignored) tokens; with no counted token every part is 0 and so is
// the gradient. Targets may be an undefined Tensor when no CE is needed (kd_ratio = 1): every
// token is then counted.
//
// The teacher is a constant: no gradient flows into its logits. Its vocabulary may be larger than
// the student's only with slice_teacher_vocab (the first V columns are used; the rest are padding
// rows of the teacher's head). The teacher's dtype may differ from the student's (a bf16 teacher
// with an f32 student); values are converted to the student's compute type.
//
// Skipped parts: with kd_ratio = 1 the CE is not computed (reported as 0); with kd_ratio = 0 the
// KD loss and the teacher entropy are not computed (reported as 0) and the teacher is not read
// (it may be undefined). Reported values are 0 rather than NaN so that averages over steps stay
// finite.
//
// Two implementations of the same math:
//   distill_loss           the fused kernel of the logits' backend (Backend::kd_loss; on the CPU
//                          tensor/cpu/kd_loss.cpp). Rows are cut into chunks of chunk_rows, run in
//                          parallel. Per row (teacher and student side by side): one pass for the
//                          two maxima, one for the exponentials and their sums (both
//                          log-sum-exps), one for the losses and the gradient dL/ds (rkl and jsd
//                          take one more: their gradient needs a row sum of the loss terms). The
//                          gradient, already scaled by kd_ratio / count, goes straight into one
//                          preallocated buffer of the student's shape and dtype: the only N x V
//                          allocation. Other temporaries are a few rows per worker thread (kept
//                          for reuse) and the N per-row losses, summed in row order: the same
//                          bits whatever chunk_rows and the thread count. The pullback is
//                          g * that buffer (the buffer itself when g = 1: cotangents are
//                          read-only). No buffer is made when the student logits are not tracked
//                          or grad mode is off. f64 computes in f64, f32 and bf16 in f32; sums
//                          along a row are taken in blocks of 1024 in that type, added in f64.
//                          Student logits on a CUDA device run the same math in the kernels of
//                          cuda/kernels/kd_loss.cuh (a block per row, one read of both rows for
//                          the log-sum-exps); the loss parts are then scalars on that device.
//                          Donated logits: passed as an rvalue (std::move(logits), or a
//                          temporary) and referenced by nothing else (Tensor::sole_owner: no
//                          copy, view or saved value of a pullback), contiguous and tracked, the
//                          student logits are consumed: the gradient is written over them (each
//                          row is read before it is overwritten) and the loss allocates no N x V
//                          buffer at all. LossParts::gradient_in_logits says whether it happened;
//                          otherwise the call is the const& one. The trainer donates the model's
//                          logits, whose producer (the LM head's matmul) does not keep them.
//   distill_loss_composed  the same losses from primitive ops (log_softmax, exp, sum, gather...),
//                          differentiated by the engine: the oracle the fused kernel is tested
//                          against, and the fallback on devices without a fused kernel.
// Non-contiguous logits are copied to a contiguous layout first.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "tensor/fused_ops.hpp"
#include "tensor/tensor.hpp"

namespace cotan::train {

// The loss's plain data, shared with the backends' kernels (tensor/fused_ops.hpp): kIgnoreIndex,
// the KdLoss kinds and LossConfig {kind, temperature, jsd_beta, kd_ratio, chunk_rows,
// slice_teacher_vocab}.
using cotan::kIgnoreIndex;
using cotan::KdLoss;
using LossConfig = cotan::KdLossConfig;

// "fkl", "rkl" or "jsd"; throws "[loss] unknown KD loss 'x' (known: fkl, rkl, jsd)".
KdLoss parse_kd_loss(std::string_view name);
// Sets config.kind (and config.jsd_beta for "jsd:<beta>", e.g. "jsd:0.3") from a command-line spec.
void set_kd_loss(LossConfig& config, std::string_view spec);
std::string_view kd_loss_name(KdLoss kind);
// "fkl", "rkl" or "jsd:0.5": the spec set_kd_loss reads back.
std::string kd_loss_spec(const LossConfig& config);

// Scalars of the student's compute dtype (f64 or f32). total is differentiable with respect to
// the student logits; kd, ce and teacher_entropy are detached, for logging. teacher_entropy is the
// mean over counted tokens of H(softmax(u / tau)), so soft cross-entropy = kd / tau^2 + entropy.
struct LossParts {
  Tensor total;
  Tensor kd;
  Tensor ce;
  Tensor teacher_entropy;
  int64_t tokens = 0;  // counted (not ignored) tokens
  bool gradient_in_logits = false;  // the gradient was written over donated student logits
};

// Fused (the backend's kernel): see above. Errors name both shapes, e.g.
// "[loss] teacher logits [2, 4, 257] do not match the student logits [2, 5, 257]".
LossParts distill_loss(const Tensor& student_logits, const Tensor& teacher_logits, const Tensor& targets,
                       const LossConfig& config = {});
// The same, donating the student logits (see above): `student_logits` is left empty.
LossParts distill_loss(Tensor&& student_logits, const Tensor& teacher_logits, const Tensor& targets,
                       const LossConfig& config = {});
// Composed from primitive ops: the oracle; any device.
LossParts distill_loss_composed(const Tensor& student_logits, const Tensor& teacher_logits, const Tensor& targets,
                                const LossConfig& config = {});

// The LM heads fused into the loss (Backend::head_loss, tensor/fused_ops.hpp): the same parts as
// distill_loss on student logits hidden W^T and teacher logits teacher_hidden teacher_head^T,
// computed chunk_rows rows at a time, so neither model's [N, V] logits are ever allocated:
//   hidden          [N, Ds] or [B, T, Ds], the student's final hidden states (after the last norm)
//   head            [V, Ds], the student's output projection (the embedding matrix when tied:
//                   its gradient then adds to the embedding's)
//   teacher_hidden  [N, Dt] or [B, T, Dt], and teacher_head [Vt, Dt], Vt >= V (the first V rows
//                   with slice_teacher_vocab); undefined for cross-entropy alone (kd_ratio = 0)
// total is differentiable with respect to hidden and head (both gradients are computed in the
// forward pass, chunk by chunk: d_head sums the chunks in order, so the bits do not depend on the
// thread count); the teacher is a constant. Errors name the tensors and their shapes.
inline constexpr int64_t kHeadChunkRows = 256;
LossParts head_loss(const Tensor& hidden, const Tensor& head, const Tensor& teacher_hidden,
                    const Tensor& teacher_head, const Tensor& targets, const LossConfig& config = {},
                    int64_t chunk_rows = kHeadChunkRows);
// The composed form: distill_loss_composed on the two heads' whole logits; the oracle.
LossParts head_loss_composed(const Tensor& hidden, const Tensor& head, const Tensor& teacher_hidden,
                             const Tensor& teacher_head, const Tensor& targets, const LossConfig& config = {});

// Mean next-token cross-entropy over non-ignored tokens (the fused kernel with kd_ratio = 0).
Tensor cross_entropy(const Tensor& logits, const Tensor& targets);
Tensor cross_entropy(Tensor&& logits, const Tensor& targets);  // donating the logits
Tensor cross_entropy_composed(const Tensor& logits, const Tensor& targets);

}  // namespace cotan::train
