// Offline teacher targets (train/teacher_topk.hpp): the sparse KL against the dense fkl at K = V,
// its bound at K < V, gradient checks, and the top-k files (round trip, corruption, mismatches).
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <tbb/global_control.h>
#include <tuple>

#include "autograd/autograd.hpp"
#include "autograd/gradcheck.hpp"
#include "tensor/cpu/memory_cache.hpp"
#include "support.hpp"
#include "tensor/ops.hpp"
#include "train/teacher_topk.hpp"
#include "util/checksum.hpp"
#include "tests/support.hpp"

using namespace cotan;
using namespace cotan::train;

namespace {

LossConfig fkl(double tau, double kd_ratio = 1.0) {
  LossConfig c;
  c.kind = KdLoss::fkl;
  c.temperature = tau;
  c.kd_ratio = kd_ratio;
  return c;
}

// Random target ids, every `every`-th from `first` on ignored.
Tensor random_targets(const Shape& lead, int64_t vocab, Generator& gen, size_t first, size_t every) {
  std::vector<int64_t> ids = randint(lead, 0, vocab, gen).to_vector<int64_t>();
  for (size_t i = first; i < ids.size(); i += every) ids[i] = kIgnoreIndex;
  return from_vector(ids, lead);
}

struct Logits {
  Tensor student, teacher, targets;
};

Logits random_logits(const Shape& lead, int64_t vocab, uint64_t seed, double scale = 2.0) {
  Generator gen(seed);
  Shape shape = lead;
  shape.push_back(vocab);
  Logits l;
  l.student = randn(shape, gen, DType::f64) * scale;
  l.teacher = randn(shape, gen, DType::f64) * scale;
  l.targets = random_targets(lead, vocab, gen, 1, 4);
  return l;
}

}  // namespace

TEST_CASE("sparse KL at K = V equals the dense fkl: values and gradient") {
  for (double tau : {1.0, 2.0})
    for (double ratio : {1.0, 0.5}) {
      INFO("tau " << tau << " kd_ratio " << ratio);
      const Logits l = random_logits({2, 5}, 11, 7);
      const TopkTargets top = teacher_topk(l.teacher, 11, tau, DType::f64);
      LossParts sparse, dense;
      auto [vs, gs] = value_and_grad(
          [&](const std::vector<Tensor>& xs) { return (sparse = sparse_distill_loss(xs[0], top, l.targets, fkl(tau, ratio))).total; },
          {l.student});
      auto [vd, gd] = value_and_grad(
          [&](const std::vector<Tensor>& xs) { return (dense = distill_loss_composed(xs[0], l.teacher, l.targets, fkl(tau, ratio))).total; },
          {l.student});
      CHECK(std::abs(vs.item<double>() - vd.item<double>()) <= 1e-12);
      CHECK(std::abs(sparse.kd.item<double>() - dense.kd.item<double>()) <= 1e-12);
      CHECK(std::abs(sparse.ce.item<double>() - dense.ce.item<double>()) <= 1e-12);
      CHECK(std::abs(sparse.teacher_entropy.item<double>() - dense.teacher_entropy.item<double>()) <= 1e-12);
      CHECK(sparse.tokens == dense.tokens);
      CHECK(max_abs_diff(gs[0], gd[0]) <= 1e-12);
    }
}

TEST_CASE("sparse KL at K < V: 0 <= sparse <= dense, per token") {
  for (int64_t k : {1, 3, 8}) {
    const Logits l = random_logits({12}, 17, 11, 3.0);
    for (int64_t r = 0; r < 12; ++r) {
      const Tensor s = slice(l.student, 0, r, r + 1), u = slice(l.teacher, 0, r, r + 1);
      const TopkTargets top = teacher_topk(u, k, 1.5, DType::f64);
      const double sparse = sparse_distill_loss(s, top, Tensor(), fkl(1.5)).kd.item<double>();
      const double dense = distill_loss_composed(s, u, Tensor(), fkl(1.5)).kd.item<double>();
      CHECK(sparse >= -1e-15);
      CHECK(sparse <= dense + 1e-12);
    }
  }
}

