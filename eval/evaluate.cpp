#include "eval/evaluate.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numbers>

#include "autograd/autograd.hpp"
#include "tensor/ops.hpp"
#include "text/byte_tokenizer.hpp"
#include "text/corpus.hpp"
#include "text/decompress.hpp"
#include "util/error.hpp"

namespace cotan::eval {

namespace {

// log p(targets[b][t]) under logits [B, T, V], [B][T]; the log-softmax is taken in f64 on the
// logits' device.
std::vector<std::vector<double>> picked_logprobs(const Tensor& logits, const std::vector<std::vector<int32_t>>& targets) {
  const int64_t rows = logits.size(0), t = logits.size(1);
  std::vector<int64_t> flat_target;
  for (const auto& row : targets) flat_target.insert(flat_target.end(), row.begin(), row.end());
  const Tensor lp = log_softmax(cast(logits, DType::f64), -1);
  const std::vector<double> picked =
      gather(lp, -1, from_vector(flat_target, {rows, t, 1}, logits.device())).to_vector<double>();  // [B, T, 1]
  std::vector<std::vector<double>> out(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) out[size_t(r)].assign(picked.begin() + r * t, picked.begin() + (r + 1) * t);
  return out;
}

std::vector<int32_t> flatten(const std::vector<std::vector<int32_t>>& rows) {
  std::vector<int32_t> flat;
  for (const auto& row : rows) flat.insert(flat.end(), row.begin(), row.end());
  return flat;
}

// log p(targets[b][t] | inputs[b][:t+1]) for every position of the rows of one forward pass,
// [B][T] (rows of equal length T).
std::vector<std::vector<double>> target_logprobs(const nn::LanguageModel& lm, const nn::Params& ps, const nn::State& st,
                                                 const std::vector<std::vector<int32_t>>& inputs,
                                                 const std::vector<std::vector<int32_t>>& targets) {
  const Device device = lm.head_weight(ps).device();
  nn::State eval = st;
  eval.training = false;
  const Tensor ids = from_vector(flatten(inputs), {int64_t(inputs.size()), int64_t(inputs[0].size())}, device);
  return picked_logprobs(lm.apply(ids, ps, eval).first, targets);  // logits [B, T, V]
}

// The same for inputs that continue the rows of `cache` (rows of equal length T; the cache grows).
std::vector<std::vector<double>> target_logprobs_cached(const nn::LanguageModel& lm, const nn::Params& ps,
                                                        const nn::State& st, nn::KVCache& cache,
                                                        const std::vector<std::vector<int32_t>>& inputs,
                                                        const std::vector<std::vector<int32_t>>& targets) {
  const Device device = lm.head_weight(ps).device();
  const Tensor ids = from_vector(flatten(inputs), {int64_t(inputs.size()), int64_t(inputs[0].size())}, device);
  return picked_logprobs(lm.extend(ids, ps, st, cache), targets);
}

// Python's str.rstrip() boundary for the harness's trailing-space move (ASCII whitespace).
size_t rstrip_end(std::string_view s) {
  size_t end = s.size();
  while (end > 0 && (s[end - 1] == ' ' || (s[end - 1] >= '\t' && s[end - 1] <= '\r'))) --end;
  return end;
}

}  // namespace

double PerplexityResult::perplexity() const { return std::exp(guide_nll / double(guide_tokens)); }
double PerplexityResult::token_perplexity() const { return std::exp(nll / double(tokens)); }
double PerplexityResult::bits_per_byte() const { return nll / std::numbers::ln2 / double(bytes); }

PerplexityResult perplexity(const nn::LanguageModel& lm, const nn::Params& ps, const nn::State& st,
                            const std::vector<int32_t>& ids, int64_t bytes, const PerplexityConfig& c) {
  const int64_t n = int64_t(ids.size());
  if (n < 2) fail("eval", "perplexity needs at least 2 tokens, the text has ", n);
  if (c.window < 2 || c.window > lm.max_positions())
    fail("eval", "--ppl-window ", c.window, " must be in [2, ", lm.max_positions(),
         "] (the model's max_position_embeddings)");
  if (c.stride < 1 || c.stride > c.window) fail("eval", "--ppl-stride ", c.stride, " must be in [1, ", c.window, "]");
  NoGrad no_grad;
  PerplexityResult result;
  result.bytes = bytes;
  int64_t previous_end = 0;
  for (int64_t begin = 0; begin < n; begin += c.stride) {
    const int64_t end = std::min(begin + c.window, n);
    // The guide's labels are tokens [previous_end, end); the window's first token has no context.
    const int64_t first = std::max(previous_end, begin + 1);
    if (first < end) {
      // The window's inputs ids[begin, end - 1) predict ids[begin + 1, end).
      std::vector<int32_t> in(ids.begin() + begin, ids.begin() + end - 1);
      std::vector<int32_t> target(ids.begin() + begin + 1, ids.begin() + end);
      const std::vector<double> lp = target_logprobs(lm, ps, st, {in}, {target})[0];
      double window_nll = 0;
      for (int64_t i = first; i < end; ++i) window_nll -= lp[size_t(i - begin - 1)];
      result.nll += window_nll;
      result.tokens += end - first;
      result.windows += 1;
      const int64_t weight = end - previous_end - 1;  // the guide's num_loss_tokens
      result.guide_nll += window_nll / double(end - first) * double(weight);
      result.guide_tokens += weight;
    }
    previous_end = end;
    if (end == n) break;
  }
  return result;
}

const char* name_of(PerplexityMode mode) { return mode == PerplexityMode::stream ? "stream" : "documents"; }

PerplexityMode parse_perplexity_mode(const std::string& name) {
  if (name == "stream") return PerplexityMode::stream;
  if (name == "documents") return PerplexityMode::documents;
  fail("eval", "--ppl-mode ", name, ": expected stream or documents");
}

PerplexityText perplexity_text(const std::string& path, PerplexityMode mode, const std::string& text_field,
                               const text::Tokenizer* tokenizer, int32_t eos) {
  const auto encode = [tokenizer](std::string_view t) {
    return tokenizer ? tokenizer->encode(t, true) : text::encode_bytes(t);
  };
  PerplexityText out;
  if (mode == PerplexityMode::documents) {
    for (const std::string& doc : text::read_documents(path, {.text_field = text_field})) {
      const std::vector<int32_t> ids = encode(doc);
      out.ids.insert(out.ids.end(), ids.begin(), ids.end());
      out.ids.push_back(eos);
      out.bytes += int64_t(doc.size());
      out.documents += 1;
    }
    return out;
  }
  std::string stream;
  for (const std::string& file : text::corpus_files(path)) {
    if (!stream.empty()) stream += "\n\n";
    if (text::input_format(file) == text::InputFormat::jsonl) {
      text::DocumentReader reader({file}, {.text_field = text_field});
      std::string doc;
      for (bool first = true; reader.next(doc); first = false) {
        if (!first) stream += "\n\n";
        stream += doc;
        out.documents += 1;
      }
    } else {
      const std::string text = text::read_all(file);
      stream += text;
      out.documents += int64_t(text::split_documents(text).size());
    }
  }
  if (out.documents == 0) fail("data", path, ": the corpus is empty");
  out.ids = encode(stream);
  out.bytes = int64_t(stream.size());
  return out;
}

std::pair<std::vector<int32_t>, std::vector<int32_t>> encode_pair(std::string_view context,
                                                                   std::string_view continuation,
                                                                   const Encode& encode, const ChoiceConfig& c) {
  std::vector<int32_t> context_ids, continuation_ids;
  if (context.empty()) {
    // The harness's loglikelihood: the prefix token stands for the context, unless the
    // continuation's plain ids start with it.
    continuation_ids = (c.plain ? c.plain : encode)(continuation);
    if (!continuation_ids.empty() && continuation_ids.front() == c.prefix_id) {
      context_ids.assign(continuation_ids.begin(), continuation_ids.begin() + 1);
      continuation_ids.erase(continuation_ids.begin());
    } else {
      context_ids = {c.prefix_id};
    }
  } else {
    // _encode_pair: the context's trailing whitespace goes to the continuation.
    const size_t keep = rstrip_end(context);
    const std::string moved = cat(context.substr(keep), continuation);
    context = context.substr(0, keep);
    const std::vector<int32_t> whole = encode(cat(context, moved));
    context_ids = encode(context);
    const size_t split = std::min(context_ids.size(), whole.size());
    continuation_ids.assign(whole.begin() + ptrdiff_t(split), whole.end());
    if (context_ids.empty()) context_ids = {c.prefix_id};
  }
  if (continuation_ids.empty()) fail("eval", "the continuation \"", continuation, "\" encodes to no tokens");
  return {context_ids, continuation_ids};
}

std::pair<std::vector<int32_t>, std::vector<int32_t>> encode_pair(std::string_view context,
                                                                   std::string_view continuation,
                                                                   const Encode& encode, int32_t prefix_id) {
  return encode_pair(context, continuation, encode, ChoiceConfig{.prefix_id = prefix_id});
}

HarnessEncoding harness_encoding(const text::Tokenizer* tokenizer, int32_t eos) {
  HarnessEncoding h;
  if (!tokenizer) {
    // The byte tokenizer adds no special tokens; its prefix is the end of a document.
    h.encode = h.plain = [](std::string_view t) { return text::encode_bytes(t); };
    h.prefix_id = eos;
    return h;
  }
  h.prefix_id = tokenizer->bos_id().value_or(eos);
  const std::string prefix_text = tokenizer->decode(std::vector<int32_t>{h.prefix_id});
  h.encode = [tokenizer, prefix_text](std::string_view t) {
    const bool has_prefix = !prefix_text.empty() && t.starts_with(prefix_text);
    return tokenizer->encode(t, !has_prefix);
  };
  h.plain = [tokenizer](std::string_view t) { return tokenizer->encode(t, false); };
  return h;
}

std::vector<double> choice_logliks(const nn::LanguageModel& lm, const nn::Params& ps, const nn::State& st,
                                   const std::vector<McRequest>& requests, const Encode& encode,
                                   const ChoiceConfig& c) {
  const int64_t window = c.window > 0 ? c.window : lm.max_positions();
  // Per request: the input, its targets and where the continuation's targets start.
  std::vector<std::vector<int32_t>> inputs, targets;
  std::vector<size_t> first, count;
  size_t longest = 0;
  for (const McRequest& r : requests) {
    auto [context_ids, continuation_ids] = encode_pair(r.context, r.continuation, encode, c);
    std::vector<int32_t> all = std::move(context_ids);
    all.insert(all.end(), continuation_ids.begin(), continuation_ids.end());
    const size_t from = all.size() > size_t(window) + 1 ? all.size() - size_t(window) - 1 : 0;
    std::vector<int32_t> kept(all.begin() + ptrdiff_t(from), all.end());
    inputs.emplace_back(kept.begin(), kept.end() - 1);
    targets.emplace_back(kept.begin() + 1, kept.end());
    count.push_back(std::min(continuation_ids.size(), targets.back().size()));
    first.push_back(targets.back().size() - count.back());
    longest = std::max(longest, inputs.back().size());
  }
  NoGrad no_grad;
  std::vector<std::vector<double>> lp;
  // The tokens every request's input starts with, up to the first scored position: the shared
  // context (PIQA's goal, HellaSwag's ctx, ARC's question, BoolQ's passage).
  size_t shared = inputs[0].size();
  for (size_t r = 0; r < requests.size(); ++r) {
    size_t n = 0;
    while (n < shared && n < inputs[r].size() && inputs[r][n] == inputs[0][n]) ++n;
    shared = std::min({shared, n, first[r]});
  }
  if (!lm.has_kv_cache()) {
    // A model without incremental decoding runs each request on its own, unpadded: affine_n
    // 'full' counts every position in N, padding included, and a model of user code is not
    // assumed to be one whose earlier positions ignore padding on the right.
    for (size_t r = 0; r < requests.size(); ++r) lp.push_back(target_logprobs(lm, ps, st, {inputs[r]}, {targets[r]})[0]);
  } else if (shared > 0 && requests.size() > 1) {
    // The context is prefilled once; each request continues it from position `shared`.
    nn::KVCache context;
    lm.prefill({std::vector<int32_t>(inputs[0].begin(), inputs[0].begin() + ptrdiff_t(shared))}, ps, st, context);
    std::vector<std::vector<int32_t>> rest_in, rest_target;
    for (size_t r = 0; r < requests.size(); ++r) {
      rest_in.emplace_back(inputs[r].begin() + ptrdiff_t(shared), inputs[r].end());
      rest_target.emplace_back(targets[r].begin() + ptrdiff_t(shared), targets[r].end());
      rest_in.back().resize(longest - shared, c.prefix_id);
      rest_target.back().resize(longest - shared, 0);
    }
    nn::KVCache rows = context.repeat(int64_t(requests.size()));
    const std::vector<std::vector<double>> rest = target_logprobs_cached(lm, ps, st, rows, rest_in, rest_target);
    for (const std::vector<double>& row : rest) {
      lp.emplace_back(shared, 0.0);  // positions before `shared` are never scored
      lp.back().insert(lp.back().end(), row.begin(), row.end());
    }
  } else {
    std::vector<std::vector<int32_t>> padded_in = inputs, padded_target = targets;
    for (size_t r = 0; r < requests.size(); ++r) {
      padded_in[r].resize(longest, c.prefix_id);
      padded_target[r].resize(longest, 0);
    }
    lp = target_logprobs(lm, ps, st, padded_in, padded_target);
  }
  std::vector<double> out;
  for (size_t r = 0; r < requests.size(); ++r) {
    double sum = 0;
    for (size_t i = first[r]; i < first[r] + count[r]; ++i) sum += lp[r][i];
    out.push_back(sum);
  }
  return out;
}

Predictions predict(const std::vector<double>& logliks, const std::vector<std::string>& choice_texts) {
  check(logliks.size() == choice_texts.size() && !logliks.empty(), "eval", "predict: ", logliks.size(),
        " log-likelihoods for ", choice_texts.size(), " choices");
  auto argmax = [&](auto weight) {
    size_t best = 0;
    for (size_t i = 1; i < logliks.size(); ++i)
      if (logliks[i] / weight(i) > logliks[best] / weight(best)) best = i;
    return int64_t(best);
  };
  Predictions p;
  p.acc = argmax([](size_t) { return 1.0; });
  p.acc_norm = argmax([&](size_t i) { return double(code_points(choice_texts[i])); });
  p.acc_bytes = argmax([&](size_t i) { return double(choice_texts[i].size()); });
  return p;
}

TaskScore score_task(const nn::LanguageModel& lm, const nn::Params& ps, const nn::State& st,
                     const std::vector<McExample>& examples, const Encode& encode, const ChoiceConfig& c) {
  const auto start = std::chrono::steady_clock::now();
  TaskScore s;
  for (const McExample& ex : examples) {
    const Predictions p = predict(choice_logliks(lm, ps, st, ex.requests, encode, c), ex.choice_texts);
    s.acc += p.acc == ex.gold;
    s.acc_norm += p.acc_norm == ex.gold;
    s.acc_bytes += p.acc_bytes == ex.gold;
    s.examples += 1;
  }
  if (s.examples > 0) {
    s.acc /= double(s.examples);
    s.acc_norm /= double(s.examples);
    s.acc_bytes /= double(s.examples);
  }
  s.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return s;
}

}  // namespace cotan::eval
