// Distillation losses and cross-entropy (train/losses.hpp): the fused kernel against the composed
// oracle and against loops written from docs/losses.md, gradient checks, determinism and errors.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <tbb/global_control.h>

#include "autograd/autograd.hpp"
#include "autograd/gradcheck.hpp"
#include "tensor/ops.hpp"
#include "train/losses.hpp"
#include "tests/support.hpp"

using namespace cotan;
using namespace cotan::train;

namespace {

LossConfig config_of(KdLoss kind, double tau, double kd_ratio = 1.0, double beta = 0.5) {
  LossConfig c;
  c.kind = kind;
  c.temperature = tau;
  c.kd_ratio = kd_ratio;
  c.jsd_beta = beta;
  return c;
}

std::string describe(const LossConfig& c) {
  return cat(kd_loss_spec(c), " tau ", c.temperature, " kd_ratio ", c.kd_ratio, " chunk ", c.chunk_rows);
}

// Random logits of spread `scale` and targets over [0, vocab), every `ignore_every`-th ignored
// (none when it is 0).
struct Batch {
  Tensor student, teacher, targets;
};

Batch random_batch(const Shape& lead, int64_t vocab, int64_t teacher_vocab, uint64_t seed, DType dtype = DType::f64,
                   double scale = 2.0, int64_t ignore_every = 4) {
  Generator gen(seed);
  Shape ss = lead, ts = lead;
  ss.push_back(vocab);
  ts.push_back(teacher_vocab);
  Batch b;
  b.student = cast(randn(ss, gen, DType::f64) * scale, dtype);
  b.teacher = cast(randn(ts, gen, DType::f64) * scale, dtype);
  std::vector<int64_t> ids = randint(lead, 0, vocab, gen).to_vector<int64_t>();
  if (ignore_every > 0)
    for (size_t i = 1; i < ids.size(); i += size_t(ignore_every)) ids[i] = kIgnoreIndex;
  b.targets = from_vector(ids, lead);
  return b;
}

using LossFn = LossParts (*)(const Tensor&, const Tensor&, const Tensor&, const LossConfig&);

// The loss parts and the gradient of total with respect to the student logits.
struct Run {
  LossParts parts;
  Tensor grad;
};

Run run(LossFn fn, const Batch& b, const LossConfig& c) {
  Run out;
  auto [value, grads] = value_and_grad(
      [&](const std::vector<Tensor>& xs) {
        out.parts = fn(xs[0], b.teacher, b.targets, c);
        return out.parts.total;
      },
      {b.student});
  out.grad = grads[0];
  return out;
}

double max_abs(const Tensor& a) {
  double m = 0;
  for (double v : a.to_vector<double>()) m = std::max(m, std::abs(v));
  return m;
}

void check_close(const LossParts& a, const LossParts& b, double tol) {
  CHECK(a.tokens == b.tokens);
  CHECK(std::abs(a.total.item<double>() - b.total.item<double>()) <= tol);
  CHECK(std::abs(a.kd.item<double>() - b.kd.item<double>()) <= tol);
  CHECK(std::abs(a.ce.item<double>() - b.ce.item<double>()) <= tol);
  CHECK(std::abs(a.teacher_entropy.item<double>() - b.teacher_entropy.item<double>()) <= tol);
}

bool same_bits(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape() || a.dtype() != b.dtype()) return false;
  Tensor x = contiguous(a), y = contiguous(b);
  return std::equal(static_cast<const char*>(x.data_ptr()), static_cast<const char*>(x.data_ptr()) + x.nbytes(),
                    static_cast<const char*>(y.data_ptr()));
}

// ---- the reference: loops over docs/losses.md, in double ----

struct Reference {
  double total = 0, kd = 0, ce = 0, entropy = 0;
  int64_t tokens = 0;
  std::vector<double> grad;  // [N * V]
};

std::vector<double> log_softmax_row(const double* x, int64_t n, double tau) {
  double m = -INFINITY;
  for (int64_t v = 0; v < n; ++v) m = std::max(m, x[v] / tau);
  double s = 0;
  for (int64_t v = 0; v < n; ++v) s += std::exp(x[v] / tau - m);
  std::vector<double> out(size_t(n), 0.0);
  for (int64_t v = 0; v < n; ++v) out[size_t(v)] = x[v] / tau - m - std::log(s);
  return out;
}

