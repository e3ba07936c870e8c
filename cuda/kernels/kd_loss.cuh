// The fused distillation loss (docs/losses.md, train/losses.hpp, tensor/fused_ops.hpp): forward
// and gradient in one kernel, for student logits S and teacher logits U (f64 computes in f64,
// f32 and bf16 in f32).
//
// Per row r of student logits s [N, V] and teacher logits u [N, Vt >= V] (first V columns), with
// a = s / tau, b = u / tau, q = softmax(a), p = softmax(b), a block of kRowBlock threads:
//   pass 1  one read of s and u: each thread keeps a running max and sum of exp (OnlineLse) of
//           a, b, and of s itself when CE needs temperature 1 but tau != 1; the block combines
//           them (fixed tree) into each row's shift m and log-sum (RowSoftmax, the CPU's
//           arithmetic: m = 0 when not finite, sums in f64).
//   pass 2  the per-row loss terms (KL, the teacher's sum p log p) and, for fkl and pure CE, the
//           gradient row: dL/ds = w_kd tau (q - p) + w_ce (softmax(s) - onehot(target)).
//   pass 3  rkl and jsd only: their gradient needs pass 2's row sum (q_v [d_v - sum_w q_w d_w]).
// The gradient is written in place, already scaled by w_kd = kd_ratio / count and
// w_ce = (1 - kd_ratio) / count, count read from the device (kd_loss_count_kernel). Per-row
// losses go to an [N, 3] f64 buffer (kd with tau^2, ce, teacher entropy; 0 for ignored rows),
// summed by kd_loss_sum_kernel in a fixed order (each thread a strided run of rows, then the
// block's tree): the same bits for any grid of the row kernel. No float atomics anywhere.
//
// Ignored rows (target -100) get a gradient row of 0 and losses 0. A target outside [0, V) (the
// caller checks them) gives a NaN CE and no one-hot term instead of an out-of-bounds read.
#pragma once

#include <cfloat>
#include <type_traits>

#include "cuda/kernels/row_group.cuh"
#include "tensor/fused_ops.hpp"

namespace cotan::COTAN_KERNELS {

struct KdLossArgs {
  int64_t rows = 0, vocab = 0, teacher_stride = 0;
  KdLoss kind = KdLoss::fkl;
  bool want_kd = false, want_ce = false;
  bool separate_ce = false;  // CE needs softmax(s) besides softmax(s / tau): want_kd, want_ce, tau != 1
  double tau = 1, beta = 0.5, kd_ratio = 1;
};

template <class A>
struct Triple {
  A x, y, z;
};

template <class A>
SIMT_DEVICE Triple<A> triple_sum(Triple<A> l, Triple<A> r) {
  return {l.x + r.x, l.y + r.y, l.z + r.z};
}
template <class A>
SIMT_DEVICE Triple<A> triple_max(Triple<A> l, Triple<A> r) {
  return {r.x > l.x ? r.x : l.x, r.y > l.y ? r.y : l.y, r.z > l.z ? r.z : l.z};
}

struct AddTriples {
  SIMT_DEVICE Triple<double> operator()(Triple<double> l, Triple<double> r) const { return triple_sum(l, r); }
};

// One thread's share of a row: the running max and the sum of exp(x - max).
template <class C>
struct OnlineLse {
  C max = C(-INFINITY);
  double sum = 0;

