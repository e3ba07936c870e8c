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

#include <cstdint>
#include <vector>

#include "tensor/tensor.hpp"

namespace cotan::nn {

// The keys and values of one attention layer, for every row.
struct LayerCache {
  Tensor k, v;  // [B, Hkv, S, d]: k after RoPE, v as projected; the model's dtype and device
  Tensor u;     // [B, Hkv, d], affine cores only: U, the sum of the row's cached v (its prefix sum)
};

struct KVCache {
  std::vector<LayerCache> layers;        // one per decoder block, in order
  std::vector<int64_t> prompt_lengths;   // [B] tokens of each row's prompt
  int64_t prompt_slots = 0;              // the longest prompt
  int64_t steps = 0;                     // decode steps taken since prefill
  // The most tokens a row may hold; 0: the model's max_position_embeddings. RoPE positions past
  // the trained context are refused unless this is raised on purpose.
  int64_t max_length = 0;

  int64_t batch() const { return int64_t(prompt_lengths.size()); }
  int64_t slots() const { return prompt_slots + steps; }            // S
  int64_t length(int64_t row) const { return prompt_lengths[size_t(row)] + steps; }
  bool empty() const { return layers.empty(); }
  // Which slots hold a token, as a bool mask [B, slots() + new_slots] on `device` (see Layout
  // above; the new slots, appended by the next steps, hold tokens in every row).
  Tensor visible(Device device, int64_t new_slots = 0) const;
};

// What one decode step passes to every layer: the new token's RoPE tables and the visibility of
// the slots, the new one included (built once per step from the cache, before it grows).
struct DecodeStep {
  Tensor cos, sin;  // [B, 1, 1, d]: position length(b) of each row
  Tensor visible;   // [B, 1, 1, S + 1] bool
  Tensor count;     // [B, 1, 1, 1] in the model's dtype: length(b) + 1, the affine kinds' N
};

}  // namespace cotan::nn