Reference reference(const std::vector<double>& s, const std::vector<double>& u, const std::vector<int64_t>& t,
                    int64_t rows, int64_t vocab, int64_t teacher_vocab, const LossConfig& c) {
  Reference r;
  r.grad.assign(size_t(rows * vocab), 0.0);
  const double tau = c.temperature, beta = c.jsd_beta;
  for (int64_t i = 0; i < rows; ++i) r.tokens += t[size_t(i)] != kIgnoreIndex;
  const double n = double(std::max<int64_t>(r.tokens, 1));
  for (int64_t i = 0; i < rows; ++i) {
    const int64_t target = t[size_t(i)];
    if (target == kIgnoreIndex) continue;
    const double* si = s.data() + i * vocab;
    double* g = r.grad.data() + i * vocab;
    if (c.kd_ratio > 0) {
      auto lq = log_softmax_row(si, vocab, tau), lp = log_softmax_row(u.data() + i * teacher_vocab, vocab, tau);
      std::vector<double> q(size_t(vocab), 0.0), p(size_t(vocab), 0.0), d(size_t(vocab), 0.0);
      for (size_t v = 0; v < size_t(vocab); ++v) {
        q[v] = std::exp(lq[v]);
        p[v] = std::exp(lp[v]);
      }
      double kl = 0, shift = 0;
      for (size_t v = 0; v < size_t(vocab); ++v) r.entropy -= p[v] * lp[v] / n;
      if (c.kind == KdLoss::fkl) {
        for (size_t v = 0; v < size_t(vocab); ++v) {
          kl += p[v] * (lp[v] - lq[v]);
          g[v] += c.kd_ratio / n * tau * (q[v] - p[v]);
        }
      } else {
        double klp = 0, klq = 0;
        for (size_t v = 0; v < size_t(vocab); ++v) {
          const double lm = c.kind == KdLoss::rkl ? lp[v] : std::log(beta * p[v] + (1 - beta) * q[v]);
          d[v] = lq[v] - lm;
          klp += p[v] * (lp[v] - lm);
          klq += q[v] * d[v];
        }
        kl = c.kind == KdLoss::rkl ? klq : beta * klp + (1 - beta) * klq;
        shift = klq;
        const double factor = c.kind == KdLoss::rkl ? tau : tau * (1 - beta);
        for (size_t v = 0; v < size_t(vocab); ++v) g[v] += c.kd_ratio / n * factor * q[v] * (d[v] - shift);
      }
      r.kd += tau * tau * kl / n;
    }
    if (c.kd_ratio < 1) {
      auto l1 = log_softmax_row(si, vocab, 1.0);
      r.ce -= l1[size_t(target)] / n;
      for (size_t v = 0; v < size_t(vocab); ++v)
        g[v] += (1 - c.kd_ratio) / n * (std::exp(l1[v]) - (int64_t(v) == target ? 1.0 : 0.0));
    }
  }
  if (c.kd_ratio > 0) r.total += c.kd_ratio * r.kd;
  if (c.kd_ratio < 1) r.total += (1 - c.kd_ratio) * r.ce;
  if (c.kd_ratio == 0) r.entropy = 0;
  return r;
}

Reference reference(const Batch& b, const LossConfig& c) {
  const int64_t vocab = b.student.size(-1), teacher_vocab = b.teacher.size(-1);
  return reference(b.student.to_vector<double>(), b.teacher.to_vector<double>(), b.targets.to_vector<int64_t>(),
                   b.student.numel() / vocab, vocab, teacher_vocab, c);
}

void check_against_reference(const Run& got, const Reference& want, double tol) {
  CHECK(got.parts.tokens == want.tokens);
  CHECK(got.parts.total.item<double>() == doctest::Approx(want.total).epsilon(tol));
  CHECK(got.parts.kd.item<double>() == doctest::Approx(want.kd).epsilon(tol));
  CHECK(got.parts.ce.item<double>() == doctest::Approx(want.ce).epsilon(tol));
  CHECK(got.parts.teacher_entropy.item<double>() == doctest::Approx(want.entropy).epsilon(tol));
  auto g = got.grad.to_vector<double>();
  REQUIRE(g.size() == want.grad.size());
  double err = 0;
  for (size_t i = 0; i < g.size(); ++i) err = std::max(err, std::abs(g[i] - want.grad[i]));
  CHECK(err <= tol);
}

