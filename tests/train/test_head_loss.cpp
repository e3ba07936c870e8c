// The LM heads fused into the KD loss (train::head_loss, Backend::head_loss): against the composed
// heads + loss (train::head_loss_composed) for every loss spec, tied and untied, in f64, f32 and
// bf16; gradcheck; chunk sizes and thread counts that do not change a bit; the errors; and a
// training step that never allocates an [N, V] tensor.
#include <doctest/doctest.h>

#include <tbb/global_control.h>

#include <string>
#include <vector>

#include "autograd/autograd.hpp"
#include "autograd/gradcheck.hpp"
#include "nn/model.hpp"
#include "tensor/cpu/memory_cache.hpp"
#include "tensor/ops.hpp"
#include "tests/support.hpp"
#include "train/losses.hpp"
#include "train/trainer.hpp"

using namespace cotan;
using namespace cotan::train;

namespace {

struct Problem {
  Tensor hidden, head, teacher_hidden, teacher_head, targets;
};

// N rows, student vocabulary V, hidden sizes ds and dt, teacher vocabulary vt; every third target
// ignored. Values drawn in f64, then converted.
Problem random_problem(int64_t n, int64_t v, int64_t ds, int64_t dt, int64_t vt, DType dtype, uint64_t seed) {
  Generator gen(seed);
  Problem p;
  p.hidden = cast(randn({n, ds}, gen, DType::f64), dtype);
  p.head = cast(randn({v, ds}, gen, DType::f64) * 0.5, dtype);
  p.teacher_hidden = cast(randn({n, dt}, gen, DType::f64), dtype);
  p.teacher_head = cast(randn({vt, dt}, gen, DType::f64) * 0.5, dtype);
  std::vector<int64_t> targets = randint({n}, 0, v, gen, DType::i64).to_vector<int64_t>();
  for (int64_t i = 0; i < n; i += 3) targets[size_t(i)] = kIgnoreIndex;
  p.targets = from_vector(targets, {n});
  return p;
}

std::vector<LossConfig> configs() {
  std::vector<LossConfig> out;
  for (const char* spec : {"fkl", "rkl", "jsd:0.3"})
    for (double ratio : {1.0, 0.5})
      for (double tau : {1.0, 2.0}) {
        LossConfig c;
        set_kd_loss(c, spec);
        c.kd_ratio = ratio;
        c.temperature = tau;
        out.push_back(c);
      }
  LossConfig ce;
  ce.kd_ratio = 0;
  out.push_back(ce);
  return out;
}

std::string describe(const LossConfig& c) {
  return cat(kd_loss_spec(c), " kd_ratio ", c.kd_ratio, " tau ", c.temperature);
}

// The loss parts and the gradients with respect to hidden and head.
struct Run {
  double total, kd, ce, entropy;
  Tensor d_hidden, d_head;
};

template <class Loss>
Run run(Loss&& loss, const Problem& p, const LossConfig& c) {
  LossParts parts;
  std::pair<Tensor, std::vector<Tensor>> result = value_and_grad(
      [&](const std::vector<Tensor>& xs) {
        parts = loss(xs[0], xs[1], c.kd_ratio > 0 ? p.teacher_hidden : Tensor(),
                     c.kd_ratio > 0 ? p.teacher_head : Tensor(), p.targets, c);
        return parts.total;
      },
      {p.hidden, p.head});
  return {result.first.item<double>(), parts.kd.item<double>(), parts.ce.item<double>(),
          parts.teacher_entropy.item<double>(), result.second[0], result.second[1]};
}

auto fused(int64_t chunk) {
  return [chunk](const Tensor& h, const Tensor& w, const Tensor& th, const Tensor& tw, const Tensor& t,
                 const LossConfig& c) { return head_loss(h, w, th, tw, t, c, chunk); };
}
auto composed() {
  return [](const Tensor& h, const Tensor& w, const Tensor& th, const Tensor& tw, const Tensor& t,
            const LossConfig& c) { return head_loss_composed(h, w, th, tw, t, c); };
}

double rel_diff(const Tensor& a, const Tensor& b) {
  REQUIRE(a.shape() == b.shape());
  const double scale = std::max(1.0, max(abs(cast(b, DType::f64))).item<double>());
  return max(abs(cast(a, DType::f64) - cast(b, DType::f64))).item<double>() / scale;
}

void check_close(const Run& got, const Run& want, double tolerance) {
  CHECK(std::abs(got.total - want.total) <= tolerance * std::max(1.0, std::abs(want.total)));
  CHECK(std::abs(got.kd - want.kd) <= tolerance * std::max(1.0, std::abs(want.kd)));
  CHECK(std::abs(got.ce - want.ce) <= tolerance * std::max(1.0, std::abs(want.ce)));
  CHECK(std::abs(got.entropy - want.entropy) <= tolerance * std::max(1.0, std::abs(want.entropy)));
  CHECK(rel_diff(got.d_hidden, want.d_hidden) <= tolerance);
  CHECK(rel_diff(got.d_head, want.d_head) <= tolerance);
}

}  // namespace

