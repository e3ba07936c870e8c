// Incremental decoding (nn/kv_cache.hpp): for every attention kind, with GQA and q/k/v biases,
// prefill and single-token decode steps give the logits that the full forward pass gives on the
// whole sequence at each step, in f64 and f32, for equal and ragged prompts, on the CPU and on
// cuda:0 through the emulator; a row's logits bit for bit alone and in a batch (CPU); and the
// cache's errors.
#include <doctest/doctest.h>

#include <cstdlib>
#include <string>
#include <tuple>
#include <vector>

#include "autograd/autograd.hpp"
#include "nn/model.hpp"
#include "tensor/cpu/gemm_info.hpp"
#include "tensor/ops.hpp"
#include "tests/support.hpp"

using namespace cotan;
using namespace cotan::nn;

namespace {

// Two layers, four query heads on two kv heads, q/k/v biases (Qwen2's layout).
ModelConfig small(AttentionKind kind) {
  ModelConfig c;
  c.model_type = "qwen2";
  c.vocab_size = 13;
  c.hidden_size = 16;
  c.num_layers = 2;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.intermediate_size = 24;
  c.qkv_bias = true;
  c.max_position_embeddings = 32;
  c.init_std = 0.3;  // large enough that attention is far from uniform
  c.attention.kind = kind;
  return c;
}

struct Model {
  CausalLM lm;
  Params ps;
  State st;
};

// Fresh random parameters; the sinks and alpha_ma (which start at 0) get random values too, so
// that the sink's mass and the affine bias both matter.
Model random_model(AttentionKind kind, DType dtype, uint64_t seed, Device device = Device::cpu()) {
  CausalLM lm(small(kind));
  Generator gen(seed);
  auto [ps, st] = lm.init(gen, dtype);
  for (auto& [name, t] : ps)
    if (name.ends_with(".sinks")) t = randn(t.shape(), gen, dtype);
  for (auto& [name, t] : st.buffers) t = rand(t.shape(), gen, dtype);
  return {lm, to(ps, device), to(st, device)};
}

std::vector<int32_t> random_tokens(int64_t n, int64_t vocab, Generator& gen) {
  return randint({n}, 0, vocab, gen, DType::i32).to_vector<int32_t>();
}

// The full forward pass on one row's tokens, the logits of its last position [1, V].
Tensor full_last_logits(const Model& m, const std::vector<int32_t>& tokens, Device device) {
  NoGrad no_grad;
  const int64_t t = int64_t(tokens.size());
  Tensor logits = m.lm.apply(from_vector(tokens, {1, t}, device), m.ps, m.st).first;
  return reshape(slice(logits, 1, t - 1, t), {1, -1});
}

// Prefills `prompts`, then feeds `steps` more tokens per row one at a time, comparing the logits
// of every row at every step with the full forward pass on the row's sequence so far.
void check_decoding(const Model& m, std::vector<std::vector<int32_t>> rows, int64_t steps, double tolerance,
                    Device device, uint64_t seed, int64_t prefill_chunk = 0) {
  Generator gen(seed);
  KVCache cache;
  cache.prefill_chunk = prefill_chunk;
  Tensor logits = m.lm.prefill(rows, m.ps, m.st, cache);
  CHECK(cache.batch() == int64_t(rows.size()));
  for (int64_t step = 0; step <= steps; ++step) {
    CAPTURE(step);
    REQUIRE(logits.shape() == Shape{int64_t(rows.size()), m.lm.config().vocab_size});
    for (size_t r = 0; r < rows.size(); ++r) {
      CAPTURE(r);
      CHECK(cache.length(int64_t(r)) == int64_t(rows[r].size()));
      Tensor cached = slice(logits, 0, int64_t(r), int64_t(r) + 1);
      CHECK(max_abs_diff(cached, full_last_logits(m, rows[r], device)) <= tolerance);
    }
    if (step == steps) break;
    std::vector<int32_t> next = random_tokens(int64_t(rows.size()), m.lm.config().vocab_size, gen);
    for (size_t r = 0; r < rows.size(); ++r) rows[r].push_back(next[r]);
    logits = m.lm.decode_step(from_vector(next, {int64_t(rows.size()), 1}, device), m.ps, m.st, cache);
  }
}

std::vector<std::vector<int32_t>> prompts(const std::vector<int64_t>& lengths, int64_t vocab, uint64_t seed) {
  Generator gen(seed);
  std::vector<std::vector<int32_t>> out;
  for (int64_t n : lengths) out.push_back(random_tokens(n, vocab, gen));
  return out;
}

}  // namespace