// Every loss of the suite: each KD kind (jsd at three betas), pure KD and the 0.3 mix, pure CE.
std::vector<LossConfig> all_configs(double tau) {
  std::vector<LossConfig> out;
  for (double ratio : {1.0, 0.3}) {
    out.push_back(config_of(KdLoss::fkl, tau, ratio));
    out.push_back(config_of(KdLoss::rkl, tau, ratio));
    for (double beta : {0.1, 0.5, 0.9}) out.push_back(config_of(KdLoss::jsd, tau, ratio, beta));
  }
  out.push_back(config_of(KdLoss::fkl, tau, 0.0));
  return out;
}

}  // namespace

TEST_CASE("fused and composed agree in f64 (values and gradients)") {
  for (double tau : {1.0, 2.0})
    for (const LossConfig& c : all_configs(tau)) {
      INFO(describe(c));
      const Batch b = random_batch({3, 5}, 17, 17, 11);
      const Run fused = run(distill_loss, b, c), composed = run(distill_loss_composed, b, c);
      check_close(fused.parts, composed.parts, 1e-12);
      CHECK(fused.parts.tokens == 11);
      CHECK(fused.grad.shape() == b.student.shape());
      CHECK(max_abs_diff(fused.grad, composed.grad) <= 1e-12);
      check_against_reference(fused, reference(b, c), 1e-12);
      check_against_reference(composed, reference(b, c), 1e-12);
    }
}

TEST_CASE("gradcheck: fused and composed, every loss") {
  for (double tau : {1.0, 2.0})
    for (const LossConfig& c : all_configs(tau)) {
      INFO(describe(c));
      const Batch b = random_batch({6}, 9, 9, 5);
      for (LossFn fn : {LossFn(distill_loss), LossFn(distill_loss_composed)}) {
        GradcheckResult r = gradcheck(
            [&](const std::vector<Tensor>& xs) { return fn(xs[0], b.teacher, b.targets, c).total; }, {b.student});
        INFO(r.describe());
        CHECK(r.pass);
      }
    }
}

TEST_CASE("cross_entropy: fused, composed and the reference") {
  const Batch b = random_batch({4, 6}, 13, 13, 3);
  auto [fused, gf] = value_and_grad([&](const std::vector<Tensor>& xs) { return cross_entropy(xs[0], b.targets); },
                                    {b.student});
  auto [composed, gc] = value_and_grad(
      [&](const std::vector<Tensor>& xs) { return cross_entropy_composed(xs[0], b.targets); }, {b.student});
  const Reference want = reference(b, config_of(KdLoss::fkl, 1.0, 0.0));
  CHECK(fused.item<double>() == doctest::Approx(want.ce).epsilon(1e-12));
  CHECK(std::abs(fused.item<double>() - composed.item<double>()) <= 1e-12);
  CHECK(max_abs_diff(gf[0], gc[0]) <= 1e-12);
  GradcheckResult r = gradcheck([&](const std::vector<Tensor>& xs) { return cross_entropy(xs[0], b.targets); },
                                {b.student});
  INFO(r.describe());
  CHECK(r.pass);
}

TEST_CASE("KD of identical teacher and student is 0, and so is its gradient") {
  for (double tau : {1.0, 2.0})
    for (const LossConfig& c : all_configs(tau)) {
      if (c.kd_ratio != 1) continue;
      INFO(describe(c));
      Batch b = random_batch({8}, 21, 21, 9, DType::f64, 4.0);
      b.teacher = clone(b.student);
      for (LossFn fn : {LossFn(distill_loss), LossFn(distill_loss_composed)}) {
        const Run r = run(fn, b, c);
        CHECK(std::abs(r.parts.kd.item<double>()) <= 1e-14);
        CHECK(std::abs(r.parts.total.item<double>()) <= 1e-14);
        CHECK(max_abs(r.grad) <= 1e-15);
        CHECK(r.parts.teacher_entropy.item<double>() > 0);
      }
    }
}