TEST_CASE("sparse KL: gradcheck") {
  for (int64_t k : {1, 4, 9})
    for (double ratio : {1.0, 0.3}) {
      INFO("k " << k << " kd_ratio " << ratio);
      const Logits l = random_logits({6}, 9, 5);
      const TopkTargets top = teacher_topk(l.teacher, k, 2.0, DType::f32);  // f32 targets: P != 1 exactly
      GradcheckResult r = gradcheck(
          [&](const std::vector<Tensor>& xs) { return sparse_distill_loss(xs[0], top, l.targets, fkl(2.0, ratio)).total; },
          {l.student});
      INFO(r.describe());
      CHECK(r.pass);
    }
}

TEST_CASE("sparse KL: errors name the shapes and the loss") {
  const Logits l = random_logits({4}, 6, 1);
  const TopkTargets top = teacher_topk(l.teacher, 3, 1.0, DType::f32);
  LossConfig rkl = fkl(1.0);
  rkl.kind = KdLoss::rkl;
  CHECK(error_of([&] { sparse_distill_loss(l.student, top, l.targets, rkl); }).find("only the fkl") != std::string::npos);
  const Tensor wider = zeros({5, 6}, DType::f64);
  CHECK(error_of([&] { sparse_distill_loss(wider, top, Tensor(), fkl(1.0)); }).find("do not match the student logits [5, 6]") !=
        std::string::npos);
}

TEST_CASE("top-k files: round trip, corruption and the checks against a shard") {
  TempDir dir;
  const std::string shard = dir / "train-00000.tok";
  std::vector<int32_t> tokens{1, 2, 3, 4, 5};
  write_token_shard(shard, tokens, kByteTokenizer);
  const Logits l = random_logits({5}, 257, 3);
  const TopkTargets top = teacher_topk(l.teacher, 4, 2.0);
  const FileChecksum c = checksum_file(shard, "test");
  TopkHeader h;
  h.k = 4;
  h.positions = 5;
  h.temperature = 2.0;
  h.vocab_size = 257;
  h.seq_len = 4;
  h.teacher_id = 0x1234;
  h.tokenizer = kByteTokenizer;
  h.source_name = "train-00000.tok";
  h.source_bytes = c.bytes;
  h.source_xxh3 = c.xxh3;
  const std::string path = dir / "out/train-00000.topk";
  std::filesystem::create_directories(dir / "out");
  write_topk_file(path, h, top.ids.to_vector<int32_t>(), top.logp.to_vector<float>(), top.tail.to_vector<float>());

  const TopkFile f = TopkFile::open(path);
  CHECK(f.header().k == 4);
  CHECK(f.header().positions == 5);
  CHECK(f.header().temperature == 2.0);
  CHECK(f.header().teacher_id == 0x1234);
  CHECK(f.header().tokenizer == kByteTokenizer);
  CHECK(f.header().source_name == "train-00000.tok");
  CHECK(std::vector<int32_t>(f.ids(), f.ids() + 20) == top.ids.to_vector<int32_t>());
  CHECK(std::vector<float>(f.logp(), f.logp() + 20) == top.logp.to_vector<float>());
  CHECK(std::vector<float>(f.tail(), f.tail() + 5) == top.tail.to_vector<float>());

  const TopkData data = load_topk(dir / "out", shard, 2.0);
  CHECK(data.train.size() == 5);
  CHECK(error_of([&] { load_topk(dir / "out", shard, 1.0); }).find("was made with temperature 2 but the run uses 1") !=
        std::string::npos);
  write_token_shard(shard, std::vector<int32_t>{1, 2, 3, 4, 6}, kByteTokenizer);
  CHECK(error_of([&] { load_topk(dir / "out", shard, 2.0); }).find("different shards") != std::string::npos);
  write_token_shard(shard, tokens, ShardTokenizer{77, 300});
  CHECK(error_of([&] { load_topk(dir / "out", shard, 2.0); }).find("was made with the byte tokenizer but") !=
        std::string::npos);

  // Every byte past the magic and version is covered by the checksum or a field check.
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  for (size_t at : {size_t(30), size_t(100), kTopkHeaderBytes + 3, bytes.size() - 1}) {
    std::string bad = bytes;
    bad[at] = char(bad[at] ^ 0x10);
    write_file(path, bad);
    INFO("byte " << at);
    CHECK(error_of([&] { TopkFile::open(path); }).find(path) != std::string::npos);
  }
  write_file(path, bytes.substr(0, bytes.size() - 4));
  CHECK(error_of([&] { TopkFile::open(path); }).find("bytes, but the header's positions") != std::string::npos);
}