TEST_CASE("cached decoding equals full recomputation for every kind: f64 within 1e-12, f32 within 1e-5") {
  for (const AttentionKindInfo& info : attention_kinds()) {  // every row of the table
    const AttentionKind kind = info.kind;
    CAPTURE(name_of(kind));
    for (DType dtype : {DType::f64, DType::f32}) {
      CAPTURE(dtype);
      const double tolerance = dtype == DType::f64 ? 1e-12 : 1e-5;
      Model m = random_model(kind, dtype, 7);
      check_decoding(m, prompts({4}, 13, 1), 6, tolerance, Device::cpu(), 2);                // one row
      check_decoding(m, prompts({3, 3, 3}, 13, 3), 5, tolerance, Device::cpu(), 4);          // equal prompts
      check_decoding(m, prompts({2, 6, 1, 4}, 13, 5), 5, tolerance, Device::cpu(), 6);       // ragged: padded slots
      // Prefill in chunks of 2 and 3 tokens: the later chunks run the cached attention.
      check_decoding(m, prompts({7}, 13, 7), 2, tolerance, Device::cpu(), 8, 2);
      check_decoding(m, prompts({2, 8, 1, 5}, 13, 9), 3, tolerance, Device::cpu(), 10, 3);
    }
  }
}

TEST_CASE("cached decoding on cuda:0 through the emulator equals full recomputation there") {
  setenv("COTAN_CUDA_EMULATOR", "1", 1);
  const Device device = Device::cuda(0);
  for (const AttentionKindInfo& info : attention_kinds()) {  // every row of the table
    const AttentionKind kind = info.kind;
    CAPTURE(name_of(kind));
    Model m = random_model(kind, DType::f32, 11, device);
    REQUIRE(m.ps.begin()->second.device() == device);
    check_decoding(m, prompts({3, 5}, 13, 12), 3, 1e-5, device, 13);
    check_decoding(m, prompts({2, 7}, 13, 14), 2, 1e-5, device, 15, 3);  // chunked prefill
  }
}

TEST_CASE("extend feeds several tokens per row, and a repeated cache continues one context several ways") {
  for (AttentionKind kind : {AttentionKind::softmax, AttentionKind::sink, AttentionKind::affine_gated}) {
    CAPTURE(name_of(kind));
    for (DType dtype : {DType::f64, DType::f32}) {
      CAPTURE(dtype);
      const double tolerance = dtype == DType::f64 ? 1e-12 : 1e-5;
      Model m = random_model(kind, dtype, 41);
      const auto context = prompts({5}, 13, 42)[0];
      const auto more = prompts({4, 4, 4}, 13, 43);  // three continuations of 4 tokens
      KVCache one;
      m.lm.prefill({context}, m.ps, m.st, one);
      KVCache rows = one.repeat(3);
      CHECK(rows.batch() == 3);
      std::vector<int32_t> flat;
      for (const auto& r : more) flat.insert(flat.end(), r.begin(), r.end());
      const Tensor logits = m.lm.extend(from_vector(flat, {3, 4}), m.ps, m.st, rows);  // [3, 4, V]
      REQUIRE(logits.shape() == Shape{3, 4, 13});
      CHECK(rows.length(2) == 9);
      CHECK(one.length(0) == 5);  // the repeated cache is left as it was
      for (size_t r = 0; r < more.size(); ++r) {
        std::vector<int32_t> whole = context;
        whole.insert(whole.end(), more[r].begin(), more[r].end());
        NoGrad no_grad;
        const Tensor full_logits = m.lm.apply(from_vector(whole, {1, 9}), m.ps, m.st).first;  // [1, 9, V]
        CHECK(max_abs_diff(slice(logits, 0, int64_t(r), int64_t(r) + 1), slice(full_logits, 1, 5, 9)) <= tolerance);
      }
      // The grown rows keep decoding.
      const Tensor next = m.lm.decode_step(from_vector(std::vector<int32_t>{1, 2, 3}, {3, 1}), m.ps, m.st, rows);
      std::vector<int32_t> whole = context;
      whole.insert(whole.end(), more[1].begin(), more[1].end());
      whole.push_back(2);
      CHECK(max_abs_diff(slice(next, 0, 1, 2), full_last_logits(m, whole, Device::cpu())) <= tolerance);
    }
  }
}

