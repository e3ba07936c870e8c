// The layers of Llama/Qwen2 decoders (docs/models.md), each a small description with
//   specs(prefix)          the parameters it declares, under HF names;
//   apply(x, ps[, st])     the forward pass (ps: a ParamView at the layer's prefix); layers with
//                          buffers return (y, st') and never change st.
// Shapes: x [B, T, D] unless said otherwise; Linear weights are [out, in] as in HF.
#pragma once

#include <optional>
#include <utility>
#include <vector>

#include "nn/attention.hpp"
#include "nn/attention_kinds.hpp"
#include "nn/config.hpp"
#include "nn/kv_cache.hpp"
#include "nn/params.hpp"

namespace cotan::nn {

// The pieces of the attention kinds, for models that assemble their own layers.
//
// phi maps the alpha projection z = x W_alpha^T [B, T, H] to alpha in [0, 1]:
//   linear_clip(z) = clamp(kLinearClipSlope z + kLinearClipOffset, 0, 1)   (derivative 0.1 on
//                    (-5, 5), 0 outside: alpha saturates at 0 and 1)
//   sigmoid(z)
inline constexpr double kLinearClipSlope = 0.1;
inline constexpr double kLinearClipOffset = 0.5;
Tensor linear_clip(const Tensor& z);
Tensor phi(const Tensor& z, AlphaFn fn);

// The output gate of the gated kinds: o * sigmoid(gate_logits), elementwise, both [B, T, H d]
// with gate_logits = x W_g^T.
Tensor output_gate(const Tensor& o, const Tensor& gate_logits);

// The running average of alpha that one pass uses, alpha_ma [H] and alpha [B, H, T]:
//   training:   rho alpha_ma + (1 - rho) mean of alpha over b and t (updated first, then used)
//   evaluation: alpha_ma (frozen)
// The result is the alpha_ma of the core and the buffer's next value; it is a constant (no
// gradient flows into it). Under checkpoint(), the recomputation does not update again: it reuses
// the first run's value (same_on_recompute), so the recomputed forward pass equals the first.
Tensor next_alpha_ma(const Tensor& alpha_ma, const Tensor& alpha, double rho, bool training);

struct Linear {
  int64_t in = 0, out = 0;
  bool bias = false;
  void specs(std::vector<ParamSpec>& out_specs, const std::string& prefix) const;
  Tensor apply(const Tensor& x, const ParamView& ps) const;  // x [..., in] -> [..., out]
};

// x W_i^T (+ b_i) for each weight W_i [out_i, in] (b_i undefined: no bias), as one product of x
// with the weights stacked, whose columns are then cut apart: one pass over x and one product
// in each direction of the backward pass instead of one per weight (the engine assembles the
// parts' cotangents in place). Each output element is the same sum as in its own product, bit
// for bit; the cotangent of x is one sum over all the outputs.
std::vector<Tensor> joint_linear(const Tensor& x, const std::vector<Tensor>& weights, const std::vector<Tensor>& biases);

struct Embedding {
  int64_t vocab = 0, dim = 0;
  void specs(std::vector<ParamSpec>& out_specs, const std::string& prefix) const;
  Tensor apply(const Tensor& ids, const ParamView& ps) const;  // ids [...] -> [..., dim]
};

// HF semantics: normalize in f32 (f64 stays f64), cast back, then multiply by the weight.
struct RMSNorm {
  int64_t dim = 0;
  double eps = 1e-6;
  void specs(std::vector<ParamSpec>& out_specs, const std::string& prefix) const;
  Tensor apply(const Tensor& x, const ParamView& ps) const;
};

// Rotary position embedding on split halves (HF rotate_half), with llama3 frequency scaling.
struct Rope {
  int64_t head_dim = 0;
  double theta = 10000.0;
  RopeScaling scaling;
  // inv_freq [head_dim / 2] in f64, scaled as configured.
  std::vector<double> inverse_frequencies() const;
  // cos and sin tables [T, head_dim] for positions 0 .. T-1.
  std::pair<Tensor, Tensor> tables(int64_t t, DType dtype, Device device) const;
  // The rows of those tables at the given positions: [positions.size(), head_dim], the same values.
  std::pair<Tensor, Tensor> tables_at(const std::vector<int64_t>& positions, DType dtype, Device device) const;
  // x [B, H, T, head_dim] -> x cos + rotate_half(x) sin.
  static Tensor apply(const Tensor& x, const Tensor& cos, const Tensor& sin);
};

// down(silu(gate(x)) * up(x))
// The gated MLP: down_proj(act(gate_proj(x)) * up_proj(x)), act silu (HF's SwiGLU, fused) or
// the tanh approximation of GELU (hidden_act gelu_pytorch_tanh / gelu_new), with biases on the
// three projections when `bias` (HF's mlp_bias).
enum class MlpActivation { silu, gelu_tanh };

struct SwiGLU {
  int64_t dim = 0, hidden = 0;
  MlpActivation act = MlpActivation::silu;
  bool bias = false;
  void specs(std::vector<ParamSpec>& out_specs, const std::string& prefix) const;
  Tensor apply(const Tensor& x, const ParamView& ps) const;
  // The weights apply stacks into one product, in order (names under the MLP's prefix).
  std::vector<std::string> joint_weights() const { return {"gate_proj.weight", "up_proj.weight"}; }
};

// What an analysis pass collects from one attention layer. with_weights is the request, set
// before the pass: keep batch row 0's attention weights (AttentionStats::weights).
struct LayerAnalysis {
  bool with_weights = false;
  AttentionStats attention;
  Tensor alpha_mean;  // [H] f64, affine kinds only
  Tensor alpha_std;   // [H] f64
};

// Self-attention with GQA and every kind of nn/attention_kinds.hpp. A row with a Backend core
// (the built-in kinds) runs it with the extra parameters under self_attn
//   alpha_proj.weight [H, D]     affine cores: z = x W_alpha^T, alpha = phi(z)
//   sinks [H]                    sink core: sigma_h
//   gate_proj.weight [H d, D]    gated kinds: O' = output_gate(O, x W_g^T)
// and affine cores have one buffer in State: alpha_ma [H] (starts at 0). A row without one runs
// its fused or composed core on q, k, v after RoPE, and declares its own parameters and buffers.
struct Attention {
  int64_t dim = 0, heads = 0, kv_heads = 0, head_dim = 0;
  bool qkv_bias = false;
  AttentionConfig options;
  Rope rope;
  bool o_bias = false;  // a bias on o_proj (HF Llama's attention_bias)

