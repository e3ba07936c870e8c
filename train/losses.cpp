// Distillation losses and cross-entropy: argument checks, the fused CPU kernel and the composed
// fallback. The math and the conventions are in train/losses.hpp.
#include "train/losses.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <vector>

#include <Eigen/Core>

#include "autograd/autograd.hpp"
#include "cotan_config.h"
#include "tensor/cpu/parallel.hpp"
#include "tensor/ops.hpp"

#include "cuda/kernels/dispatch.hpp"
#include "cuda/kernels/kd_loss.hpp"

namespace cotan::train {

namespace {

constexpr const char* kOp = "loss";

// ---- arguments ----

void check_config(const LossConfig& config) {
  const double tau = config.temperature;
  check(std::isfinite(tau) && tau > 0, kOp, "temperature must be positive, got ", tau);
  check(config.kd_ratio >= 0 && config.kd_ratio <= 1, kOp, "kd_ratio must be in [0, 1], got ", config.kd_ratio);
  if (config.kind == KdLoss::jsd)
    check(config.jsd_beta > 0 && config.jsd_beta < 1, kOp, "jsd beta must be in (0, 1), got ", config.jsd_beta);
  check(config.chunk_rows >= 1, kOp, "chunk_rows must be positive, got ", config.chunk_rows);
}

// The checked arguments: student [N, V], teacher [N, Vt] (when KD is computed), target ids.
struct Inputs {
  Tensor student, teacher;            // flattened to [N, V] and [N, Vt]; the teacher detached
  Tensor targets;                     // [N] or undefined
  std::vector<int64_t> target_ids;    // N ids, or empty when there are no targets
  int64_t rows = 0, vocab = 0, teacher_vocab = 0;
  int64_t count = 0;                  // counted (not ignored) tokens
  bool want_kd = false, want_ce = false;
};

Shape leading(const Tensor& x) { return Shape(x.shape().begin(), x.shape().end() - 1); }

Inputs check_inputs(const Tensor& student, const Tensor& teacher, const Tensor& targets, const LossConfig& config) {
  check_config(config);
  Inputs in;
  check(student.defined(), kOp, "student logits are undefined");
  check(is_floating(student.dtype()), kOp, "student logits must be floating, got ", student.dtype());
  check(student.dim() == 2 || student.dim() == 3, kOp, "student logits must be [N, V] or [B, T, V], got ",
        to_string(student.shape()));
  in.vocab = student.size(-1);
  check(in.vocab > 0, kOp, "student logits ", to_string(student.shape()), " have an empty vocabulary");
  in.rows = student.numel() / in.vocab;
  in.student = reshape(student, {in.rows, in.vocab});
  in.want_kd = config.kd_ratio > 0;
  in.want_ce = config.kd_ratio < 1;

  if (in.want_kd) {
    check(teacher.defined(), kOp, "the KD loss needs teacher logits (kd_ratio is ", config.kd_ratio, ")");
    check(is_floating(teacher.dtype()), kOp, "teacher logits must be floating, got ", teacher.dtype());
    check(teacher.device() == student.device(), kOp, "student logits on ", to_string(student.device()),
          " and teacher logits on ", to_string(teacher.device()));
    if (teacher.dim() != student.dim() || leading(teacher) != leading(student))
      fail(kOp, "teacher logits ", to_string(teacher.shape()), " do not match the student logits ",
           to_string(student.shape()));
    in.teacher_vocab = teacher.size(-1);
    if (in.teacher_vocab > in.vocab && !config.slice_teacher_vocab)
      fail(kOp, "teacher vocabulary ", in.teacher_vocab, " is larger than the student's ", in.vocab,
           " (pass --slice-teacher-vocab to drop the teacher's extra rows)");
    check(in.teacher_vocab >= in.vocab, kOp, "teacher vocabulary ", in.teacher_vocab, " is smaller than the student's ",
          in.vocab);
    in.teacher = reshape(teacher.detach(), {in.rows, in.teacher_vocab});
  }

  if (targets.defined()) {
    check(is_integral(targets.dtype()), kOp, "targets must be i32 or i64, got ", targets.dtype());
    if (targets.shape() != leading(student))
      fail(kOp, "targets ", to_string(targets.shape()), " do not match the student logits ",
           to_string(student.shape()));
    in.targets = reshape(targets, {in.rows});
    in.target_ids = in.targets.to_vector<int64_t>();
    for (int64_t r = 0; r < in.rows; ++r) {
      const int64_t t = in.target_ids[size_t(r)];
      if (t == kIgnoreIndex) continue;
      if (t < 0 || t >= in.vocab)
        fail(kOp, "target ", t, " at token ", r, " is outside the student's vocabulary of ", in.vocab,
             " (ignored tokens are ", kIgnoreIndex, ")");
      ++in.count;
    }
  } else {
    check(!in.want_ce, kOp, "cross-entropy needs targets (kd_ratio is ", config.kd_ratio, ")");
    in.count = in.rows;
  }
  return in;
}

// f64 for f64 logits, f32 for f32 and bf16.
DType compute_dtype(DType logits) { return logits == DType::f64 ? DType::f64 : DType::f32; }

// ---- fused kernel ----
//
// A row is handled in blocks of kBlock columns that stay in L1: every pass over the row is a few
// Eigen array expressions (vectorized exp and log) per block. Sums are taken per block in the
// compute type by Eigen, whose order depends only on the block's length and the data's address,
// and added up in f64 in block order: a row gives the same bits whichever thread computes it.

constexpr int64_t kBlock = 1024;

template <class T>
using Row = Eigen::Array<T, Eigen::Dynamic, 1>;

template <class C>
Eigen::Map<const Row<C>> segment(const C* row, int64_t v0, int64_t len) {
  return Eigen::Map<const Row<C>>(row + v0, len);
}

// A row of logits in the compute type, times `scale`: read in place when it already is one.
template <class C, class T>
const C* load_row(const T* src, int64_t n, C scale, Row<C>& buffer) {
  if constexpr (std::is_same_v<T, C>)
    if (scale == C(1)) return src;
  buffer.resize(n);
  for (int64_t v = 0; v < n; ++v) buffer[v] = convert<C>(src[v]) * scale;
  return buffer.data();
}

// Softmax of one row x, keeping e = exp(x - m): log softmax = (x - m) - log_sum and
// softmax = e * inv_sum. m is 0 for a row without a finite maximum (no inf - inf).
template <class C>
struct RowSoftmax {
  C m = 0, log_sum = 0, inv_sum = 0;
};

template <class C>
RowSoftmax<C> row_softmax(const C* x, int64_t n, Row<C>& e) {
  C m = Eigen::Map<const Row<C>>(x, n).maxCoeff();
  if (!std::isfinite(m)) m = C(0);
  e.resize(n);
  double sum = 0;
  for (int64_t v0 = 0; v0 < n; v0 += kBlock) {
    const int64_t len = std::min(kBlock, n - v0);
    auto block = e.segment(v0, len);
    block = (segment(x, v0, len) - m).exp();
    sum += double(block.sum());
  }
  return {m, C(std::log(sum)), C(1.0 / sum)};
}

// One row of each intermediate (and one block of the gradient), reused by every row a worker
// thread handles: the only temporaries besides the gradient and the per-row losses.
template <class C>
struct Scratch {
  Row<C> a, a1, b, ea, e1, eb, log_m, grad_block;
};

struct RowLoss {
  double kd = 0, ce = 0, entropy = 0;  // kd includes tau^2; entropy of the teacher at tau
};

// Rows of student logits S and teacher logits U. Computes each row's losses and, when `grad` is
// set, writes the row of dL/ds already scaled by the per-token weights (kd_ratio or 1 - kd_ratio,
// over the count).
template <class S, class U>
struct FusedRows {
  using C = compute_t<S>;

