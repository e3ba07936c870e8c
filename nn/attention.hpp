// The attention core of every kind (docs/attention.md), after the projections and RoPE.
//
//   q        [B, H, T, d]
//   k, v     [B, Hkv, T, d]        H % Hkv == 0; query head h reads kv head h / (H / Hkv)
//   alpha    [B, H, T]             affine kinds: phi(z), differentiable; undefined otherwise
//   alpha_ma [H]                   affine kinds: the running average (a constant: no gradient)
//   sigma    [H]                   sink: the learnable sink logit per head; undefined otherwise
// returns O [B, H, T, d]: S for softmax and sink, alpha S + beta U for affine, with
//   beta_i = (alpha_ma - alpha_i) / N_i and U_i = sum of the visible v_j.
// The gate of the gated kinds is applied by the layer, outside this core.
//
// attention_fused runs the backend's hand-written tiled kernels (Backend::attention_forward and
// attention_backward; no T x T buffer; forward saves S and the logsumexp L for the backward);
// attention_composed builds the same function from primitive ops and materializes the T x T
// weights: it is the fused kernel's oracle, and attention_fused's path for dtypes the backend has
// no kernel for (f64 on CUDA).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "tensor/fused_ops.hpp"
#include "tensor/tensor.hpp"

namespace cotan::nn {

using cotan::AffineN;  // tensor/fused_ops.hpp

struct AttentionCore {
  Tensor q, k, v;
  Tensor alpha;     // affine only
  Tensor alpha_ma;  // affine only
  Tensor sigma;     // sink only
  bool causal = true;
  AffineN affine_n = AffineN::visible;
};

Tensor attention_composed(const AttentionCore& in);
Tensor attention_fused(const AttentionCore& in);

// The core as the backend's kernels take it: its kind (affine when alpha is defined, sink when
// sigma is, else softmax) and its tensors off the tape.
AttentionSpec core_spec(const AttentionCore& core);

// The differentiable inputs of a core, in the order the fused attention records them (and a
// vjp returns their gradients): q, k, v, then alpha (affine) and sigma (sink). alpha_ma is a
// buffer, read but not differentiated.
std::vector<Tensor> differentiable_inputs(const AttentionCore& core);
// `core` with those inputs replaced by xs, in the same order.
AttentionCore with_differentiable_inputs(AttentionCore core, const std::vector<Tensor>& xs);
// `core` with each of its tensors cast to dtype (alpha_ma included).
AttentionCore cast(AttentionCore core, DType dtype);

// The statistics (docs/attention.md, "Attention statistics") for one layer, from the effective weights A (P for softmax,
// P without the sink mass for sink, alpha P + beta on visible keys for affine). Averages are over
// batch rows and heads unless said otherwise.
struct AttentionStats {
  double first_token_weight = 0;  // mean over b, h, i >= 1 of A_i0
  // mean over b, h, i >= 1 of A_i0 / sum_j A_ij, over the rows whose sum is positive (NaN when
  // none is): the first token's share of the row, which the affine scale alpha does not change
  double first_token_share = 0;
  double entropy = 0;             // mean over b, h, i of the entropy of max(A, 0) / sum max(A, 0)
  double mean_logit = 0;          // mean over visible (i, j) of s_ij
  Tensor head_mass;               // [H] f64: mean over b, i of sum_j A_ij
  Tensor weight_sums;             // [B, T] f64: sum_j A_ij averaged over heads, per query
  Tensor row_sums;                // [B, H, T] f64: sum_j A_ij of each head's query
  // [T, T] f64, with `with_weights` only: A of batch row 0 averaged over heads (0 on masked keys)
  Tensor weights;
};

// Runs the forward pass without gradients and returns the statistics (q, k, v ... as above).
// `with_weights` also keeps batch row 0's A (AttentionStats::weights), T x T doubles.
AttentionStats attention_stats(const AttentionCore& in, bool with_weights = false);

// Checks the shapes and dtypes of `in` and throws "[attention] ..." naming the offending tensor.
void check_attention_core(const AttentionCore& in, std::string_view op);

}  // namespace cotan::nn
