// GEMM kernels: C = A B for every matrix of a batch. A [M, K] and B [K, N] are read through any
// strides (a transposed operand is just other strides; broadcast batch dims have stride 0); C is
// contiguous, [batch, M, N]. One block computes one 64 x 64 tile of C for one or more matrices
// of the batch (grid z strides over the batch). K advances in steps through shared memory; rows,
// columns and K beyond the matrix are zero there, so any M, N, K works and only in-range
// elements of C are written.
//
// tiled_gemm_kernel (f32, f64): 16 x 16 threads, K steps of 16. Thread (x, y) accumulates the
//   4 x 4 outputs at rows y + 16 i and columns x + 16 j of the tile: a warp reads one A value per
//   row and 16 consecutive B values from shared memory, without bank conflicts.
// tensor_core_gemm_kernel (bf16): 4 warps in a 2 x 2 grid, 32 x 32 outputs each, K steps of 32.
//   Per 16-wide slice of K a warp loads two A fragments (ldmatrix_x4 of the row-major A tile)
//   and four B fragments (ldmatrix_x4_trans of the row-major B tile), then issues the 2 x 4
//   mma.m16n8k16 on them; f32 accumulators, rounded to bf16 once at the end.
#pragma once

#include <cstdint>
#include <type_traits>

#include "cuda/kernels/common.cuh"