TEST_CASE("top-k files whose checksum is right but whose values no teacher gives are refused, naming the position") {
  TempDir dir;
  const Logits l = random_logits({3}, 257, 5);
  const TopkTargets top = teacher_topk(l.teacher, 4, 1.0);
  TopkHeader h;
  h.k = 4;
  h.positions = 3;
  h.vocab_size = 257;
  h.seq_len = 3;
  h.tokenizer = kByteTokenizer;
  h.source_name = "train-00000.tok";
  const std::string path = dir / "bad.topk";
  const std::vector<int32_t> ids = top.ids.to_vector<int32_t>();
  const std::vector<float> logp = top.logp.to_vector<float>(), tail = top.tail.to_vector<float>();
  auto error_with = [&](std::vector<int32_t> i, std::vector<float> lp, std::vector<float> t) {
    write_topk_file(path, h, i, lp, t);  // a valid checksum over whatever values it is given
    return error_of([&] { TopkFile::open(path); });
  };
  CHECK(error_with(ids, logp, tail) == "(no error)");  // the teacher's own values pass
  std::vector<float> positive = logp;
  positive[5] = 0.25f;  // position 1
  CHECK(error_with(ids, positive, tail) == "[teacher-logits] " + path + ": position 1: log p 0.25 of id " +
                                               std::to_string(ids[5]) + " is not a log-probability (above 0, or NaN)");
  std::vector<float> unsorted = logp;
  std::swap(unsorted[8], unsorted[9]);  // position 2
  CHECK(error_with(ids, unsorted, tail).find(": position 2: log p ") != std::string::npos);
  CHECK(error_with(ids, unsorted, tail).find("the top-k is not sorted by probability") != std::string::npos);
  std::vector<int32_t> twice = ids;
  twice[3] = twice[1];  // position 0
  CHECK(error_with(twice, logp, tail) ==
        "[teacher-logits] " + path + ": position 0: id " + std::to_string(ids[1]) + " appears twice in the top-4");
  std::vector<float> heavy_tail = tail;
  heavy_tail[2] = 0.5f;
  CHECK(error_with(ids, logp, heavy_tail).find(": position 2: the tail's log-mass 0.5 is not a log-probability") !=
        std::string::npos);
  std::vector<float> light_tail = tail;
  light_tail[1] = -30.0f;  // the mass of positions 1's tail gone: the row sums to less than 1
  CHECK(error_with(ids, logp, light_tail).find(": position 1: the top-4 probabilities and the tail sum to ") !=
        std::string::npos);
  std::vector<int32_t> outside = ids;
  outside[6] = 300;
  CHECK(error_with(outside, logp, tail) ==
        "[teacher-logits] " + path + ": position 1: id 300 is outside the vocabulary of 257");
}

TEST_CASE("aligned windows carry the top-k of their positions, across files") {
  TempDir dir;
  std::vector<int32_t> a(23), b(18);
  for (size_t i = 0; i < a.size(); ++i) a[i] = int32_t(i % 250);
  for (size_t i = 0; i < b.size(); ++i) b[i] = int32_t((i * 7) % 250);
  std::filesystem::create_directories(dir / "data");
  write_token_shard(dir / "data/train-00000.tok", a, kByteTokenizer);
  write_token_shard(dir / "data/train-00001.tok", b, kByteTokenizer);
  std::filesystem::create_directories(dir / "topk");
  // Position p's top-k is ids (p, p + 1) with probabilities 0.5 and 0.1 + p / 200; the tail holds
  // the rest, whose log tells the positions apart too.
  auto second = [](uint64_t p) { return 0.1 + double(p) / 200; };
  auto tail_of = [&](uint64_t p) { return float(std::log(0.5 - second(p))); };
  uint64_t position = 0;
  for (const std::string name : {"train-00000.tok", "train-00001.tok"}) {
    const std::string shard = dir / ("data/" + name);
    const uint64_t n = TokenShard::open(shard).size();
    const FileChecksum c = checksum_file(shard, "test");
    TopkHeader h;
    h.k = 2;
    h.positions = n;
    h.vocab_size = 257;
    h.seq_len = 5;
    h.tokenizer = kByteTokenizer;
    h.source_name = name;
    h.source_bytes = c.bytes;
    h.source_xxh3 = c.xxh3;
    std::vector<int32_t> ids;
    std::vector<float> logp, tail;
    for (uint64_t i = 0; i < n; ++i, ++position) {
      ids.insert(ids.end(), {int32_t(position), int32_t(position + 1)});
      logp.insert(logp.end(), {float(std::log(0.5)), float(std::log(second(position)))});
      tail.push_back(tail_of(position));
    }
    write_topk_file(dir / ("topk/" + topk_file_name(name)), h, ids, logp, tail);
  }
  const TokenData data = load_tokens(dir / "data", 0, 0);
  const TopkData topk = load_topk(dir / "topk", dir / "data", 1.0);
  REQUIRE(topk.train.size() == 41);
  WindowLoader loader(data.train, 5, 3, 7, /*aligned=*/true);
  loader.attach_topk(&topk.train);
  for (int step = 0; step < 6; ++step) {
    const Batch batch = loader.next();
    REQUIRE(batch.topk.defined());
    CHECK(batch.topk.ids.shape() == Shape{3, 5, 2});
    const auto ids = batch.topk.ids.to_vector<int32_t>();
    const auto tail = batch.topk.tail.to_vector<float>();
    const auto inputs = batch.inputs.to_vector<int64_t>();
    for (int64_t r = 0; r < 3; ++r) {
      const int32_t start = ids[size_t(r * 10)];
      CHECK(start % 5 == 0);  // aligned: every window starts at a multiple of seq_len
      for (int64_t t = 0; t < 5; ++t) {
        CHECK(ids[size_t(r * 10 + t * 2)] == start + t);
        CHECK(tail[size_t(r * 5 + t)] == tail_of(uint64_t(start + t)));
        CHECK(inputs[size_t(r * 5 + t)] == data.train[uint64_t(start + t)]);
      }
    }
  }
  const std::vector<Batch> val = validation_batches(data.train, 5, 4, 0, &topk.train);
  REQUIRE(!val.empty());
  CHECK(val[1].topk.ids.to_vector<int32_t>()[0] == 20);  // the fifth window starts at 20
}

