// The fused distillation loss kernels (cuda/kernels/kd_loss.cuh) run by the SIMT emulator, against
// the CPU's fused op (train::distill_loss) and its composed oracle (train::distill_loss_composed):
// every loss part and the gradient with respect to the student logits, for fkl, rkl and jsd, with
// and without CE, at temperatures 1 and 2, with ignored rows, f32 and bf16 logits, odd N and V
// longer than one block's stride, under two emulator schedules (which must agree bit for bit).
#include "tests/cuda/kernel_check.hpp"

#include <optional>

#include "autograd/autograd.hpp"
#include "tensor/ops.hpp"
#include "train/losses.hpp"

using namespace cotan;
using namespace cotan::train;
using namespace kernel_check;

namespace {

// The emulated backend's fused loss (Backend::kd_loss).
KdLossResult emulated_loss(const Tensor& student, const Tensor& teacher, const Tensor& targets,
                           const LossConfig& config, bool want_grad, const Tensor& grad_into = Tensor()) {
  return emulated_backend().kd_loss(student, teacher, targets, config, want_grad, grad_into);
}

struct Case {
  KdLoss kind;
  double beta, tau, kd_ratio;
};

// One line per configuration.
constexpr Case kCases[] = {
    {KdLoss::fkl, 0.5, 1, 1},   {KdLoss::fkl, 0.5, 2, 1},   {KdLoss::rkl, 0.5, 1, 1},
    {KdLoss::rkl, 0.5, 2, 1},   {KdLoss::jsd, 0.5, 1, 1},   {KdLoss::jsd, 0.2, 2, 1},
    {KdLoss::fkl, 0.5, 2, 0.5}, {KdLoss::rkl, 0.5, 1, 0.5}, {KdLoss::jsd, 0.7, 2, 0.5},
    {KdLoss::jsd, 0.5, 1, 0.5}, {KdLoss::fkl, 0.5, 1, 0},  // pure CE
};

LossConfig config_of(const Case& c) {
  LossConfig config;
  config.kind = c.kind;
  config.jsd_beta = c.beta;
  config.temperature = c.tau;
  config.kd_ratio = c.kd_ratio;
  return config;
}

struct Batch {
  Tensor student, teacher, targets;
};

// Logits of spread 3 (the teacher's vocabulary may be wider), targets with every third row from
// the second on ignored.
Batch random_batch(int64_t rows, int64_t vocab, int64_t teacher_vocab, DType dtype, DType teacher_dtype,
                   DType target_dtype, uint64_t seed) {
  Generator gen(seed);
  Batch b;
  b.student = cast(randn({rows, vocab}, gen, DType::f64) * 3.0, dtype);
  b.teacher = cast(randn({rows, teacher_vocab}, gen, DType::f64) * 3.0, teacher_dtype);
  std::vector<int64_t> ids = randint({rows}, 0, vocab, gen).to_vector<int64_t>();
  for (size_t i = 1; i < ids.size(); i += 3) ids[i] = kIgnoreIndex;
  b.targets = cast(from_vector(ids, {rows}), target_dtype);
  return b;
}

// The CPU's loss parts and gradient of total with respect to the student logits.
struct CpuRun {
  LossParts parts;
  Tensor grad;
};

CpuRun run_cpu(LossParts (*loss)(const Tensor&, const Tensor&, const Tensor&, const LossConfig&), const Batch& b,
               const LossConfig& config) {
  CpuRun out;
  auto [value, grads] = value_and_grad(
      [&](const std::vector<Tensor>& xs) {
        out.parts = loss(xs[0], b.teacher, b.targets, config);
        return out.parts.total;
      },
      {b.student});
  out.grad = grads[0];
  return out;
}

// Loss values compute in f32 (f64 for f64 logits) whatever the logits' storage.
void expect_parts(const KdLossResult& got, const LossParts& want, DType logits, const std::string& what) {
  INFO(what);
  const DType dtype = logits == DType::f64 ? DType::f64 : DType::f32;
  CHECK(got.tokens == want.tokens);
  const std::pair<double, const Tensor*> parts[] = {
      {got.total, &want.total}, {got.kd, &want.kd}, {got.ce, &want.ce}, {got.teacher_entropy, &want.teacher_entropy}};
  for (const auto& [value, tensor] : parts) {
    const double expected = tensor->item<double>();
    INFO("got ", value, ", want ", expected);
    CHECK(close(value, expected, dtype));
  }
}

// The emulated kernels against both CPU implementations; under every schedule, bit for bit the
// same as under the first.
void check_batch(const Batch& b, const LossConfig& config, const std::string& what) {
  const CpuRun fused = run_cpu(distill_loss, b, config);
  const CpuRun composed = run_cpu(distill_loss_composed, b, config);
  std::optional<KdLossResult> first;
  for_each_schedule([&] {
    const KdLossResult got = emulated_loss(b.student, b.teacher, b.targets, config, true);
    expect_parts(got, fused.parts, b.student.dtype(), cat(what, " vs fused"));
    expect_parts(got, composed.parts, b.student.dtype(), cat(what, " vs composed"));
    expect_close(got.grad, fused.grad, cat(what, " gradient vs fused"));
    expect_close(got.grad, composed.grad, cat(what, " gradient vs composed"));
    if (!first) {
      first = got;
      return;
    }
    CHECK(got.total == first->total);
    CHECK(got.teacher_entropy == first->teacher_entropy);
    expect_same(got.grad, first->grad, cat(what, " gradient under another schedule"));
  });
}

std::string describe(const LossConfig& c, const Batch& b) {
  return cat(kd_loss_spec(c), " tau ", c.temperature, " kd_ratio ", c.kd_ratio, " ", b.student.dtype(), " ",
             to_string(b.student.shape()));
}

}  // namespace