  const S* student = nullptr;
  const U* teacher = nullptr;
  int64_t vocab = 0, teacher_stride = 0;
  const int64_t* targets = nullptr;  // null: every row counts, no CE
  KdLoss kind = KdLoss::fkl;
  bool want_kd = false, want_ce = false;
  C tau = 1, inv_tau = 1, beta = 0.5;
  S* grad = nullptr;
  C weight_kd = 0, weight_ce = 0;  // weight_ce is 0 without CE

  RowLoss row(int64_t r, Scratch<C>& sc) const {
    const int64_t n = vocab;
    S* g = grad ? grad + r * n : nullptr;
    const int64_t target = targets ? targets[r] : -1;
    if (targets && target == kIgnoreIndex) {
      if (g) std::fill_n(g, n, S{});
      return {};
    }
    RowLoss out;
    const S* s = student + r * n;
    // The student at the KD temperature (at 1 without KD): a = s / tau, q = softmax(a).
    const C* a = load_row(s, n, want_kd ? inv_tau : C(1), sc.a);
    const RowSoftmax<C> sq = row_softmax(a, n, sc.ea);
    const C* ea = sc.ea.data();
    auto q = [&](int64_t v0, int64_t len) { return segment(ea, v0, len) * sq.inv_sum; };
    auto log_q = [&](int64_t v0, int64_t len) { return (segment(a, v0, len) - sq.m) - sq.log_sum; };

    // CE at temperature 1: the softmax above unless the KD temperature is not 1.
    const C* a1 = a;
    const C* e1 = ea;
    RowSoftmax<C> s1 = sq;
    if (want_ce) {
      if (want_kd && inv_tau != C(1)) {
        a1 = load_row(s, n, C(1), sc.a1);
        s1 = row_softmax(a1, n, sc.e1);
        e1 = sc.e1.data();
      }
      out.ce = -double((a1[target] - s1.m) - s1.log_sum);
    }
    // The CE gradient without its -1 at the target, which store() subtracts.
    auto ce_grad = [&](int64_t v0, int64_t len) { return weight_ce * (segment(e1, v0, len) * s1.inv_sum); };

    if (!want_kd) {
      if (g) for_blocks([&](int64_t v0, int64_t len) { store(g, v0, len, ce_grad(v0, len), target, sc); });
      return out;
    }
    const C* b = load_row(teacher + r * teacher_stride, n, inv_tau, sc.b);
    const RowSoftmax<C> sp = row_softmax(b, n, sc.eb);
    const C* eb = sc.eb.data();
    auto p = [&](int64_t v0, int64_t len) { return segment(eb, v0, len) * sp.inv_sum; };
    auto log_p = [&](int64_t v0, int64_t len) { return (segment(b, v0, len) - sp.m) - sp.log_sum; };
    const double tau2 = double(tau) * double(tau);

    switch (kind) {
      case KdLoss::fkl: {
        // One pass: the loss and the gradient need nothing but the two softmaxes.
        double kl = 0, p_log_p = 0;
        const C w = weight_kd * tau;
        for_blocks([&](int64_t v0, int64_t len) {
          kl += double((p(v0, len) * (log_p(v0, len) - log_q(v0, len))).sum());
          p_log_p += double((p(v0, len) * log_p(v0, len)).sum());
          if (g) store(g, v0, len, w * (q(v0, len) - p(v0, len)) + ce_grad(v0, len), target, sc);
        });
        out.kd = tau2 * kl;
        out.entropy = -p_log_p;
        break;
      }
      case KdLoss::rkl: {
        double kl = 0, p_log_p = 0;
        for_blocks([&](int64_t v0, int64_t len) {
          kl += double((q(v0, len) * (log_q(v0, len) - log_p(v0, len))).sum());
          p_log_p += double((p(v0, len) * log_p(v0, len)).sum());
        });
        out.kd = tau2 * kl;
        out.entropy = -p_log_p;
        const C w = weight_kd * tau, shift = C(kl);
        if (g)
          for_blocks([&](int64_t v0, int64_t len) {
            store(g, v0, len, w * q(v0, len) * ((log_q(v0, len) - log_p(v0, len)) - shift) + ce_grad(v0, len),
                  target, sc);
          });
        break;
      }
      case KdLoss::jsd: {
        // log M with M clamped below at the smallest normal number: where p and q both
        // underflow, M is 0 and so are the terms that multiply log M, which stays finite.
        double kl_p = 0, kl_q = 0, p_log_p = 0;
        sc.log_m.resize(n);
        for_blocks([&](int64_t v0, int64_t len) {
          auto mix = beta * p(v0, len) + (C(1) - beta) * q(v0, len);
          auto log_mix = sc.log_m.segment(v0, len);
          log_mix = mix.max(std::numeric_limits<C>::min()).log();
          kl_p += double((p(v0, len) * (log_p(v0, len) - log_mix)).sum());
          kl_q += double((q(v0, len) * (log_q(v0, len) - log_mix)).sum());
          p_log_p += double((p(v0, len) * log_p(v0, len)).sum());
        });
        out.kd = tau2 * (double(beta) * kl_p + (1 - double(beta)) * kl_q);
        out.entropy = -p_log_p;
        const C w = weight_kd * tau * (C(1) - beta), shift = C(kl_q);
        const C* log_m = sc.log_m.data();
        if (g)
          for_blocks([&](int64_t v0, int64_t len) {
            store(g, v0, len,
                  w * q(v0, len) * ((log_q(v0, len) - segment(log_m, v0, len)) - shift) + ce_grad(v0, len), target,
                  sc);
          });
        break;
      }
    }
    return out;
  }