TEST_CASE("sparse KL and top-k: the same bits on one thread and on all") {
  const Logits l = random_logits({7, 19}, 23, 9);
  const auto run = [&] {
    const TopkTargets top = teacher_topk(l.teacher, 5, 1.5);
    auto [value, grads] = value_and_grad(
        [&](const std::vector<Tensor>& xs) { return sparse_distill_loss(xs[0], top, l.targets, fkl(1.5, 0.6)).total; },
        {l.student});
    return std::tuple{top.logp.to_vector<float>(), value.item<double>(), grads[0].to_vector<double>()};
  };
  const auto all = run();
  tbb::global_control one(tbb::global_control::max_allowed_parallelism, 1);
  CHECK(run() == all);
}

namespace {

// Hidden states and a head whose logits are in the range of random_logits'.
struct HeadInputs {
  Tensor hidden, head, teacher, targets;
};

HeadInputs random_head_inputs(const Shape& lead, int64_t dim, int64_t vocab, uint64_t seed, DType dtype = DType::f64) {
  Generator gen(seed);
  Shape hs = lead;
  hs.push_back(dim);
  HeadInputs in;
  in.hidden = cast(randn(hs, gen, DType::f64), dtype);
  in.head = cast(randn({vocab, dim}, gen, DType::f64) * (1.5 / std::sqrt(double(dim))), dtype);
  Shape ls = lead;
  ls.push_back(vocab);
  in.teacher = randn(ls, gen, DType::f64) * 2.0;
  in.targets = random_targets(lead, vocab, gen, 2, 5);
  return in;
}

}  // namespace

TEST_CASE("sparse head loss equals the sparse KL on the whole logits: values and both gradients") {
  for (int64_t chunk : {3, 4, 256})
    for (int64_t k : {2, 13})
      for (double ratio : {1.0, 0.4}) {
        INFO("chunk " << chunk << " k " << k << " kd_ratio " << ratio);
        const HeadInputs in = random_head_inputs({2, 7}, 5, 13, 31);  // 14 rows: ragged chunks of 3 and 4
        const TopkTargets top = teacher_topk(in.teacher, k, 1.5, DType::f64);
        LossParts fused, whole;
        auto [vf, gf] = value_and_grad(
            [&](const std::vector<Tensor>& xs) {
              return (fused = sparse_head_loss(xs[0], xs[1], top, in.targets, fkl(1.5, ratio), chunk)).total;
            },
            {in.hidden, in.head});
        auto [vw, gw] = value_and_grad(
            [&](const std::vector<Tensor>& xs) {
              return (whole = sparse_distill_loss(matmul(xs[0], transpose(xs[1])), top, in.targets, fkl(1.5, ratio))).total;
            },
            {in.hidden, in.head});
        CHECK(std::abs(vf.item<double>() - vw.item<double>()) <= 1e-12);
        CHECK(std::abs(fused.kd.item<double>() - whole.kd.item<double>()) <= 1e-12);
        CHECK(std::abs(fused.ce.item<double>() - whole.ce.item<double>()) <= 1e-12);
        CHECK(std::abs(fused.teacher_entropy.item<double>() - whole.teacher_entropy.item<double>()) <= 1e-12);
        CHECK(fused.tokens == whole.tokens);
        CHECK(max_abs_diff(gf[0], gw[0]) <= 1e-12);
        CHECK(max_abs_diff(gf[1], gw[1]) <= 1e-12);
      }
}

