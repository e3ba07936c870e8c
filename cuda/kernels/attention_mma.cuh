// Tensor-core versions of the fused attention kernels of attention.cuh (docs/attention.md) for bf16
// and head dims 64 and 128: every matrix product is mma.sync m16n8k16 (bf16 operands, f32
// accumulators). They take the same AttentionArgs and write the same tensors (s, o and lse f32
// forward; dq, delta, dalpha and the sink's per-row terms; dk and dv), so either backward runs
// on either forward's saved s and lse, and the dsigma kernel of attention.cuh finishes the sink.
//
// Layout: 4 warps per block; a warp owns 16 rows of the block's 64-row tile (queries in the
// forward and dq kernels, keys in dkdv), its own operands kept in registers as mma A fragments
// (loaded from global memory), while the other side streams through shared memory, 64 keys per
// step in the forward and 32 keys or queries in the backward, as bf16 rows of D + kMmaAttnPad
// (16-byte aligned rows, the 8 rows of one ldmatrix in different banks). No kernel spills at
// d = 128 on sm_80 or sm_90: the dkdv kernel keeps V in registers but reads K's fragments from
// a shared tile at each step, the dq kernel needs no U (below).
// Scores live in the accumulator layout (AccTile): lane l holds rows l / 4 and l / 4 + 8, so a
// row's max and sum are a shuffle across its quad of 4 lanes, and a tile of probabilities
// becomes the A operand of the next product without leaving registers (to_a_fragments).
//
//   forward      (query tile, h, b): S = Q K^T (K by ldmatrix), online softmax on S scaled by
//                c, O += P V (V by ldmatrix.trans) with P rounded to bf16 for the product but
//                summed in f32 (L as exact as the SIMT kernel's: the backward and dsigma read
//                it); affine: U += M V, M the 0/1 visibility (exact in bf16).
//   backward dq  (query tile, h, b): S = Q K^T and G V^T, ds = P (alpha G V^T - D) in f32,
//                dQ += dS K; affine: G_i . U_i for dalpha is the sum of the visible (G V^T)_ij.
//   backward dkdv (key tile, kv head, b), over the group's heads and query tiles in order:
//                S^T = K Q^T, dP^T = V G^T, dV += A^T G, dK += dS^T Q (c applied once at
//                the end; the product uses q itself, exact in bf16).
// The mma instructions need sm_80: launch only there (attention.cu checks the device).
#pragma once

#include <cstdint>
#include <cstring>

#include "cuda/kernels/attention.cuh"