TEST_CASE("decoding runs in evaluation mode: alpha_ma stays frozen even when st.training is set") {
  Model m = random_model(AttentionKind::affine, DType::f64, 21);
  Model training = m;
  training.st.training = true;
  auto rows = prompts({5}, 13, 22);
  KVCache cache;
  Tensor logits = training.lm.prefill(rows, training.ps, training.st, cache);
  CHECK(max_abs_diff(logits, full_last_logits(m, rows[0], Device::cpu())) <= 1e-12);
  logits = training.lm.decode_step(from_vector(std::vector<int32_t>{3}, {1, 1}), training.ps, training.st, cache);
  rows[0].push_back(3);
  CHECK(max_abs_diff(logits, full_last_logits(m, rows[0], Device::cpu())) <= 1e-12);
}

TEST_CASE("the cache's errors") {
  Model m = random_model(AttentionKind::softmax, DType::f32, 31);
  const Tensor one = from_vector(std::vector<int32_t>{1}, {1, 1});
  KVCache cache;
  CHECK(error_of([&] { m.lm.decode_step(one, m.ps, m.st, cache); }) ==
        "[decode] the cache holds 0 layers, the model has 2 (run prefill first)");
  CHECK(error_of([&] { m.lm.prefill(std::vector<std::vector<int32_t>>{{1}, {}}, m.ps, m.st, cache); }) ==
        "[prefill] an empty prompt (every row needs at least one token)");
  CHECK(error_of([&] { m.lm.prefill(prompts({33}, 13, 1), m.ps, m.st, cache); }) ==
        "[prefill] a prompt of 33 tokens is longer than the cache's limit of 32 (the model's max_position_embeddings)");

  m.lm.prefill(prompts({30, 2}, 13, 1), m.ps, m.st, cache);
  const Tensor two = from_vector(std::vector<int32_t>{1, 2}, {2, 1});
  CHECK(error_of([&] { m.lm.decode_step(one, m.ps, m.st, cache); }) ==
        "[decode] token ids must be [2, 1] integers (one per cached row), got i32 [1, 1]");
  m.lm.decode_step(two, m.ps, m.st, cache);
  m.lm.decode_step(two, m.ps, m.st, cache);  // row 0 now holds 32 tokens, the limit
  CHECK(cache.length(0) == 32);
  CHECK(error_of([&] { m.lm.decode_step(two, m.ps, m.st, cache); }) ==
        "[decode] row 0 would hold 33 tokens, more than the cache's limit of 32 (the model's max_position_embeddings)");
  CHECK(cache.steps == 2);  // the refused step left the cache as it was

  // A longer cache on purpose: RoPE positions continue past the trained context.
  KVCache longer;
  longer.max_length = 40;
  m.lm.prefill(prompts({32}, 13, 1), m.ps, m.st, longer);
  CHECK(m.lm.decode_step(one, m.ps, m.st, longer).shape() == Shape{1, 13});

  ModelConfig full = small(AttentionKind::affine);
  full.attention.affine_n = AffineN::full;
  CausalLM ablation(full);
  Generator gen(1);
  // Not a structured binding: the lambdas below capture ps and st.
  Params ps;
  State st;
  std::tie(ps, st) = ablation.init(gen);
  CHECK(error_of([&] { ablation.prefill(prompts({3}, 13, 1), ps, st, cache); }) ==
        "[prefill] affine_n 'full' divides by the whole sequence length: cached decoding needs affine_n 'visible'");
}

