// The CPU backend's attention kernels (Backend::attention_forward and attention_backward,
// tensor/fused_ops.hpp; the math in nn/attention.hpp): softmax, sink and affine, forward and
// backward, tiled over keys with no T x T buffer. bf16 cores compute in f32.
//
// Forward, one task per (b, kv head g) whose query heads share the packed K and V (or per (b, h)
// when that gives too few tasks): for each block of kQueryRows queries, an online softmax over key
// tiles (running max m_i and sum l_i of exp(s_ij - m_i), the S accumulator rescaled when m_i
// grows). The sink adds exp(sigma_h) to the denominator at the end; affine adds beta_i U_i from
// a running prefix sum of V. Saves S [B, H, T, d] and L [B, H, T] for the backward.
//
// Backward, one task per (b, kv head g), looping over the group's query heads in order, so dK and
// dV of a kv head are summed in one fixed order (deterministic, no atomics): for each key tile,
// for each query tile that sees it, P = exp(s - L) is recomputed and
//   dP = Ghat V^T,  ds = P (dP - D),  dQ += ds K
// with Ghat_i = alpha_i G_i and D_i = Ghat_i . S_i; P and ds of the key tile are kept as strips
// [T][kKeyCols] (never T x T) for dV += P^T Ghat and dK += ds^T (c Q), one product each over all
// queries. Affine adds the suffix sums of beta_i G_i to dV and dalpha_i = G_i . S_i - G_i . U_i /
// N_i; the sink's dsigma_h = -sum exp(sigma_h - L_i) D_i.
//
// Scratch: per thread, reused across calls (tiles::Scratch): about 3 T d (forward) and
// 9 T d + 2 T kKeyCols (backward) elements of the compute dtype, T and d padded.
#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "tensor/cpu/attention_tiles.hpp"
#include "tensor/cpu/backend.hpp"
#include "tensor/cpu/parallel.hpp"

