// Fused attention kernels (docs/attention.md): softmax, sink and affine, forward and backward, flash
// style: a block owns a tile of kTileRows rows (queries, or keys in dK/dV) and streams the other
// side through shared memory in tiles of kTileCols; nothing T x T is ever stored.
//
// Thread layout (kThreads per block): thread tid owns row tid / kLanesPerRow of the block's tile
// and the head-dim columns x = tid % kLanesPerRow + c * kLanesPerRow, c < kColsPerThread, so
// d <= kMaxHeadDim. Scores of a tile pair are spread kScoresPerThread to a thread.
//
// Forward (one block per (query tile, head, batch row)): online softmax over key tiles (running
// max m_i and sum l_i, the accumulator rescaled when m_i grows), causal key tiles past the
// diagonal skipped; the sink adds exp(sigma_h) to the denominator; affine accumulates
// U_i = sum of the visible v_j in the same pass and writes O = alpha S + beta U.
// Saves S [B, H, T, d] and L [B, H, T] (f32) for the backward.
//
// Backward, deterministic (no atomics), P recomputed from L:
//   dq kernel   (query tile, head, b):   D_i = alpha_i G_i . S_i (saved for the dkdv kernel),
//               dQ_i = c sum_j ds_ij k_j, dalpha_i = G_i . S_i - G_i . U_i / N_i, and the sink's
//               per-row terms -exp(sigma_h - L_i) D_i
//   dkdv kernel (key tile, kv head, b):  loops over the group's query heads and their query
//               tiles in order: dV_j = sum_i A_ij G_i with A_ij = alpha_i P_ij + beta_i (visible),
//               dK_j = sum_i ds_ij (c q_i)
//   dsigma kernel: dsigma_h = sum over b, i of the per-row terms, in order, in double
// with dP_ij = alpha_i G_i . v_j and ds_ij = P_ij (dP_ij - D_i).
#pragma once

#include "cuda/kernels/common.cuh"
#include "tensor/core_kind.hpp"

namespace cotan::COTAN_KERNELS {

constexpr int kAttnTileRows = 16;
constexpr int kAttnTileCols = 16;
constexpr int kAttnMaxHeadDim = 128;
constexpr int kAttnThreads = 128;
constexpr int kAttnLanesPerRow = kAttnThreads / kAttnTileRows;             // 8
constexpr int kAttnColsPerThread = kAttnMaxHeadDim / kAttnLanesPerRow;     // 16
constexpr int kAttnScoresPerThread = kAttnTileRows * kAttnTileCols / kAttnThreads;  // 2
constexpr int kAttnPitch = kAttnMaxHeadDim + 1;  // shared row pitch: rows start in different banks
static_assert(kAttnTileRows == kAttnTileCols, "the dkdv kernel starts causal query tiles at its key tile");
static_assert(kAttnScoresPerThread * kAttnThreads == kAttnTileRows * kAttnTileCols);

using AttnTile = float[kAttnTileRows][kAttnPitch];

// The problem, contiguous: q [B, H, T, d], k and v [B, Hkv, T, d], alpha [B, H, T],
// alpha_ma and sigma [H]. Plain data: passed to kernels by value.
template <class T>
struct AttentionArgs {
  CoreKind kind;
  bool causal;
  bool full_count;  // AffineN::full: N_i = T
  int batch, heads, kv_heads, t, d;
  float scale;  // c = 1 / sqrt(d)
  const T *q, *k, *v, *alpha, *alpha_ma, *sigma;