TEST_CASE("fkl is the soft cross-entropy minus the teacher entropy") {
  for (double tau : {1.0, 2.0}) {
    const Batch b = random_batch({2, 7}, 15, 15, 21);
    const int64_t rows = 14, vocab = 15;
    auto s = b.student.to_vector<double>(), u = b.teacher.to_vector<double>();
    auto t = b.targets.to_vector<int64_t>();
    double soft_ce = 0, entropy = 0, counted = 0;
    for (int64_t i = 0; i < rows; ++i) {
      if (t[size_t(i)] == kIgnoreIndex) continue;
      counted += 1;
      auto lq = log_softmax_row(s.data() + i * vocab, vocab, tau), lp = log_softmax_row(u.data() + i * vocab, vocab, tau);
      for (size_t v = 0; v < size_t(vocab); ++v) {
        soft_ce -= std::exp(lp[v]) * lq[v];
        entropy -= std::exp(lp[v]) * lp[v];
      }
    }
    soft_ce /= counted;
    entropy /= counted;
    for (LossFn fn : {LossFn(distill_loss), LossFn(distill_loss_composed)}) {
      LossParts parts = fn(b.student, b.teacher, b.targets, config_of(KdLoss::fkl, tau));
      CHECK(parts.teacher_entropy.item<double>() == doctest::Approx(entropy).epsilon(1e-12));
      CHECK(parts.kd.item<double>() == doctest::Approx(tau * tau * (soft_ce - entropy)).epsilon(1e-12));
      CHECK(parts.kd.item<double>() / (tau * tau) + parts.teacher_entropy.item<double>() ==
            doctest::Approx(soft_ce).epsilon(1e-12));
    }
  }
}

TEST_CASE("a hand-sized example: V = 3, two tokens and an ignored one") {
  // Token 0 is confident where the teacher is flat, token 1 disagrees with its teacher, token 2
  // is ignored (its logits are large on purpose: they must not leak into anything).
  const std::vector<double> s = {2.0, 0.5, -1.0, 0.0, 1.0, 3.0, 50.0, -50.0, 0.0};
  const std::vector<double> u = {0.1, 0.0, -0.1, 3.0, 1.0, 0.0, -50.0, 50.0, 0.0};
  const std::vector<int64_t> t = {0, 2, kIgnoreIndex};
  Batch b{from_vector(s, {3, 3}), from_vector(u, {3, 3}), from_vector(t, {3})};
  for (LossConfig c : {config_of(KdLoss::fkl, 1.0), config_of(KdLoss::rkl, 2.0), config_of(KdLoss::jsd, 1.5, 1.0, 0.3),
                       config_of(KdLoss::fkl, 2.0, 0.3), config_of(KdLoss::jsd, 1.0, 0.6, 0.7),
                       config_of(KdLoss::fkl, 1.0, 0.0)}) {
    INFO(describe(c));
    const Reference want = reference(s, u, t, 3, 3, 3, c);
    CHECK(want.tokens == 2);
    for (double g : {want.grad[6], want.grad[7], want.grad[8]}) CHECK(g == 0.0);
    check_against_reference(run(distill_loss, b, c), want, 1e-13);
    check_against_reference(run(distill_loss_composed, b, c), want, 1e-13);
  }
  // fkl at tau = 1 written out: KL(p || q) per counted token, p = softmax(u), q = softmax(s).
  double kl[2] = {0, 0};
  for (size_t i = 0; i < 2; ++i) {
    double zp = 0, zq = 0;
    for (size_t v = 0; v < 3; ++v) {
      zp += std::exp(u[3 * i + v]);
      zq += std::exp(s[3 * i + v]);
    }
    for (size_t v = 0; v < 3; ++v) {
      const double p = std::exp(u[3 * i + v]) / zp, q = std::exp(s[3 * i + v]) / zq;
      kl[i] += p * std::log(p / q);
    }
  }
  CHECK(kl[1] > kl[0]);  // token 1 disagrees with its teacher more than token 0
  const LossParts parts = distill_loss(b.student, b.teacher, b.targets);
  CHECK(parts.tokens == 2);
  CHECK(parts.kd.item<double>() == doctest::Approx((kl[0] + kl[1]) / 2).epsilon(1e-14));
  CHECK(parts.total.item<double>() == doctest::Approx((kl[0] + kl[1]) / 2).epsilon(1e-14));
}

TEST_CASE("chunk_rows does not change a bit") {
  for (DType dtype : {DType::f64, DType::f32}) {
    const Batch b = random_batch({40}, 50, 50, 13, dtype);
    for (LossConfig c : {config_of(KdLoss::fkl, 2.0, 0.3), config_of(KdLoss::rkl, 1.0), config_of(KdLoss::jsd, 1.0, 1.0, 0.2)}) {
      INFO(describe(c), " ", dtype);
      c.chunk_rows = 1;
      const Run one = run(distill_loss, b, c);
      for (int64_t chunk : {7, 128, 1000}) {
        c.chunk_rows = chunk;
        const Run other = run(distill_loss, b, c);
        CHECK(same_bits(one.parts.total, other.parts.total));
        CHECK(same_bits(one.parts.kd, other.parts.kd));
        CHECK(same_bits(one.parts.ce, other.parts.ce));
        CHECK(same_bits(one.parts.teacher_entropy, other.parts.teacher_entropy));
        CHECK(same_bits(one.grad, other.grad));
      }
    }
  }
}