  SIMT_DEVICE void add(C x) {
    if (x > max) {
      sum = sum * double(math::exp(max - x)) + 1.0;
      max = x;
    } else if (x > C(-INFINITY)) {  // -inf adds nothing (and -inf - -inf would be NaN)
      sum += double(math::exp(x - max));
    }
  }
};

// A row's softmax as the CPU computes it: log softmax = (x - m) - log_sum,
// softmax = exp(x - m) * inv_sum.
template <class C>
struct RowSoftmax {
  C m = 0, log_sum = 0, inv_sum = 0;
};

// The row softmaxes of three running sums, combined over the block. Every thread gets them.
template <class C>
SIMT_DEVICE Triple<RowSoftmax<C>> block_softmax(const OnlineLse<C> (&part)[3]) {
  const Triple<C> max = group_reduce<kRowBlock>(Triple<C>{part[0].max, part[1].max, part[2].max},
                                                    [](Triple<C> l, Triple<C> r) { return triple_max(l, r); });
  // The shift: the max, or 0 when it is not finite (the CPU's rule).
  const C shift[3] = {math::abs(max.x) < C(INFINITY) ? max.x : C(0), math::abs(max.y) < C(INFINITY) ? max.y : C(0),
                      math::abs(max.z) < C(INFINITY) ? max.z : C(0)};
  double rescaled[3];
  for (int k = 0; k < 3; ++k)  // sum * exp(max_t - shift); a thread that saw no finite value has sum 0
    rescaled[k] = part[k].sum == 0 ? 0.0 : part[k].sum * double(math::exp(part[k].max - shift[k]));
  const Triple<double> sum =
      group_reduce<kRowBlock>(Triple<double>{rescaled[0], rescaled[1], rescaled[2]}, AddTriples{});
  auto row = [](C m, double s) { return RowSoftmax<C>{m, C(math::log(s)), C(1.0 / s)}; };
  return {row(shift[0], sum.x), row(shift[1], sum.y), row(shift[2], sum.z)};
}

// log M, M = beta p + (1 - beta) q, with M clamped below at the smallest normal number: where p
// and q both underflow, M is 0 and so are the terms that multiply log M, which stays finite.
template <class C>
SIMT_DEVICE C jsd_log_mix(C p, C q, C beta) {
  constexpr C smallest = std::is_same_v<C, double> ? C(DBL_MIN) : C(FLT_MIN);
  const C mix = beta * p + (C(1) - beta) * q;
  return math::log(mix > smallest ? mix : smallest);
}

// One element of a row at its softmax: x, log softmax and softmax.
template <class C>
struct Prob {
  C log_p, p;
};
template <class C>
SIMT_DEVICE Prob<C> prob(C x, const RowSoftmax<C>& r) {
  return {(x - r.m) - r.log_sum, math::exp(x - r.m) * r.inv_sum};
}

// The gradient and the losses of rows of student logits S and teacher logits U (see the top of
// the file). count: the counted tokens (device); grad: null when no gradient is wanted;
// row_losses: [rows, 3].
template <class S, class U>
SIMT_GLOBAL void kd_loss_rows_kernel(KdLossArgs args, const S* student, const U* teacher, const int64_t* targets,
                                     const int64_t* count, S* grad, double* row_losses) {
  using C = compute_t<S>;
  using G = RowGroup<kRowBlock>;
  const int64_t n = args.vocab;
  const unsigned rank = G::rank();
  const double denom = double(*count > 1 ? *count : 1);
  const C weight_kd = C(args.kd_ratio / denom);
  const C weight_ce = args.want_ce ? C((1 - args.kd_ratio) / denom) : C(0);
  const C tau = C(args.tau), inv_tau = C(1.0 / args.tau), beta = C(args.beta);
  const double tau2 = double(tau) * double(tau);
  // The student at the KD temperature (at 1 without KD), and at 1 for CE.
  const C a_scale = args.want_kd ? inv_tau : C(1);
  const C ce_scale = args.separate_ce ? C(1) : a_scale;

  for (int64_t r = G::first_row(); r < args.rows; r += G::row_stride()) {
    const int64_t target = targets ? targets[r] : -1;
    S* g = grad ? grad + r * n : nullptr;
    double* losses = row_losses + 3 * r;
    if (targets && target == kIgnoreIndex) {
      if (g)
        for (int64_t v = rank; v < n; v += kRowBlock) g[v] = convert_to<S>(C(0));
      if (rank == 0) losses[0] = losses[1] = losses[2] = 0;
      continue;
    }
    const S* s = student + r * n;
    const U* u = args.want_kd ? teacher + r * args.teacher_stride : nullptr;

    // Pass 1: both log-sum-exps (three with a separate CE) in one read of each row.
    OnlineLse<C> part[3];
    for (int64_t v = rank; v < n; v += kRowBlock) {
      const C x = load(s + v);
      part[0].add(x * a_scale);
      if (args.want_kd) part[1].add(convert_to<C>(load(u + v)) * inv_tau);
      if (args.separate_ce) part[2].add(x);
    }
    // The target's logit is read before the group's barrier in block_softmax: the gradient may be
    // written over the logits (grad == student), and its column belongs to another thread.
    const bool target_valid = target >= 0 && target < n;
    const C target_logit = args.want_ce && target_valid ? load(s + target) : C(0);
    const Triple<RowSoftmax<C>> rows = block_softmax(part);
    const RowSoftmax<C> sq = rows.x, sp = rows.y, s1 = args.separate_ce ? rows.z : rows.x;

    double ce = 0;
    if (args.want_ce) ce = target_valid ? -double((target_logit * ce_scale - s1.m) - s1.log_sum) : double(NAN);
    // The CE gradient at column v (weight_ce softmax(s)_v - weight_ce [v = target]), added to `kd`.
    auto store = [&](int64_t v, C kd) {
      C value = kd;
      if (args.want_ce) {
        value = value + weight_ce * (math::exp(load(s + v) * ce_scale - s1.m) * s1.inv_sum);
        if (v == target) value -= weight_ce;
      }
      g[v] = convert_to<S>(value);
    };

    if (!args.want_kd) {
      if (g)
        for (int64_t v = rank; v < n; v += kRowBlock) store(v, C(0));
      if (rank == 0) {
        losses[0] = losses[2] = 0;
        losses[1] = ce;
      }
      continue;
    }

    // Pass 2: the row sums (x, y, z) = fkl, rkl: (KL, -, sum p log p); jsd: (KL(p||M), KL(q||M),
    // sum p log p). fkl writes its gradient here.
    Triple<double> acc{0, 0, 0};
    const C w_fkl = weight_kd * tau;
    for (int64_t v = rank; v < n; v += kRowBlock) {
      const Prob<C> q = prob(load(s + v) * a_scale, sq);
      const Prob<C> p = prob(convert_to<C>(load(u + v)) * inv_tau, sp);
      acc.z += double(p.p * p.log_p);
      switch (args.kind) {
        case KdLoss::fkl:
          acc.x += double(p.p * (p.log_p - q.log_p));
          if (g) store(v, w_fkl * (q.p - p.p));
          break;
        case KdLoss::rkl: acc.x += double(q.p * (q.log_p - p.log_p)); break;
        case KdLoss::jsd: {
          const C log_mix = jsd_log_mix(p.p, q.p, beta);
          acc.x += double(p.p * (p.log_p - log_mix));
          acc.y += double(q.p * (q.log_p - log_mix));
          break;
        }
      }
    }
    const Triple<double> sums = group_reduce<kRowBlock>(acc, AddTriples{});
    double kd = 0;
    switch (args.kind) {
      case KdLoss::fkl:
      case KdLoss::rkl: kd = tau2 * sums.x; break;
      case KdLoss::jsd: kd = tau2 * (double(beta) * sums.x + (1 - double(beta)) * sums.y); break;
    }
    if (rank == 0) {
      losses[0] = kd;
      losses[1] = ce;
      losses[2] = -sums.z;
    }

    // Pass 3 (rkl, jsd): dL/ds_v = w q_v [d_v - shift], shift = sum_w q_w d_w (that row's KL).
    if (!g || args.kind == KdLoss::fkl) continue;
    const bool rkl = args.kind == KdLoss::rkl;
    const C w = rkl ? weight_kd * tau : weight_kd * tau * (C(1) - beta);
    const C shift = C(rkl ? sums.x : sums.y);
    for (int64_t v = rank; v < n; v += kRowBlock) {
      const Prob<C> q = prob(load(s + v) * a_scale, sq);
      const Prob<C> p = prob(convert_to<C>(load(u + v)) * inv_tau, sp);
      const C d = rkl ? q.log_p - p.log_p : q.log_p - jsd_log_mix(p.p, q.p, beta);
      store(v, w * q.p * (d - shift));
    }
  }
}

// *count = the rows whose target is not ignored (all rows without targets). One block.
SIMT_GLOBAL void kd_loss_count_kernel(int64_t rows, const int64_t* targets, int64_t* count) {
  int64_t counted = 0;
  for (int64_t r = simt::thread_idx().x; r < rows; r += kRowBlock)
    counted += (!targets || targets[r] != kIgnoreIndex) ? 1 : 0;
  counted = group_reduce<kRowBlock>(counted, [](int64_t a, int64_t b) { return a + b; });
  if (simt::thread_idx().x == 0) *count = counted;
}

// out = (kd, ce, entropy) summed over rows and divided by max(count, 1), then count. One block;
// thread t adds rows t, t + kRowBlock, ... in order, then the block's tree: a fixed order.
SIMT_GLOBAL void kd_loss_sum_kernel(int64_t rows, const double* row_losses, const int64_t* count, double* out) {
  Triple<double> acc{0, 0, 0};
  for (int64_t r = simt::thread_idx().x; r < rows; r += kRowBlock)
    acc = triple_sum(acc, Triple<double>{row_losses[3 * r], row_losses[3 * r + 1], row_losses[3 * r + 2]});
  acc = group_reduce<kRowBlock>(acc, AddTriples{});
  if (simt::thread_idx().x == 0) {
    const double denom = double(*count > 1 ? *count : 1);
    out[0] = acc.x / denom;
    out[1] = acc.y / denom;
    out[2] = acc.z / denom;
    out[3] = double(*count);
  }
}

}  // namespace cotan::COTAN_KERNELS
