// Sampling and the generation loop (nn/generate.hpp): the cached loop gives the tokens that full
// recomputation gives, greedy and sampled, for every kind; sampling is deterministic for a seed
// and draws from the distribution it describes; bad input.
#include <doctest/doctest.h>

#include <cmath>
#include <tuple>
#include <vector>

#include "nn/generate.hpp"
#include "nn/model.hpp"
#include "tensor/ops.hpp"
#include "tests/support.hpp"

using namespace cotan;
using namespace cotan::nn;

namespace {

ModelConfig small(AttentionKind kind) {
  ModelConfig c;
  c.vocab_size = 17;
  c.hidden_size = 16;
  c.num_layers = 2;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.intermediate_size = 24;
  c.max_position_embeddings = 24;
  c.init_std = 0.3;
  c.attention.kind = kind;
  return c;
}

Tensor logits_of(const std::vector<double>& values, int64_t rows) {
  return from_vector(values, {rows, int64_t(values.size()) / rows});
}

}  // namespace

TEST_CASE("generation with the cache gives the tokens of full recomputation, greedy and sampled, for every kind") {
  const std::vector<std::vector<int32_t>> prompts = {{1, 2, 3}, {4}, {5, 6, 7, 8, 9}};
  for (const AttentionKindInfo& info : attention_kinds()) {
    CAPTURE(info.name);
    CausalLM lm(small(info.kind));
    Generator init(3);
    auto [ps, st] = lm.init(init, DType::f64);
    for (auto& [name, t] : st.buffers) t = full(t.shape(), 0.6, DType::f64);
    for (bool greedy : {true, false}) {
      CAPTURE(greedy);
      GenerateConfig c;
      c.max_new_tokens = 8;
      c.sampling.greedy = greedy;
      c.sampling.top_k = 10;
      c.sampling.top_p = 0.95;
      c.eos = 0;
      Generator a(99), b(99);
      Generation cached = generate(lm, ps, st, prompts, c, a);
      c.use_cache = false;
      Generation recomputed = generate(lm, ps, st, prompts, c, b);
      CHECK(cached.tokens == recomputed.tokens);
      CHECK(cached.finish == recomputed.finish);
      CHECK(cached.new_tokens == recomputed.new_tokens);
      CHECK(cached.prompt_tokens == 9);
      for (size_t r = 0; r < prompts.size(); ++r) {
        const auto& t = cached.tokens[r];
        CHECK(!t.empty());
        CHECK((cached.finish[r] == FinishReason::eos) == (t.back() == 0));
        if (cached.finish[r] == FinishReason::length) CHECK(t.size() == 8);
      }
    }
  }
}

TEST_CASE("a callback that returns false stops its row, with its token kept") {
  CausalLM lm(small(AttentionKind::softmax));
  Generator init(5);
  // Not a structured binding: the lambdas below capture ps and st.
  Params ps;
  State st;
  std::tie(ps, st) = lm.init(init);
  GenerateConfig c;
  c.max_new_tokens = 6;
  c.sampling.greedy = true;
  Generator gen(0);
  std::vector<int> seen(2, 0);
  Generation g = generate(lm, ps, st, {{1, 2}, {3}}, c, gen, [&](size_t row, int32_t) {
    ++seen[row];
    return !(row == 1 && seen[row] == 2);
  });
  CHECK(g.tokens[0].size() == 6);
  CHECK(g.finish[0] == FinishReason::length);
  CHECK(g.tokens[1].size() == 2);
  CHECK(g.finish[1] == FinishReason::stop);
  CHECK(seen == std::vector<int>{6, 2});
}

