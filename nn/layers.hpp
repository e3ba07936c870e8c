// The layers of Llama/Qwen2 decoders (DESIGN.md section 2), each a small description with
//   specs(prefix)          the parameters it declares, under HF names;
//   apply(x, ps[, st])     the forward pass (ps: a ParamView at the layer's prefix).
// Shapes: x [B, T, D] unless said otherwise; Linear weights are [out, in] as in HF.
#pragma once

#include <optional>
#include <vector>

#include "nn/attention.hpp"
#include "nn/config.hpp"
#include "nn/params.hpp"

namespace cotan::nn {

struct Linear {
  int64_t in = 0, out = 0;
  bool bias = false;
  void specs(std::vector<ParamSpec>& out_specs, const std::string& prefix) const;
  Tensor apply(const Tensor& x, const ParamView& ps) const;  // x [..., in] -> [..., out]
};

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
  // x [B, H, T, head_dim] -> x cos + rotate_half(x) sin.
  static Tensor apply(const Tensor& x, const Tensor& cos, const Tensor& sin);
};

// down(silu(gate(x)) * up(x))
struct SwiGLU {
  int64_t dim = 0, hidden = 0;
  void specs(std::vector<ParamSpec>& out_specs, const std::string& prefix) const;
  Tensor apply(const Tensor& x, const ParamView& ps) const;
};

// What an analysis pass collects from one attention layer.
struct LayerAnalysis {
  AttentionStats attention;
  Tensor alpha_mean;  // [H] f64, affine kinds only
  Tensor alpha_std;   // [H] f64
};

// Self-attention with GQA and every kind of DESIGN.md 1.1. Extra parameters under self_attn:
//   alpha_proj.weight [H, D]     affine kinds: z = x W_alpha^T, alpha = phi(z)   (normal init)
//   sinks [H]                    sink: sigma_h                                  (starts at 0)
//   gate_proj.weight [H d, D]    gated kinds: O' = O * sigmoid(x W_g^T)         (normal init)
// and one buffer in State: alpha_ma [H] (affine kinds, starts at 0).
struct Attention {
  int64_t dim = 0, heads = 0, kv_heads = 0, head_dim = 0;
  bool qkv_bias = false;
  AttentionConfig options;
  Rope rope;

  void specs(std::vector<ParamSpec>& out_specs, const std::string& prefix) const;
  void buffers(State& st, const std::string& prefix, DType dtype) const;
  // x: the normed block input. Updates alpha_ma first in training passes (st.training).
  Tensor apply(const Tensor& x, const ParamView& ps, State& st, const std::string& prefix,
               LayerAnalysis* analysis = nullptr) const;
};

struct DecoderBlock {
  RMSNorm input_norm, post_norm;
  Attention attention;
  SwiGLU mlp;
  void specs(std::vector<ParamSpec>& out_specs, const std::string& prefix) const;
  Tensor apply(const Tensor& x, const ParamView& ps, State& st, const std::string& prefix,
               LayerAnalysis* analysis = nullptr) const;
};

}  // namespace cotan::nn