  template <class F>
  void for_blocks(F&& f) const {
    for (int64_t v0 = 0; v0 < vocab; v0 += kBlock) f(v0, std::min(kBlock, vocab - v0));
  }

  // g[v0, v0 + len) = value, converted to S, less weight_ce at the target (the one-hot of CE).
  template <class Expr>
  void store(S* g, int64_t v0, int64_t len, const Expr& value, int64_t target, Scratch<C>& sc) const {
    const bool has_target = want_ce && target >= v0 && target < v0 + len;
    if constexpr (std::is_same_v<S, C>) {
      Eigen::Map<Row<C>> out(g + v0, len);
      out = value;
      if (has_target) out[target - v0] -= weight_ce;
    } else {
      sc.grad_block = value;
      if (has_target) sc.grad_block[target - v0] -= weight_ce;
      for (int64_t v = 0; v < len; ++v) g[v0 + v] = convert<S>(sc.grad_block[v]);
    }
  }
};

struct LossValues {
  double kd = 0, ce = 0, entropy = 0;  // means over the counted tokens
};

template <class S, class U>
LossValues run_fused(const Inputs& in, const LossConfig& config, const Tensor& grad) {
  using C = compute_t<S>;
  const double denom = double(std::max<int64_t>(in.count, 1));
  FusedRows<S, U> rows;
  rows.student = static_cast<const S*>(in.student.data_ptr());
  if (in.want_kd) {
    rows.teacher = static_cast<const U*>(in.teacher.data_ptr());
    rows.teacher_stride = in.teacher_vocab;
  }
  rows.vocab = in.vocab;
  rows.targets = in.target_ids.empty() ? nullptr : in.target_ids.data();
  rows.kind = config.kind;
  rows.want_kd = in.want_kd;
  rows.want_ce = in.want_ce;
  rows.tau = C(config.temperature);
  rows.inv_tau = C(1.0 / config.temperature);
  rows.beta = C(config.jsd_beta);
  rows.grad = grad.defined() ? static_cast<S*>(grad.data_ptr()) : nullptr;
  rows.weight_kd = C(config.kd_ratio / denom);
  rows.weight_ce = C((1 - config.kd_ratio) / denom);

  std::vector<RowLoss> per_row(size_t(in.rows));
  cpu::parallel_for(in.rows, config.chunk_rows, [&](int64_t r0, int64_t r1) {
    thread_local Scratch<C> scratch;
    for (int64_t r = r0; r < r1; ++r) per_row[size_t(r)] = rows.row(r, scratch);
  });
  // In row order: the same bits whatever the chunks and threads.
  LossValues sum;
  for (const RowLoss& l : per_row) {
    sum.kd += l.kd;
    sum.ce += l.ce;
    sum.entropy += l.entropy;
  }
  return {sum.kd / denom, sum.ce / denom, sum.entropy / denom};
}

template <class F>
void dispatch_floating(DType dtype, F&& f) {
  dispatch_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (is_floating(dtype_v<T>)) f(tag);
  });
}

