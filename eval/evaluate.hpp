// Scoring any LanguageModel (nn/language_model.hpp) the way the paper's Table 1 does
// (docs/evaluation.md): perplexity over a token stream with HF's sliding window, and zero-shot
// multiple choice by summed log-likelihoods in lm-evaluation-harness 0.4.13's conventions (the
// tasks: eval/tasks.hpp; the requests encoded as its HF backend encodes them).
//
//   PerplexityText text = perplexity_text("c4.jsonl", PerplexityMode::stream, "text", &tokenizer, eos);
//   PerplexityResult p = perplexity(model, ps, st, text.ids, text.bytes, {.window = 1024, .stride = 512});
//   HarnessEncoding h = harness_encoding(&tokenizer, eos);
//   TaskScore s = score_task(model, ps, st, read_task("piqa", "piqa.jsonl"), h.encode, h.config());
//
// Everything runs under NoGrad in evaluation mode; log-softmax is taken in f64 on the host.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "nn/language_model.hpp"
#include "eval/tasks.hpp"
#include "text/tokenizer.hpp"

namespace cotan::eval {

// ---- perplexity ----

struct PerplexityConfig {
  int64_t window = 1024;  // tokens per forward pass, >= 2
  int64_t stride = 512;   // new tokens per window after the first, in [1, window]
};

struct PerplexityResult {
  double nll = 0;        // total negative log-likelihood of the scored tokens, in nats
  int64_t tokens = 0;    // tokens scored (each once)
  int64_t bytes = 0;     // UTF-8 bytes of the scored text, as given
  int64_t windows = 0;   // forward passes
  // HF's guide accumulates each window's mean NLL times its `num_loss_tokens`, the window's
  // trg_len - 1 (end - previous end - 1): one token fewer than it scores in a window that
  // overlaps the one before it. These are that sum and the sum of the weights.
  double guide_nll = 0;
  int64_t guide_tokens = 0;
  double perplexity() const;        // exp(guide_nll / guide_tokens): the guide's number
  double token_perplexity() const;  // exp(nll / tokens): every scored token weighted alike
  double bits_per_byte() const;     // nll / ln 2 / bytes
};

// HF's sliding-window perplexity ("Perplexity of fixed-length models", its code step for step):
// windows [begin, min(begin + window, n)) with begin = 0, stride, 2 stride, ... until a window
// reaches the end; each scores the tokens past the previous window's end (tokens 1.. in the
// first), given the tokens of the window before them; a window's first token has no context in
// it and is not scored (with stride = window, the first token of every window). Windows that
// score nothing are skipped (the guide's code gives NaN there). Throws "[eval] ..." for fewer
// than 2 tokens, a window below 2 or past max_position_embeddings, a stride outside [1, window].
PerplexityResult perplexity(const nn::LanguageModel& lm, const nn::Params& ps, const nn::State& st,
                            const std::vector<int32_t>& ids, int64_t bytes, const PerplexityConfig& c);

// How a perplexity corpus becomes tokens.
//   stream     the corpus as one text, as HF's guide scores a file: a text file's bytes as they are
//              (fortune separators and all), a JSONL file's documents joined with "\n\n" (as the
//              guide joins WikiText's lines), several files joined with "\n\n"; encoded once
//              with the tokenizer's special tokens (Llama's BOS in front, Qwen2's nothing), no EOS.
//   documents  each document (text/corpus.hpp: fortune files split at "%" lines, JSONL lines)
//              encoded with the tokenizer's special tokens and followed by the end-of-sequence
//              id, the documents joined: the stream `cotan tokenize` makes of a corpus.
enum class PerplexityMode { stream, documents };
const char* name_of(PerplexityMode mode);
// "stream" or "documents"; anything else throws "[eval] --ppl-mode x: expected stream or documents".
PerplexityMode parse_perplexity_mode(const std::string& name);

struct PerplexityText {
  std::vector<int32_t> ids;
  int64_t bytes = 0;      // of the text encoded (the stream's joiners included)
  int64_t documents = 0;  // the corpus's documents
};

// The tokens of `path` (a text or JSONL file, or a directory; compressed too) in `mode`, with
// `tokenizer` (null: the byte tokenizer) and `eos` ending each document in documents mode. Errors
// are the corpus readers'.
PerplexityText perplexity_text(const std::string& path, PerplexityMode mode, const std::string& text_field,
                               const text::Tokenizer* tokenizer, int32_t eos);

// ---- multiple choice ----

// Text to ids.
using Encode = std::function<std::vector<int32_t>(std::string_view)>;

struct ChoiceConfig {
  int32_t prefix_id = 0;   // the token an empty context stands for (the harness's prefix_token_id)
  int64_t window = 0;      // the longest input; 0: max_position_embeddings
  // The continuation of an empty context, encoded without special tokens; null: the encode given.
  Encode plain = nullptr;
};

// The harness's loglikelihood requests, as lm-evaluation-harness 0.4.13's HF backend
// (HFLM.tok_encode, TemplateLM._encode_pair and loglikelihood) makes them:
// - a context that is "": the continuation encoded without special tokens (c.plain), after
//   prefix_id unless it starts with prefix_id, in which case that first token is the context;
// - otherwise the context's trailing whitespace moves to the front of the continuation,
//   context_ids = encode(context), and the continuation's ids are encode(context +
//   continuation) past the first len(context_ids) tokens. A context that encodes to nothing is
//   prefix_id (the harness asserts there instead).
// Throws "[eval] ..." for a continuation that encodes to nothing.
std::pair<std::vector<int32_t>, std::vector<int32_t>> encode_pair(std::string_view context,
                                                                   std::string_view continuation,
                                                                   const Encode& encode, const ChoiceConfig& c);
// The same with prefix_id alone (c.plain null: `encode` for both).
std::pair<std::vector<int32_t>, std::vector<int32_t>> encode_pair(std::string_view context,
                                                                   std::string_view continuation,
                                                                   const Encode& encode, int32_t prefix_id);

// How the harness's HF backend encodes requests with a tokenizer (null: the byte tokenizer).
//   encode     tok_encode: the tokenizer's default special tokens (add_special_tokens=True:
//              Llama's BOS, Qwen2's nothing), none when the text already starts with the
//              prefix token's text (its has_bos_prefix check);
//   plain      add_special_tokens=False;
//   prefix_id  prefix_token_id: the tokenizer's bos_token_id when it has one, else `eos`.
// The tokenizer must outlive the encoders.
struct HarnessEncoding {
  Encode encode, plain;
  int32_t prefix_id = 0;
  ChoiceConfig config(int64_t window = 0) const { return {.prefix_id = prefix_id, .window = window, .plain = plain}; }
};
HarnessEncoding harness_encoding(const text::Tokenizer* tokenizer, int32_t eos);

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
