// Incremental decoding against the KV cache (docs/generation.md): the cached attention op and its
// composed oracle, the layers' extend, and CausalLM's prefill (in chunks), extend and decode_step.
#include "nn/kv_cache.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "autograd/autograd.hpp"
#include "nn/layers.hpp"
#include "nn/model.hpp"
#include "tensor/op_table.hpp"
#include "tensor/ops.hpp"

namespace cotan::nn {

// ---- the cache ----

Tensor KVCache::visible(Device device, int64_t new_slots) const {
  const int64_t b = batch(), s = slots() + new_slots;
  Tensor slot = reshape(arange(0, s, 1, DType::i64, device), {1, s});
  Tensor prompt = reshape(from_vector(prompt_lengths, {b}, device), {b, 1});
  return logical_or(lt(slot, prompt), ge(slot, full({}, double(prompt_slots), DType::i64, device)));
}

KVCache KVCache::repeat(int64_t rows) const {
  if (batch() != 1) fail("decode", "repeat takes a cache of one row, this one has ", batch());
  if (rows < 1) fail("decode", "repeat needs at least one row, got ", rows);
  KVCache out = *this;
  auto widen = [rows](const Tensor& x) {
    if (!x.defined()) return x;
    Shape shape = x.shape();
    shape[0] = rows;
    return broadcast_to(x, shape);
  };
  for (LayerCache& layer : out.layers) {
    layer.k = widen(layer.k);
    layer.v = widen(layer.v);
    layer.u = widen(layer.u);
    // The rows share one row's slots: the next step writes them into buffers of their own.
    layer.k_buffer = layer.v_buffer = Tensor();
    layer.filled.reset();
  }
  out.prompt_lengths.assign(size_t(rows), prompt_lengths[0]);
  return out;
}

// ---- the cached attention op ----

void check_cached_attention(const CachedAttentionSpec& c) {
  constexpr const char* op = "cached_attention";
  auto shape = [](const Tensor& t) { return to_string(t.shape()); };
  if (!c.q.defined() || !c.k.defined() || !c.v.defined() || !c.visible.defined())
    fail(op, "q, k, v and visible are required");
  if (c.q.dim() != 4) fail(op, "q must be [B, H, Tq, d], got ", shape(c.q));
  const int64_t b = c.q.size(0), h = c.q.size(1), tq = c.q.size(2), d = c.q.size(3);
  if (c.k.dim() != 4 || c.k.size(0) != b || c.k.size(3) != d || c.k.size(1) < 1 || h % c.k.size(1) != 0)
    fail(op, "k must be [", b, ", Hkv, S, ", d, "] with ", h, " % Hkv == 0, got ", shape(c.k), " for q ", shape(c.q));
  const int64_t hkv = c.k.size(1), s = c.k.size(2);
  if (c.v.shape() != c.k.shape()) fail(op, "v must have k's shape ", shape(c.k), ", got ", shape(c.v));
  if (tq < 1 || s < tq) fail(op, "the cache's ", s, " slots must include the ", tq, " new ones (q ", shape(c.q), ")");
  if (c.visible.shape() != Shape{b, s} || c.visible.dtype() != DType::boolean)
    fail(op, "visible must be bool [", b, ", ", s, "], got ", c.visible.dtype(), " ", shape(c.visible));
  if (!is_floating(c.q.dtype())) fail(op, "q must be floating, got ", c.q.dtype());
  const bool sink = c.kind == CoreKind::sink, affine = c.kind == CoreKind::affine;
  if (sink != c.sigma.defined()) fail(op, sink ? "the sink kind needs sigma [H]" : "sigma is for the sink kind only");
  if (affine != c.alpha.defined() || affine != c.alpha_ma.defined() || affine != c.u.defined() ||
      affine != c.count.defined())
    fail(op, affine ? "the affine kind needs alpha, alpha_ma, u and count" : "alpha, alpha_ma, u and count are for the affine kind only");
  auto expect = [&](const char* name, const Tensor& t, const Shape& want) {
    if (!t.defined()) return;
    if (t.shape() != want) fail(op, name, " must be ", to_string(want), ", got ", shape(t));
  };
  expect("sigma", c.sigma, {h});
  expect("alpha", c.alpha, {b, h, tq});
  expect("alpha_ma", c.alpha_ma, {h});
  expect("u", c.u, {b, hkv, tq, d});
  expect("count", c.count, {b, tq});
  if (c.count.defined() && c.count.dtype() != DType::i64) fail(op, "count must be i64, got ", c.count.dtype());
  const Device device = c.q.device();
  for (const auto& [name, t] : {std::pair{"k", c.k}, {"v", c.v}, {"sigma", c.sigma}, {"alpha", c.alpha},
                                {"alpha_ma", c.alpha_ma}, {"u", c.u}}) {
    if (!t.defined()) continue;
    if (t.dtype() != c.q.dtype()) fail(op, name, " is ", t.dtype(), ", q is ", c.q.dtype());
    if (t.device() != device) fail(op, name, " is on ", t.device(), ", q on ", device);
  }
  for (const Tensor* t : {&c.visible, &c.count})
    if (t->defined() && t->device() != device) fail(op, "visible and count must be on q's device ", device);
  if (grad_enabled())
    for (const Tensor* t : {&c.q, &c.k, &c.v, &c.sigma, &c.alpha, &c.u})
      if (t->defined() && t->tracked())
        fail(op, "inference only: its inputs must not require grad (run it under NoGrad)");
}

Tensor cached_attention_composed(const CachedAttentionSpec& c) {
  check_cached_attention(c);
  const int64_t b = c.q.size(0), h = c.q.size(1), tq = c.q.size(2), d = c.q.size(3);
  const int64_t hkv = c.k.size(1), s = c.k.size(2), group = h / hkv;
  const DType dtype = c.q.dtype();
  const Device device = c.q.device();
  // Query head h = g G + r reads kv head g: [B, H, Tq, d] is [B, Hkv, G Tq, d].
  Tensor scores = matmul(reshape(c.q, {b, hkv, group * tq, d}), transpose(c.k)) * (1.0 / std::sqrt(double(d)));
  scores = reshape(scores, {b, h, tq, s});
  // Query i sees slot j when the slot holds a token and j <= S - Tq + i.
  Tensor slot = reshape(arange(0, s, 1, DType::i64, device), {1, s});
  Tensor last = reshape(arange(s - tq, s, 1, DType::i64, device), {tq, 1});
  Tensor sees = logical_and(reshape(c.visible, {b, 1, 1, s}), reshape(le(slot, last), {1, 1, tq, s}));
  Tensor masked = where(sees, scores, full({}, -std::numeric_limits<double>::infinity(), dtype, device));
  Tensor p;
  if (c.kind == CoreKind::sink) {
    // L = log(sum_j exp(s_j) + exp(sigma_h)): the sink is one more logit in the normaliser.
    Tensor sink = broadcast_to(reshape(c.sigma, {1, h, 1, 1}), {b, h, tq, 1});
    p = exp(masked - logsumexp(concat({masked, sink}, -1), {-1}, true));
  } else {
    p = softmax(masked, -1);
  }
  Tensor o = reshape(matmul(reshape(p, {b, hkv, group * tq, s}), c.v), {b, h, tq, d});
  if (c.kind == CoreKind::affine) {
    Tensor alpha = unsqueeze(c.alpha, -1);  // [B, H, Tq, 1]
    Tensor n = cast(reshape(c.count, {b, 1, tq, 1}), dtype);
    Tensor beta = (reshape(c.alpha_ma, {1, h, 1, 1}) - alpha) / n;
    Tensor u = reshape(broadcast_to(reshape(c.u, {b, hkv, 1, tq, d}), {b, hkv, group, tq, d}), {b, h, tq, d});
    o = alpha * o + beta * u;
  }
  return o;
}

Tensor cached_attention(const CachedAttentionSpec& c) {
  check_cached_attention(c);
  Backend& kernels = backend(c.q.device());
  if (!kernels.has_cached_attention_kernel(c.q.dtype(), c.q.size(3))) return cached_attention_composed(c);
  return kernels.cached_attention(c);
}

// ---- the layers ----

namespace {

std::string no_cached_step(std::string_view kind) {
  return cat("attention kind '", kind, "' has no cached decoding step (its row has no cached_step): ",
             "decode by recomputing whole sequences (has_kv_cache() is false; generate() and evaluation do so themselves)");
}

// cache.k and cache.v += k and v [B, Hkv, Tq, d] along the slots: written into the buffers' spare
// slots when they have enough and no other copy of the cache has written there, else into new
// buffers, the S cached slots copied once. New buffers hold twice the slots (at most max_slots,
// at least S + Tq), so that a cache growing step by step is copied O(log S) times; but exactly
// S + Tq when the cache has none yet and is fed several tokens a row at once (an evaluation's
// continuations of a repeated context, which it feeds once; a prefill chunk).
void append_slots(LayerCache& cache, const Tensor& k, const Tensor& v, int64_t max_slots) {
  const int64_t s = cache.k.defined() ? cache.k.size(2) : 0, tq = k.size(2);
  // The buffers are this cache's (k and v still view them) and hold room for the new slots; then
  // the slots past S are claimed at once, so that of two copies stepped side by side, even on
  // two threads, only one writes there.
  auto views_buffer = [](const Tensor& x, const Tensor& buffer) {  // x: the buffer's first slots
    return x.data_ptr() == buffer.data_ptr() && x.strides() == buffer.strides();
  };
  bool in_place = cache.k_buffer.defined() && cache.filled && s + tq <= cache.k_buffer.size(2) &&
                  cache.k_buffer.size(0) == k.size(0) && views_buffer(cache.k, cache.k_buffer) &&
                  views_buffer(cache.v, cache.v_buffer);
  if (in_place) {
    int64_t expected = s;
    in_place = cache.filled->compare_exchange_strong(expected, s + tq);
  }
  if (!in_place) {
    int64_t capacity = s + tq;
    if (cache.k_buffer.defined() || tq == 1) {
      capacity = std::max(capacity, 2 * s);
      if (max_slots > 0) capacity = std::max(s + tq, std::min(capacity, max_slots));
    }
    Shape shape = k.shape();
    shape[2] = capacity;
    Tensor k_buffer = Tensor::empty(shape, k.dtype(), k.device());
    Tensor v_buffer = Tensor::empty(shape, v.dtype(), v.device());
    if (s > 0) {
      backend(k.device()).assign(slice(k_buffer, 2, 0, s), cache.k);
      backend(v.device()).assign(slice(v_buffer, 2, 0, s), cache.v);
    }
    cache.k_buffer = k_buffer;
    cache.v_buffer = v_buffer;
    cache.filled = std::make_shared<std::atomic<int64_t>>(s + tq);
  }
  backend(k.device()).assign(slice(cache.k_buffer, 2, s, s + tq), k);
  backend(v.device()).assign(slice(cache.v_buffer, 2, s, s + tq), v);
  cache.k = slice(cache.k_buffer, 2, 0, s + tq);
  cache.v = slice(cache.v_buffer, 2, 0, s + tq);
}

}  // namespace

Attention::Projections Attention::project_step(const Tensor& x, const ParamView& ps, const CacheStep& step) const {
  Projections p = project_qkv(x, ps);
  p.q = Rope::apply(p.q, step.cos, step.sin);
  p.k = Rope::apply(p.k, step.cos, step.sin);
  if (step.real.defined()) {  // padding of a ragged prefill chunk: stored as zeros, never seen
    p.k = p.k * step.real;
    p.v = p.v * step.real;
  }
  return p;
}

Tensor Attention::extend(const Tensor& x, const ParamView& ps, const State& st, const std::string& prefix,
                         const CacheStep& step, LayerCache& cache) const {
  if (x.dim() != 3 || x.size(1) < 1 || x.size(2) != dim)
    fail("decode", "x must be [B, Tq, ", dim, "], got ", to_string(x.shape()));
  const AttentionKindInfo& row = kind();
  if (!row.core) return extend_registered(row, x, ps, st, prefix, step, cache);
  if (options.affine_n == AffineN::full && row.core == CoreKind::affine)
    fail("decode", "affine_n 'full' divides by the whole sequence length, which changes every earlier position as "
                   "the sequence grows: cached decoding needs affine_n 'visible'");
  const int64_t b = x.size(0), tq = x.size(1);
  auto [q, k, v, alpha_logits, gate_logits] = project_step(x, ps, step);
  // The state and parameters the attention reads, looked up before the cache is touched.
  const Tensor sigma = row.core == CoreKind::sink ? ps[kSinks.name] : Tensor();
  const Tensor* alpha_ma = nullptr;
  if (row.core == CoreKind::affine) {
    std::string key = join(prefix, "alpha_ma");
    auto it = st.buffers.find(key);
    if (it == st.buffers.end()) fail("decode", "state has no buffer '", key, "'");
    alpha_ma = &it->second;
  }
  append_slots(cache, k, v, step.max_slots);  // [B, Hkv, S + Tq, d]

  CachedAttentionSpec spec;
  spec.kind = *row.core;
  spec.q = q;
  spec.k = cache.k;
  spec.v = cache.v;
  spec.visible = step.visible;
  if (spec.kind == CoreKind::sink) spec.sigma = sigma;
  if (spec.kind == CoreKind::affine) {
    // U_i = U + the running sum of the new v: O(d) per query for the affine term, however long
    // the row.
    Tensor u = unsqueeze(cache.u, 2) + cumsum(v, 2);  // [B, Hkv, Tq, d]
    cache.u = reshape(slice(u, 2, tq - 1, tq), {b, kv_heads, head_dim});
    spec.alpha = permute(phi(alpha_logits, options.phi), {0, 2, 1});  // [B, H, Tq]
    spec.alpha_ma = *alpha_ma;
    spec.u = u;
    spec.count = step.count;
  }
  Tensor o = reshape(permute(cached_attention(spec), {0, 2, 1, 3}), {b, tq, heads * head_dim});
  if (row.gated) o = output_gate(o, gate_logits);
  return Linear{heads * head_dim, dim, o_bias}.apply(o, ps.sub("o_proj"));
}

Tensor Attention::extend_registered(const AttentionKindInfo& row, const Tensor& x, const ParamView& ps, const State& st,
                                    const std::string& prefix, const CacheStep& step, LayerCache& cache) const {
  if (!row.cached_step) fail("decode", no_cached_step(row.name));
  const int64_t b = x.size(0), tq = x.size(1);
  auto [q, k, v, alpha_logits, gate_logits] = project_step(x, ps, step);
  append_slots(cache, k, v, step.max_slots);  // [B, Hkv, S + Tq, d]
  const CachedStepInputs in{{ps, st, prefix, options}, q, cache.k, cache.v, step.visible, step.count, x};
  const Tensor o = row.cached_step(in);
  const Shape expected{b, heads, tq, head_dim};
  if (!o.defined() || o.shape() != expected)
    fail("decode", "the cached step of attention kind '", row.name, "' returned O ",
         o.defined() ? to_string(o.shape()) : "undefined", ", expected [B, H, Tq, d] = ", to_string(expected));
  Tensor out = reshape(permute(o, {0, 2, 1, 3}), {b, tq, heads * head_dim});
  if (row.gated) out = output_gate(out, gate_logits);
  return Linear{heads * head_dim, dim, o_bias}.apply(out, ps.sub("o_proj"));
}

Tensor DecoderBlock::extend(const Tensor& x, const ParamView& ps, const State& st, const std::string& prefix,
                            const CacheStep& step, LayerCache& cache) const {
  Tensor a = attention.extend(input_norm.apply(x, ps.sub("input_layernorm")), ps.sub("self_attn"), st,
                              join(prefix, "self_attn"), step, cache);
  Tensor h = x + a;
  return h + mlp.apply(post_norm.apply(h, ps.sub("post_attention_layernorm")), ps.sub("mlp"));
}

// ---- the model ----

namespace {

std::string layer_prefix(size_t i) { return "model.layers." + std::to_string(i); }

State evaluation(const State& st) {
  State eval = st;
  eval.training = false;
  return eval;
}

// The RoPE tables of a step at `positions` ([B][Tq], row-major), shaped [B, 1, Tq, d].
void set_rope(CacheStep& step, const Rope& rope, const std::vector<int64_t>& positions, int64_t b, int64_t tq,
              DType dtype, Device device) {
  auto [cos, sin] = rope.tables_at(positions, dtype, device);
  step.cos = reshape(cos, {b, 1, tq, cos.size(1)});
  step.sin = reshape(sin, {b, 1, tq, sin.size(1)});
}

}  // namespace


int64_t CausalLM::cache_limit(const KVCache& cache) const {
  return cache.max_length > 0 ? cache.max_length : config_.max_position_embeddings;
}

Tensor CausalLM::advance(const Tensor& ids, const Params& ps, const State& st, const CacheStep& step,
                         std::vector<LayerCache>& layers) const {
  ParamView view(ps);
  Tensor x = embed_.apply(ids, view.sub("model.embed_tokens"));  // [B, Tq, D]
  std::vector<LayerCache> grown = layers;  // handles: the cache changes only if every layer succeeds
  for (size_t i = 0; i < blocks_.size(); ++i)
    x = blocks_[i].extend(x, view.sub(layer_prefix(i)), st, layer_prefix(i), step, grown[i]);
  layers = std::move(grown);
  return norm_.apply(x, view.sub("model.norm"));
}

Tensor CausalLM::prefill(const Tensor& ids, const Params& ps, const State& st, KVCache& cache) const {
  if (ids.dim() != 2 || ids.size(1) == 0 || !is_integral(ids.dtype()))
    fail("prefill", "token ids must be [batch, seq] integers with seq >= 1, got ", ids.dtype(), " ",
         to_string(ids.shape()));
  const int64_t b = ids.size(0), t = ids.size(1);
  const std::vector<int64_t> flat = cast(ids, DType::i64).to_vector<int64_t>();
  std::vector<std::vector<int32_t>> rows(static_cast<size_t>(b));
  for (int64_t r = 0; r < b; ++r)
    for (int64_t i = 0; i < t; ++i) {
      // Checked here, not only by the embedding: the narrowing to i32 would wrap larger ids.
      const int64_t id = flat[size_t(r * t + i)];
      if (id < 0 || id >= config_.vocab_size)
        fail("prefill", "token id ", id, " at [", r, ", ", i, "] is outside the vocabulary [0, ", config_.vocab_size, ")");
      rows[size_t(r)].push_back(int32_t(id));
    }
  return prefill(rows, ps, st, cache);
}

Tensor CausalLM::prefill(const std::vector<std::vector<int32_t>>& prompts, const Params& ps, const State& st,
                         KVCache& cache) const {
  if (!attention_kind(config_.attention.kind).has_cached_step()) fail("decode", no_cached_step(name_of(config_.attention.kind)));
  if (prompts.empty()) fail("prefill", "no prompts");
  if (config_.attention.affine_n == AffineN::full && is_affine(config_.attention.kind))
    fail("prefill", "affine_n 'full' divides by the whole sequence length: cached decoding needs affine_n 'visible'");
  const int64_t b = int64_t(prompts.size()), limit = cache_limit(cache);
  std::vector<int64_t> lengths;
  for (const auto& p : prompts) {
    if (p.empty()) fail("prefill", "an empty prompt (every row needs at least one token)");
    lengths.push_back(int64_t(p.size()));
  }
  const int64_t longest = *std::max_element(lengths.begin(), lengths.end());
  const bool ragged = *std::min_element(lengths.begin(), lengths.end()) != longest;
  if (longest > limit)
    fail("prefill", "a prompt of ", longest, " tokens is longer than the cache's limit of ", limit,
         cache.max_length > 0 ? "" : " (the model's max_position_embeddings)");
  const int64_t chunk = cache.prefill_chunk > 0 ? cache.prefill_chunk : KVCache::kDefaultPrefillChunk;
  NoGrad no_grad;
  const State eval = evaluation(st);
  const Tensor& head = head_weight(ps);
  const DType dtype = head.dtype();
  const Device device = head.device();
  // The rows padded to the longest (padding: token 0, masked out everywhere).
  auto chunk_ids = [&](int64_t c0, int64_t c1) {
    std::vector<int32_t> flat;
    for (const auto& p : prompts)
      for (int64_t i = c0; i < c1; ++i) flat.push_back(i < int64_t(p.size()) ? p[size_t(i)] : 0);
    return from_vector(flat, {b, c1 - c0}, device);
  };
  // Slots [0, c1): 1 where the row holds a token, as [B, 1, c1, 1] in the model's dtype.
  Tensor slot_index = arange(0, longest, 1, DType::i64, device);
  Tensor row_length = reshape(from_vector(lengths, {b}, device), {b, 1});
  auto holds = [&](int64_t c0, int64_t c1) { return lt(reshape(slice(slot_index, 0, c0, c1), {1, c1 - c0}), row_length); };

  std::vector<Tensor> last(static_cast<size_t>(b));  // each row's final hidden state at its last prompt token
  auto take_last = [&](const Tensor& h, int64_t c0, int64_t c1) {
    for (int64_t r = 0; r < b; ++r) {
      const int64_t i = lengths[size_t(r)] - 1;
      if (i >= c0 && i < c1) last[size_t(r)] = reshape(slice(slice(h, 0, r, r + 1), 1, i - c0, i - c0 + 1), {1, -1});
    }
  };

  // The first chunk: the forward pass, with the fused attention of training.
  const int64_t first = std::min(chunk, longest);
  std::vector<LayerCache> layers;
  Tensor h = run(chunk_ids(0, first), ps, eval, nullptr, &layers).first;  // [B, first, D]
  take_last(h, 0, first);
  if (ragged) {  // padded slots hold zeros, and U sums the row's tokens only
    Tensor real = cast(reshape(holds(0, first), {b, 1, first, 1}), dtype);
    for (LayerCache& layer : layers) {
      layer.k = layer.k * real;
      layer.v = layer.v * real;
      if (layer.u.defined()) layer.u = sum(layer.v, {2});
    }
  }
  // Each later chunk: the cached attention against the slots so far.
  for (int64_t c0 = first; c0 < longest; c0 += chunk) {
    const int64_t c1 = std::min(c0 + chunk, longest), tq = c1 - c0;
    CacheStep step;
    std::vector<int64_t> positions, counts;
    for (int64_t r = 0; r < b; ++r)
      for (int64_t i = c0; i < c1; ++i) {
        positions.push_back(i);
        counts.push_back(std::min(i, lengths[size_t(r)] - 1) + 1);  // padding sees the row's tokens
      }
    set_rope(step, blocks_[0].attention.rope, positions, b, tq, dtype, device);
    step.visible = holds(0, c1);
    step.count = from_vector(counts, {b, tq}, device);
    if (ragged) step.real = cast(reshape(holds(c0, c1), {b, 1, tq, 1}), dtype);
    step.max_slots = limit;
    take_last(advance(chunk_ids(c0, c1), ps, eval, step, layers), c0, c1);
  }
  cache.layers = std::move(layers);
  cache.prompt_lengths = lengths;
  cache.prompt_slots = longest;
  cache.steps = 0;
  return matmul(concat(last, 0), transpose(head));
}

Tensor CausalLM::extend(const Tensor& ids, const Params& ps, const State& st, KVCache& cache) const {
  if (!attention_kind(config_.attention.kind).has_cached_step()) fail("decode", no_cached_step(name_of(config_.attention.kind)));
  if (cache.empty() || int64_t(cache.layers.size()) != config_.num_layers)
    fail("decode", "the cache holds ", cache.layers.size(), " layers, the model has ", config_.num_layers,
         " (run prefill first)");
  if (ids.dim() != 2 || ids.size(0) != cache.batch() || ids.size(1) < 1 || !is_integral(ids.dtype()))
    fail("decode", "token ids must be [", cache.batch(), ", T >= 1] integers (one row per cached row), got ",
         ids.dtype(), " ", to_string(ids.shape()));
  if (config_.attention.affine_n == AffineN::full && is_affine(config_.attention.kind))
    fail("decode", "affine_n 'full' divides by the whole sequence length: cached decoding needs affine_n 'visible'");
  const int64_t b = cache.batch(), tq = ids.size(1), limit = cache_limit(cache);
  std::vector<int64_t> positions, counts;
  for (int64_t r = 0; r < b; ++r) {
    if (cache.length(r) + tq > limit)
      fail("decode", "row ", r, " would hold ", cache.length(r) + tq, " tokens, more than the cache's limit of ", limit,
           cache.max_length > 0 ? "" : " (the model's max_position_embeddings)");
    for (int64_t i = 0; i < tq; ++i) {
      positions.push_back(cache.length(r) + i);
      counts.push_back(cache.length(r) + i + 1);
    }
  }
  NoGrad no_grad;
  const Tensor& head = head_weight(ps);
  const DType dtype = head.dtype();
  const Device device = head.device();
  CacheStep step;
  set_rope(step, blocks_[0].attention.rope, positions, b, tq, dtype, device);
  step.visible = cache.visible(device, tq);
  step.count = from_vector(counts, {b, tq}, device);
  step.max_slots = limit;
  Tensor h = advance(ids, ps, evaluation(st), step, cache.layers);
  cache.steps += tq;
  return matmul(h, transpose(head));  // [B, Tq, V]
}

Tensor CausalLM::decode_step(const Tensor& ids, const Params& ps, const State& st, KVCache& cache) const {
  if (!cache.empty() && (ids.dim() != 2 || ids.size(0) != cache.batch() || ids.size(1) != 1 || !is_integral(ids.dtype())))
    fail("decode", "token ids must be [", cache.batch(), ", 1] integers (one per cached row), got ", ids.dtype(), " ",
         to_string(ids.shape()));
  Tensor logits = extend(ids, ps, st, cache);
  return reshape(logits, {logits.size(0), logits.size(2)});
}

}  // namespace cotan::nn