// Batch invariance: the packed GEMM sums each output in one FMA chain whatever the number of rows
// (one row runs on its own kernel when decoded alone), and everything else works row by row.
TEST_CASE("a row decodes to the same bits alone and in a batch, on the CPU") {
  if (cpu::gemm_info().kernel == "eigen") {
    MESSAGE("Eigen's GEMM blocks by the shapes: no batch invariance to check in this build");
    return;
  }
  for (const AttentionKindInfo& info : attention_kinds()) {
    const AttentionKind kind = info.kind;
    CAPTURE(name_of(kind));
    for (DType dtype : {DType::f64, DType::f32}) {
      CAPTURE(dtype);
      Model m = random_model(kind, dtype, 51);
      for (const auto& lengths : {std::vector<int64_t>{4, 4, 4}, std::vector<int64_t>{2, 6, 1, 4}}) {
        const auto rows = prompts(lengths, 13, 52);
        Generator gen(53);
        std::vector<std::vector<int32_t>> next;
        for (int64_t s = 0; s < 4; ++s) next.push_back(random_tokens(int64_t(rows.size()), 13, gen));
        // Logits of every step, [batch, V] each.
        auto decode = [&](const std::vector<std::vector<int32_t>>& batch, const std::vector<size_t>& which) {
          KVCache cache;
          std::vector<Tensor> out{m.lm.prefill(batch, m.ps, m.st, cache)};
          for (const auto& step : next) {
            std::vector<int32_t> tokens;
            for (size_t r : which) tokens.push_back(step[r]);
            out.push_back(m.lm.decode_step(from_vector(tokens, {int64_t(tokens.size()), 1}), m.ps, m.st, cache));
          }
          return out;
        };
        std::vector<size_t> all(rows.size());
        for (size_t r = 0; r < rows.size(); ++r) all[r] = r;
        const auto together = decode(rows, all);
        for (size_t r = 0; r < rows.size(); ++r) {
          CAPTURE(r);
          const auto alone = decode({rows[r]}, {r});
          for (size_t s = 0; s < together.size(); ++s) {
            CAPTURE(s);
            const Tensor a = slice(together[s], 0, int64_t(r), int64_t(r) + 1);
            CHECK(max_abs_diff(a, alone[s]) == 0.0);
          }
        }
      }
    }
  }
}

// The slots live in buffers with spare room: a step writes its slot in place (the same storage
// as before), the capacity doubles when full and never passes the cache's limit, and copies of
// one cache that continue differently never see each other's slots.
TEST_CASE("decode steps append in place, and copies of a cache continue independently") {
  for (AttentionKind kind : {AttentionKind::softmax, AttentionKind::affine}) {
    CAPTURE(name_of(kind));
    Model m = random_model(kind, DType::f64, 61);
    auto step = [&](KVCache& cache, std::vector<int32_t>& row, int32_t token) {
      row.push_back(token);
      return m.lm.decode_step(from_vector(std::vector<int32_t>{token}, {1, 1}), m.ps, m.st, cache);
    };
    std::vector<int32_t> row = prompts({5}, 13, 62)[0];
    KVCache cache;
    cache.max_length = 24;
    m.lm.prefill({row}, m.ps, m.st, cache);
    step(cache, row, 3);  // 6 slots: the first buffers, of 2 x 5 = 10 slots
    auto layer = [&]() -> const LayerCache& { return cache.layers[1]; };  // each step replaces the layers
    REQUIRE(layer().k_buffer.defined());
    CHECK(layer().k_buffer.size(2) == 10);
    Tensor before = layer().k;
    for (int32_t t : {4, 5, 6, 7}) {  // slots 7 to 10: in place
      const Tensor logits = step(cache, row, t);
      CHECK(layer().k.same_storage(before));
      CHECK(layer().v.same_storage(layer().v_buffer));
      CHECK(layer().k.size(2) == int64_t(row.size()));
      CHECK(max_abs_diff(logits, full_last_logits(m, row, Device::cpu())) <= 1e-12);
    }
    step(cache, row, 8);  // slot 11: buffers of 20 slots, the 10 cached ones copied
    CHECK(!layer().k.same_storage(before));
    CHECK(layer().k_buffer.size(2) == 20);
    for (int32_t t = 0; t < 9; ++t) step(cache, row, t);  // 20 slots
    CHECK(layer().k_buffer.size(2) == 20);
    const Tensor last = step(cache, row, 1);  // slot 21: 24 slots, the limit, not 40
    CHECK(layer().k_buffer.size(2) == 24);
    CHECK(max_abs_diff(last, full_last_logits(m, row, Device::cpu())) <= 1e-12);

    // Two copies of one cache, continued differently: each sees its own slots only, whichever
    // writes first, and the first keeps going after the second has written into the buffers.
    KVCache a;
    std::vector<int32_t> row_a = prompts({4}, 13, 63)[0];
    m.lm.prefill({row_a}, m.ps, m.st, a);
    step(a, row_a, 2);
    KVCache b = a;
    std::vector<int32_t> row_b = row_a;
    // Each step's logits against the full forward pass on the row it has grown.
    auto check_step = [&](KVCache& cache_of, std::vector<int32_t>& row_of, int32_t token) {
      const Tensor logits = step(cache_of, row_of, token);
      CHECK(max_abs_diff(logits, full_last_logits(m, row_of, Device::cpu())) <= 1e-12);
    };
    check_step(a, row_a, 5);
    check_step(b, row_b, 9);
    CHECK(!b.layers[0].k.same_storage(a.layers[0].k));  // b was behind a: new buffers
    check_step(a, row_a, 11);
    check_step(b, row_b, 12);
  }
}