TEST_CASE("one and two threads give the same bits") {
  const Batch b = random_batch({96}, 300, 300, 17, DType::f32);
  for (LossConfig c : {config_of(KdLoss::fkl, 1.0, 0.5), config_of(KdLoss::jsd, 2.0, 1.0, 0.5)}) {
    INFO(describe(c));
    c.chunk_rows = 4;
    Run runs[2];
    for (int threads : {1, 2}) {
      tbb::global_control limit(tbb::global_control::max_allowed_parallelism, size_t(threads));
      runs[threads - 1] = run(distill_loss, b, c);
    }
    CHECK(same_bits(runs[0].parts.total, runs[1].parts.total));
    CHECK(same_bits(runs[0].parts.teacher_entropy, runs[1].parts.teacher_entropy));
    CHECK(same_bits(runs[0].grad, runs[1].grad));
  }
}

TEST_CASE("f32 and bf16 logits, and a bf16 teacher") {
  const Batch b64 = random_batch({4, 8}, 64, 64, 23);
  for (LossConfig c : {config_of(KdLoss::fkl, 2.0, 0.5), config_of(KdLoss::rkl, 1.0), config_of(KdLoss::jsd, 1.0, 1.0, 0.5)}) {
    INFO(describe(c));
    const Run want = run(distill_loss_composed, b64, c);
    Batch b32{cast(b64.student, DType::f32), cast(b64.teacher, DType::f32), b64.targets};
    const Run f32 = run(distill_loss, b32, c);
    CHECK(f32.parts.total.dtype() == DType::f32);
    CHECK(f32.grad.dtype() == DType::f32);
    CHECK(f32.parts.total.item<double>() == doctest::Approx(want.parts.total.item<double>()).epsilon(1e-5));
    CHECK(max_abs_diff(f32.grad, want.grad) <= 1e-7);
    CHECK(max_abs_diff(f32.grad, run(distill_loss_composed, b32, c).grad) <= 1e-7);

    // bf16 logits compute in f32: compare with f32 runs on the same (rounded) values.
    Batch b16{cast(b64.student, DType::bf16), cast(b64.teacher, DType::bf16), b64.targets};
    const Run bf = run(distill_loss, b16, c);
    CHECK(bf.parts.total.dtype() == DType::f32);
    CHECK(bf.grad.dtype() == DType::bf16);
    Batch rounded{cast(b16.student, DType::f32), cast(b16.teacher, DType::f32), b64.targets};
    const Run ref = run(distill_loss, rounded, c);
    CHECK(bf.parts.total.item<double>() == doctest::Approx(ref.parts.total.item<double>()).epsilon(1e-6));
    CHECK(max_abs_diff(bf.grad, ref.grad) <= 1e-4);
    CHECK(max_abs_diff(bf.grad, run(distill_loss_composed, b16, c).grad) <= 1e-4);

    // A bf16 teacher with an f32 student.
    Batch mixed{b32.student, b16.teacher, b64.targets};
    const Run m = run(distill_loss, mixed, c);
    CHECK(m.parts.total.item<double>() == doctest::Approx(ref.parts.total.item<double>()).epsilon(1e-3));
    CHECK(max_abs_diff(m.parts.total, run(distill_loss_composed, mixed, c).parts.total) <= 1e-5);
  }
}

TEST_CASE("a cotangent other than 1 scales the gradient; no gradient without tracking") {
  const Batch b = random_batch({5}, 8, 8, 2);
  const LossConfig c = config_of(KdLoss::rkl, 2.0, 0.3);
  const Run one = run(distill_loss, b, c);
  auto [value, grads] = vjp([&](const std::vector<Tensor>& xs) { return distill_loss(xs[0], b.teacher, b.targets, c).total; },
                            {b.student}, scalar(2.5, DType::f64));
  CHECK(max_abs_diff(grads[0], one.grad * 2.5) <= 1e-15);
  LossParts untracked = distill_loss(b.student, b.teacher, b.targets, c);
  CHECK_FALSE(untracked.total.tracked());
  CHECK(untracked.total.item<double>() == one.parts.total.item<double>());
}

