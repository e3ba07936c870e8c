// Text generation with any LanguageModel (nn/language_model.hpp): sampling a next token from logits, and the loop that prefills
// the prompts into a KV cache and decodes one token per row per step (docs/generation.md).
//
//   nn::GenerateConfig c;
//   c.max_new_tokens = 32;
//   c.sampling.top_p = 0.9;
//   c.eos = 256;
//   Generator gen(seed);
//   nn::Generation g = nn::generate(model, ps, st, {prompt_ids}, c, gen,
//                                   [&](size_t row, int32_t id) { show(row, id); return true; });
//
// Sampling is deterministic for a seed: each step reserves one Philox block per row of the batch,
// whether the row is still active or not, and draws on the host in f64.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string_view>
#include <vector>

#include "nn/language_model.hpp"

namespace cotan::nn {

struct SamplingConfig {
  bool greedy = false;       // the most likely id (the lowest among equal logits); the rest is ignored
  double temperature = 1.0;  // > 0: sample from softmax(logits / temperature)
  int64_t top_k = 0;         // only the k most likely ids (0: off)
  double top_p = 1.0;        // only the fewest most likely ids whose probability reaches top_p (1: off)
};

// Throws "[sampling] ..." for a temperature that is not positive and finite, a negative top_k or
// a top_p outside (0, 1].
void check_sampling(const SamplingConfig& c);

// One id per row of logits [B, V] (any floating dtype and device). Candidates are ordered by
// logit (ties: the lower id first), cut to top_k, then to the shortest prefix whose probability
// (after the temperature) reaches top_p, and renormalised; row r draws u = uniform53 of the first
// two words of Philox block (start + r, gen.seed()), start = gen.advance(B). Throws "[sampling]
// row r has a logit that is not finite" (NaN or inf).
std::vector<int32_t> sample(const Tensor& logits, const SamplingConfig& c, Generator& gen);

enum class FinishReason { length, eos, stop };
std::string_view name_of(FinishReason reason);  // "length", "eos", "stop"

struct GenerateConfig {
  int64_t max_new_tokens = 64;
  SamplingConfig sampling;
  std::optional<int32_t> eos;  // a row that produces it ends (it is kept as the row's last token)
  // false: every step runs the full forward pass on each row's whole sequence instead of the KV
  // cache (slow: the oracle the cached path is compared with). A model without incremental
  // decoding (LanguageModel::has_kv_cache() false: a family without it, an attention kind without
  // a cached step, affine_n 'full') always does.
  bool use_cache = true;
};

struct Generation {
  std::vector<std::vector<int32_t>> tokens;  // per prompt, the new ids
  std::vector<FinishReason> finish;          // per prompt, why it ended
  int64_t prompt_tokens = 0;                 // over all prompts
  int64_t new_tokens = 0;                    // over all prompts
};

// Called after each new token of a row that is still active, rows in order within a step;
// returning false ends the row (FinishReason::stop), its token kept.
using TokenCallback = std::function<bool(size_t row, int32_t id)>;

// Generates up to max_new_tokens for each prompt, batched: the prompts are prefilled together
// (LanguageModel::prefill, ragged rows padded) and each step decodes one token per row. A row ends at
// eos, when on_token says so, or after max_new_tokens; the loop ends when every row has. Runs
// without gradients in evaluation mode. Throws "[generate] ..." for no prompts, an empty prompt,
// max_new_tokens < 1, or a prompt too long for the model: prompt + max_new_tokens - 1 tokens must
// fit in max_position_embeddings (the last new token is never fed back).
Generation generate(const LanguageModel& lm, const Params& ps, const State& st,
                    const std::vector<std::vector<int32_t>>& prompts, const GenerateConfig& c, Generator& gen,
                    const TokenCallback& on_token = {});

}  // namespace cotan::nn