// A step that fails after some layers have appended their slots (here the second layer's
// alpha_ma is missing) changes nothing the caller sees; the next step appends into new buffers,
// since the failed one claimed the first layer's spare slots. A cache whose k and v no longer
// view its buffers, or that has none (a repeated one), gets new buffers too, the latter of
// exactly the slots it needs.
TEST_CASE("a failed step leaves the cache as it was, and the next one continues it") {
  Model m = random_model(AttentionKind::affine, DType::f64, 71);
  std::vector<int32_t> row = prompts({5}, 13, 72)[0];
  KVCache cache;
  m.lm.prefill({row}, m.ps, m.st, cache);
  auto feed = [&](const State& st, int32_t token) {
    return m.lm.decode_step(from_vector(std::vector<int32_t>{token}, {1, 1}), m.ps, st, cache);
  };
  feed(m.st, 3);  // 6 slots in buffers of 10
  row.push_back(3);
  const Tensor k0 = cache.layers[0].k, k0_buffer = cache.layers[0].k_buffer;
  State broken = m.st;
  REQUIRE(broken.buffers.erase("model.layers.1.self_attn.alpha_ma") == 1);
  CHECK(error_of([&] { feed(broken, 4); }) == "[decode] state has no buffer 'model.layers.1.self_attn.alpha_ma'");
  CHECK(cache.steps == 1);
  CHECK(cache.layers[0].k.size(2) == 6);
  CHECK(cache.layers[0].k.same_storage(k0_buffer));
  CHECK(*cache.layers[0].filled == 7);  // the failed step's slot, claimed
  CHECK(*cache.layers[1].filled == 6);
  const Tensor logits = feed(m.st, 4);
  row.push_back(4);
  CHECK(max_abs_diff(logits, full_last_logits(m, row, Device::cpu())) <= 1e-12);
  CHECK(!cache.layers[0].k.same_storage(k0_buffer));  // layer 0: new buffers
  CHECK(cache.layers[1].k.same_storage(cache.layers[1].k_buffer));
  CHECK(max_abs_diff(slice(cache.layers[0].k, 2, 0, 6), k0) == 0.0);

  // k replaced by a copy of itself: the buffers are no longer its own, so they are left alone.
  const Tensor buffer = cache.layers[1].k_buffer;
  for (LayerCache& layer : cache.layers) layer.k = clone(layer.k);
  const Tensor again = feed(m.st, 5);
  row.push_back(5);
  CHECK(max_abs_diff(again, full_last_logits(m, row, Device::cpu())) <= 1e-12);
  CHECK(!cache.layers[1].k_buffer.same_storage(buffer));
  CHECK(cache.layers[1].k.same_storage(cache.layers[1].k_buffer));

  // A repeated cache continued once by three tokens a row: buffers of S + 3 slots, not 2S.
  KVCache rows = cache.repeat(2);
  const int64_t s = rows.slots();
  Generator gen(73);
  const std::vector<int32_t> more = random_tokens(6, 13, gen);
  const Tensor out = m.lm.extend(from_vector(more, {2, 3}), m.ps, m.st, rows);
  CHECK(out.size(0) == 2);
  for (const LayerCache& layer : rows.layers) {
    CHECK(layer.k_buffer.size(0) == 2);
    CHECK(layer.k_buffer.size(2) == s + 3);
  }
  for (int64_t r = 0; r < 2; ++r) {
    CAPTURE(r);
    std::vector<int32_t> full = row;
    full.insert(full.end(), more.begin() + 3 * r, more.begin() + 3 * r + 3);
    NoGrad no_grad;
    const Tensor all = m.lm.apply(from_vector(full, {1, int64_t(full.size())}), m.ps, m.st).first;
    const int64_t t = int64_t(full.size());
    CHECK(max_abs_diff(slice(slice(out, 0, r, r + 1), 1, 0, 3), slice(all, 1, t - 3, t)) <= 1e-12);
  }
}