TEST_CASE("ignored tokens: all ignored gives 0; no targets counts every token") {
  Batch b = random_batch({2, 3}, 5, 5, 4);
  b.targets = full({2, 3}, double(kIgnoreIndex), DType::i32);
  for (LossConfig c : {config_of(KdLoss::fkl, 1.0), config_of(KdLoss::jsd, 1.0, 0.5)}) {
    for (LossFn fn : {LossFn(distill_loss), LossFn(distill_loss_composed)}) {
      const Run r = run(fn, b, c);
      CHECK(r.parts.tokens == 0);
      CHECK(r.parts.total.item<double>() == 0.0);
      CHECK(r.parts.teacher_entropy.item<double>() == 0.0);
      CHECK(max_abs(r.grad) == 0.0);
    }
  }
  // Without targets (pure KD) every token counts: the same as targets with nothing ignored.
  Batch all = random_batch({2, 3}, 5, 5, 4, DType::f64, 2.0, 0);
  Batch none{all.student, all.teacher, Tensor()};
  const LossConfig c = config_of(KdLoss::fkl, 2.0);
  const Run with = run(distill_loss, all, c), without = run(distill_loss, none, c);
  CHECK(without.parts.tokens == 6);
  CHECK(same_bits(with.parts.total, without.parts.total));
  CHECK(same_bits(with.grad, without.grad));
  check_close(without.parts, run(distill_loss_composed, none, c).parts, 1e-12);
}

TEST_CASE("a larger teacher vocabulary: an error unless sliced") {
  const Batch b = random_batch({4}, 257, 300, 8);
  LossConfig c;
  CHECK_THROWS_WITH_AS(distill_loss(b.student, b.teacher, b.targets, c),
                       "[loss] teacher vocabulary 300 is larger than the student's 257 (pass --slice-teacher-vocab to "
                       "drop the teacher's extra rows)",
                       Error);
  CHECK_THROWS_WITH_AS(distill_loss_composed(b.student, b.teacher, b.targets, c),
                       "[loss] teacher vocabulary 300 is larger than the student's 257 (pass --slice-teacher-vocab to "
                       "drop the teacher's extra rows)",
                       Error);
  c.slice_teacher_vocab = true;
  Batch sliced{b.student, contiguous(slice(b.teacher, 1, 0, 257)), b.targets};
  LossConfig plain;
  for (LossConfig k : {c, config_of(KdLoss::jsd, 2.0, 0.3)}) {
    k.slice_teacher_vocab = true;
    plain = k;
    plain.slice_teacher_vocab = false;
    const Run got = run(distill_loss, b, k), want = run(distill_loss, sliced, plain);
    CHECK(same_bits(got.parts.total, want.parts.total));
    CHECK(same_bits(got.grad, want.grad));
    check_close(got.parts, run(distill_loss_composed, b, k).parts, 1e-12);
  }
  // A smaller teacher is always an error.
  const Batch small = random_batch({4}, 257, 200, 8);
  CHECK_THROWS_WITH_AS(distill_loss(small.student, small.teacher, small.targets, c),
                       "[loss] teacher vocabulary 200 is smaller than the student's 257", Error);
}

