#include "nn/layers.hpp"

#include <algorithm>
#include <cmath>
#include <mutex>
#include <numbers>
#include <vector>

#include "autograd/autograd.hpp"
#include "nn/fused.hpp"
#include "tensor/ops.hpp"

namespace cotan::nn {

void Linear::specs(std::vector<ParamSpec>& s, const std::string& prefix) const {
  s.push_back({join(prefix, "weight"), {out, in}, Init::normal, true});
  if (bias) s.push_back({join(prefix, "bias"), {out}, Init::zeros, false});
}

Tensor Linear::apply(const Tensor& x, const ParamView& ps) const {
  Tensor y = matmul(x, transpose(ps["weight"]));
  return bias ? y + ps["bias"] : y;
}

std::vector<Tensor> joint_linear(const Tensor& x, const std::vector<Tensor>& weights, const std::vector<Tensor>& biases) {
  if (weights.empty() || biases.size() != weights.size())
    fail("joint_linear", "needs one bias (or an undefined tensor) per weight, got ", weights.size(), " weights and ",
         biases.size(), " biases");
  std::vector<Tensor> out;
  if (weights.size() == 1) {
    out.push_back(matmul(x, transpose(weights[0])));
  } else {
    const Tensor y = matmul(x, transpose(concat(weights, 0)));  // [..., sum of the out sizes]
    for (int64_t at = 0; const Tensor& w : weights) {
      out.push_back(slice(y, -1, at, at + w.size(0)));
      at += w.size(0);
    }
  }
  for (size_t i = 0; i < out.size(); ++i)
    if (biases[i].defined()) out[i] = out[i] + biases[i];
  return out;
}

void Embedding::specs(std::vector<ParamSpec>& s, const std::string& prefix) const {
  s.push_back({join(prefix, "weight"), {vocab, dim}, Init::normal, true});
}

Tensor Embedding::apply(const Tensor& ids, const ParamView& ps) const { return embedding(ps["weight"], ids); }

void RMSNorm::specs(std::vector<ParamSpec>& s, const std::string& prefix) const {
  s.push_back({join(prefix, "weight"), {dim}, Init::ones, false});
}

Tensor RMSNorm::apply(const Tensor& x, const ParamView& ps) const { return rms_norm(x, ps["weight"], eps); }

std::vector<double> Rope::inverse_frequencies() const {
  std::vector<double> inv(size_t(head_dim / 2));
  for (size_t i = 0; i < inv.size(); ++i) inv[i] = 1.0 / std::pow(theta, double(2 * i) / double(head_dim));
  if (scaling.type == "linear") {
    // HF _compute_linear_scaling_rope_parameters: every frequency slowed by `factor`.
    for (double& f : inv) f /= scaling.factor;
    return inv;
  }
  if (scaling.type != "llama3") return inv;
  // HF _compute_llama3_parameters: long wavelengths are slowed by `factor`, short ones kept,
  // the band between them interpolated.
  double old_len = double(scaling.original_max_position_embeddings);
  double low_wavelen = old_len / scaling.low_freq_factor, high_wavelen = old_len / scaling.high_freq_factor;
  for (double& f : inv) {
    double wavelen = 2 * std::numbers::pi / f;
    if (wavelen > low_wavelen) {
      f /= scaling.factor;
    } else if (wavelen >= high_wavelen) {
      double smooth = (old_len / wavelen - scaling.low_freq_factor) / (scaling.high_freq_factor - scaling.low_freq_factor);
      f = (1 - smooth) * f / scaling.factor + smooth * f;
    }
  }
  return inv;
}

std::pair<Tensor, Tensor> Rope::tables(int64_t t, DType dtype, Device device) const {
  // Every layer of a forward pass asks for the same tables, at every step: on the CPU the last
  // few are kept (read-only values; the key holds every input of their computation). Device
  // tables are not kept: a static holding device memory would outlive the device's runtime.
  struct Key {
    int64_t head_dim, t;
    double theta;
    RopeScaling scaling;
    DType dtype;
    bool operator==(const Key&) const = default;
  };
  static std::mutex mutex;
  static std::vector<std::pair<Key, std::pair<Tensor, Tensor>>> kept;  // newest last
  constexpr size_t kKept = 8;
  const Key key{head_dim, t, theta, scaling, dtype};
  if (device.is_cpu()) {
    std::lock_guard lock(mutex);
    for (const auto& [k, tables] : kept)
      if (k == key) return tables;
  }
  std::vector<int64_t> positions(static_cast<size_t>(t));
  for (int64_t p = 0; p < t; ++p) positions[size_t(p)] = p;
  auto tables = tables_at(positions, dtype, device);
  if (device.is_cpu()) {
    std::lock_guard lock(mutex);
    if (kept.size() == kKept) kept.erase(kept.begin());
    kept.emplace_back(key, tables);
  }
  return tables;
}

std::pair<Tensor, Tensor> Rope::tables_at(const std::vector<int64_t>& positions, DType dtype, Device device) const {
  auto inv = inverse_frequencies();
  int64_t half = head_dim / 2, t = int64_t(positions.size());
  std::vector<double> c(size_t(t * head_dim)), s(size_t(t * head_dim));
  for (int64_t r = 0; r < t; ++r)
    for (int64_t i = 0; i < half; ++i) {
      double angle = double(positions[size_t(r)]) * inv[size_t(i)];
      // emb = cat(freqs, freqs): both halves use the same angle.
      c[size_t(r * head_dim + i)] = c[size_t(r * head_dim + i + half)] = std::cos(angle);
      s[size_t(r * head_dim + i)] = s[size_t(r * head_dim + i + half)] = std::sin(angle);
    }
  return {cast(from_vector(c, {t, head_dim}, device), dtype), cast(from_vector(s, {t, head_dim}, device), dtype)};
}

Tensor Rope::apply(const Tensor& x, const Tensor& cos, const Tensor& sin) { return rope(x, cos, sin); }

void SwiGLU::specs(std::vector<ParamSpec>& s, const std::string& prefix) const {
  Linear{dim, hidden, bias}.specs(s, join(prefix, "gate_proj"));
  Linear{dim, hidden, bias}.specs(s, join(prefix, "up_proj"));
  Linear{hidden, dim, bias}.specs(s, join(prefix, "down_proj"));
}

Tensor SwiGLU::apply(const Tensor& x, const ParamView& ps) const {
  // gate and up in one product: x is read once, and the backward pass gets x's cotangent from one
  // product over both (swiglu's kernels return g's and u's cotangents side by side, in place).
  std::vector<Tensor> weights;
  for (const std::string& name : joint_weights()) weights.push_back(ps[name]);
  const std::vector<Tensor> gu =
      joint_linear(x, weights, {bias ? ps["gate_proj.bias"] : Tensor(), bias ? ps["up_proj.bias"] : Tensor()});
  const Tensor &g = gu[0], &u = gu[1];
  Tensor h = act == MlpActivation::silu ? swiglu(g, u) : gelu_tanh(g) * u;
  return Linear{hidden, dim, bias}.apply(h, ps.sub("down_proj"));
}

Tensor linear_clip(const Tensor& z) { return clamp(z * kLinearClipSlope + kLinearClipOffset, 0.0, 1.0); }

Tensor phi(const Tensor& z, AlphaFn fn) { return fn == AlphaFn::linear_clip ? linear_clip(z) : sigmoid(z); }

Tensor output_gate(const Tensor& o, const Tensor& gate_logits) { return o * sigmoid(gate_logits); }

Tensor next_alpha_ma(const Tensor& alpha_ma, const Tensor& alpha, double rho, bool training) {
  if (alpha_ma.dim() != 1 || alpha.dim() != 3 || alpha.size(1) != alpha_ma.size(0))
    fail("attention", "alpha_ma must be [H] and alpha [B, H, T], got ", to_string(alpha_ma.shape()), " and ",
         to_string(alpha.shape()));
  if (!training) return alpha_ma.detach();
  return same_on_recompute([&] { return alpha_ma * rho + mean(alpha.detach(), {0, 2}) * (1.0 - rho); });
}

void Attention::specs(std::vector<ParamSpec>& s, const std::string& prefix) const {
  Linear{dim, heads * head_dim, qkv_bias}.specs(s, join(prefix, "q_proj"));
  Linear{dim, kv_heads * head_dim, qkv_bias}.specs(s, join(prefix, "k_proj"));
  Linear{dim, kv_heads * head_dim, qkv_bias}.specs(s, join(prefix, "v_proj"));
  Linear{heads * head_dim, dim, o_bias}.specs(s, join(prefix, "o_proj"));
  for (const ExtraParam& p : kind().params) s.push_back({join(prefix, p.name), shape_of(p, sizes()), p.init, p.decay});
}

void Attention::buffers(State& st, const std::string& prefix, DType dtype) const {
  for (const KindBuffer& b : kind().buffers) st.buffers[join(prefix, b.name)] = full(shape_of(b, sizes()), b.initial, dtype);
}

std::vector<std::string> Attention::joint_weights() const {
  std::vector<std::string> names{"q_proj.weight", "k_proj.weight", "v_proj.weight"};
  if (kind().core == CoreKind::affine) names.emplace_back(kAlphaProj.name);
  if (kind().gated) names.emplace_back(kGateProj.name);
  return names;
}

Attention::Projections Attention::project_qkv(const Tensor& x, const ParamView& ps) const {
  const int64_t b = x.size(0), t = x.size(1);
  auto heads_first = [&](const Tensor& y, int64_t h) { return permute(reshape(y, {b, t, h, head_dim}), {0, 2, 1, 3}); };
  std::vector<Tensor> weights, biases(3);
  for (const std::string& name : joint_weights()) weights.push_back(ps[name]);
  if (qkv_bias) biases = {ps["q_proj.bias"], ps["k_proj.bias"], ps["v_proj.bias"]};
  const bool affine = kind().core == CoreKind::affine, gated = kind().gated;
  biases.resize(weights.size());  // the extra projections have no bias
  std::vector<Tensor> y = joint_linear(x, weights, biases);
  Projections out{heads_first(y[0], heads), heads_first(y[1], kv_heads), heads_first(y[2], kv_heads), {}, {}};
  if (affine) out.alpha_logits = y[3];
  if (gated) out.gate_logits = y[affine ? 4 : 3];
  return out;
}

std::pair<Tensor, State> Attention::apply(const Tensor& x, const ParamView& ps, const State& st,
                                          const std::string& prefix, LayerAnalysis* analysis, LayerCache* cache) const {
  const AttentionKindInfo& row = kind();
  if (!row.core) return apply_registered(row, x, ps, st, prefix, analysis, cache);
  int64_t b = x.size(0), t = x.size(1);
  auto [q, k, v, alpha_logits, gate_logits] = project_qkv(x, ps);
  auto [cos, sin] = rope.tables(t, x.dtype(), x.device());

  State next = st;
  AttentionCore core;
  // q, k and v go to the core as they are: v is a strided view of the joint projection, which
  // the kernels read in place (each backend copies what its kernels cannot read).
  core.q = Rope::apply(q, cos, sin);
  core.k = Rope::apply(k, cos, sin);
  core.v = v;
  core.causal = true;
  core.affine_n = options.affine_n;
  if (row.core == CoreKind::affine) {
    Tensor alpha = phi(alpha_logits, options.phi);  // [B, T, H]
    core.alpha = contiguous(permute(alpha, {0, 2, 1}));     // [B, H, T]
    std::string key = join(prefix, "alpha_ma");
    auto it = st.buffers.find(key);
    if (it == st.buffers.end()) fail("attention", "state has no buffer '", key, "'");
    core.alpha_ma = next_alpha_ma(it->second, core.alpha, options.rho, st.training);
    next.buffers[key] = core.alpha_ma;
  }
  if (row.core == CoreKind::sink) core.sigma = ps[kSinks.name];
  if (cache) {
    cache->k = contiguous(core.k);
    cache->v = contiguous(core.v);
    if (core.alpha.defined()) cache->u = sum(core.v, {2});
  }
  if (analysis) {
    NoGrad no_grad;
    analysis->attention = attention_stats(core, analysis->with_weights);
    if (core.alpha.defined()) {
      Tensor a = cast(core.alpha.detach(), DType::f64);
      analysis->alpha_mean = mean(a, {0, 2});
      analysis->alpha_std = sqrt(var(a, {0, 2}));
    }
  }

  Tensor o = options.impl == AttentionImpl::fused ? attention_fused(core) : attention_composed(core);
  o = reshape(permute(o, {0, 2, 1, 3}), {b, t, heads * head_dim});
  if (row.gated) o = output_gate(o, gate_logits);
  return {Linear{heads * head_dim, dim, o_bias}.apply(o, ps.sub("o_proj")), std::move(next)};
}

std::pair<Tensor, State> Attention::apply_registered(const AttentionKindInfo& row, const Tensor& x, const ParamView& ps,
                                                     const State& st, const std::string& prefix,
                                                     LayerAnalysis* analysis, LayerCache* cache) const {
  if (analysis)
    fail("analyze", "attention kind '", row.name, "' computes its own core, whose attention weights the statistics ",
         "cannot read (they cover the kinds with a Backend core: softmax, sink and affine cores)");
  const int64_t b = x.size(0), t = x.size(1);
  auto [q, k, v, alpha_logits, gate_logits] = project_qkv(x, ps);
  auto [cos, sin] = rope.tables(t, x.dtype(), x.device());
  q = Rope::apply(q, cos, sin);
  k = Rope::apply(k, cos, sin);
  if (cache) {
    cache->k = contiguous(k);
    cache->v = contiguous(v);
  }
  const CoreInputs in{{ps, st, prefix, options}, q, k, v, x};
  CoreResult r = options.impl == AttentionImpl::fused && row.fused ? row.fused(in) : row.composed(in);
  const Shape expected{b, heads, t, head_dim};
  if (!r.o.defined() || r.o.shape() != expected)
    fail("attention", "the core of attention kind '", row.name, "' returned O ",
         r.o.defined() ? to_string(r.o.shape()) : "undefined", ", expected [B, H, T, d] = ", to_string(expected));
  State next = st;
  for (auto& [name, value] : r.buffers) {
    auto declared = std::find_if(row.buffers.begin(), row.buffers.end(), [&](const KindBuffer& kb) { return kb.name == name; });
    if (declared == row.buffers.end())
      fail("attention", "the core of attention kind '", row.name, "' updated '", name, "', which is none of its buffers");
    if (!st.training)
      fail("attention", "the core of attention kind '", row.name, "' updated buffer '", name,
           "' in an evaluation pass (buffers change in training passes only)");
    const Shape shape = shape_of(*declared, sizes());
    if (value.shape() != shape)
      fail("attention", "the core of attention kind '", row.name, "' updated buffer '", name, "' to ",
           to_string(value.shape()), ", its shape is ", to_string(shape));
    // Under checkpoint(), the State holds the first run's value, as next_alpha_ma's does.
    next.buffers[join(prefix, name)] = same_on_recompute([&value] { return value; });
  }
  Tensor o = reshape(permute(r.o, {0, 2, 1, 3}), {b, t, heads * head_dim});
  if (row.gated) o = output_gate(o, gate_logits);
  return {Linear{heads * head_dim, dim, o_bias}.apply(o, ps.sub("o_proj")), std::move(next)};
}

void DecoderBlock::specs(std::vector<ParamSpec>& s, const std::string& prefix) const {
  input_norm.specs(s, join(prefix, "input_layernorm"));
  attention.specs(s, join(prefix, "self_attn"));
  post_norm.specs(s, join(prefix, "post_attention_layernorm"));
  mlp.specs(s, join(prefix, "mlp"));
}

void DecoderBlock::joint_weight_groups(std::vector<std::vector<std::string>>& out, const std::string& prefix) const {
  const std::pair<std::vector<std::string>, const char*> products[] = {{attention.joint_weights(), "self_attn"},
                                                                      {mlp.joint_weights(), "mlp"}};
  for (const auto& [names, sub] : products) {
    std::vector<std::string>& group = out.emplace_back();
    for (const std::string& name : names) group.push_back(join(join(prefix, sub), name));
  }
}

std::pair<Tensor, State> DecoderBlock::apply(const Tensor& x, const ParamView& ps, const State& st,
                                             const std::string& prefix, LayerAnalysis* analysis,
                                             LayerCache* cache) const {
  auto [a, next] = attention.apply(input_norm.apply(x, ps.sub("input_layernorm")), ps.sub("self_attn"), st,
                                   join(prefix, "self_attn"), analysis, cache);
  Tensor h = x + a;
  return {h + mlp.apply(post_norm.apply(h, ps.sub("post_attention_layernorm")), ps.sub("mlp")), std::move(next)};
}

}  // namespace cotan::nn
