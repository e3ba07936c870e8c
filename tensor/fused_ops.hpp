// The fused ops of the backend interface (tensor/op_table.hpp): plain descriptors and results,
// no autograd. Each family has one differentiable op above the backend that checks its
// arguments, records the node and calls backend(device).<op>(...):
//   attention   nn::attention_fused (nn/attention.hpp)
//   cached attention  nn::cached_attention (nn/kv_cache.hpp), inference only
//   rows        nn::rms_norm, nn::swiglu, nn::rope (nn/fused.hpp)
//   KD loss     train::distill_loss, train::cross_entropy (train/losses.hpp)
//   head loss   train::head_loss: the LM heads and the KD loss, chunk by chunk (train/losses.hpp)
//   AdamW       train::adamw_update, train::global_norm (train/optim.hpp)
// and a composed version from primitive ops next to it, the oracle of its tests. The kernels may
// assume what the op checked; what each one reads and writes is stated below. Every result is a
// fresh contiguous tensor on the inputs' device unless said otherwise.
#pragma once

#include <cstdint>

#include "tensor/adamw_element.hpp"
#include "tensor/core_kind.hpp"
#include "tensor/tensor.hpp"

namespace cotan {

// ---- attention ----

// N_i of the affine bias beta_i = (alpha_ma - alpha_i) / N_i: the keys query i sees, or T.
enum class AffineN { visible, full };

// One attention core after the projections and RoPE (the math in nn/attention.hpp):
//   q        [B, H, T, d]
//   k, v     [B, Hkv, T, d]      H % Hkv == 0; query head h reads kv head h / (H / Hkv)
//   alpha    [B, H, T]           affine: phi(z); undefined otherwise
//   alpha_ma [H]                 affine: the running average, a constant
//   sigma    [H]                 sink: the sink logit per head; undefined otherwise
// One floating dtype, one device, any strides; off the tape.
struct AttentionSpec {
  CoreKind kind = CoreKind::softmax;
  Tensor q, k, v;
  Tensor alpha, alpha_ma;
  Tensor sigma;
  bool causal = true;
  AffineN affine_n = AffineN::visible;
};

// What attention_forward returns and attention_backward reads back.
struct AttentionForward {
  Tensor o;    // [B, H, T, d], q's dtype: alpha S + beta U (affine), else S
  Tensor s;    // [B, H, T, d]: S = sum_j P_ij v_j, in the backend's saved dtype
  Tensor lse;  // [B, H, T]: L_i, the sink's exp(sigma_h) included, in the backend's saved dtype
};

// Cotangents of the core's differentiable inputs, each in its input's shape and dtype; dalpha
// (affine) and dsigma (sink) are undefined for the other kinds. alpha_ma gets none.
struct AttentionGrads {
  Tensor dq, dk, dv, dalpha, dsigma;
};

// ---- cached attention (incremental decoding, nn/kv_cache.hpp) ----

// Tq new queries of each row against a cache of S slots whose last Tq slots hold the new keys
// (decode: Tq = 1; a prefill chunk or an evaluation's continuations: Tq > 1):
//   q        [B, H, Tq, d]     after RoPE
//   k, v     [B, Hkv, S, d]    S >= Tq; H % Hkv == 0, query head h reads kv head h / (H / Hkv)
//   visible  [B, S] bool       whether slot j of row b holds a token (padded slots do not)
//   sigma    [H]               sink: the sink logit per head; undefined otherwise
//   alpha    [B, H, Tq]        affine: phi(z) of each new token; undefined otherwise
//   alpha_ma [H]               affine: the frozen running average
//   u        [B, Hkv, Tq, d]   affine: U_i, the sum of the v that query i sees (the cache's
//                              running prefix sum: no pass over the slots for it)
//   count    [B, Tq] i64       affine: N_i, the number of slots query i sees
// Query i sees slot j when visible[b, j] and j <= S - Tq + i: the new tokens are causal among
// themselves and see every cached token. Every query must see at least one slot. Returns
// O [B, H, Tq, d] in q's dtype: S_i = sum_j P_ij v_j with P the softmax of c q_i . k_j over the
// slots it sees (the sink's exp(sigma_h) in the normaliser), and for affine
// O_i = alpha_i S_i + (alpha_ma - alpha_i) / N_i U_i. One floating dtype for the floating
// operands, one device, any strides; inference only (no gradient).
struct CachedAttentionSpec {
  CoreKind kind = CoreKind::softmax;
  Tensor q, k, v, visible;
  Tensor sigma;
  Tensor alpha, alpha_ma, u, count;
};

// ---- rows: rms_norm, swiglu, rope ----
//
// C is the compute type: f64 for f64, f32 for f32 and bf16.
//   rms_norm_forward(x [R, D], weight [D], eps) -> y [R, D] (x's dtype), rstd [R] (C)
//       rstd = 1 / sqrt(mean(h^2) + eps), h = x in C; y = weight * round(h rstd), where round
//       rounds to x's dtype (the composed op's cast back).
//   rms_norm_backward(dy, x, weight, rstd) -> dx [R, D], dweight [D]
//       n = h rstd, dn = dy weight: dx = rstd (dn - n mean(dn n)); dweight = sum over rows of
//       dy round(n), summed in f64 over fixed blocks of rows in a fixed order (the same bits
//       whatever the thread count or schedule).
//   swiglu_forward(g, u) -> y = round(silu(g)) u;  swiglu_backward(dy, g, u) -> dg, du
//       (one shape, any length), silu(g) = g s, s = 1 / (1 + exp(-g)):
//       dg = dy u s (1 + g (1 - s)), du = dy silu(g).
//   rope_forward(x, cos, sin) -> y;  rope_backward(dy, cos, sin) -> dx
//       x (dy), cos and sin of one shape [..., d], d even, each with unit stride along the last
//       axis and any strides elsewhere (0 for broadcast dims). With halves x = [x1, x2],
//       c = [c1, c2], s = [s1, s2]:
//         y  = [x1 c1 - x2 s1,  x2 c2 + x1 s2]   (products rounded to x's dtype, as composed)
//         dx = [g1 c1 + g2 s2,  g2 c2 - g1 s1]
// One floating dtype (f64, f32, bf16) for every operand; rms_norm and swiglu inputs that are not
// contiguous are copied first.

struct RmsNormForward {
  Tensor y;     // [R, D], x's dtype
  Tensor rstd;  // [R], the compute dtype: what the backward reads
};

struct RmsNormGrads {
  Tensor dx;       // [R, D], x's dtype
  Tensor dweight;  // [D], the weight's dtype
};

struct SwigluGrads {
  Tensor dg, du;
};

// The compute dtype of the row kernels for `dtype`: f64 for f64, f32 otherwise.
inline DType row_compute_dtype(DType dtype) { return dtype == DType::f64 ? DType::f64 : DType::f32; }

// ---- KD loss (the math in train/losses.hpp) ----

// A target that takes no part in any loss (the HF / torch convention).
inline constexpr int64_t kIgnoreIndex = -100;

enum class KdLoss { fkl, rkl, jsd };

struct KdLossConfig {
  KdLoss kind = KdLoss::fkl;
  double temperature = 1.0;   // tau > 0
  double jsd_beta = 0.5;      // 0 < beta < 1, for jsd
  double kd_ratio = 1.0;      // in [0, 1]; 1 = pure KD (the paper), 0 = pure CE
  int64_t chunk_rows = 128;   // rows per parallel chunk of the CPU kernel (does not change results)
  bool slice_teacher_vocab = false;  // use the teacher's first V columns when its vocabulary is larger
};

// Means over the counted (not ignored) tokens: kd includes tau^2, teacher_entropy is
// H(softmax(u / tau)); parts that are not computed (kd with kd_ratio = 0, ce with kd_ratio = 1)
// are 0.
struct KdLossResult {
  double total = 0, kd = 0, ce = 0, teacher_entropy = 0;
  int64_t tokens = 0;  // counted tokens
  Tensor grad;         // d total / d student: the student's shape and dtype; undefined without want_grad
};

// Arguments of Backend::kd_loss, checked by the op:
//   student   [N, V] floating (f64 computes in f64, f32 and bf16 in f32), any strides
//   teacher   [N, Vt >= V] floating, its first V columns used; undefined when kd_ratio = 0
//   targets   [N] i32 or i64, each in [0, V) or kIgnoreIndex; undefined: every row counts
//             (then kd_ratio is 1)
//   want_grad whether to write the gradient (one [N, V] buffer, scaled by kd_ratio / count and
//             (1 - kd_ratio) / count, rows of ignored tokens 0)
//   grad_into where to write it (contiguous, the student's shape and dtype), or undefined for a
//             new buffer. It may be the student logits themselves: each row is read before any
//             of its columns is overwritten, so no [N, V] buffer is allocated.
// Returns after the loss values are on the host.

// ---- head loss: the LM heads and the KD loss, chunk by chunk ----

// Arguments of Backend::head_loss, checked by the op (train::head_loss):
//   hidden          [N, Ds] the student's final hidden states (after the last norm), floating
//   head            [V, Ds] the student's output projection (the embedding when tied), hidden's dtype
//   teacher_hidden  [N, Dt] and teacher_head [Vt, Dt], Vt >= V: the teacher's; undefined when
//                   kd_ratio = 0 (cross-entropy alone)
//   targets         [N] i32 or i64, or undefined (then kd_ratio is 1)
//   count           the counted (not ignored) tokens of all N rows: every chunk's loss and
//                   gradient are scaled to the mean over them
//   chunk_rows      rows per chunk (>= 1): at most chunk_rows x V logits of each model exist
// Contiguous or not; one device.
struct HeadLossSpec {
  Tensor hidden, head, teacher_hidden, teacher_head, targets;
  int64_t count = 0;
  int64_t chunk_rows = 256;
};

// The loss parts as KdLossResult (means over the counted tokens), and with want_grad
//   d_hidden [N, Ds] = G W,  d_head [V, Ds] = sum over chunks, in chunk order, of G_c^T H_c
// with G the gradient of the total with respect to the student logits, in hidden's dtype.
struct HeadLossResult {
  double total = 0, kd = 0, ce = 0, teacher_entropy = 0;
  int64_t tokens = 0;
  Tensor d_hidden, d_head;
};

// ---- AdamW ----

// One tensor's update: fresh p, m, v (the inputs are never written).
struct AdamWTensors {
  Tensor p, m, v;
};

// One parameter of a step's update (Backend::adamw_update_all): its p, g, m, v (contiguous, one
// shape, all f32 or all f64) and constants. With in_place, nothing else holds p, m or v, and the
// backend may write the results over them; either way it replaces p, m and v with the updated
// tensors.
struct AdamWJob {
  Tensor p, g, m, v;
  AdamWScalars<double> s;
  bool in_place = false;
};

}  // namespace cotan