// g * grad (grad itself when g is 1), in grad's dtype.
Tensor scale_cotangent(const Tensor& grad, const Tensor& g) {
  if (g.item<double>() == 1.0) return grad;
  if (g.dtype() == grad.dtype()) return grad * g;
  return cast(cast(grad, g.dtype()) * g, grad.dtype());
}

LossParts assemble(const LossValues& v, const Inputs& in, const LossConfig& config, DType dtype, Device device) {
  double total = 0;
  if (in.want_kd) total += config.kd_ratio * v.kd;
  if (in.want_ce) total += (1 - config.kd_ratio) * v.ce;
  return {scalar(total, dtype, device), scalar(v.kd, dtype, device), scalar(v.ce, dtype, device),
          scalar(v.entropy, dtype, device), in.count};
}

// Student logits off the CPU: the device's fused kernel (cuda/kernels/kd_loss.hpp), which sets
// `grad` (the student's shape, on the device) when `differentiate`.
// A defined `grad` on entry is the buffer to write the gradient into (donated logits).
LossValues run_fused_device(const Inputs& in, const Tensor& student_logits, const LossConfig& config,
                            bool differentiate, Tensor& grad) {
  if (student_logits.device().is_cuda()) {
    const Tensor into = grad.defined() ? reshape(grad, in.student.shape()) : Tensor();
    const kd_loss::KdLossResult r = COTAN_CUDA_LAUNCH(
        kd_loss_forward_backward(in.student.detach(), in.teacher, in.targets, config, differentiate, into));
    if (differentiate) grad = reshape(r.grad, student_logits.shape());
    return {r.kd, r.ce, r.teacher_entropy};
  }
  fail(kOp, "the fused loss has no ", to_string(student_logits.device()), " kernel; use distill_loss_composed");
}

}  // namespace