  SIMT_DEVICE int visible_end(int i) const { return causal ? i + 1 : t; }
  SIMT_DEVICE bool visible(int i, int j) const { return i < t && j < t && j < visible_end(i); }
  SIMT_DEVICE float affine_count(int i) const { return float(full_count ? t : visible_end(i)); }
  SIMT_DEVICE int64_t q_row(int b, int h) const { return (int64_t(b) * heads + h) * t; }
  SIMT_DEVICE int64_t kv_row(int b, int g) const { return (int64_t(b) * kv_heads + g) * t; }
};

// dst[r][x] = scale * src row (row0 + r), x < d; rows past t are zero. Every thread takes part.
template <class T>
SIMT_DEVICE void load_tile(AttnTile& dst, const T* src, int row0, int t, int d, float scale = 1.0f) {
  for (int e = int(simt::linear_thread_idx()); e < kAttnTileRows * d; e += kAttnThreads) {
    const int r = e / d, x = e % d;
    dst[r][x] = row0 + r < t ? scale * load(src + int64_t(row0 + r) * d + x) : 0.0f;
  }
}

SIMT_DEVICE float row_dot(const float* a, const float* b, int d) {
  float sum = 0;
  for (int x = 0; x < d; ++x) sum += a[x] * b[x];
  return sum;
}

// One step of the online softmax for a row of kAttnTileCols scores (-inf where not visible):
// the scores become exp(s - m) for the new running max m, `rescale` = exp(m_old - m) is the
// factor for what was accumulated before, and `sum` gets the tile's mass.
SIMT_DEVICE void online_softmax_step(float* scores, float& running_max, float& running_sum, float& rescale) {
  float tile_max = -INFINITY;
  for (int j = 0; j < kAttnTileCols; ++j) tile_max = scores[j] > tile_max ? scores[j] : tile_max;
  if (tile_max == -INFINITY) {  // no visible key in this tile
    for (int j = 0; j < kAttnTileCols; ++j) scores[j] = 0;
    rescale = 1;
    return;
  }
  const float top = running_max > tile_max ? running_max : tile_max;
  rescale = math::exp(running_max - top);  // 0 on the first visible tile (running max -inf)
  float tile_sum = 0;
  for (int j = 0; j < kAttnTileCols; ++j) {
    scores[j] = math::exp(scores[j] - top);
    tile_sum += scores[j];
  }
  running_max = top;
  running_sum = running_sum * rescale + tile_sum;
}

// Affine: alpha_i and beta_i = (alpha_ma_h - alpha_i) / N_i of query i of head h, whose alpha
// is at `row`.
struct AffineCoefficients {
  float alpha = 0, beta = 0;
};

template <class T>
SIMT_DEVICE AffineCoefficients affine_coefficients(const AttentionArgs<T>& a, int64_t row, int h, int i) {
  const float alpha = load(a.alpha + row);
  return {alpha, (load(a.alpha_ma + h) - alpha) / a.affine_count(i)};
}

// The end of a row's online softmax with running max m and sum l: L = log of the row's total mass
// (the sink's exp(sigma_h) included) and the factor that normalises the accumulated P V.
struct RowEnd {
  float lse, inv;
};

template <class T>
SIMT_DEVICE RowEnd finish_row(const AttentionArgs<T>& a, int h, float m, float l) {
  if (a.kind != CoreKind::sink) return {m + math::log(l), 1.0f / l};
  // L = log(sum_j exp(s_ij) + exp(sigma)), shifted by the larger of the two maxima.
  const float sigma = load(a.sigma + h), top = m > sigma ? m : sigma;
  const float lse = top + math::log(l * math::exp(m - top) + math::exp(sigma - top));
  return {lse, math::exp(m - lse)};
}

// What the dkdv kernels read per query: L_i, D_i, and alpha_i, beta_i (affine; 1 and 0
// otherwise). Queries past t get neutral values (they see no key).
struct QueryTerms {
  float lse = 0, delta = 0, alpha = 1, beta = 0;
};

template <class T>
SIMT_DEVICE QueryTerms query_terms(const AttentionArgs<T>& a, int64_t row0, int h, int qi, const float* lse_in,
                                   const float* delta_in) {
  QueryTerms q;
  if (qi >= a.t) return q;
  q.lse = lse_in[row0 + qi];
  q.delta = delta_in[row0 + qi];
  if (a.kind == CoreKind::affine) {
    const AffineCoefficients c = affine_coefficients(a, row0 + qi, h, qi);
    q.alpha = c.alpha;
    q.beta = c.beta;
  }
  return q;
}

// ---- forward ----

// Grid (query tiles, H, B). Writes s, o (affine only; o == s otherwise) and lse.
template <class T>
SIMT_GLOBAL void attention_fwd_kernel(AttentionArgs<T> a, T* s_out, T* o_out, float* lse_out) {
  SIMT_SHARED(float, q_tile, [kAttnTileRows][kAttnPitch]);
  SIMT_SHARED(float, k_tile, [kAttnTileCols][kAttnPitch]);
  SIMT_SHARED(float, v_tile, [kAttnTileCols][kAttnPitch]);
  SIMT_SHARED(float, p_tile, [kAttnTileRows][kAttnTileCols]);
  SIMT_SHARED(float, row_max, [kAttnTileRows]);
  SIMT_SHARED(float, row_sum, [kAttnTileRows]);
  SIMT_SHARED(float, row_rescale, [kAttnTileRows]);
  const int tid = int(simt::linear_thread_idx());
  const int i0 = int(simt::block_idx().x) * kAttnTileRows, h = int(simt::block_idx().y), b = int(simt::block_idx().z);
  const int g = h / (a.heads / a.kv_heads), t = a.t, d = a.d;
  const int r = tid / kAttnLanesPerRow, lane = tid % kAttnLanesPerRow, i = i0 + r;
  const T* k = a.k + a.kv_row(b, g) * d;
  const T* v = a.v + a.kv_row(b, g) * d;

  load_tile(q_tile, a.q + a.q_row(b, h) * d, i0, t, d, a.scale);  // c q
  if (tid < kAttnTileRows) {
    row_max[tid] = -INFINITY;
    row_sum[tid] = 0;
  }
  float acc[kAttnColsPerThread] = {}, u[kAttnColsPerThread] = {};
  const int key_end = a.causal ? (i0 + kAttnTileRows < t ? i0 + kAttnTileRows : t) : t;
  for (int j0 = 0; j0 < key_end; j0 += kAttnTileCols) {
    simt::sync_threads();  // the previous tile is read
    load_tile(k_tile, k, j0, t, d);
    load_tile(v_tile, v, j0, t, d);
    simt::sync_threads();
    for (int e = 0; e < kAttnScoresPerThread; ++e) {
      const int idx = tid + e * kAttnThreads, sr = idx / kAttnTileCols, sj = idx % kAttnTileCols;
      p_tile[sr][sj] = a.visible(i0 + sr, j0 + sj) ? row_dot(q_tile[sr], k_tile[sj], d) : -INFINITY;
    }
    simt::sync_threads();
    if (tid < kAttnTileRows) online_softmax_step(p_tile[tid], row_max[tid], row_sum[tid], row_rescale[tid]);
    simt::sync_threads();
    const float rescale = row_rescale[r];
    for (int c = 0; c < kAttnColsPerThread; ++c) {
      const int x = lane + c * kAttnLanesPerRow;
      if (x >= d) break;
      float pv = 0;
      for (int j = 0; j < kAttnTileCols; ++j) pv += p_tile[r][j] * v_tile[j][x];
      acc[c] = acc[c] * rescale + pv;
      if (a.kind == CoreKind::affine)
        for (int j = 0; j < kAttnTileCols; ++j)
          if (a.visible(i, j0 + j)) u[c] += v_tile[j][x];
    }
  }
  if (i >= t) return;

  const int64_t row = a.q_row(b, h) + i;
  const RowEnd end = finish_row(a, h, row_max[r], row_sum[r]);
  if (lane == 0) lse_out[row] = end.lse;
  const bool affine = a.kind == CoreKind::affine;
  const AffineCoefficients ab = affine ? affine_coefficients(a, row, h, i) : AffineCoefficients{};
  for (int c = 0; c < kAttnColsPerThread; ++c) {
    const int x = lane + c * kAttnLanesPerRow;
    if (x >= d) break;
    const float s = acc[c] * end.inv;
    s_out[row * d + x] = convert_to<T>(s);
    if (affine) o_out[row * d + x] = convert_to<T>(ab.alpha * s + ab.beta * u[c]);
  }
}

// ---- backward ----

// Grid (query tiles, H, B). g_in = dLoss/dO. Writes dq, delta [B, H, T] (D_i), dalpha (affine)
// and sigma_terms [B, H, T] (sink: -exp(sigma_h - L_i) D_i).
template <class T>
SIMT_GLOBAL void attention_bwd_dq_kernel(AttentionArgs<T> a, const T* g_in, const T* s_in, const float* lse_in,
                                         T* dq_out, float* delta_out, T* dalpha_out, float* sigma_terms) {
  SIMT_SHARED(float, q_tile, [kAttnTileRows][kAttnPitch]);
  SIMT_SHARED(float, g_tile, [kAttnTileRows][kAttnPitch]);
  SIMT_SHARED(float, k_tile, [kAttnTileCols][kAttnPitch]);
  SIMT_SHARED(float, v_tile, [kAttnTileCols][kAttnPitch]);
  SIMT_SHARED(float, ds_tile, [kAttnTileRows][kAttnTileCols]);
  SIMT_SHARED(float, row_lse, [kAttnTileRows]);
  SIMT_SHARED(float, row_delta, [kAttnTileRows]);
  SIMT_SHARED(float, row_alpha, [kAttnTileRows]);
  SIMT_SHARED(float, row_gs, [kAttnTileRows]);
  SIMT_SHARED(float, gu_parts, [kAttnTileRows][kAttnLanesPerRow]);
  const int tid = int(simt::linear_thread_idx());
  const int i0 = int(simt::block_idx().x) * kAttnTileRows, h = int(simt::block_idx().y), b = int(simt::block_idx().z);
  const int g = h / (a.heads / a.kv_heads), t = a.t, d = a.d;
  const int r = tid / kAttnLanesPerRow, lane = tid % kAttnLanesPerRow, i = i0 + r;
  const int64_t row0 = a.q_row(b, h);
  const T* k = a.k + a.kv_row(b, g) * d;
  const T* v = a.v + a.kv_row(b, g) * d;

  load_tile(q_tile, a.q + row0 * d, i0, t, d, a.scale);  // c q
  load_tile(g_tile, g_in + row0 * d, i0, t, d);
  simt::sync_threads();
  if (tid < kAttnTileRows) {
    const int qi = i0 + tid;
    float lse = 0, alpha = 0, gs = 0;
    if (qi < t) {
      const T* s_row = s_in + (row0 + qi) * d;
      for (int x = 0; x < d; ++x) gs += g_tile[tid][x] * load(s_row + x);
      lse = lse_in[row0 + qi];
      alpha = a.kind == CoreKind::affine ? load(a.alpha + row0 + qi) : 1.0f;
      delta_out[row0 + qi] = alpha * gs;
      if (a.kind == CoreKind::sink)
        sigma_terms[row0 + qi] = -math::exp(load(a.sigma + h) - lse) * (alpha * gs);
    }
    row_lse[tid] = lse;
    row_alpha[tid] = alpha;
    row_gs[tid] = gs;
    row_delta[tid] = alpha * gs;
  }

  float dq[kAttnColsPerThread] = {}, u[kAttnColsPerThread] = {};
  const int key_end = a.causal ? (i0 + kAttnTileRows < t ? i0 + kAttnTileRows : t) : t;
  for (int j0 = 0; j0 < key_end; j0 += kAttnTileCols) {
    simt::sync_threads();
    load_tile(k_tile, k, j0, t, d);
    load_tile(v_tile, v, j0, t, d);
    simt::sync_threads();
    for (int e = 0; e < kAttnScoresPerThread; ++e) {
      const int idx = tid + e * kAttnThreads, sr = idx / kAttnTileCols, sj = idx % kAttnTileCols;
      float ds = 0;
      if (a.visible(i0 + sr, j0 + sj)) {
        const float p = math::exp(row_dot(q_tile[sr], k_tile[sj], d) - row_lse[sr]);
        const float dp = row_alpha[sr] * row_dot(g_tile[sr], v_tile[sj], d);
        ds = p * (dp - row_delta[sr]);
      }
      ds_tile[sr][sj] = ds;
    }
    simt::sync_threads();
    for (int c = 0; c < kAttnColsPerThread; ++c) {
      const int x = lane + c * kAttnLanesPerRow;
      if (x >= d) break;
      for (int j = 0; j < kAttnTileCols; ++j) dq[c] += ds_tile[r][j] * k_tile[j][x];
      if (a.kind == CoreKind::affine)
        for (int j = 0; j < kAttnTileCols; ++j)
          if (a.visible(i, j0 + j)) u[c] += v_tile[j][x];
    }
  }

  float gu = 0;  // this thread's share of G_i . U_i
  for (int c = 0; c < kAttnColsPerThread; ++c) {
    const int x = lane + c * kAttnLanesPerRow;
    if (x >= d) break;
    if (i < t) dq_out[(row0 + i) * d + x] = convert_to<T>(a.scale * dq[c]);
    gu += g_tile[r][x] * u[c];
  }
  if (a.kind != CoreKind::affine) return;  // uniform over the block
  gu_parts[r][lane] = gu;
  simt::sync_threads();
  if (lane == 0 && i < t) {
    float total = 0;
    for (int p = 0; p < kAttnLanesPerRow; ++p) total += gu_parts[r][p];
    dalpha_out[row0 + i] = convert_to<T>(row_gs[r] - total / a.affine_count(i));
  }
}

// Grid (key tiles, Hkv, B). Reads delta from the dq kernel; writes dk and dv.
template <class T>
SIMT_GLOBAL void attention_bwd_dkdv_kernel(AttentionArgs<T> a, const T* g_in, const float* lse_in,
                                           const float* delta_in, T* dk_out, T* dv_out) {
  SIMT_SHARED(float, k_tile, [kAttnTileRows][kAttnPitch]);
  SIMT_SHARED(float, v_tile, [kAttnTileRows][kAttnPitch]);
  SIMT_SHARED(float, q_tile, [kAttnTileCols][kAttnPitch]);
  SIMT_SHARED(float, g_tile, [kAttnTileCols][kAttnPitch]);
  SIMT_SHARED(float, a_tile, [kAttnTileCols][kAttnTileRows]);   // A_ij, [query][key]
  SIMT_SHARED(float, ds_tile, [kAttnTileCols][kAttnTileRows]);  // ds_ij, [query][key]
  SIMT_SHARED(float, row_lse, [kAttnTileCols]);
  SIMT_SHARED(float, row_delta, [kAttnTileCols]);
  SIMT_SHARED(float, row_alpha, [kAttnTileCols]);
  SIMT_SHARED(float, row_beta, [kAttnTileCols]);
  const int tid = int(simt::linear_thread_idx());
  const int j0 = int(simt::block_idx().x) * kAttnTileRows, g = int(simt::block_idx().y), b = int(simt::block_idx().z);
  const int group = a.heads / a.kv_heads, t = a.t, d = a.d;
  const int r = tid / kAttnLanesPerRow, lane = tid % kAttnLanesPerRow, j = j0 + r;
  const int64_t kv0 = a.kv_row(b, g);

  load_tile(k_tile, a.k + kv0 * d, j0, t, d);
  load_tile(v_tile, a.v + kv0 * d, j0, t, d);
  float dk[kAttnColsPerThread] = {}, dv[kAttnColsPerThread] = {};
  for (int h = g * group; h < (g + 1) * group; ++h) {
    const int64_t row0 = a.q_row(b, h);
    // Causal: queries before j0 see none of these keys.
    for (int i0 = a.causal ? j0 : 0; i0 < t; i0 += kAttnTileCols) {
      simt::sync_threads();
      load_tile(q_tile, a.q + row0 * d, i0, t, d, a.scale);  // c q
      load_tile(g_tile, g_in + row0 * d, i0, t, d);
      if (tid < kAttnTileCols) {
        const QueryTerms q = query_terms(a, row0, h, i0 + tid, lse_in, delta_in);
        row_lse[tid] = q.lse;
        row_delta[tid] = q.delta;
        row_alpha[tid] = q.alpha;
        row_beta[tid] = q.beta;
      }
      simt::sync_threads();
      for (int e = 0; e < kAttnScoresPerThread; ++e) {
        const int idx = tid + e * kAttnThreads, sq = idx / kAttnTileRows, sk = idx % kAttnTileRows;
        float weight = 0, ds = 0;
        if (a.visible(i0 + sq, j0 + sk)) {
          const float p = math::exp(row_dot(q_tile[sq], k_tile[sk], d) - row_lse[sq]);
          const float dp = row_alpha[sq] * row_dot(g_tile[sq], v_tile[sk], d);
          ds = p * (dp - row_delta[sq]);
          weight = row_alpha[sq] * p + row_beta[sq];
        }
        a_tile[sq][sk] = weight;
        ds_tile[sq][sk] = ds;
      }
      simt::sync_threads();
      for (int c = 0; c < kAttnColsPerThread; ++c) {
        const int x = lane + c * kAttnLanesPerRow;
        if (x >= d) break;
        for (int qi = 0; qi < kAttnTileCols; ++qi) {
          dv[c] += a_tile[qi][r] * g_tile[qi][x];
          dk[c] += ds_tile[qi][r] * q_tile[qi][x];
        }
      }
    }
  }
  if (j >= t) return;
  for (int c = 0; c < kAttnColsPerThread; ++c) {
    const int x = lane + c * kAttnLanesPerRow;
    if (x >= d) break;
    dk_out[(kv0 + j) * d + x] = convert_to<T>(dk[c]);
    dv_out[(kv0 + j) * d + x] = convert_to<T>(dv[c]);
  }
}

// One block: dsigma_h = sum over b, i of the per-row sink terms, in a fixed order.
template <class T>
SIMT_GLOBAL void attention_bwd_dsigma_kernel(int batch, int heads, int t, const float* sigma_terms, T* dsigma) {
  for (int h = int(simt::linear_thread_idx()); h < heads; h += int(simt::block_dim().x)) {
    double sum = 0;
    for (int b = 0; b < batch; ++b)
      for (int i = 0; i < t; ++i) sum += double(sigma_terms[(int64_t(b) * heads + h) * t + i]);
    dsigma[h] = convert_to<T>(float(sum));
  }
}

}  // namespace cotan::COTAN_KERNELS