TEST_CASE("shape, dtype and value errors") {
  const Batch b = random_batch({2, 5}, 257, 257, 1);
  const Batch other = random_batch({2, 4}, 257, 257, 1);
  for (LossFn fn : {LossFn(distill_loss), LossFn(distill_loss_composed)}) {
    CHECK_THROWS_WITH_AS(fn(b.student, other.teacher, b.targets, {}),
                         "[loss] teacher logits [2, 4, 257] do not match the student logits [2, 5, 257]", Error);
    CHECK_THROWS_WITH_AS(fn(b.student, reshape(b.teacher, {10, 257}), b.targets, {}),
                         "[loss] teacher logits [10, 257] do not match the student logits [2, 5, 257]", Error);
    CHECK_THROWS_WITH_AS(fn(b.student, b.teacher, other.targets, {}),
                         "[loss] targets [2, 4] do not match the student logits [2, 5, 257]", Error);
    CHECK_THROWS_WITH_AS(fn(b.student, b.teacher, cast(b.targets, DType::f32), {}),
                         "[loss] targets must be i32 or i64, got f32", Error);
    CHECK_THROWS_WITH_AS(fn(reshape(b.student, {2570}), b.teacher, b.targets, {}),
                         "[loss] student logits must be [N, V] or [B, T, V], got [2570]", Error);
    CHECK_THROWS_WITH_AS(fn(b.targets, b.teacher, b.targets, {}), "[loss] student logits must be floating, got i64",
                         Error);
    CHECK_THROWS_WITH_AS(fn(b.student, Tensor(), b.targets, {}),
                         "[loss] the KD loss needs teacher logits (kd_ratio is 1)", Error);
    CHECK_THROWS_WITH_AS(fn(b.student, b.teacher, Tensor(), config_of(KdLoss::fkl, 1.0, 0.3)),
                         "[loss] cross-entropy needs targets (kd_ratio is 0.3)", Error);
    CHECK_THROWS_WITH_AS(fn(b.student, b.teacher, full({2, 5}, 257, DType::i64), {}),
                         "[loss] target 257 at token 0 is outside the student's vocabulary of 257 (ignored tokens are "
                         "-100)",
                         Error);
    CHECK_THROWS_WITH_AS(fn(b.student, b.teacher, b.targets, config_of(KdLoss::fkl, 0.0)),
                         "[loss] temperature must be positive, got 0", Error);
    CHECK_THROWS_WITH_AS(fn(b.student, b.teacher, b.targets, config_of(KdLoss::fkl, 1.0, 1.5)),
                         "[loss] kd_ratio must be in [0, 1], got 1.5", Error);
    CHECK_THROWS_WITH_AS(fn(b.student, b.teacher, b.targets, config_of(KdLoss::jsd, 1.0, 1.0, 1.0)),
                         "[loss] jsd beta must be in (0, 1), got 1", Error);
  }
  // With kd_ratio 0 the teacher is not read.
  CHECK_NOTHROW(distill_loss(b.student, Tensor(), b.targets, config_of(KdLoss::fkl, 1.0, 0.0)));
}

TEST_CASE("KD loss names") {
  CHECK(parse_kd_loss("fkl") == KdLoss::fkl);
  CHECK(parse_kd_loss("rkl") == KdLoss::rkl);
  CHECK(parse_kd_loss("jsd") == KdLoss::jsd);
  CHECK_THROWS_WITH_AS(parse_kd_loss("kl"), "[loss] unknown KD loss 'kl' (known: fkl, rkl, jsd)", Error);
  LossConfig c;
  set_kd_loss(c, "jsd:0.3");
  CHECK(c.kind == KdLoss::jsd);
  CHECK(c.jsd_beta == 0.3);
  CHECK(kd_loss_spec(c) == "jsd:0.3");
  set_kd_loss(c, "rkl");
  CHECK(c.kind == KdLoss::rkl);
  CHECK(kd_loss_spec(c) == "rkl");
  CHECK_THROWS_WITH_AS(set_kd_loss(c, "jsd:1.5"), "[loss] jsd beta must be in (0, 1), got 1.5", Error);
  CHECK_THROWS_WITH_AS(set_kd_loss(c, "jsd:x"), "[loss] cannot read the jsd beta in 'jsd:x'", Error);
  CHECK_THROWS_WITH_AS(set_kd_loss(c, "fkl:0.5"), "[loss] only jsd takes a parameter, got 'fkl:0.5'", Error);
  CHECK_THROWS_WITH_AS(set_kd_loss(c, "nope:0.5"), "[loss] unknown KD loss 'nope' (known: fkl, rkl, jsd)", Error);
}

// Donated logits: the fused loss on a sole-owned leaf given as an rvalue. Returns the run and
// whether the gradient came back in the leaf's own memory.
struct DonatedRun {
  Run run;
  bool in_place = false;
};

DonatedRun run_donated(const Batch& b, const LossConfig& c) {
  Tensor input = clone(b.student);
  const void* memory = input.data_ptr();
  Tensor leaf = track(input);
  input = Tensor();
  Tensor wrt = Tensor::empty({});  // carries the leaf's node, not its data
  wrt.set_node(leaf.node());
  DonatedRun out;
  out.run.parts = distill_loss(std::move(leaf), b.teacher, b.targets, c);
  CHECK_FALSE(leaf.defined());
  out.run.grad = gradients(out.run.parts.total, ones({}, out.run.parts.total.dtype()), {wrt})[0];
  out.in_place = out.run.grad.data_ptr() == memory;
  return out;
}