// ---- names ----

KdLoss parse_kd_loss(std::string_view name) {
  if (name == "fkl") return KdLoss::fkl;
  if (name == "rkl") return KdLoss::rkl;
  if (name == "jsd") return KdLoss::jsd;
  fail(kOp, "unknown KD loss '", name, "' (known: fkl, rkl, jsd)");
}

void set_kd_loss(LossConfig& config, std::string_view spec) {
  const size_t colon = spec.find(':');
  const KdLoss kind = parse_kd_loss(spec.substr(0, colon));
  if (colon == std::string_view::npos) {
    config.kind = kind;
    return;
  }
  check(kind == KdLoss::jsd, kOp, "only jsd takes a parameter, got '", spec, "'");
  const std::string text(spec.substr(colon + 1));
  double beta = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), beta);
  check(error == std::errc() && end == text.data() + text.size(), kOp, "cannot read the jsd beta in '", spec, "'");
  check(beta > 0 && beta < 1, kOp, "jsd beta must be in (0, 1), got ", beta);
  config.kind = kind;
  config.jsd_beta = beta;
}

std::string_view kd_loss_name(KdLoss kind) {
  switch (kind) {
    case KdLoss::fkl: return "fkl";
    case KdLoss::rkl: return "rkl";
    case KdLoss::jsd: return "jsd";
  }
  return "?";
}

std::string kd_loss_spec(const LossConfig& config) {
  std::string spec(kd_loss_name(config.kind));
  if (config.kind == KdLoss::jsd) spec += cat(":", config.jsd_beta);
  return spec;
}

// ---- fused ----

namespace {

// `donate`: the caller gave up student_logits and nothing else references them; the gradient is
// then written over them.
LossParts fused_loss(const Tensor& student_logits, const Tensor& teacher_logits, const Tensor& targets,
                     const LossConfig& config, bool donate) {
  Inputs in = check_inputs(student_logits, teacher_logits, targets, config);
  const bool differentiate = grad_enabled() && student_logits.tracked();
  donate = donate && differentiate && student_logits.is_contiguous();
  Tensor grad = donate ? student_logits.detach() : Tensor();
  LossValues values;
  if (!student_logits.device().is_cpu()) {
    values = run_fused_device(in, student_logits, config, differentiate, grad);
  } else {
    in.student = contiguous(in.student.detach());
    if (in.want_kd) in.teacher = contiguous(in.teacher);
    if (differentiate && !donate) grad = Tensor::empty(student_logits.shape(), student_logits.dtype());
    dispatch_floating(in.student.dtype(), [&](auto s) {
      using S = decltype(s);
      if (!in.want_kd) {
        values = run_fused<S, S>(in, config, grad);
        return;
      }
      dispatch_floating(in.teacher.dtype(), [&](auto u) { values = run_fused<S, decltype(u)>(in, config, grad); });
    });
  }

  LossParts parts = assemble(values, in, config, compute_dtype(student_logits.dtype()), student_logits.device());
  parts.gradient_in_logits = donate;
  if (differentiate)
    parts.total = record("distill_loss", parts.total, {student_logits, teacher_logits, targets},
                         [grad](const Tensor& g) { return std::vector{scale_cotangent(grad, g), Tensor(), Tensor()}; });
  return parts;
}

LossConfig cross_entropy_config() {
  LossConfig config;
  config.kd_ratio = 0;
  return config;
}

}  // namespace