namespace cotan::cpu {

namespace {

using namespace tiles;

template <class T>
Scratch<T>& thread_scratch() {
  static thread_local Scratch<T> scratch;
  return scratch;
}

// Outputs of the forward pass, contiguous.
template <class T>
struct ForwardOut {
  T* s;    // [B, H, T, d]
  T* lse;  // [B, H, T]
  T* o;    // [B, H, T, d]; == s for softmax and sink
};

// Query head h of batch row b, against kt and v packed (forward_heads); q, p, acc, running_max,
// running_sum and u are its scratch.
template <class T>
void forward_head(const Problem<T>& pr, int64_t b, int64_t h, const ForwardOut<T>& out, T* q, const T* kt,
                  const T* v, T* p, T* acc, T* running_max, T* running_sum, T* u) {
  const int64_t t = pr.t, d = pr.d, tp = pr.tp, dp = pr.dp;
  pack_rows(q, tp, dp, pr.q.rows(b, h), pr.q.stride, t, d, pr.scale);

  // U_i: the running prefix sum of v (causal) or the sum of all of v.
  std::fill(u, u + dp, T(0));
  if (pr.affine() && !pr.causal)
    for (int64_t j = 0; j < t; ++j)
      for (int64_t x = 0; x < d; ++x) u[x] += v[j * dp + x];

  for (int64_t i0 = 0; i0 < t; i0 += kQueryRows) {
    const int64_t m = std::min(kQueryRows, t - i0), mr = round_up(m, kRowGranule);
    const int64_t key_end = pr.causal ? i0 + m : t;
    std::fill(acc, acc + mr * dp, T(0));
    std::fill(running_sum, running_sum + m, T(0));
    for (int64_t j0 = 0; j0 < key_end; j0 += kKeyCols) {
      const int64_t n = std::min(kKeyCols, key_end - j0), nr = round_up(n, lanes<T>);
      mma(p, kKeyCols, q + i0 * dp, dp, kt + j0 * dp, kKeyCols, mr, nr, dp, false);  // s = c Q K^T
      for (int64_t r = 0; r < mr; ++r) {
        T* row = p + r * kKeyCols;
        const int64_t seen = r < m ? visible_keys(pr, i0 + r, j0, n) : 0;
        if (seen == 0) {
          std::fill(row, row + nr, T(0));
          continue;
        }
        // Key 0 is visible to every query, so the first tile sets a finite running max.
        const T tile_max = visible_max(row, seen, nr);
        const T top = j0 == 0 ? tile_max : std::max(running_max[r], tile_max);
        const T tile_sum = exp_visible(row, seen, nr, top);  // P~ = exp(s - m_i)
        if (j0 > 0 && top != running_max[r]) {
          const T rescale = std::exp(running_max[r] - top);
          running_sum[r] *= rescale;
          scale_row(acc + r * dp, dp, rescale);
        }
        running_max[r] = top;
        running_sum[r] += tile_sum;
      }
      mma(acc, dp, p, kKeyCols, v + j0 * dp, dp, mr, dp, nr, true);  // acc += P~ V
    }

    for (int64_t r = 0; r < m; ++r) {
      const int64_t i = i0 + r, row = pr.row(b, h) + i;
      T lse, inv;
      if (pr.sink()) {
        // L = log(sum_j exp(s_ij) + exp(sigma)), shifted by the larger of the two maxima.
        const T sigma = pr.sigma[h], top = std::max(running_max[r], sigma);
        lse = top + std::log(running_sum[r] * std::exp(running_max[r] - top) + std::exp(sigma - top));
        inv = std::exp(running_max[r] - lse);
      } else {
        lse = running_max[r] + std::log(running_sum[r]);
        inv = T(1) / running_sum[r];
      }
      out.lse[row] = lse;
      T* s_row = out.s + row * d;
      for (int64_t x = 0; x < d; ++x) s_row[x] = acc[r * dp + x] * inv;
      if (!pr.affine()) continue;
      // O_i = alpha_i S_i + beta_i U_i, beta_i = (alpha_ma - alpha_i) / N_i.
      if (pr.causal)
        for (int64_t x = 0; x < d; ++x) u[x] += v[i * dp + x];
      const T alpha = pr.alpha[row], beta = (pr.alpha_ma[h] - alpha) / pr.affine_count(i);
      T* o_row = out.o + row * d;
      for (int64_t x = 0; x < d; ++x) o_row[x] = alpha * s_row[x] + beta * u[x];
    }
  }
}

// Query heads [h0, h1) of kv head g, one after the other: K^T and V are packed once for them.
template <class T>
void forward_heads(const Problem<T>& pr, int64_t b, int64_t g, int64_t h0, int64_t h1, const ForwardOut<T>& out) {
  const int64_t t = pr.t, d = pr.d, tp = pr.tp, dp = pr.dp;
  std::vector<T*> a = thread_scratch<T>().carve(
      {tp * dp, dp * tp, tp * dp, kQueryRows * kKeyCols, kQueryRows * dp, kQueryRows, kQueryRows, dp});
  T *q = a[0], *kt = a[1], *v = a[2], *p = a[3], *acc = a[4], *running_max = a[5], *running_sum = a[6], *u = a[7];
  pack_key_tiles(kt, tp, dp, pr.k.rows(b, g), pr.k.stride, t, d);
  pack_rows(v, tp, dp, pr.v.rows(b, g), pr.v.stride, t, d);
  for (int64_t h = h0; h < h1; ++h) forward_head(pr, b, h, out, q, kt, v, p, acc, running_max, running_sum, u);
}

// Inputs and outputs of the backward pass (compute dtype T): g as HeadRows (O's cotangent as the
// model's permute hands it back, [B, T, H, d] in memory, is read in place), the others contiguous.
template <class T>
struct BackwardIo {
  HeadRows<const T> g;   // dLoss/dO [B, H, T, d]
  const T* s;            // saved S
  const T* lse;          // saved L
  T* dq;                 // [B, H, T, d]
  T* dk;                 // [B, Hkv, T, d]
  T* dv;                 // [B, Hkv, T, d]
  T* dalpha;             // [B, H, T], affine only
  double* dsigma_parts;  // [B, H], sink only: summed over b afterwards, in order
};

template <class T>
void backward_kv_head(const Problem<T>& pr, int64_t b, int64_t g, const BackwardIo<T>& io) {
  const int64_t t = pr.t, d = pr.d, tp = pr.tp, dp = pr.dp;
  std::vector<T*> a = thread_scratch<T>().carve({tp * dp, dp * tp, tp * dp, dp * tp, tp * dp, tp * dp, tp * dp,
                                                 tp * dp, tp * dp, tp, tp * kKeyCols, tp * kKeyCols, dp});
  T *k = a[0], *kt = a[1], *v = a[2], *vt = a[3], *dk = a[4], *dv = a[5], *q = a[6], *ghat = a[7], *dq = a[8];
  T *delta = a[9], *p_strip = a[10], *ds_strip = a[11], *u = a[12];
  const T* k_src = pr.k.rows(b, g);
  const T* v_src = pr.v.rows(b, g);
  pack_rows(k, tp, dp, k_src, pr.k.stride, t, d);
  pack_key_tiles(kt, tp, dp, k_src, pr.k.stride, t, d);
  pack_rows(v, tp, dp, v_src, pr.v.stride, t, d);
  pack_key_tiles(vt, tp, dp, v_src, pr.v.stride, t, d);
  std::fill(dk, dk + tp * dp, T(0));
  std::fill(dv, dv + tp * dp, T(0));

  for (int64_t h = g * pr.group(); h < (g + 1) * pr.group(); ++h) {
    const int64_t row0 = pr.row(b, h);
    const T* g_src = io.g.rows(b, h);
    const T* s_src = io.s + row0 * d;
    const int64_t g_stride = io.g.stride;
    const T* lse = io.lse + row0;
    pack_rows(q, tp, dp, pr.q.rows(b, h), pr.q.stride, t, d, pr.scale);
    pack_rows(ghat, tp, dp, g_src, g_stride, t, d);
    std::fill(delta, delta + tp, T(0));
    for (int64_t i = 0; i < t; ++i) {
      if (pr.affine())
        for (int64_t x = 0; x < d; ++x) ghat[i * dp + x] *= pr.alpha[row0 + i];
      delta[i] = dot(ghat + i * dp, s_src + i * d, d);  // D_i = Ghat_i . S_i
    }
    std::fill(dq, dq + tp * dp, T(0));

    for (int64_t j0 = 0; j0 < t; j0 += kKeyCols) {
      const int64_t tile_keys = round_up(std::min(kKeyCols, t - j0), lanes<T>);
      // Causal: only query tiles holding a row i >= j0 see this key tile. Their P and ds rows go
      // to the strips from i_begin on, zero past the keys each row sees.
      const int64_t i_begin = pr.causal ? j0 / kQueryRows * kQueryRows : 0;
      for (int64_t i0 = i_begin; i0 < t; i0 += kQueryRows) {
        const int64_t m = std::min(kQueryRows, t - i0), mr = round_up(m, kRowGranule);
        // Keys of the tile these rows see (causal: the first one on the diagonal sees fewer).
        const int64_t n = std::min({kKeyCols, t - j0, pr.causal ? i0 + m - j0 : kKeyCols});
        const int64_t nr = round_up(n, lanes<T>);
        T* p = p_strip + (i0 - i_begin) * kKeyCols;
        T* ds = ds_strip + (i0 - i_begin) * kKeyCols;
        mma(p, kKeyCols, q + i0 * dp, dp, kt + j0 * dp, kKeyCols, mr, nr, dp, false);  // s = c Q K^T
        for (int64_t r = 0; r < mr; ++r) {
          T* row = p + r * kKeyCols;
          const int64_t seen = r < m ? visible_keys(pr, i0 + r, j0, n) : 0;
          if (seen > 0)
            exp_visible(row, seen, tile_keys, lse[i0 + r]);  // P = exp(s - L), 0 past `seen`
          else
            std::fill(row, row + tile_keys, T(0));
        }
        mma(ds, kKeyCols, ghat + i0 * dp, dp, vt + j0 * dp, kKeyCols, mr, nr, dp, false);  // dP = Ghat V^T
        for (int64_t r = 0; r < mr; ++r) {
          T* __restrict ds_row = ds + r * kKeyCols;
          const T* __restrict p_row = p + r * kKeyCols;
          const T delta_r = delta[i0 + r];
          for (int64_t c = 0; c < nr; ++c) ds_row[c] = p_row[c] * (ds_row[c] - delta_r);  // ds = P (dP - D)
          std::fill(ds_row + nr, ds_row + tile_keys, T(0));
        }
        mma(dq + i0 * dp, dp, ds, kKeyCols, k + j0 * dp, dp, mr, dp, nr, true);  // dQ += ds K
      }
      const int64_t strip_rows = round_up(t, kRowGranule) - i_begin;
      // dV += P^T Ghat, dK += ds^T (c Q): each one sum over every query, kept in registers.
      mma_at(dv + j0 * dp, dp, p_strip, kKeyCols, ghat + i_begin * dp, dp, tile_keys, dp, strip_rows);
      mma_at(dk + j0 * dp, dp, ds_strip, kKeyCols, q + i_begin * dp, dp, tile_keys, dp, strip_rows);
    }

    T* dq_out = io.dq + row0 * d;
    for (int64_t i = 0; i < t; ++i)
      for (int64_t x = 0; x < d; ++x) dq_out[i * d + x] = pr.scale * dq[i * dp + x];

    if (pr.sink()) {
      double sum = 0;
      for (int64_t i = 0; i < t; ++i) sum += double(std::exp(pr.sigma[h] - lse[i]) * delta[i]);
      io.dsigma_parts[b * pr.heads + h] = -sum;
    }
    if (pr.affine()) {
      // dalpha_i = G_i . S_i - G_i . U_i / N_i, with U_i the prefix sum (causal) or total of v.
      std::fill(u, u + dp, T(0));
      if (!pr.causal)
        for (int64_t j = 0; j < t; ++j)
          for (int64_t x = 0; x < d; ++x) u[x] += v[j * dp + x];
      for (int64_t i = 0; i < t; ++i) {
        if (pr.causal)
          for (int64_t x = 0; x < d; ++x) u[x] += v[i * dp + x];
        const T* gi = g_src + i * g_stride;
        io.dalpha[row0 + i] = dot(gi, s_src + i * d, d) - dot(gi, u, d) / pr.affine_count(i);
      }
      // dV_j += sum over the queries i that see j of beta_i G_i: a suffix sum over i >= j
      // (causal) or the sum over all i. `u` now holds that running sum.
      std::fill(u, u + dp, T(0));
      auto add_beta_g = [&](int64_t i) {
        const T beta = (pr.alpha_ma[h] - pr.alpha[row0 + i]) / pr.affine_count(i);
        for (int64_t x = 0; x < d; ++x) u[x] += beta * g_src[i * g_stride + x];
      };
      if (pr.causal) {
        for (int64_t j = t - 1; j >= 0; --j) {
          add_beta_g(j);
          for (int64_t x = 0; x < d; ++x) dv[j * dp + x] += u[x];
        }
      } else {
        for (int64_t i = 0; i < t; ++i) add_beta_g(i);
        for (int64_t j = 0; j < t; ++j)
          for (int64_t x = 0; x < d; ++x) dv[j * dp + x] += u[x];
      }
    }
  }

  T* dk_out = io.dk + pr.kv_row(b, g) * d;
  T* dv_out = io.dv + pr.kv_row(b, g) * d;
  for (int64_t j = 0; j < t; ++j)
    for (int64_t x = 0; x < d; ++x) {
      dk_out[j * d + x] = dk[j * dp + x];
      dv_out[j * d + x] = dv[j * dp + x];
    }
}

// x in dtype dt with a unit stride along its last dim: x itself when it already is (the kernels
// read q, k and v through their other strides: v, a slice of the fused projection, is never
// copied), else a contiguous copy.
Tensor rows_as(const Tensor& x, DType dt) {
  return x.dtype() == dt && x.strides().back() == 1 ? x : contiguous_as(x, dt);
}

// The core's inputs in the compute dtype (f32 for bf16): q, k and v with a unit stride along d,
// the others contiguous.
struct Inputs {
  bool causal;
  AffineN affine_n;
  Tensor q, k, v, alpha, alpha_ma, sigma;

