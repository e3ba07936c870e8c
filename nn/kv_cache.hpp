// The key/value cache of incremental decoding (docs/generation.md): what CausalLM::prefill
// leaves behind and CausalLM::decode_step extends by one token per row.
//
//   nn::KVCache cache;
//   Tensor logits = model.prefill(prompts, ps, st, cache);   // [B, V], each row's last token
//   for (...) {
//     Tensor next = ...;                                     // ids [B, 1] chosen from logits
//     logits = model.decode_step(next, ps, st, cache);       // [B, V]
//   }
//
// Layout. Rows may hold prompts of different lengths. The cache has S slots per row: the first
// `prompt_slots` hold the prompts, each row's from slot 0 and zero-padded to the longest, and
// every decode step appends one slot to all rows. Slot j of row b holds a token when
//   j < prompt_lengths[b]  or  j >= prompt_slots,
// so row b holds length(b) = prompt_lengths[b] + steps tokens, and its next token sits at RoPE
// position length(b), as it would in the row's own unpadded sequence. Padded slots are masked
// out of every score and hold zeros, so they add nothing to the affine prefix sum either.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "tensor/fused_ops.hpp"
#include "tensor/tensor.hpp"

namespace cotan::nn {

// The keys and values of one attention layer, for every row.
struct LayerCache {
  Tensor k, v;  // [B, Hkv, S, d]: k after RoPE, v as projected; the model's dtype and device
  Tensor u;     // [B, Hkv, d], affine cores only: U, the sum of the row's cached v (its prefix sum)
  // Where k and v live once a step has been appended: buffers [B, Hkv, capacity, d] whose first
  // S slots k and v view, so that a step writes its new slots in place instead of copying the
  // whole cache (the capacity doubles when full, up to the cache's limit). `filled` is shared by
  // every copy of this cache: how many slots of the buffers have been claimed, atomically. A copy
  // that is behind it (another continuation wrote there, or a step that failed after this layer
  // did) appends into new buffers, as does a cache whose k or v no longer view the buffers.
  Tensor k_buffer, v_buffer;
  std::shared_ptr<std::atomic<int64_t>> filled;
};

struct KVCache {
  std::vector<LayerCache> layers;        // one per decoder block, in order
  std::vector<int64_t> prompt_lengths;   // [B] tokens of each row's prompt
  int64_t prompt_slots = 0;              // the longest prompt
  int64_t steps = 0;                     // decode steps taken since prefill
  // The most tokens a row may hold; 0: the model's max_position_embeddings. RoPE positions past
  // the trained context are refused unless this is raised on purpose.
  int64_t max_length = 0;
  // Prompt tokens per prefill chunk: the first chunk runs the fused attention of the forward
  // pass, each later one the cached attention against the chunks before it, so a long prompt
  // never needs more than chunk x length scores. 0: kDefaultPrefillChunk.
  int64_t prefill_chunk = 0;
  static constexpr int64_t kDefaultPrefillChunk = 512;

  int64_t batch() const { return int64_t(prompt_lengths.size()); }
  int64_t slots() const { return prompt_slots + steps; }            // S
  int64_t length(int64_t row) const { return prompt_lengths[size_t(row)] + steps; }
  bool empty() const { return layers.empty(); }
  // This cache's single row repeated `rows` times (the slots are shared, not copied, until each
  // row grows): a context prefilled once, then continued in several ways.
  KVCache repeat(int64_t rows) const;
  // Which slots hold a token, as a bool mask [B, slots() + new_slots] on `device` (see Layout
  // above; the new slots, appended by the next steps, hold tokens in every row).
  Tensor visible(Device device, int64_t new_slots = 0) const;
};

// What one step of the cache passes to every layer, built once per step before the cache grows:
// Tq new tokens per row (a decode step: 1; a prefill chunk or an evaluation's continuations: more).
struct CacheStep {
  Tensor cos, sin;  // [B, 1, Tq, d]: the RoPE tables at each new token's position
  Tensor visible;   // [B, S + Tq] bool: which slots, the new ones included, hold a token
  Tensor count;     // [B, Tq] i64: N_i, the slots new token i sees (the affine kinds' count)
  // [B, 1, Tq, 1] in the model's dtype: 1 where the new token is real, 0 where it pads a ragged
  // prefill chunk (its k and v are stored as zeros); undefined: every new token is real.
  Tensor real;
  int64_t max_slots = 0;  // the cache's limit: its buffers never grow past it (0: none)
};

// The attention of Tq new queries against the cache (tensor/fused_ops.hpp, CachedAttentionSpec):
// the backend's kernel (tensor/cpu/cached_attention.cpp, cuda/kernels/cached_attention.cuh) for
// the dtypes it takes, else cached_attention_composed. Checks the spec and throws
// "[cached_attention] ..." naming the tensor. Inference only: refused on inputs that require grad.
Tensor cached_attention(const CachedAttentionSpec& spec);
// The same function from primitive ops (it materialises the [B, H, Tq, S] scores): the kernels'
// oracle and the fallback.
Tensor cached_attention_composed(const CachedAttentionSpec& spec);
void check_cached_attention(const CachedAttentionSpec& spec);

}  // namespace cotan::nn