TEST_CASE("head_loss equals the composed heads + loss for every spec: f64 1e-12, f32 1e-5, bf16 2e-2") {
  uint64_t seed = 10;
  for (const LossConfig& c : configs()) {
    INFO(describe(c));
    for (DType dtype : {DType::f64, DType::f32, DType::bf16}) {
      CAPTURE(dtype);
      const double tolerance = dtype == DType::f64 ? 1e-12 : dtype == DType::f32 ? 1e-5 : 2e-2;
      // 10 rows in chunks of 4 (a short last chunk); the teacher wider and with its own width.
      const Problem p = random_problem(10, 23, 8, 12, 23, dtype, ++seed);
      // The oracle in f64 on the same values: bf16's composed ops would each round.
      Problem wide = p;
      for (Tensor* t : {&wide.hidden, &wide.head, &wide.teacher_hidden, &wide.teacher_head})
        *t = cast(*t, DType::f64);
      check_close(run(fused(4), p, c), run(composed(), wide, c), tolerance);
    }
  }
}

TEST_CASE("head_loss: a larger teacher vocabulary sliced, and the teacher in another dtype") {
  LossConfig c;
  c.slice_teacher_vocab = true;
  c.kd_ratio = 0.7;
  const Problem p = random_problem(9, 17, 6, 5, 21, DType::f64, 3);
  check_close(run(fused(2), p, c), run(composed(), p, c), 1e-12);
  c.slice_teacher_vocab = false;
  CHECK_THROWS_WITH_AS(run(fused(2), p, c), doctest::Contains("teacher vocabulary 21 is larger than the student's 17"),
                       std::exception);
  // An f32 teacher with an f64 student: the teacher's logits are read in the student's compute type.
  Problem mixed = random_problem(9, 17, 6, 5, 17, DType::f64, 4);
  mixed.teacher_hidden = cast(mixed.teacher_hidden, DType::f32);
  mixed.teacher_head = cast(mixed.teacher_head, DType::f32);
  c.kd_ratio = 1;
  Problem oracle = mixed;
  oracle.teacher_hidden = cast(mixed.teacher_hidden, DType::f64);
  oracle.teacher_head = cast(mixed.teacher_head, DType::f64);
  check_close(run(fused(4), mixed, c), run(composed(), oracle, c), 1e-6);  // f32 teacher logits
}

TEST_CASE("head_loss with a tied head: its gradient adds to the embedding's") {
  // hidden = E[ids] (an embedding lookup) times a mixing matrix, head = E: E gets both gradients.
  Generator gen(5);
  const Tensor embedding = randn({19, 7}, gen, DType::f64);
  const Tensor mix = randn({7, 7}, gen, DType::f64) * 0.4;
  const Tensor ids = randint({11}, 0, 19, gen, DType::i64);
  const Problem p = random_problem(11, 19, 7, 6, 19, DType::f64, 6);
  for (const LossConfig& c : configs()) {
    INFO(describe(c));
    auto loss_of = [&](auto&& loss) {
      return value_and_grad(
          [&](const std::vector<Tensor>& xs) {
            const Tensor hidden = tanh(matmul(index_select(xs[0], 0, ids), xs[1]));
            return loss(hidden, xs[0], c.kd_ratio > 0 ? p.teacher_hidden : Tensor(),
                        c.kd_ratio > 0 ? p.teacher_head : Tensor(), p.targets, c)
                .total;
          },
          {embedding, mix});
    };
    auto [fused_value, fused_grads] = loss_of(fused(3));
    auto [composed_value, composed_grads] = loss_of(composed());
    CHECK(fused_value.item<double>() == doctest::Approx(composed_value.item<double>()).epsilon(1e-12));
    CHECK(rel_diff(fused_grads[0], composed_grads[0]) <= 1e-12);
    CHECK(rel_diff(fused_grads[1], composed_grads[1]) <= 1e-12);
  }
}