TEST_CASE("donated student logits: the gradient is written over them, the same bits as a new buffer") {
  for (DType dtype : {DType::f64, DType::f32, DType::bf16})
    for (KdLoss kind : {KdLoss::fkl, KdLoss::rkl, KdLoss::jsd})
      for (double tau : {1.0, 2.0})
        for (double kd_ratio : {1.0, 0.6}) {
          const LossConfig c = config_of(kind, tau, kd_ratio, 0.3);
          CAPTURE(describe(c));
          CAPTURE(dtype);
          const Batch b = random_batch({3, 5}, 1500, 1500, 41, dtype);  // 1500 > one 1024-column block
          const Run kept = run(distill_loss, b, c);
          CHECK_FALSE(kept.parts.gradient_in_logits);
          const DonatedRun donated = run_donated(b, c);
          CHECK(donated.run.parts.gradient_in_logits);
          CHECK(donated.in_place);
          CHECK(donated.run.parts.total.item<double>() == kept.parts.total.item<double>());
          CHECK(donated.run.parts.teacher_entropy.item<double>() == kept.parts.teacher_entropy.item<double>());
          CHECK(max_abs_diff(donated.run.grad, kept.grad) == 0);
        }
  // Cross-entropy alone donates too.
  const Batch b = random_batch({4, 6}, 300, 300, 43, DType::f32);
  Tensor input = clone(b.student);
  const void* memory = input.data_ptr();
  auto [value, grads] = value_and_grad(
      [&](const std::vector<Tensor>& xs) {
        Tensor logits = xs[0] * 1.0;  // a new value nobody else holds
        return cross_entropy(std::move(logits), b.targets);
      },
      {input});
  auto [want_value, want] = value_and_grad(
      [&](const std::vector<Tensor>& xs) { return cross_entropy_composed(xs[0], b.targets); }, {input});
  CHECK(std::abs(value.item<double>() - want_value.item<double>()) <= 1e-6);
  CHECK(max_abs_diff(grads[0], want[0]) <= 1e-7);
  CHECK(input.data_ptr() == memory);
}

TEST_CASE("logits that anything else references are not donated and stay as they were") {
  const Batch b = random_batch({6}, 200, 200, 47, DType::f32);
  const LossConfig c = config_of(KdLoss::fkl, 1.0);
  const std::vector<float> before = b.student.to_vector<float>();
  const Run kept = run(distill_loss, b, c);
  {  // the caller keeps the data (b.student)
    Tensor leaf = track(b.student);
    const LossParts parts = distill_loss(std::move(leaf), b.teacher, b.targets, c);
    CHECK_FALSE(parts.gradient_in_logits);
    CHECK(b.student.to_vector<float>() == before);
  }
  {  // a view of the same data is alive
    Tensor leaf = track(clone(b.student));
    const Tensor view = reshape(leaf.detach(), {2, 3, 200});
    const LossParts parts = distill_loss(std::move(leaf), b.teacher, b.targets, c);
    CHECK_FALSE(parts.gradient_in_logits);
    CHECK(view.to_vector<float>() == before);
  }
  {  // another handle of the tensor is alive
    Tensor leaf = track(clone(b.student));
    const Tensor copy = leaf;
    const LossParts parts = distill_loss(std::move(leaf), b.teacher, b.targets, c);
    CHECK_FALSE(parts.gradient_in_logits);
    CHECK(copy.to_vector<float>() == before);
    CHECK(max_abs_diff(gradients(parts.total, ones({}), {copy})[0], kept.grad) == 0);
  }
  {  // not tracked: no gradient to write
    Tensor sole = clone(b.student);
    const LossParts parts = distill_loss(std::move(sole), b.teacher, b.targets, c);
    CHECK_FALSE(parts.gradient_in_logits);
    CHECK(parts.total.item<double>() == kept.parts.total.item<double>());
  }
  {  // not contiguous: copied first, so the donated memory is not the gradient's layout
    Tensor wide = concat({b.student, b.student}, 1);  // [6, 400]
    Tensor leaf = track(slice(wide, 1, 0, 200));
    wide = Tensor();
    const LossParts parts = distill_loss(std::move(leaf), b.teacher, b.targets, c);
    CHECK_FALSE(parts.gradient_in_logits);
  }
}
