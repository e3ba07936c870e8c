// The CPU backend's fused KD loss (Backend::kd_loss, tensor/fused_ops.hpp; the math and the
// conventions in train/losses.hpp): the losses and the gradient dL/ds of every row in one pass
// over the student and teacher logits, rows cut into chunks of chunk_rows run in parallel.
//
// Per row (teacher and student side by side): one pass for the two maxima, one for the
// exponentials and their sums (both log-sum-exps), one for the losses and the gradient (rkl and
// jsd take one more: their gradient needs a row sum of the loss terms). The gradient, already
// scaled by kd_ratio / count, goes straight into one buffer of the student's shape and dtype (the
// donated logits themselves, or a new one): the only N x V allocation. Other temporaries are a
// few rows per worker thread (kept for reuse) and the N per-row losses, summed in row order.
//
// A row is handled in blocks of kBlock columns that stay in L1: every pass over the row is a few
// Eigen array expressions (vectorized exp and log) per block. Sums are taken per block in the
// compute type by Eigen, whose order depends only on the block's length and the data's address,
// and added up in f64 in block order: a row gives the same bits whichever thread computes it.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include <Eigen/Core>

#include "tensor/cpu/backend.hpp"
#include "tensor/cpu/parallel.hpp"

namespace cotan::cpu {

namespace {

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

// The rows of one call, checked and contiguous: student [N, V], teacher [N, Vt] (with KD).
struct Problem {
  Tensor student, teacher;
  std::vector<int64_t> target_ids;  // N ids, or empty when there are no targets
  int64_t rows = 0, vocab = 0, teacher_vocab = 0;
  int64_t count = 0;                // counted (not ignored) tokens
  bool want_kd = false, want_ce = false;
};

template <class S, class U>
LossValues run_fused(const Problem& in, const KdLossConfig& config, const Tensor& grad) {
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

}  // namespace

KdLossResult CpuBackend::kd_loss(const Tensor& student, const Tensor& teacher, const Tensor& targets,
                                 const KdLossConfig& config, bool want_grad, const Tensor& grad_into) {
  Problem in;
  in.rows = student.size(0);
  in.vocab = student.size(1);
  in.want_kd = config.kd_ratio > 0;
  in.want_ce = config.kd_ratio < 1;
  in.student = contiguous_as(student);
  if (in.want_kd) {
    in.teacher = contiguous_as(teacher);
    in.teacher_vocab = teacher.size(1);
  }
  if (targets.defined()) {
    in.target_ids = targets.to_vector<int64_t>();
    in.count = int64_t(std::count_if(in.target_ids.begin(), in.target_ids.end(),
                                     [](int64_t t) { return t != kIgnoreIndex; }));
  } else {
    in.count = in.rows;
  }
  KdLossResult result;
  if (want_grad) result.grad = grad_into.defined() ? grad_into : Tensor::empty(student.shape(), student.dtype());
  LossValues values;
  dispatch_floating("kd_loss", in.student.dtype(), [&](auto s) {
    using S = decltype(s);
    if (!in.want_kd) {
      values = run_fused<S, S>(in, config, result.grad);
      return;
    }
    dispatch_floating("kd_loss", in.teacher.dtype(),
                      [&](auto u) { values = run_fused<S, decltype(u)>(in, config, result.grad); });
  });
  result.kd = values.kd;
  result.ce = values.ce;
  result.teacher_entropy = values.entropy;
  result.tokens = in.count;
  if (in.want_kd) result.total += config.kd_ratio * values.kd;
  if (in.want_ce) result.total += (1 - config.kd_ratio) * values.ce;
  return result;
}

}  // namespace cotan::cpu