  const AttentionKindInfo& kind() const { return attention_kind(options.kind); }
  AttentionSizes sizes() const { return {dim, heads, head_dim, kv_heads}; }
  void specs(std::vector<ParamSpec>& out_specs, const std::string& prefix) const;
  void buffers(State& st, const std::string& prefix, DType dtype) const;
  // x: the normed block input. Returns the output and the State with alpha_ma replaced by
  // next_alpha_ma (training passes); st is left as it is. With `cache`, the layer's k (after
  // RoPE) and v go into it, and U = sum_t v_t for affine cores (CausalLM::prefill).
  std::pair<Tensor, State> apply(const Tensor& x, const ParamView& ps, const State& st, const std::string& prefix,
                                 LayerAnalysis* analysis = nullptr, LayerCache* cache = nullptr) const;
  // Tq new tokens per row (nn/kv_cache.cpp): x [B, Tq, D], the normed block input at the rows'
  // next positions. Appends the tokens' k and v to `cache` (and their running sum to U),
  // attends over the slots each one sees with nn::cached_attention (a row without a Backend
  // core: its cached_step), and returns [B, Tq, D]. Evaluation mode: alpha_ma is read from st,
  // never updated. Equals the matching rows of apply() on the whole sequence, for every kind
  // (affine_n visible only: with `full`, N_i = T changes every earlier row as the sequence
  // grows). Throws "[decode] attention kind 'x' has no cached decoding step" for a row without one.
  Tensor extend(const Tensor& x, const ParamView& ps, const State& st, const std::string& prefix,
                const CacheStep& step, LayerCache& cache) const;
  // apply and extend for a row without a Backend core: its own core, then the gate and o_proj.
  std::pair<Tensor, State> apply_registered(const AttentionKindInfo& row, const Tensor& x, const ParamView& ps,
                                            const State& st, const std::string& prefix, LayerAnalysis* analysis,
                                            LayerCache* cache) const;
  Tensor extend_registered(const AttentionKindInfo& row, const Tensor& x, const ParamView& ps, const State& st,
                           const std::string& prefix, const CacheStep& step, LayerCache& cache) const;
  // q [B, H, T, d] and k, v [B, Hkv, T, d] of x [B, T, D], heads first, before RoPE, and the
  // kind's alpha logits [B, T, H] and gate logits [B, T, H d] (undefined for kinds without
  // them): what apply and extend both start from. One product of x with the weights stacked
  // (joint_linear), as in HF's separate products bit for bit.
  struct Projections {
    Tensor q, k, v, alpha_logits, gate_logits;
  };
  Projections project_qkv(const Tensor& x, const ParamView& ps) const;
  // project_qkv of a step's Tq new tokens, q and k rotated to their positions, the padding of a
  // ragged prefill chunk zeroed in k and v: what extend and extend_registered both start from.
  Projections project_step(const Tensor& x, const ParamView& ps, const CacheStep& step) const;
  // The weights project_qkv stacks into one product, in order (names under the layer's prefix).
  std::vector<std::string> joint_weights() const;
};

struct DecoderBlock {
  RMSNorm input_norm, post_norm;
  Attention attention;
  SwiGLU mlp;
  void specs(std::vector<ParamSpec>& out_specs, const std::string& prefix) const;
  // The full names of the weights each of its joint products stacks (attention, then MLP).
  void joint_weight_groups(std::vector<std::vector<std::string>>& out, const std::string& prefix) const;
  std::pair<Tensor, State> apply(const Tensor& x, const ParamView& ps, const State& st, const std::string& prefix,
                                 LayerAnalysis* analysis = nullptr, LayerCache* cache = nullptr) const;
  // The block on Tq new tokens per row, x [B, Tq, D] (Attention::extend).
  Tensor extend(const Tensor& x, const ParamView& ps, const State& st, const std::string& prefix,
                const CacheStep& step, LayerCache& cache) const;
};

}  // namespace cotan::nn