  Inputs(const AttentionSpec& in, DType dt)
      : causal(in.causal), affine_n(in.affine_n), q(rows_as(in.q, dt)), k(rows_as(in.k, dt)), v(rows_as(in.v, dt)),
        alpha(contiguous_as(in.alpha, dt)), alpha_ma(contiguous_as(in.alpha_ma, dt)),
        sigma(contiguous_as(in.sigma, dt)) {}

  template <class T>
  Problem<T> problem() const {
    return Problem<T>(causal, affine_n, q, k, v, alpha, alpha_ma, sigma);
  }
};

// o, s and lse in the compute dtype T.
template <class T>
AttentionForward forward(const Inputs& in) {
  const Problem<T> pr = in.problem<T>();
  const DType dt = dtype_v<T>;
  AttentionForward out;
  out.s = Tensor::empty(in.q.shape(), dt);
  out.lse = Tensor::empty({pr.batch, pr.heads, pr.t}, dt);
  out.o = pr.affine() ? Tensor::empty(in.q.shape(), dt) : out.s;
  const ForwardOut<T> io{out.s.data<T>(), out.lse.data<T>(), out.o.data<T>()};
  // One task per kv head and batch row (its query heads share the packed K and V: with the
  // teacher's 3 query heads per kv head, [8, 6, 128, 32] took 336 us instead of 365 on 2 threads),
  // unless that leaves fewer than 4 tasks a thread: then one per query head.
  if (pr.group() > 1 && pr.batch * pr.kv_heads >= 4 * worker_threads()) {
    cpu::parallel_for(pr.batch * pr.kv_heads, 1, [&](int64_t begin, int64_t end) {
      for (int64_t bg = begin; bg < end; ++bg) {
        const int64_t g = bg % pr.kv_heads;
        forward_heads(pr, bg / pr.kv_heads, g, g * pr.group(), (g + 1) * pr.group(), io);
      }
    });
  } else {
    cpu::parallel_for(pr.batch * pr.heads, 1, [&](int64_t begin, int64_t end) {
      for (int64_t bh = begin; bh < end; ++bh) {
        const int64_t h = bh % pr.heads;
        forward_heads(pr, bh / pr.heads, h / pr.group(), h, h + 1, io);
      }
    });
  }
  return out;
}

// Cotangents for q, k, v, then alpha and sigma where defined, in the compute dtype.
template <class T>
std::vector<Tensor> backward(const Inputs& in, const AttentionForward& saved, const Tensor& g) {
  const Problem<T> pr = in.problem<T>();
  const DType dt = dtype_v<T>;
  Tensor dq = Tensor::empty(in.q.shape(), dt), dk = Tensor::empty(in.k.shape(), dt),
         dv = Tensor::empty(in.v.shape(), dt);
  Tensor dalpha = pr.affine() ? Tensor::empty(in.alpha.shape(), dt) : Tensor();
  std::vector<double> dsigma_parts(size_t(pr.sink() ? pr.batch * pr.heads : 0));
  const BackwardIo<T> io{{g.data<T>(), g}, saved.s.data<T>(), saved.lse.data<T>(), dq.data<T>(), dk.data<T>(),
                         dv.data<T>(), pr.affine() ? dalpha.data<T>() : nullptr, dsigma_parts.data()};
  cpu::parallel_for(pr.batch * pr.kv_heads, 1, [&](int64_t begin, int64_t end) {
    for (int64_t bg = begin; bg < end; ++bg) backward_kv_head(pr, bg / pr.kv_heads, bg % pr.kv_heads, io);
  });
  std::vector<Tensor> grads{dq, dk, dv};
  if (pr.affine()) grads.push_back(dalpha);
  if (pr.sink()) {
    Tensor dsigma = Tensor::empty({pr.heads}, dt);
    for (int64_t h = 0; h < pr.heads; ++h) {
      double sum = 0;
      for (int64_t b = 0; b < pr.batch; ++b) sum += dsigma_parts[size_t(b * pr.heads + h)];
      dsigma.data<T>()[h] = T(sum);
    }
    grads.push_back(dsigma);
  }
  return grads;
}

// The compute dtype of a core: f32 for bf16, else q's own.
DType compute_dtype(DType dtype) { return dtype == DType::bf16 ? DType::f32 : dtype; }

}  // namespace

AttentionForward CpuBackend::attention_forward(const AttentionSpec& core) {
  const DType dt = core.q.dtype(), ct = compute_dtype(dt);
  const Inputs inputs(core, ct);
  AttentionForward out = ct == DType::f64 ? forward<double>(inputs) : forward<float>(inputs);
  // O in q's dtype; S and L stay in the compute dtype for the backward.
  if (dt != ct) out.o = contiguous_as(out.o, dt);
  return out;
}

AttentionGrads CpuBackend::attention_backward(const AttentionSpec& core, const AttentionForward& saved,
                                              const Tensor& d_out) {
  const DType dt = core.q.dtype(), ct = compute_dtype(dt);
  const Inputs inputs(core, ct);
  const Tensor g = rows_as(d_out, ct);
  std::vector<Tensor> grads =
      ct == DType::f64 ? backward<double>(inputs, saved, g) : backward<float>(inputs, saved, g);
  for (Tensor& x : grads) x = contiguous_as(x, dt);
  AttentionGrads out{grads[0], grads[1], grads[2], Tensor(), Tensor()};
  size_t at = 3;
  if (core.alpha.defined()) out.dalpha = grads[at++];
  if (core.sigma.defined()) out.dsigma = grads[at++];
  return out;
}

}  // namespace cotan::cpu