TEST_CASE("gradcheck: head_loss with respect to hidden states and head, every spec") {
  for (const LossConfig& c : configs()) {
    INFO(describe(c));
    const Problem p = random_problem(7, 9, 5, 4, 9, DType::f64, 8);
    const GradcheckResult r = gradcheck(
        [&](const std::vector<Tensor>& xs) {
          return head_loss(xs[0], xs[1], c.kd_ratio > 0 ? p.teacher_hidden : Tensor(),
                           c.kd_ratio > 0 ? p.teacher_head : Tensor(), p.targets, c, 3)
              .total;
        },
        {p.hidden, p.head});
    INFO(r.describe());
    CHECK(r.pass);
  }
}

TEST_CASE("head_loss: the chunk size changes no value beyond rounding, the thread count not a bit") {
  LossConfig c;
  c.kd_ratio = 0.5;
  const Problem p = random_problem(300, 700, 64, 48, 700, DType::f32, 9);
  Run runs[2];
  for (int threads : {1, 2}) {
    tbb::global_control limit(tbb::global_control::max_allowed_parallelism, size_t(threads));
    runs[threads - 1] = run(fused(128), p, c);
  }
  CHECK(runs[0].total == runs[1].total);
  CHECK(max(abs(runs[0].d_hidden - runs[1].d_hidden)).item<double>() == 0);
  CHECK(max(abs(runs[0].d_head - runs[1].d_head)).item<double>() == 0);
  check_close(run(fused(300), p, c), runs[0], 1e-5);  // one chunk
}

TEST_CASE("head_loss's errors name the tensors and their shapes") {
  const Problem p = random_problem(4, 6, 3, 3, 6, DType::f32, 12);
  LossConfig c;
  CHECK(error_of([&] { head_loss(p.hidden, zeros({6, 4}), p.teacher_hidden, p.teacher_head, p.targets, c); }) ==
        "[loss] student head must be [V, 3] for student hidden states [4, 3], got [6, 4]");
  CHECK(error_of([&] { head_loss(p.hidden, p.head, slice(p.teacher_hidden, 0, 0, 3), p.teacher_head, p.targets, c); }) ==
        "[loss] teacher hidden states [3, 3] do not match the student hidden states [4, 3]");
  CHECK(error_of([&] { head_loss(p.hidden, p.head, Tensor(), Tensor(), p.targets, c); }) ==
        "[loss] the KD loss needs the teacher's hidden states and head (kd_ratio is 1)");
  CHECK(error_of([&] { head_loss(p.hidden, p.head, p.teacher_hidden, p.teacher_head, from_vector(std::vector<int64_t>{0, 1, 9, 2}, {4}), c); }) ==
        "[loss] target 9 at token 2 is outside the student's vocabulary of 6 (ignored tokens are -100)");
  CHECK(error_of([&] { head_loss(p.hidden, cast(p.head, DType::f64), p.teacher_hidden, p.teacher_head, p.targets, c); }) ==
        "[loss] student head is f64, student hidden states is f32");
}

TEST_CASE("a training step with the fused head never allocates an [N, V] tensor; with --no-fused-head it does") {
  // A vocabulary large against the hidden size, as in real models: V = 2048, D = 16.
  nn::ModelConfig mc;
  mc.model_type = "llama";
  mc.vocab_size = 2048;
  mc.hidden_size = 16;
  mc.num_layers = 1;
  mc.num_heads = 2;
  mc.num_kv_heads = 1;
  mc.intermediate_size = 24;
  mc.max_position_embeddings = 128;
  const nn::CausalLM student(mc), teacher_model(mc);
  Generator gen(13);
  auto [ps, st] = student.init(gen);
  auto [tps, tst] = teacher_model.init(gen);
  Batch batch;
  batch.inputs = randint({8, 128}, 0, 2048, gen, DType::i32);
  batch.targets = randint({8, 128}, 0, 2048, gen, DType::i64);
  const Teacher teacher{&teacher_model, &tps, &tst};
  const size_t logits_bytes = size_t(8 * 128) * 2048 * sizeof(float);  // N = 1024 tokens
  double losses[2];
  for (bool fused_head : {true, false}) {
    CAPTURE(fused_head);
    cpu::reset_cpu_memory_peak();
    LossParts parts;
    auto [value, grads] = nn::value_and_grad(
        [&](const nn::Params& p) {
          parts = objective(student, teacher, p, st, batch, LossConfig{}, fused_head).first;
          return parts.total;
        },
        ps);
    losses[fused_head] = value.item<double>();
    const size_t largest = cpu::cpu_memory_stats().largest;
    CAPTURE(largest);
    // Fused: one chunk of kHeadChunkRows = 256 rows of each model's logits at a time.
    if (fused_head) CHECK(largest <= logits_bytes * kHeadChunkRows / 1024);
    else CHECK(largest >= logits_bytes);
  }
  CHECK(losses[1] == doctest::Approx(losses[0]).epsilon(1e-5));
}