LossParts distill_loss(const Tensor& student_logits, const Tensor& teacher_logits, const Tensor& targets,
                       const LossConfig& config) {
  return fused_loss(student_logits, teacher_logits, targets, config, false);
}

LossParts distill_loss(Tensor&& student_logits, const Tensor& teacher_logits, const Tensor& targets,
                       const LossConfig& config) {
  const Tensor logits = std::move(student_logits);
  return fused_loss(logits, teacher_logits, targets, config, logits.sole_owner());
}

Tensor cross_entropy(const Tensor& logits, const Tensor& targets) {
  return distill_loss(logits, Tensor(), targets, cross_entropy_config()).total;
}

Tensor cross_entropy(Tensor&& logits, const Tensor& targets) {
  return distill_loss(std::move(logits), Tensor(), targets, cross_entropy_config()).total;
}

// ---- composed ----

LossParts distill_loss_composed(const Tensor& student_logits, const Tensor& teacher_logits, const Tensor& targets,
                                const LossConfig& config) {
  const Inputs in = check_inputs(student_logits, teacher_logits, targets, config);
  const DType dtype = compute_dtype(student_logits.dtype());
  const double tau = config.temperature;
  const double denom = double(std::max<int64_t>(in.count, 1));
  Tensor s = cast(in.student, dtype);  // [N, V]
  // [N]: 1 for counted tokens, 0 for ignored ones.
  Tensor counted = in.targets.defined()
                       ? ne(in.targets, scalar(double(kIgnoreIndex), in.targets.dtype(), s.device()))
                       : ones({in.rows}, DType::boolean, s.device());
  Tensor weight = cast(counted, dtype);

  Tensor kd = zeros({}, dtype, s.device()), entropy = kd, ce = kd, total = kd;
  if (in.want_kd) {
    Tensor u = cast(in.teacher, dtype);
    if (in.teacher_vocab > in.vocab) u = slice(u, 1, 0, in.vocab);
    Tensor log_q = log_softmax(tau == 1 ? s : s / tau);
    Tensor log_p = log_softmax(tau == 1 ? u : u / tau);
    Tensor p = exp(log_p);
    Tensor per_token;  // [N], KL without the tau^2
    if (config.kind == KdLoss::fkl) {
      per_token = sum(p * (log_p - log_q), {-1});
    } else if (config.kind == KdLoss::rkl) {
      per_token = sum(exp(log_q) * (log_q - log_p), {-1});
    } else {
      const double beta = config.jsd_beta;
      Tensor q = exp(log_q);
      Tensor log_m = log(p * beta + q * (1 - beta));
      per_token = sum(p * (log_p - log_m), {-1}) * beta + sum(q * (log_q - log_m), {-1}) * (1 - beta);
    }
    kd = sum(per_token * weight) * (tau * tau / denom);
    entropy = sum(neg(sum(p * log_p, {-1})) * weight) / denom;
    total = config.kd_ratio == 1 ? kd : kd * config.kd_ratio;
  }
  if (in.want_ce) {
    Tensor safe = where(counted, in.targets, zeros_like(in.targets));
    Tensor picked = gather(log_softmax(s), 1, reshape(safe, {in.rows, 1}));  // [N, 1]
    ce = neg(sum(reshape(picked, {in.rows}) * weight)) / denom;
    Tensor part = config.kd_ratio == 0 ? ce : ce * (1 - config.kd_ratio);
    total = in.want_kd ? total + part : part;
  }
  return {total, kd.detach(), ce.detach(), entropy.detach(), in.count};
}

Tensor cross_entropy_composed(const Tensor& logits, const Tensor& targets) {
  return distill_loss_composed(logits, Tensor(), targets, cross_entropy_config()).total;
}

}  // namespace cotan::train