namespace cotan::COTAN_KERNELS {

// What a GEMM launch multiplies. Operand 0 of `batch` is A, 1 is B: where matrix b of the batch
// starts, in elements.
struct GemmArgs {
  StridedLayout<2> batch;
  int64_t batches;
  int64_t m, n, k;
  int64_t a_row, a_col;  // element (i, l) of A at a_row * i + a_col * l
  int64_t b_row, b_col;
};

constexpr int kGemmTile = 64;  // rows and columns of C per block

// ---- tiles in shared memory ----

// The R x C block of a matrix at (r0, c0), as elements D: dst[r * dst_row + c * dst_col] =
// matrix(r0 + r, c0 + c), zero outside rows x cols. Threads t < Threads share the copy; they
// walk the block in the order that makes consecutive threads read consecutive addresses.
template <int R, int C, int Threads, class D, class S>
SIMT_DEVICE void load_tile(D* dst, int dst_row, int dst_col, const S* src, int64_t row_stride, int64_t col_stride,
                           int64_t r0, int64_t c0, int64_t rows, int64_t cols, unsigned t) {
  const bool along_rows = col_stride == 1;  // uniform across the block
  for (int e = int(t); e < R * C; e += Threads) {
    const int r = along_rows ? e / C : e % R;
    const int c = along_rows ? e % C : e / R;
    const int64_t i = r0 + r, j = c0 + c;
    D v = D(0);
    if (i < rows && j < cols) {
      if constexpr (std::is_same_v<S, bf16>) v = src[i * row_stride + j * col_stride].bits;
      else v = src[i * row_stride + j * col_stride];
    }
    dst[r * dst_row + c * dst_col] = v;
  }
}

// ---- SIMT GEMM (f32, f64) ----

constexpr int kTiledStepK = 16;
constexpr int kTiledThreads = 16;  // per side of the block
constexpr int kTiledPerThread = kGemmTile / kTiledThreads;

template <class T>
SIMT_GLOBAL void SIMT_LAUNCH_BOUNDS(kTiledThreads* kTiledThreads)
    tiled_gemm_kernel(GemmArgs g, const T* a, const T* b, T* c) {
  constexpr int P = kTiledPerThread, S = kTiledThreads;
  // a_tile[l][i] = A(m0 + i, k0 + l), b_tile[l][j] = B(k0 + l, n0 + j); one column of padding.
  SIMT_SHARED(T, a_tile, [kTiledStepK][kGemmTile + 1]);
  SIMT_SHARED(T, b_tile, [kTiledStepK][kGemmTile + 1]);
  const unsigned tx = simt::thread_idx().x, ty = simt::thread_idx().y, t = simt::linear_thread_idx();
  const int64_t m0 = int64_t(simt::block_idx().y) * kGemmTile, n0 = int64_t(simt::block_idx().x) * kGemmTile;
  for (int64_t batch = simt::block_idx().z; batch < g.batches; batch += simt::grid_dim().z) {
    int64_t at[2];
    g.batch.offsets(batch, at);
    T acc[P][P] = {};
    for (int64_t k0 = 0; k0 < g.k; k0 += kTiledStepK) {
      load_tile<kGemmTile, kTiledStepK, S * S>(&a_tile[0][0], 1, kGemmTile + 1, a + at[0], g.a_row, g.a_col, m0, k0,
                                               g.m, g.k, t);
      load_tile<kTiledStepK, kGemmTile, S * S>(&b_tile[0][0], kGemmTile + 1, 1, b + at[1], g.b_row, g.b_col, k0, n0,
                                               g.k, g.n, t);
      simt::sync_threads();
      for (int l = 0; l < kTiledStepK; ++l) {
        T a_col[P], b_row[P];
        for (int i = 0; i < P; ++i) a_col[i] = a_tile[l][int(ty) + S * i];
        for (int j = 0; j < P; ++j) b_row[j] = b_tile[l][int(tx) + S * j];
        for (int i = 0; i < P; ++i)
          for (int j = 0; j < P; ++j) acc[i][j] += a_col[i] * b_row[j];
      }
      simt::sync_threads();
    }
    T* out = c + batch * g.m * g.n;
    for (int i = 0; i < P; ++i) {
      const int64_t row = m0 + ty + S * i;
      for (int j = 0; j < P; ++j) {
        const int64_t col = n0 + tx + S * j;
        if (row < g.m && col < g.n) out[row * g.n + col] = acc[i][j];
      }
    }
  }
}

// ---- tensor-core GEMM (bf16 operands, f32 accumulation) ----

constexpr int kMmaStepK = 32;
constexpr int kMmaThreads = 128;  // 4 warps, 2 x 2 over the tile
constexpr int kWarpTile = 32;     // rows and columns of C per warp
constexpr int kRowPad = 8;        // bf16 per shared row beyond the tile: rows stay 16-byte aligned
                                  // and the 8 rows of one ldmatrix hit different banks

// A 16 x 16 bf16 tile of A in the mma's A-fragment layout, from a row-major tile in shared
// memory (`row`: its first element). Lane l names row l % 16, columns 8 (l / 16) ..: the four
// 8 x 8 matrices (rows 0-7 | 8-15) x (columns 0-7 | 8-15) in the order a[0..3] takes them.
template <int Pitch>
SIMT_DEVICE void load_a_fragment(uint32_t (&a)[4], const uint16_t* row, unsigned lane) {
  simt::ldmatrix_x4(a, row + (lane % 16) * Pitch + 8 * (lane / 16));
}

// Two adjacent 16 x 8 tiles of B (columns 0-7 and 8-15 from `row`) in the B-fragment layout,
// from a row-major K x N tile: transposed 8 x 8 matrices (k 0-7 | 8-15) x (n 0-7 | 8-15).
template <int Pitch>
SIMT_DEVICE void load_b_fragments(uint32_t (&b0)[2], uint32_t (&b1)[2], const uint16_t* row, unsigned lane) {
  uint32_t r[4];
  simt::ldmatrix_x4_trans(r, row + (lane % 16) * Pitch + 8 * (lane / 16));
  b0[0] = r[0], b0[1] = r[1], b1[0] = r[2], b1[1] = r[3];
}

SIMT_GLOBAL void SIMT_LAUNCH_BOUNDS(kMmaThreads)
    tensor_core_gemm_kernel(GemmArgs g, const bf16* a, const bf16* b, bf16* c) {
  constexpr int MT = kWarpTile / 16, NT = kWarpTile / 8;  // m16 and n8 tiles per warp
  constexpr int a_pitch = kMmaStepK + kRowPad, b_pitch = kGemmTile + kRowPad;
  // a_tile[i][l] = A(m0 + i, k0 + l), b_tile[l][j] = B(k0 + l, n0 + j), as bf16 bits.
  SIMT_SHARED_ALIGNED(uint16_t, a_tile, [kGemmTile][a_pitch], 16);
  SIMT_SHARED_ALIGNED(uint16_t, b_tile, [kMmaStepK][b_pitch], 16);
  const unsigned t = simt::linear_thread_idx(), lane = simt::lane_id(), warp = simt::warp_id();
  const int wm = int(warp / 2) * kWarpTile, wn = int(warp % 2) * kWarpTile;
  const int64_t m0 = int64_t(simt::block_idx().y) * kGemmTile, n0 = int64_t(simt::block_idx().x) * kGemmTile;
  for (int64_t batch = simt::block_idx().z; batch < g.batches; batch += simt::grid_dim().z) {
    int64_t at[2];
    g.batch.offsets(batch, at);
    float acc[MT][NT][4] = {};  // acc[i][j]: the C fragment of m16 tile i, n8 tile j
    for (int64_t k0 = 0; k0 < g.k; k0 += kMmaStepK) {
      load_tile<kGemmTile, kMmaStepK, kMmaThreads>(&a_tile[0][0], a_pitch, 1, a + at[0], g.a_row, g.a_col, m0, k0, g.m,
                                                   g.k, t);
      load_tile<kMmaStepK, kGemmTile, kMmaThreads>(&b_tile[0][0], b_pitch, 1, b + at[1], g.b_row, g.b_col, k0, n0, g.k,
                                                   g.n, t);
      simt::sync_threads();
      for (int l = 0; l < kMmaStepK; l += 16) {
        uint32_t af[MT][4], bf[NT][2];
        for (int i = 0; i < MT; ++i) load_a_fragment<a_pitch>(af[i], &a_tile[wm + 16 * i][l], lane);
        for (int j = 0; j < NT; j += 2) load_b_fragments<b_pitch>(bf[j], bf[j + 1], &b_tile[l][wn + 8 * j], lane);
        for (int i = 0; i < MT; ++i)
          for (int j = 0; j < NT; ++j) simt::mma_m16n8k16_bf16(acc[i][j], af[i], bf[j], acc[i][j]);
      }
      simt::sync_threads();
    }
    // Fragment element e of tile (i, j) is C(row + 8 (e / 2), col + e % 2).
    bf16* out = c + batch * g.m * g.n;
    const int g_row = int(lane >> 2), g_col = 2 * int(lane & 3);
    for (int i = 0; i < MT; ++i)
      for (int j = 0; j < NT; ++j)
        for (int e = 0; e < 4; ++e) {
          const int64_t row = m0 + wm + 16 * i + g_row + 8 * (e / 2), col = n0 + wn + 8 * j + g_col + e % 2;
          if (row < g.m && col < g.n) out[row * g.n + col] = to_bf16(acc[i][j][e]);
        }
  }
}

}  // namespace cotan::COTAN_KERNELS