TEST_CASE("sampling: greedy, top-k, top-p, the temperature and determinism for a seed") {
  const Tensor logits = logits_of({0.0, std::log(3.0), -1.0, 2.0, 2.0, -5.0}, 2);
  SamplingConfig greedy;
  greedy.greedy = true;
  Generator gen(1);
  CHECK(sample(logits, greedy, gen) == std::vector<int32_t>{1, 0});  // ties: the lower id

  SamplingConfig top1;
  top1.top_k = 1;
  SamplingConfig tiny_p;
  tiny_p.top_p = 1e-9;
  for (int i = 0; i < 20; ++i) {
    CHECK(sample(logits, top1, gen) == std::vector<int32_t>{1, 0});
    CHECK(sample(logits, tiny_p, gen) == std::vector<int32_t>{1, 0});
  }

  // Row 0 over {0, 1} with top_k 2: p(1) = 3/4; with temperature 2, sqrt(3) / (1 + sqrt(3)).
  auto frequency_of_1 = [&](const SamplingConfig& c, uint64_t seed) {
    Generator g(seed);
    int ones = 0, n = 4000;
    for (int i = 0; i < n; ++i) ones += sample(logits, c, g)[0] == 1;
    return double(ones) / n;
  };
  SamplingConfig k2;
  k2.top_k = 2;
  CHECK(frequency_of_1(k2, 7) == doctest::Approx(0.75).epsilon(0.04));
  SamplingConfig hot = k2;
  hot.temperature = 2;
  CHECK(frequency_of_1(hot, 8) == doctest::Approx(std::sqrt(3.0) / (1 + std::sqrt(3.0))).epsilon(0.04));
  // Row 0 over its three ids: p(1) = 3 / (4 + e^-1) = 0.687 < 0.7, so top_p 0.7 keeps ids 1 and 0.
  SamplingConfig p7;
  p7.top_p = 0.7;
  CHECK(frequency_of_1(p7, 9) == doctest::Approx(0.75).epsilon(0.04));

  Generator a(42), b(42), c(43);
  SamplingConfig plain;
  std::vector<int32_t> first, second, other;
  for (int i = 0; i < 50; ++i) {
    for (int32_t id : sample(logits, plain, a)) first.push_back(id);
    for (int32_t id : sample(logits, plain, b)) second.push_back(id);
    for (int32_t id : sample(logits, plain, c)) other.push_back(id);
  }
  CHECK(first == second);
  CHECK(first != other);
}

TEST_CASE("generation's and sampling's errors") {
  CausalLM lm(small(AttentionKind::softmax));
  Generator gen(1);
  // Not a structured binding: the lambdas below capture ps and st.
  Params ps;
  State st;
  std::tie(ps, st) = lm.init(gen);
  GenerateConfig c;
  c.max_new_tokens = 5;
  CHECK(error_of([&] { generate(lm, ps, st, {}, c, gen); }) == "[generate] no prompts");
  CHECK(error_of([&] { generate(lm, ps, st, {{1}, {}}, c, gen); }) == "[generate] prompt 2 has no tokens");
  CHECK(error_of([&] { generate(lm, ps, st, {std::vector<int32_t>(21, 1)}, c, gen); }) ==
        "[generate] prompt 1 has 21 tokens: with 5 new tokens it would pass the model's max_position_embeddings of 24");
  CHECK(generate(lm, ps, st, {std::vector<int32_t>(20, 1)}, c, gen).tokens[0].size() == 5);
  c.max_new_tokens = 0;
  CHECK(error_of([&] { generate(lm, ps, st, {{1}}, c, gen); }) == "[generate] max_new_tokens 0 must be at least 1");

  SamplingConfig s;
  s.temperature = 0;
  CHECK(error_of([&] { sample(logits_of({1, 2}, 1), s, gen); }) ==
        "[sampling] temperature 0 must be positive and finite (greedy decoding takes no temperature)");
  s = {};
  s.top_p = 0;
  CHECK(error_of([&] { sample(logits_of({1, 2}, 1), s, gen); }) == "[sampling] top_p 0 must be in (0, 1] (1: off)");
  s = {};
  CHECK(error_of([&] { sample(logits_of({1, std::nan("")}, 1), s, gen); }) ==
        "[sampling] row 0 has a logit that is not finite");
}