TEST_CASE("sparse head loss at K = V equals the dense fused head loss; f32 within 1e-5") {
  const HeadInputs in = random_head_inputs({9}, 6, 11, 3);
  Generator gen(5);
  const Tensor teacher_hidden = randn({9, 6}, gen, DType::f64);
  const Tensor teacher_head = randn({11, 6}, gen, DType::f64);
  const Tensor teacher_logits = matmul(teacher_hidden, transpose(teacher_head));
  const TopkTargets top = teacher_topk(teacher_logits, 11, 2.0, DType::f64);
  auto [vs, gs] = value_and_grad(
      [&](const std::vector<Tensor>& xs) { return sparse_head_loss(xs[0], xs[1], top, in.targets, fkl(2.0, 0.7), 4).total; },
      {in.hidden, in.head});
  auto [vd, gd] = value_and_grad(
      [&](const std::vector<Tensor>& xs) {
        return head_loss(xs[0], xs[1], teacher_hidden, teacher_head, in.targets, fkl(2.0, 0.7), 4).total;
      },
      {in.hidden, in.head});
  CHECK(std::abs(vs.item<double>() - vd.item<double>()) <= 1e-12);
  CHECK(max_abs_diff(gs[0], gd[0]) <= 1e-12);
  CHECK(max_abs_diff(gs[1], gd[1]) <= 1e-12);
  // f32 operands: the logits round in f32, the loss is computed in f64 either way.
  const Tensor h32 = cast(in.hidden, DType::f32), w32 = cast(in.head, DType::f32);
  auto [v32, g32] = value_and_grad(
      [&](const std::vector<Tensor>& xs) { return sparse_head_loss(xs[0], xs[1], top, in.targets, fkl(2.0, 0.7), 4).total; },
      {h32, w32});
  CHECK(std::abs(v32.item<double>() - vs.item<double>()) <= 1e-5);
  CHECK(max_abs_diff(cast(g32[0], DType::f64), gs[0]) <= 1e-5);
  CHECK(max_abs_diff(cast(g32[1], DType::f64), gs[1]) <= 1e-5);
}

TEST_CASE("sparse head loss: gradcheck, the same bits on 1 and 2 threads, and no [N, V] tensor") {
  const HeadInputs in = random_head_inputs({10}, 4, 9, 17);
  const TopkTargets top = teacher_topk(in.teacher, 3, 1.0, DType::f32);
  GradcheckResult r = gradcheck(
      [&](const std::vector<Tensor>& xs) { return sparse_head_loss(xs[0], xs[1], top, in.targets, fkl(1.0, 0.5), 3).total; },
      {in.hidden, in.head});
  INFO(r.describe());
  CHECK(r.pass);

  const HeadInputs big = random_head_inputs({600}, 16, 2048, 19, DType::f32);
  const TopkTargets big_top = teacher_topk(big.teacher, 8, 1.0);
  const auto run = [&] {
    cpu::reset_cpu_memory_peak();
    auto [value, grads] = value_and_grad(
        [&](const std::vector<Tensor>& xs) { return sparse_head_loss(xs[0], xs[1], big_top, big.targets, fkl(1.0, 0.8)).total; },
        {big.hidden, big.head});
    const size_t largest = cpu::cpu_memory_stats().largest;
    CHECK(largest <= size_t(kHeadChunkRows) * 2048 * sizeof(float));  // a chunk of rows, never 600 x 2048
    return std::tuple{value.item<double>(), grads[0].to_vector<float>(), grads[1].to_vector<float>()};
  };
  const auto all = run();
  tbb::global_control one(tbb::global_control::max_allowed_parallelism, 1);
  CHECK(run() == all);
}
