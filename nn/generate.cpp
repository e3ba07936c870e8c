#include "nn/generate.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <span>

#include "autograd/autograd.hpp"
#include "tensor/ops.hpp"

namespace cotan::nn {

namespace {

// The id one row of logits samples (sample() in nn/generate.hpp), given its uniform draw u in [0, 1).
int32_t sample_row(std::span<const double> logits, const SamplingConfig& c, double u) {
  const size_t vocab = logits.size();
  if (c.greedy) return int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
  std::vector<int32_t> order(vocab);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return logits[size_t(a)] > logits[size_t(b)]; });
  size_t kept = c.top_k > 0 ? std::min(vocab, size_t(c.top_k)) : vocab;
  // Probabilities of the kept ids after the temperature, largest first.
  const double top = logits[size_t(order[0])];
  std::vector<double> p(kept);
  double total = 0;
  for (size_t i = 0; i < kept; ++i) total += p[i] = std::exp((logits[size_t(order[i])] - top) / c.temperature);
  if (c.top_p < 1.0) {
    double mass = 0;
    size_t i = 0;
    while (i < kept && (mass += p[i] / total) < c.top_p) ++i;
    kept = std::min(kept, i + 1);
    total = std::accumulate(p.begin(), p.begin() + std::ptrdiff_t(kept), 0.0);
  }
  double target = u * total, cumulative = 0;
  for (size_t i = 0; i < kept; ++i)
    if ((cumulative += p[i]) > target) return order[i];
  return order[kept - 1];  // u * total rounded up to the total
}

}  // namespace

void check_sampling(const SamplingConfig& c) {
  if (!(std::isfinite(c.temperature) && c.temperature > 0))
    fail("sampling", "temperature ", c.temperature, " must be positive and finite (greedy decoding takes no temperature)");
  if (c.top_k < 0) fail("sampling", "top_k ", c.top_k, " must be >= 0 (0: off)");
  if (!(c.top_p > 0 && c.top_p <= 1)) fail("sampling", "top_p ", c.top_p, " must be in (0, 1] (1: off)");
}

std::vector<int32_t> sample(const Tensor& logits, const SamplingConfig& c, Generator& gen) {
  check_sampling(c);
  if (logits.dim() != 2 || logits.size(1) == 0 || !is_floating(logits.dtype()))
    fail("sampling", "logits must be [batch, vocab] floats, got ", logits.dtype(), " ", to_string(logits.shape()));
  const int64_t rows = logits.size(0), vocab = logits.size(1);
  const std::vector<double> values = cast(logits.detach(), DType::f64).to_vector<double>();
  const uint64_t start = gen.advance(uint64_t(rows));
  std::vector<int32_t> out;
  for (int64_t r = 0; r < rows; ++r) {
    std::span<const double> row(values.data() + r * vocab, size_t(vocab));
    if (!std::all_of(row.begin(), row.end(), [](double v) { return std::isfinite(v); }))
      fail("sampling", "row ", r, " has a logit that is not finite");
    const auto words = Philox::block(start + uint64_t(r), gen.seed());
    out.push_back(sample_row(row, c, Philox::uniform53(words[0], words[1])));
  }
  return out;
}

std::string_view name_of(FinishReason reason) {
  switch (reason) {
    case FinishReason::length: return "length";
    case FinishReason::eos: return "eos";
    case FinishReason::stop: return "stop";
  }
  return "?";
}

Generation generate(const CausalLM& lm, const Params& ps, const State& st,
                    const std::vector<std::vector<int32_t>>& prompts, const GenerateConfig& c, Generator& gen,
                    const TokenCallback& on_token) {
  check_sampling(c.sampling);
  if (prompts.empty()) fail("generate", "no prompts");
  if (c.max_new_tokens < 1) fail("generate", "max_new_tokens ", c.max_new_tokens, " must be at least 1");
  const int64_t limit = lm.config().max_position_embeddings;
  Generation g;
  for (size_t r = 0; r < prompts.size(); ++r) {
    const int64_t n = int64_t(prompts[r].size());
    if (n == 0) fail("generate", "prompt ", r + 1, " has no tokens");
    if (n > limit - (c.max_new_tokens - 1))
      fail("generate", "prompt ", r + 1, " has ", n, " tokens: with ", c.max_new_tokens,
           " new tokens it would pass the model's max_position_embeddings of ", limit);
    g.prompt_tokens += n;
  }
  NoGrad no_grad;
  const size_t rows = prompts.size();
  const Device device = lm.head_weight(ps).device();
  g.tokens.assign(rows, {});
  g.finish.assign(rows, FinishReason::length);
  std::vector<bool> active(rows, true);
  std::vector<std::vector<int32_t>> sequences = prompts;  // for the path without a cache
  State eval = st;
  eval.training = false;

  // Logits [B, V] of the token after each row's sequence, recomputed from scratch (rows that
  // have ended get zeros: their draw is discarded).
  auto recompute = [&] {
    std::vector<Tensor> out;
    for (size_t r = 0; r < rows; ++r) {
      const int64_t t = int64_t(sequences[r].size());
      if (!active[r]) {
        out.push_back(zeros({1, lm.config().vocab_size}, lm.head_weight(ps).dtype(), device));
        continue;
      }
      Tensor logits = lm.apply(from_vector(sequences[r], {1, t}, device), ps, eval).first;
      out.push_back(reshape(slice(logits, 1, t - 1, t), {1, -1}));
    }
    return concat(out, 0);
  };

  KVCache cache;
  // A kind without a cached decoding step recomputes whole sequences.
  const bool use_cache = c.use_cache && lm.supports_kv_cache();
  Tensor logits = use_cache ? lm.prefill(prompts, ps, eval, cache) : recompute();
  for (int64_t step = 0; step < c.max_new_tokens; ++step) {
    std::vector<int32_t> next = sample(logits, c.sampling, gen);
    size_t still = 0;
    for (size_t r = 0; r < rows; ++r) {
      if (!active[r]) {
        next[r] = 0;  // a placeholder the finished row is fed; its outputs are never read
        continue;
      }
      g.tokens[r].push_back(next[r]);
      sequences[r].push_back(next[r]);
      ++g.new_tokens;
      const bool go_on = !on_token || on_token(r, next[r]);
      if (c.eos && next[r] == *c.eos) {
        active[r] = false, g.finish[r] = FinishReason::eos;
      } else if (!go_on) {
        active[r] = false, g.finish[r] = FinishReason::stop;
      }
      still += active[r];
    }
    if (still == 0 || step + 1 == c.max_new_tokens) break;
    logits = use_cache ? lm.decode_step(from_vector(next, {int64_t(rows), 1}, device), ps, eval, cache) : recompute();
  }
  return g;
}

}  // namespace cotan::nn
