// Scoring any LanguageModel (nn/language_model.hpp) the way the paper's Table 1 does (docs/evaluation.md): perplexity over a
// token stream with a sliding window, and zero-shot multiple choice by summed log-likelihoods in
// lm-eval-harness 0.4's conventions (the tasks: eval/tasks.hpp).
//
//   PerplexityResult p = perplexity(model, ps, st, ids, text_bytes, {.window = 1024, .stride = 512});
//   Encode encode = [&](std::string_view s) { return tokenizer.encode(s, false); };
//   TaskScore s = score_task(model, ps, st, read_task("piqa", "piqa.jsonl"), encode, {.prefix_id = eos});
//
// Everything runs under NoGrad in evaluation mode; log-softmax is taken in f64 on the host.
#pragma once

#include <cstdint>
#include <functional>
#include <string_view>
#include <vector>

#include "nn/language_model.hpp"
#include "eval/tasks.hpp"

namespace cotan::eval {

// ---- perplexity ----

struct PerplexityConfig {
  int64_t window = 1024;  // tokens per forward pass, >= 2
  int64_t stride = 512;   // new tokens per window after the first, in [1, window]
};

struct PerplexityResult {
  double nll = 0;        // total negative log-likelihood of the scored tokens, in nats
  int64_t tokens = 0;    // tokens scored: every token of the stream but the first
  int64_t bytes = 0;     // UTF-8 bytes of the scored text, as given
  int64_t windows = 0;   // forward passes
  double perplexity() const;     // exp(nll / tokens)
  double bits_per_byte() const;  // nll / ln 2 / bytes
};

// HF's sliding-window perplexity: windows [begin, begin + window) with begin = 0, stride, 2 stride,
// ...; the first window scores its tokens 1..window-1 given everything before them, each later
// window only the tokens past the previous window's end (its last `stride` tokens, fewer at the
// end of the stream), so each token but the first is scored once, with at least window - stride
// tokens of context where the stream has them. Throws "[eval] ..." for fewer than 2 tokens, a
// window below 2 or past max_position_embeddings, a stride outside [1, window].
PerplexityResult perplexity(const nn::LanguageModel& lm, const nn::Params& ps, const nn::State& st,
                            const std::vector<int32_t>& ids, int64_t bytes, const PerplexityConfig& c);

// ---- multiple choice ----

// Text to ids without special tokens (the harness encodes with add_special_tokens=False).
using Encode = std::function<std::vector<int32_t>(std::string_view)>;

// The harness's _encode_pair: trailing whitespace of the context moves to the continuation, the
// whole context + continuation is encoded, and the continuation's ids are those after the
// context's own ids (encode(context)). A context that encodes to nothing is the one token
// `prefix_id` (the harness's prefix_token_id, the EOS). Throws "[eval] ..." for a continuation
// that encodes to nothing.
std::pair<std::vector<int32_t>, std::vector<int32_t>> encode_pair(std::string_view context,
                                                                   std::string_view continuation,
                                                                   const Encode& encode, int32_t prefix_id);

struct ChoiceConfig {
  int32_t prefix_id = 0;   // the token before an empty context
  int64_t window = 0;      // the longest input; 0: max_position_embeddings
};

// The log-likelihood of each request's continuation given its context, summed over its tokens.
// The input is (context + continuation)[-(window + 1):][:-1], truncated from the left as the
// harness does. The tokens every input shares before its first scored position (the example's
// context) are prefilled once into a KV cache, and the choices continue it as one batch, padded
// on the right (padding never reaches an earlier position of a causal model); without a shared
// prefix the choices run as one padded batch. A model without incremental decoding
// (has_kv_cache() false: affine_n 'full', kinds or families without a cached step) runs the
// choices one at a time, unpadded.
std::vector<double> choice_logliks(const nn::LanguageModel& lm, const nn::Params& ps, const nn::State& st,
                                   const std::vector<McRequest>& requests, const Encode& encode,
                                   const ChoiceConfig& c);

// The harness's three predictions from the summed log-likelihoods: argmax of ll (acc), of
// ll / code points (acc_norm), of ll / UTF-8 bytes (acc_bytes) of the choice_texts; ties go to
// the first choice, as numpy's argmax.
struct Predictions {
  int64_t acc = 0, acc_norm = 0, acc_bytes = 0;
};
Predictions predict(const std::vector<double>& logliks, const std::vector<std::string>& choice_texts);

struct TaskScore {
  int64_t examples = 0;
  double acc = 0, acc_norm = 0, acc_bytes = 0;  // fractions of examples right
  double seconds = 0;
  double examples_per_second() const { return seconds > 0 ? double(examples) / seconds : 0.0; }
};

TaskScore score_task(const nn::LanguageModel& lm, const nn::Params& ps, const nn::State& st,
                     const std::vector<McExample>& examples, const Encode& encode, const ChoiceConfig& c);

}  // namespace cotan::eval
