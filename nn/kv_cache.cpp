// Decoding one token per row against the KV cache: the attention of every kind composed from
// primitive ops (so it runs on every backend), as docs/generation.md derives it.
#include "nn/kv_cache.hpp"

#include <cmath>
#include <limits>

#include "autograd/autograd.hpp"
#include "nn/layers.hpp"
#include "nn/model.hpp"
#include "tensor/ops.hpp"

namespace cotan::nn {

Tensor KVCache::visible(Device device, int64_t new_slots) const {
  const int64_t b = batch(), s = slots() + new_slots;
  Tensor slot = reshape(arange(0, s, 1, DType::i64, device), {1, s});
  Tensor prompt = reshape(from_vector(prompt_lengths, {b}, device), {b, 1});
  return logical_or(lt(slot, prompt), ge(slot, full({}, double(prompt_slots), DType::i64, device)));
}

Tensor Attention::decode(const Tensor& x, const ParamView& ps, const State& st, const std::string& prefix,
                         const DecodeStep& step, LayerCache& cache) const {
  if (x.dim() != 3 || x.size(1) != 1 || x.size(2) != dim)
    fail("decode", "x must be [B, 1, ", dim, "], got ", to_string(x.shape()));
  if (options.affine_n == AffineN::full && kind().core == CoreKind::affine)
    fail("decode", "affine_n 'full' divides by the whole sequence length, which changes every earlier position as "
                   "the sequence grows: cached decoding needs affine_n 'visible'");
  const int64_t b = x.size(0), group = heads / kv_heads;
  auto project = [&](const ExtraParam& p) { return matmul(x, transpose(ps[p.name])); };  // x W^T
  // One token: [B, 1, H d] is [B, Hkv, G, d] with query head h = g G + r reading kv head g.
  Tensor q = reshape(Linear{dim, heads * head_dim, qkv_bias}.apply(x, ps.sub("q_proj")), {b, kv_heads, group, head_dim});
  Tensor k = reshape(Linear{dim, kv_heads * head_dim, qkv_bias}.apply(x, ps.sub("k_proj")), {b, kv_heads, 1, head_dim});
  Tensor v = reshape(Linear{dim, kv_heads * head_dim, qkv_bias}.apply(x, ps.sub("v_proj")), {b, kv_heads, 1, head_dim});
  q = Rope::apply(q, step.cos, step.sin);
  k = Rope::apply(k, step.cos, step.sin);
  cache.k = concat({cache.k, k}, 2);  // [B, Hkv, S + 1, d]
  cache.v = concat({cache.v, v}, 2);

  // s_j = c (q . k_j) over the visible slots: [B, Hkv, G, S + 1].
  Tensor s = matmul(q, transpose(cache.k)) * (1.0 / std::sqrt(double(head_dim)));
  Tensor masked = where(step.visible, s, full({}, -std::numeric_limits<double>::infinity(), x.dtype(), x.device()));
  Tensor p;
  if (kind().core == CoreKind::sink) {
    // L = log(sum_j exp(s_j) + exp(sigma_h)): the sink is one more logit in the normaliser.
    Tensor sink = broadcast_to(reshape(ps[kSinks.name], {1, kv_heads, group, 1}), {b, kv_heads, group, 1});
    p = exp(masked - logsumexp(concat({masked, sink}, -1), {-1}, true));
  } else {
    p = softmax(masked, -1);
  }
  Tensor o = matmul(p, cache.v);  // S [B, Hkv, G, d]
  if (kind().core == CoreKind::affine) {
    // O = alpha S + beta U, beta = (alpha_ma - alpha) / N, with U the running sum of the cached v:
    // O(d) per head for the affine term, however long the row.
    cache.u = cache.u + reshape(v, {b, kv_heads, head_dim});
    Tensor alpha = reshape(phi(project(kAlphaProj), options.phi), {b, kv_heads, group, 1});
    std::string key = join(prefix, "alpha_ma");
    auto it = st.buffers.find(key);
    if (it == st.buffers.end()) fail("decode", "state has no buffer '", key, "'");
    Tensor beta = (reshape(it->second, {1, kv_heads, group, 1}) - alpha) / step.count;
    o = alpha * o + beta * unsqueeze(cache.u, 2);
  }
  o = reshape(o, {b, 1, heads * head_dim});
  if (kind().gated) o = output_gate(o, project(kGateProj));
  return Linear{heads * head_dim, dim, o_bias}.apply(o, ps.sub("o_proj"));
}

Tensor DecoderBlock::decode(const Tensor& x, const ParamView& ps, const State& st, const std::string& prefix,
                            const DecodeStep& step, LayerCache& cache) const {
  Tensor a = attention.decode(input_norm.apply(x, ps.sub("input_layernorm")), ps.sub("self_attn"), st,
                              join(prefix, "self_attn"), step, cache);
  Tensor h = x + a;
  return h + mlp.apply(post_norm.apply(h, ps.sub("post_attention_layernorm")), ps.sub("mlp"));
}

namespace {

std::string layer_prefix(size_t i) { return "model.layers." + std::to_string(i); }

State evaluation(const State& st) {
  State eval = st;
  eval.training = false;
  return eval;
}

// k or v [B, Hkv, T, d] padded with zeros to `slots` along T.
Tensor pad_slots(const Tensor& x, int64_t slots) {
  const int64_t t = x.size(2);
  if (t == slots) return x;
  Shape shape = x.shape();
  shape[2] = slots - t;
  return concat({x, zeros(shape, x.dtype(), x.device())}, 2);
}

}  // namespace

int64_t CausalLM::cache_limit(const KVCache& cache) const {
  return cache.max_length > 0 ? cache.max_length : config_.max_position_embeddings;
}

Tensor CausalLM::prefill(const Tensor& ids, const Params& ps, const State& st, KVCache& cache) const {
  if (ids.dim() != 2 || ids.size(1) == 0 || !is_integral(ids.dtype()))
    fail("prefill", "token ids must be [batch, seq] integers with seq >= 1, got ", ids.dtype(), " ",
         to_string(ids.shape()));
  if (config_.attention.affine_n == AffineN::full && is_affine(config_.attention.kind))
    fail("prefill", "affine_n 'full' divides by the whole sequence length: cached decoding needs affine_n 'visible'");
  const int64_t b = ids.size(0), t = ids.size(1), limit = cache_limit(cache);
  if (t > limit)
    fail("prefill", "a prompt of ", t, " tokens is longer than the cache's limit of ", limit,
         cache.max_length > 0 ? "" : " (the model's max_position_embeddings)");
  NoGrad no_grad;
  std::vector<LayerCache> layers;
  Tensor h = run(ids, ps, evaluation(st), nullptr, &layers).first;  // [B, T, D]
  Tensor last = reshape(slice(h, 1, t - 1, t), {b, config_.hidden_size});
  cache.layers = std::move(layers);
  cache.prompt_lengths.assign(size_t(b), t);
  cache.prompt_slots = t;
  cache.steps = 0;
  return matmul(last, transpose(head_weight(ps)));
}

Tensor CausalLM::prefill(const std::vector<std::vector<int32_t>>& prompts, const Params& ps, const State& st,
                         KVCache& cache) const {
  if (prompts.empty()) fail("prefill", "no prompts");
  const Device device = head_weight(ps).device();
  int64_t longest = 0;
  bool equal = true;
  for (const auto& p : prompts) {
    if (p.empty()) fail("prefill", "an empty prompt (every row needs at least one token)");
    equal = equal && p.size() == prompts[0].size();
    longest = std::max(longest, int64_t(p.size()));
  }
  if (equal) {
    std::vector<int32_t> flat;
    for (const auto& p : prompts) flat.insert(flat.end(), p.begin(), p.end());
    return prefill(from_vector(flat, {int64_t(prompts.size()), longest}, device), ps, st, cache);
  }
  // Rows one by one, then padded to the longest and stacked.
  std::vector<Tensor> logits;
  std::vector<std::vector<Tensor>> k(config_.num_layers), v(config_.num_layers), u(config_.num_layers);
  for (const auto& p : prompts) {
    KVCache row;
    row.max_length = cache.max_length;
    logits.push_back(prefill(from_vector(p, {1, int64_t(p.size())}, device), ps, st, row));
    for (size_t l = 0; l < row.layers.size(); ++l) {
      k[l].push_back(pad_slots(row.layers[l].k, longest));
      v[l].push_back(pad_slots(row.layers[l].v, longest));
      if (row.layers[l].u.defined()) u[l].push_back(row.layers[l].u);
    }
  }
  NoGrad no_grad;
  cache.layers.assign(size_t(config_.num_layers), LayerCache{});
  for (size_t l = 0; l < cache.layers.size(); ++l) {
    cache.layers[l].k = concat(k[l], 0);
    cache.layers[l].v = concat(v[l], 0);
    if (!u[l].empty()) cache.layers[l].u = concat(u[l], 0);
  }
  cache.prompt_lengths.clear();
  for (const auto& p : prompts) cache.prompt_lengths.push_back(int64_t(p.size()));
  cache.prompt_slots = longest;
  cache.steps = 0;
  return concat(logits, 0);
}

Tensor CausalLM::decode_step(const Tensor& ids, const Params& ps, const State& st, KVCache& cache) const {
  if (cache.empty() || int64_t(cache.layers.size()) != config_.num_layers)
    fail("decode", "the cache holds ", cache.layers.size(), " layers, the model has ", config_.num_layers,
         " (run prefill first)");
  if (ids.dim() != 2 || ids.size(0) != cache.batch() || ids.size(1) != 1 || !is_integral(ids.dtype()))
    fail("decode", "token ids must be [", cache.batch(), ", 1] integers (one per cached row), got ", ids.dtype(), " ",
         to_string(ids.shape()));
  if (config_.attention.affine_n == AffineN::full && is_affine(config_.attention.kind))
    fail("decode", "affine_n 'full' divides by the whole sequence length: cached decoding needs affine_n 'visible'");
  const int64_t b = cache.batch(), limit = cache_limit(cache);
  std::vector<int64_t> positions, counts;
  for (int64_t r = 0; r < b; ++r) {
    if (cache.length(r) + 1 > limit)
      fail("decode", "row ", r, " would hold ", cache.length(r) + 1, " tokens, more than the cache's limit of ", limit,
           cache.max_length > 0 ? "" : " (the model's max_position_embeddings)");
    positions.push_back(cache.length(r));
    counts.push_back(cache.length(r) + 1);
  }
  NoGrad no_grad;
  const State eval = evaluation(st);
  const Tensor& head = head_weight(ps);
  const DType dtype = head.dtype();
  const Device device = head.device();
  DecodeStep step;
  auto [cos, sin] = blocks_[0].attention.rope.tables_at(positions, dtype, device);
  step.cos = reshape(cos, {b, 1, 1, cos.size(1)});
  step.sin = reshape(sin, {b, 1, 1, sin.size(1)});
  step.visible = reshape(cache.visible(device, 1), {b, 1, 1, cache.slots() + 1});
  step.count = reshape(cast(from_vector(counts, {b}, device), dtype), {b, 1, 1, 1});

  ParamView view(ps);
  Tensor x = embed_.apply(ids, view.sub("model.embed_tokens"));  // [B, 1, D]
  std::vector<LayerCache> layers = cache.layers;  // handles: the cache changes only if every layer succeeds
  for (size_t i = 0; i < blocks_.size(); ++i)
    x = blocks_[i].decode(x, view.sub(layer_prefix(i)), eval, layer_prefix(i), step, layers[i]);
  cache.layers = std::move(layers);
  cache.steps += 1;
  Tensor h = reshape(norm_.apply(x, view.sub("model.norm")), {b, config_.hidden_size});
  return matmul(h, transpose(head));
}

}  // namespace cotan::nn