TEST_CASE("kd_loss kernels match the fused CPU loss and the composed oracle") {
  for (DType dtype : {DType::f32, DType::bf16})
    for (int64_t vocab : {1000, 3001}) {
      const Batch b = random_batch(7, vocab, vocab, dtype, dtype, DType::i64, uint64_t(vocab) + 3);
      for (const Case& c : kCases) check_batch(b, config_of(c), describe(config_of(c), b));
    }
}

TEST_CASE("kd_loss kernels: wider bf16 teacher, i32 targets, f64 logits") {
  LossConfig config = config_of({KdLoss::jsd, 0.4, 2, 0.5});
  config.slice_teacher_vocab = true;
  const Batch mixed = random_batch(5, 777, 801, DType::f32, DType::bf16, DType::i32, 41);
  check_batch(mixed, config, cat("sliced teacher ", describe(config, mixed)));
  const Batch wide = random_batch(3, 300, 300, DType::f64, DType::f64, DType::i64, 42);
  for (const Case& c : {Case{KdLoss::rkl, 0.5, 2, 0.5}, Case{KdLoss::fkl, 0.5, 1, 1}})
    check_batch(wide, config_of(c), describe(config_of(c), wide));
}

TEST_CASE("kd_loss kernels: no gradient, all rows ignored, no targets") {
  const Batch b = random_batch(4, 500, 500, DType::f32, DType::f32, DType::i64, 51);
  const LossConfig config = config_of({KdLoss::rkl, 0.5, 2, 0.5});
  const auto with_grad = emulated_loss(b.student, b.teacher, b.targets, config, true);
  const auto without = emulated_loss(b.student, b.teacher, b.targets, config, false);
  CHECK(!without.grad.defined());
  CHECK(without.total == with_grad.total);

  // Every row ignored: every part 0, the gradient 0.
  Batch ignored = b;
  ignored.targets = full({4}, double(kIgnoreIndex), DType::i64);
  const auto none = emulated_loss(ignored.student, ignored.teacher, ignored.targets, config, true);
  CHECK(none.tokens == 0);
  CHECK(none.total == 0);
  CHECK(none.teacher_entropy == 0);
  for (double v : values(none.grad)) CHECK(v == 0);

  // Pure KD without targets: every row counts.
  Batch untargeted = b;
  untargeted.targets = Tensor();
  check_batch(untargeted, config_of({KdLoss::jsd, 0.5, 2, 1}), "no targets");
}

TEST_CASE("kd_loss kernels: the gradient written over the student logits equals a new buffer, bit for bit") {
  // Each row is read before its columns are overwritten; the target's logit, which every thread
  // of the row reads for CE, before the row group's first barrier. A read after another thread's
  // write would change the result under one of the schedules.
  for (DType dtype : {DType::f32, DType::bf16}) {
    const Batch b = random_batch(6, 1500, 1500, dtype, dtype, DType::i64, 61);
    for (const Case& c : kCases) {
      const LossConfig config = config_of(c);
      const std::string what = describe(config, b);
      const auto separate = emulated_loss(b.student, b.teacher, b.targets, config, true);
      for_each_schedule([&] {
        const Tensor logits = clone(b.student);
        const auto in_place =
            emulated_loss(logits, b.teacher, b.targets, config, true, logits);
        CHECK(in_place.grad.data_ptr() == logits.data_ptr());
        CHECK(in_place.total == separate.total);
        CHECK(in_place.teacher_entropy == separate.teacher_entropy);
        expect_same(in_place.grad, separate.grad, cat(what, " gradient over the logits"));
      });
    }
  }
  const Batch b = random_batch(2, 100, 100, DType::f32, DType::f32, DType::i64, 62);
  CHECK_THROWS_WITH_AS(emulated_loss(b.student, b.teacher, b.targets, LossConfig{}, true,
                                                             zeros({2, 99})),
                       "[kd_loss] the gradient buffer f32 [2, 99] is not a contiguous tensor of the student logits' "
                       "shape and dtype f32 [2, 100]",
                       Error);
}