namespace cotan::COTAN_KERNELS {

constexpr int kMmaAttnRows = 64;      // queries (forward, dq) or keys (dkdv) per block
constexpr int kMmaAttnThreads = 128;  // 4 warps x 16 rows
constexpr int kMmaAttnFwdCols = 64;   // keys per step of the forward
constexpr int kMmaAttnBwdCols = 32;   // keys (dq) or queries (dkdv) per step of the backward
constexpr int kMmaAttnPad = 8;        // bf16 per shared row beyond d
static_assert(kMmaAttnRows % kMmaAttnBwdCols == 0, "dkdv starts causal query steps at its key tile");

// Loops over fragments unroll fully, so that the fragment arrays stay in registers.
#if defined(__CUDACC__)
#define COTAN_UNROLL _Pragma("unroll")
#else
#define COTAN_UNROLL
#endif

// Whether the tensor-core kernels take head dim d.
SIMT_HOST_DEVICE constexpr bool mma_head_dim(int d) { return d == 64 || d == 128; }

// A warp's 16 x N f32 tile in the mma accumulator layout: f[n][e] is element
// (l / 4 + 8 (e / 2), 8 n + 2 (l % 4) + e % 2) for lane l.
template <int N>
struct AccTile {
  float f[N / 8][4] = {};
  static SIMT_DEVICE int row(int e, unsigned lane) { return int(lane >> 2) + 8 * (e >> 1); }
  static SIMT_DEVICE int col(int n, int e, unsigned lane) { return 8 * n + 2 * int(lane & 3) + (e & 1); }
};

// A 16 x K bf16 operand in the mma A-fragment layout: a[kk] is the k16 slice kk.
template <int K>
using AFrags = uint32_t[K / 16][4];

// Shared rows of D bf16 (as bits) plus padding.
template <int D>
using MmaRows = uint16_t[D + kMmaAttnPad];

SIMT_DEVICE float quad_max(float v) {
  v = fmaxf(v, simt::shfl_xor(0xffffffffu, v, 1));
  return fmaxf(v, simt::shfl_xor(0xffffffffu, v, 2));
}
SIMT_DEVICE float quad_sum(float v) {
  v += simt::shfl_xor(0xffffffffu, v, 1);
  return v + simt::shfl_xor(0xffffffffu, v, 2);
}

SIMT_DEVICE uint32_t bf16_pair_bits(const bf16* p) { return uint32_t(p[0].bits) | (uint32_t(p[1].bits) << 16); }

// A fragments of the 16 x D rows row0 .. row0 + 15 of src [rows, D] (row-major); rows past
// `rows` are zero.
template <int D>
SIMT_DEVICE void load_a_frags(AFrags<D>& a, const bf16* src, int row0, int rows, unsigned lane) {
  const int g = int(lane >> 2), t2 = 2 * int(lane & 3);
  COTAN_UNROLL
  for (int kk = 0; kk < D / 16; ++kk)
    for (int q = 0; q < 4; ++q) {
      const int r = row0 + g + 8 * (q & 1), x = 16 * kk + t2 + 8 * (q >> 1);
      a[kk][q] = r < rows ? bf16_pair_bits(src + int64_t(r) * D + x) : 0u;
    }
}

// A fragments of the 16 x K bf16 rows in shared memory (ldmatrix: lane l names row l % 16,
// columns 8 (l / 16) of each k16 slice, the four 8 x 8 matrices in the order a[kk] takes them).
template <int K>
SIMT_DEVICE void load_a_frags(AFrags<K>& a, const MmaRows<K>* rows, unsigned lane) {
  COTAN_UNROLL
  for (int kk = 0; kk < K / 16; ++kk) simt::ldmatrix_x4(a[kk], &rows[lane & 15][16 * kk + 8 * int(lane >> 4)]);
}

// The accumulator tile as bf16 A fragments (the n8 tiles 2 kk and 2 kk + 1 make slice kk).
template <int N>
SIMT_DEVICE void to_a_fragments(AFrags<N>& a, const AccTile<N>& c) {
  COTAN_UNROLL
  for (int kk = 0; kk < N / 16; ++kk) {
    const float(&lo)[4] = c.f[2 * kk];
    const float(&hi)[4] = c.f[2 * kk + 1];
    a[kk][0] = simt::pack_bf16x2(lo[0], lo[1]);
    a[kk][1] = simt::pack_bf16x2(lo[2], lo[3]);
    a[kk][2] = simt::pack_bf16x2(hi[0], hi[1]);
    a[kk][3] = simt::pack_bf16x2(hi[2], hi[3]);
  }
}

// dst[r] = row row0 + r of src [rows, D] for r < R, zero past `rows`; every thread takes part.
// 16-byte pieces when src allows (rows of 64 or 128 bf16 keep every piece aligned).
template <int R, int D>
SIMT_DEVICE void stage_rows(MmaRows<D>* dst, const bf16* src, int row0, int rows) {
  struct alignas(16) Piece {
    uint32_t w[4];
  };
  constexpr int kPerRow = D / 8;
  const int tid = int(simt::linear_thread_idx());
  if (reinterpret_cast<uintptr_t>(src) % 16 == 0) {
    for (int e = tid; e < R * kPerRow; e += kMmaAttnThreads) {
      const int r = e / kPerRow, x = 8 * (e % kPerRow);
      Piece v{};
#if COTAN_SIMT_EMULATED  // the host compiler's aliasing rules
      if (row0 + r < rows) std::memcpy(&v, src + int64_t(row0 + r) * D + x, sizeof v);
      std::memcpy(&dst[r][x], &v, sizeof v);
#else
      if (row0 + r < rows) v = *reinterpret_cast<const Piece*>(src + int64_t(row0 + r) * D + x);
      *reinterpret_cast<Piece*>(&dst[r][x]) = v;
#endif
    }
  } else {
    for (int e = tid; e < R * D; e += kMmaAttnThreads) {
      const int r = e / D, x = e % D;
      dst[r][x] = row0 + r < rows ? src[int64_t(row0 + r) * D + x].bits : uint16_t(0);
    }
  }
}

// c += A B^T: A 16 x K in registers, B N x K bf16 rows in shared memory (non-transposed
// ldmatrix: rows of B are the mma's columns). One ldmatrix_x4 gives two n8 tiles' fragments.
template <int K, int N>
SIMT_DEVICE void mma_abt(AccTile<N>& c, const AFrags<K>& a, const MmaRows<K>* b, unsigned lane) {
  const int row = int(lane & 7) + 8 * int(lane >> 4), col = 8 * int((lane >> 3) & 1);
  COTAN_UNROLL
  for (int n = 0; n < N / 8; n += 2)
    for (int kk = 0; kk < K / 16; ++kk) {
      uint32_t r[4];
      simt::ldmatrix_x4(r, &b[8 * n + row][16 * kk + col]);
      const uint32_t b0[2] = {r[0], r[1]}, b1[2] = {r[2], r[3]};
      simt::mma_m16n8k16_bf16(c.f[n], a[kk], b0, c.f[n]);
      simt::mma_m16n8k16_bf16(c.f[n + 1], a[kk], b1, c.f[n + 1]);
    }
}

// c += A B: A 16 x K in registers, B K x N bf16 rows in shared memory (transposed ldmatrix).
template <int K, int N>
SIMT_DEVICE void mma_ab(AccTile<N>& c, const AFrags<K>& a, const MmaRows<N>* b, unsigned lane) {
  const int row = int(lane & 15), col = 8 * int(lane >> 4);
  COTAN_UNROLL
  for (int n = 0; n < N / 8; n += 2)
    for (int kk = 0; kk < K / 16; ++kk) {
      uint32_t r[4];
      simt::ldmatrix_x4_trans(r, &b[16 * kk + row][8 * n + col]);
      const uint32_t b0[2] = {r[0], r[1]}, b1[2] = {r[2], r[3]};
      simt::mma_m16n8k16_bf16(c.f[n], a[kk], b0, c.f[n]);
      simt::mma_m16n8k16_bf16(c.f[n + 1], a[kk], b1, c.f[n + 1]);
    }
}

// The 0/1 visibility of a warp's 16 queries from i0 and N keys from j0, as A fragments.
template <int N>
SIMT_DEVICE void visibility_frags(AFrags<N>& m, const AttentionArgs<bf16>& a, int i0, int j0, unsigned lane) {
  AccTile<N> ones;
  COTAN_UNROLL
  for (int n = 0; n < N / 8; ++n)
    for (int e = 0; e < 4; ++e)
      ones.f[n][e] = a.visible(i0 + AccTile<N>::row(e, lane), j0 + AccTile<N>::col(n, e, lane)) ? 1.0f : 0.0f;
  to_a_fragments(m, ones);
}

// ---- forward ----

// Grid (T / kMmaAttnRows rounded up, H, B). Writes what attention_fwd_kernel writes.
template <int D>
SIMT_GLOBAL void SIMT_LAUNCH_BOUNDS(kMmaAttnThreads)
    attention_fwd_mma_kernel(AttentionArgs<bf16> a, bf16* s_out, bf16* o_out, float* lse_out) {
  constexpr int N = kMmaAttnFwdCols;
  using Acc = AccTile<N>;
  SIMT_SHARED_ALIGNED(uint16_t, k_tile, [N][D + kMmaAttnPad], 16);
  SIMT_SHARED_ALIGNED(uint16_t, v_tile, [N][D + kMmaAttnPad], 16);
  const unsigned lane = simt::lane_id();
  const int i0 = int(simt::block_idx().x) * kMmaAttnRows, h = int(simt::block_idx().y), b = int(simt::block_idx().z);
  const int w0 = i0 + 16 * int(simt::warp_id()), g = h / (a.heads / a.kv_heads), t = a.t;
  const bool affine = a.kind == CoreKind::affine;
  const int64_t q0 = a.q_row(b, h);
  const bf16* k = a.k + a.kv_row(b, g) * D;
  const bf16* v = a.v + a.kv_row(b, g) * D;

  AFrags<D> q_frags;
  load_a_frags<D>(q_frags, a.q + q0 * D, w0, t, lane);
  AccTile<D> o, u;  // S_i unnormalised, and U_i (affine)
  float row_max[2] = {-INFINITY, -INFINITY}, row_sum[2] = {0, 0};
  const int key_end = a.causal ? (i0 + kMmaAttnRows < t ? i0 + kMmaAttnRows : t) : t;
  for (int j0 = 0; j0 < key_end; j0 += N) {
    simt::sync_threads();  // the previous tile is read
    stage_rows<N, D>(k_tile, k, j0, t);
    stage_rows<N, D>(v_tile, v, j0, t);
    simt::sync_threads();
    Acc s;
    mma_abt<D, N>(s, q_frags, k_tile, lane);
    // Online softmax per row half (rows l / 4 and l / 4 + 8), as online_softmax_step.
    COTAN_UNROLL
    for (int half = 0; half < 2; ++half) {
      const int i = w0 + Acc::row(2 * half, lane);
      float tile_max = -INFINITY;
      COTAN_UNROLL
      for (int n = 0; n < N / 8; ++n)
        for (int e = 2 * half; e < 2 * half + 2; ++e) {
          const float score = a.visible(i, j0 + Acc::col(n, e, lane)) ? a.scale * s.f[n][e] : -INFINITY;
          s.f[n][e] = score;
          tile_max = fmaxf(tile_max, score);
        }
      tile_max = quad_max(tile_max);
      const bool empty = tile_max == -INFINITY;  // no visible key for this row in the tile
      const float top = fmaxf(row_max[half], tile_max);
      const float rescale = empty ? 1.0f : math::exp(row_max[half] - top);
      float tile_sum = 0;
      COTAN_UNROLL
      for (int n = 0; n < N / 8; ++n)
        for (int e = 2 * half; e < 2 * half + 2; ++e) {
          const float p = empty ? 0.0f : math::exp(s.f[n][e] - top);
          s.f[n][e] = p;
          tile_sum += p;
        }
      row_max[half] = empty ? row_max[half] : top;
      row_sum[half] = row_sum[half] * rescale + quad_sum(tile_sum);
      COTAN_UNROLL
      for (int n = 0; n < D / 8; ++n)
        for (int e = 2 * half; e < 2 * half + 2; ++e) o.f[n][e] *= rescale;
    }
    AFrags<N> p_frags;
    to_a_fragments(p_frags, s);
    mma_ab<N, D>(o, p_frags, v_tile, lane);
    if (affine) {
      AFrags<N> mask;
      visibility_frags<N>(mask, a, w0, j0, lane);
      mma_ab<N, D>(u, mask, v_tile, lane);
    }
  }

  COTAN_UNROLL
  for (int half = 0; half < 2; ++half) {
    const int i = w0 + AccTile<D>::row(2 * half, lane);
    if (i >= t) continue;
    const int64_t row = q0 + i;
    const RowEnd end = finish_row(a, h, row_max[half], row_sum[half]);
    if ((lane & 3) == 0) lse_out[row] = end.lse;
    const AffineCoefficients ab = affine ? affine_coefficients(a, row, h, i) : AffineCoefficients{};
    COTAN_UNROLL
    for (int n = 0; n < D / 8; ++n)
      for (int e = 2 * half; e < 2 * half + 2; ++e) {
        const int64_t at = row * D + AccTile<D>::col(n, e, lane);
        const float s = o.f[n][e] * end.inv;
        s_out[at] = to_bf16(s);
        if (affine) o_out[at] = to_bf16(ab.alpha * s + ab.beta * u.f[n][e]);
      }
  }
}

// ---- backward ----

// Grid (T / kMmaAttnRows rounded up, H, B). Writes what attention_bwd_dq_kernel writes.
template <int D>
SIMT_GLOBAL void SIMT_LAUNCH_BOUNDS(kMmaAttnThreads)
    attention_bwd_dq_mma_kernel(AttentionArgs<bf16> a, const bf16* g_in, const bf16* s_in, const float* lse_in,
                                bf16* dq_out, float* delta_out, bf16* dalpha_out, float* sigma_terms) {
  constexpr int N = kMmaAttnBwdCols;
  using Acc = AccTile<N>;
  SIMT_SHARED_ALIGNED(uint16_t, k_tile, [N][D + kMmaAttnPad], 16);
  SIMT_SHARED_ALIGNED(uint16_t, v_tile, [N][D + kMmaAttnPad], 16);
  const unsigned lane = simt::lane_id();
  const int i0 = int(simt::block_idx().x) * kMmaAttnRows, h = int(simt::block_idx().y), b = int(simt::block_idx().z);
  const int w0 = i0 + 16 * int(simt::warp_id()), g = h / (a.heads / a.kv_heads), t = a.t;
  const bool affine = a.kind == CoreKind::affine;
  const int64_t q0 = a.q_row(b, h);
  const bf16* k = a.k + a.kv_row(b, g) * D;
  const bf16* v = a.v + a.kv_row(b, g) * D;

  AFrags<D> q_frags, g_frags;
  load_a_frags<D>(q_frags, a.q + q0 * D, w0, t, lane);
  load_a_frags<D>(g_frags, g_in + q0 * D, w0, t, lane);
  // Per row half: G_i . S_i over the elements of this lane's G fragments, then the quad.
  float lse[2], alpha[2], gs[2], delta[2];
  COTAN_UNROLL
  for (int half = 0; half < 2; ++half) {
    const int i = w0 + Acc::row(2 * half, lane);
    float part = 0;
    if (i < t) {
      COTAN_UNROLL
      for (int kk = 0; kk < D / 16; ++kk)
        for (int q = half; q < 4; q += 2) {
          const uint32_t pair = bf16_pair_bits(s_in + (q0 + i) * D + 16 * kk + 2 * int(lane & 3) + 8 * (q >> 1));
          const uint32_t gx = g_frags[kk][q];
          part += simt::bf16_lo(gx) * simt::bf16_lo(pair) + simt::bf16_hi(gx) * simt::bf16_hi(pair);
        }
    }
    gs[half] = quad_sum(part);
    lse[half] = i < t ? lse_in[q0 + i] : 0.0f;
    alpha[half] = i < t && affine ? load(a.alpha + q0 + i) : 1.0f;
    delta[half] = alpha[half] * gs[half];
    if (i < t && (lane & 3) == 0) {
      delta_out[q0 + i] = delta[half];
      if (a.kind == CoreKind::sink) sigma_terms[q0 + i] = -math::exp(load(a.sigma + h) - lse[half]) * delta[half];
    }
  }

  AccTile<D> dq;
  float gu[2] = {0, 0};  // this lane's share of G_i . U_i = sum of the visible (G V^T)_ij (affine)
  const int key_end = a.causal ? (i0 + kMmaAttnRows < t ? i0 + kMmaAttnRows : t) : t;
  for (int j0 = 0; j0 < key_end; j0 += N) {
    simt::sync_threads();
    stage_rows<N, D>(k_tile, k, j0, t);
    stage_rows<N, D>(v_tile, v, j0, t);
    simt::sync_threads();
    Acc s, ds;  // ds starts as dP = G V^T
    mma_abt<D, N>(s, q_frags, k_tile, lane);
    mma_abt<D, N>(ds, g_frags, v_tile, lane);
    COTAN_UNROLL
    for (int n = 0; n < N / 8; ++n)
      for (int e = 0; e < 4; ++e) {
        const int half = e >> 1, i = w0 + Acc::row(e, lane);
        float value = 0;
        if (a.visible(i, j0 + Acc::col(n, e, lane))) {
          const float p = math::exp(a.scale * s.f[n][e] - lse[half]);
          value = p * (alpha[half] * ds.f[n][e] - delta[half]);
          gu[half] += ds.f[n][e];
        }
        ds.f[n][e] = value;
      }
    AFrags<N> ds_frags;
    to_a_fragments(ds_frags, ds);
    mma_ab<N, D>(dq, ds_frags, k_tile, lane);
  }

  COTAN_UNROLL
  for (int half = 0; half < 2; ++half) {
    const int i = w0 + AccTile<D>::row(2 * half, lane);
    if (i < t) {
      COTAN_UNROLL
      for (int n = 0; n < D / 8; ++n)
        for (int e = 2 * half; e < 2 * half + 2; ++e)
          dq_out[(q0 + i) * D + AccTile<D>::col(n, e, lane)] = to_bf16(a.scale * dq.f[n][e]);
    }
    if (!affine) continue;  // uniform over the block
    const float g_dot_u = quad_sum(gu[half]);
    if (i < t && (lane & 3) == 0) dalpha_out[q0 + i] = to_bf16(gs[half] - g_dot_u / a.affine_count(i));
  }
}

// Grid (T / kMmaAttnRows rounded up, Hkv, B). Reads delta from a dq kernel; writes dk and dv.
template <int D>
SIMT_GLOBAL void SIMT_LAUNCH_BOUNDS(kMmaAttnThreads)
    attention_bwd_dkdv_mma_kernel(AttentionArgs<bf16> a, const bf16* g_in, const float* lse_in,
                                  const float* delta_in, bf16* dk_out, bf16* dv_out) {
  constexpr int N = kMmaAttnBwdCols;
  using Acc = AccTile<N>;  // [keys, queries]
  SIMT_SHARED_ALIGNED(uint16_t, k_tile, [kMmaAttnRows][D + kMmaAttnPad], 16);
  SIMT_SHARED_ALIGNED(uint16_t, q_tile, [N][D + kMmaAttnPad], 16);
  SIMT_SHARED_ALIGNED(uint16_t, g_tile, [N][D + kMmaAttnPad], 16);
  SIMT_SHARED(float, col_lse, [N]);
  SIMT_SHARED(float, col_delta, [N]);
  SIMT_SHARED(float, col_alpha, [N]);
  SIMT_SHARED(float, col_beta, [N]);
  const unsigned lane = simt::lane_id();
  const int tid = int(simt::linear_thread_idx());
  const int j0 = int(simt::block_idx().x) * kMmaAttnRows, g = int(simt::block_idx().y), b = int(simt::block_idx().z);
  const int w0 = j0 + 16 * int(simt::warp_id()), group = a.heads / a.kv_heads, t = a.t;
  const int64_t kv0 = a.kv_row(b, g);

  // V stays in registers; K is read from shared memory at each step (registers for both spill
  // at d = 128 next to the two accumulators).
  stage_rows<kMmaAttnRows, D>(k_tile, a.k + kv0 * D, j0, t);
  AFrags<D> v_frags;
  load_a_frags<D>(v_frags, a.v + kv0 * D, w0, t, lane);
  AccTile<D> dk, dv;
  for (int h = g * group; h < (g + 1) * group; ++h) {
    const int64_t q0 = a.q_row(b, h);
    // Causal: queries before j0 see none of these keys.
    for (int i0 = a.causal ? j0 : 0; i0 < t; i0 += N) {
      simt::sync_threads();
      stage_rows<N, D>(q_tile, a.q + q0 * D, i0, t);
      stage_rows<N, D>(g_tile, g_in + q0 * D, i0, t);
      if (tid < N) {
        const QueryTerms q = query_terms(a, q0, h, i0 + tid, lse_in, delta_in);
        col_lse[tid] = q.lse;
        col_delta[tid] = q.delta;
        col_alpha[tid] = q.alpha;
        col_beta[tid] = q.beta;
      }
      simt::sync_threads();
      Acc weight, ds;  // start as S^T = K Q^T and dP^T = V G^T
      {
        AFrags<D> k_frags;
        load_a_frags<D>(k_frags, k_tile + 16 * simt::warp_id(), lane);
        mma_abt<D, N>(weight, k_frags, q_tile, lane);
      }
      mma_abt<D, N>(ds, v_frags, g_tile, lane);
      COTAN_UNROLL
      for (int n = 0; n < N / 8; ++n)
        for (int e = 0; e < 4; ++e) {
          const int c = Acc::col(n, e, lane), qi = i0 + c;
          float w = 0, value = 0;
          if (a.visible(qi, w0 + Acc::row(e, lane))) {
            const float p = math::exp(a.scale * weight.f[n][e] - col_lse[c]);
            value = p * (col_alpha[c] * ds.f[n][e] - col_delta[c]);
            w = col_alpha[c] * p + col_beta[c];
          }
          weight.f[n][e] = w;
          ds.f[n][e] = value;
        }
      AFrags<N> w_frags, ds_frags;
      to_a_fragments(w_frags, weight);
      to_a_fragments(ds_frags, ds);
      mma_ab<N, D>(dv, w_frags, g_tile, lane);
      mma_ab<N, D>(dk, ds_frags, q_tile, lane);
    }
  }
  COTAN_UNROLL
  for (int half = 0; half < 2; ++half) {
    const int j = w0 + AccTile<D>::row(2 * half, lane);
    if (j >= t) continue;
    COTAN_UNROLL
    for (int n = 0; n < D / 8; ++n)
      for (int e = 2 * half; e < 2 * half + 2; ++e) {
        const int64_t at = (kv0 + j) * D + AccTile<D>::col(n, e, lane);
        dk_out[at] = to_bf16(a.scale * dk.f[n][e]);
        dv_out[at] = to_bf16(dv.f[n][e]);
      }
  }
}

}  // namespace cotan::COTAN_KERNELS

#undef COTAN_UNROLL
