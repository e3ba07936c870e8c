// The attention statistics (docs/attention.md), from the effective weights A of each kind:
//   softmax  A_ij = P_ij
//   sink     A_ij = P_ij with exp(sigma_h) in the denominator (the sink's own mass left out)
//   affine   A_ij = alpha_i P_ij + beta_i on visible keys, 0 on masked ones
// Row by row, with no T x T buffer: a first pass over the key tiles finds L_i, a second one
// recomputes s_ij, forms A_ij and accumulates the row's sums. One task per (b, h) writes its own
// per-row results; the means are then taken serially in a fixed order, so the numbers do not
// depend on the thread count. With `with_weights`, the heads of batch row 0 run serially after
// the others, each adding A / H into one [T, T] buffer, in head order.
#include <cmath>
#include <limits>

#include "autograd/autograd.hpp"
#include "nn/attention.hpp"
#include "tensor/cpu/attention_tiles.hpp"
#include "tensor/cpu/parallel.hpp"
#include "tensor/ops.hpp"

namespace cotan::nn {

namespace {

using namespace cpu::tiles;

// Per (b, h, i) results of one row of A.
struct RowStats {
  double first = 0;       // A_i0
  double mass = 0;        // sum_j A_ij
  double entropy = 0;     // entropy of max(A_i, 0) / sum_j max(A_ij, 0), natural log
  double logit_sum = 0;   // sum over visible j of s_ij
};

template <class T>
// weights: null, or [T, T] to which A / H of this (b, h) is added.
void head_stats(const Problem<T>& pr, int64_t b, int64_t h, RowStats* rows, double* weights) {
  static thread_local Scratch<T> scratch;
  const int64_t t = pr.t, d = pr.d, tp = pr.tp, dp = pr.dp, g = h / pr.group();
  std::vector<T*> a = scratch.carve({tp * dp, dp * tp, kQueryRows * kKeyCols, kQueryRows, kQueryRows, kQueryRows});
  T *q = a[0], *kt = a[1], *p = a[2], *running_max = a[3], *running_sum = a[4], *lse = a[5];
  pack_rows(q, tp, dp, pr.q.rows(b, h), pr.q.stride, t, d, pr.scale);
  pack_key_tiles(kt, tp, dp, pr.k.rows(b, g), pr.k.stride, t, d);

  for (int64_t i0 = 0; i0 < t; i0 += kQueryRows) {
    const int64_t m = std::min(kQueryRows, t - i0), mr = round_up(m, kRowGranule);
    const int64_t key_end = pr.causal ? i0 + m : t;
    auto scores = [&](int64_t j0, int64_t nr) {  // p = c Q K^T for the nr keys from j0
      mma(p, kKeyCols, q + i0 * dp, dp, kt + j0 * dp, kKeyCols, mr, nr, dp, false);
    };

    // Pass 1: L_i by an online max and sum over the key tiles (plus the sink).
    for (int64_t j0 = 0; j0 < key_end; j0 += kKeyCols) {
      const int64_t n = std::min(kKeyCols, key_end - j0), nr = round_up(n, lanes<T>);
      scores(j0, nr);
      for (int64_t r = 0; r < m; ++r) {
        T* row = p + r * kKeyCols;
        const int64_t seen = visible_keys(pr, i0 + r, j0, n);
        if (seen == 0) continue;
        const T tile_max = visible_max(row, seen, nr);
        const T top = j0 == 0 ? tile_max : std::max(running_max[r], tile_max);
        const T previous = j0 == 0 ? T(0) : running_sum[r] * std::exp(running_max[r] - top);
        running_sum[r] = previous + exp_visible(row, seen, nr, top);
        running_max[r] = top;
      }
    }
    for (int64_t r = 0; r < m; ++r) {
      if (pr.sink()) {
        const T sigma = pr.sigma[h], top = std::max(running_max[r], sigma);
        lse[r] = top + std::log(running_sum[r] * std::exp(running_max[r] - top) + std::exp(sigma - top));
      } else {
        lse[r] = running_max[r] + std::log(running_sum[r]);
      }
    }

    // Pass 2: A_ij and the row sums. Entropy of Atilde = a / Z (a = max(A, 0), Z = sum a) is
    // log Z - sum a log a / Z.
    std::vector<double> positive(size_t(m), 0.0), a_log_a(size_t(m), 0.0);
    for (int64_t j0 = 0; j0 < key_end; j0 += kKeyCols) {
      const int64_t n = std::min(kKeyCols, key_end - j0), nr = round_up(n, lanes<T>);
      scores(j0, nr);
      for (int64_t r = 0; r < m; ++r) {
        const int64_t i = i0 + r;
        T* row = p + r * kKeyCols;
        const int64_t seen = visible_keys(pr, i, j0, n);
        if (seen == 0) continue;
        RowStats& out = rows[pr.row(b, h) + i];
        for (int64_t c = 0; c < seen; ++c) out.logit_sum += double(row[c]);
        exp_visible(row, seen, nr, lse[r]);
        double alpha = 1, beta = 0;
        if (pr.affine()) {
          alpha = double(pr.alpha[pr.row(b, h) + i]);
          beta = (double(pr.alpha_ma[h]) - alpha) / double(pr.affine_count(i));
        }
        for (int64_t c = 0; c < seen; ++c) {
          const double w = alpha * double(row[c]) + beta;
          if (j0 + c == 0) out.first = w;
          if (weights) weights[i * t + j0 + c] += w / double(pr.heads);
          out.mass += w;
          if (w > 0) {
            positive[size_t(r)] += w;
            a_log_a[size_t(r)] += w * std::log(w);
          }
        }
      }
    }
    for (int64_t r = 0; r < m; ++r) {
      const double z = positive[size_t(r)];
      rows[pr.row(b, h) + i0 + r].entropy = z > 0 ? std::log(z) - a_log_a[size_t(r)] / z : 0.0;
    }
  }
}

template <class T>
std::vector<RowStats> all_rows(const Problem<T>& pr, double* weights) {
  std::vector<RowStats> rows(size_t(pr.batch * pr.heads * pr.t));
  const int64_t first = weights ? pr.heads : 0;  // the (b, h) left to the serial pass
  cpu::parallel_for(pr.batch * pr.heads - first, 1, [&](int64_t begin, int64_t end) {
    for (int64_t bh = first + begin; bh < first + end; ++bh)
      head_stats(pr, bh / pr.heads, bh % pr.heads, rows.data(), nullptr);
  });
  for (int64_t h = 0; h < first; ++h) head_stats(pr, 0, h, rows.data(), weights);
  return rows;
}

}  // namespace

AttentionStats attention_stats(const AttentionCore& in, bool with_weights) {
  check_attention_core(in, "attention_stats");
  if (!in.q.device().is_cpu())
    fail("attention_stats", "runs on the CPU; q is on ", to_string(in.q.device()));
  NoGrad no_grad;
  const DType ct = in.q.dtype() == DType::f64 ? DType::f64 : DType::f32;
  auto prepare = [ct](const Tensor& x) { return x.defined() ? contiguous(cast(x.detach(), ct)) : Tensor(); };
  const Tensor q = prepare(in.q), k = prepare(in.k), v = prepare(in.v), alpha = prepare(in.alpha),
               alpha_ma = prepare(in.alpha_ma), sigma = prepare(in.sigma);
  const int64_t batch = q.size(0), heads = q.size(1), t = q.size(2);
  AttentionStats out;
  if (with_weights) out.weights = zeros({t, t}, DType::f64);
  double* weights = with_weights ? out.weights.data<double>() : nullptr;
  const std::vector<RowStats> rows =
      ct == DType::f64 ? all_rows(Problem<double>(in.causal, in.affine_n, q, k, v, alpha, alpha_ma, sigma), weights)
                       : all_rows(Problem<float>(in.causal, in.affine_n, q, k, v, alpha, alpha_ma, sigma), weights);

  out.head_mass = zeros({heads}, DType::f64);
  out.weight_sums = zeros({batch, t}, DType::f64);
  out.row_sums = zeros({batch, heads, t}, DType::f64);
  double* row_sums = out.row_sums.data<double>();
  double* head_mass = out.head_mass.data<double>();
  double* weight_sums = out.weight_sums.data<double>();
  double first = 0, share = 0, shared_rows = 0, entropy = 0, logits = 0, visible = 0;
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t i = 0; i < t; ++i) {
        const RowStats& r = rows[size_t((b * heads + h) * t + i)];
        if (i >= 1) first += r.first;
        if (i >= 1 && r.mass > 0) {
          share += r.first / r.mass;
          shared_rows += 1;
        }
        entropy += r.entropy;
        logits += r.logit_sum;
        visible += double(in.causal ? i + 1 : t);
        head_mass[h] += r.mass;
        row_sums[(b * heads + h) * t + i] = r.mass;
        weight_sums[b * t + i] += r.mass;
      }
  const double rows_total = double(batch * heads * t);
  out.first_token_weight = t > 1 ? first / double(batch * heads * (t - 1)) : 0.0;
  out.first_token_share = shared_rows > 0 ? share / shared_rows : std::numeric_limits<double>::quiet_NaN();
  out.entropy = entropy / rows_total;
  out.mean_logit = logits / visible;
  for (int64_t h = 0; h < heads; ++h) head_mass[h] /= double(batch * t);
  for (int64_t x = 0; x < batch * t; ++x) weight_sums[x] /= double(heads);
  return out;
}

}  // namespace cotan::nn
