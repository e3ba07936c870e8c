// Tensor-core instructions for kernels written against simt.hpp (included by it): on nvcc the
// PTX instructions (sm_80 and newer), in the emulator a warp collective computing the same
// fragments. All are warp-collective: every lane of a full warp executes them together.
//
// mma_m16n8k16_bf16(d, a, b, c): D = A B + C, mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32.
//   A 16x16 bf16, B 16x8 bf16, C and D 16x8 f32, in the register layouts of the PTX ISA section
//   "Matrix Fragments for mma.m16n8k16 with floating point type" (g = lane >> 2, t = lane % 4):
//     a[0] = A[g][2t, 2t+1]      a[1] = A[g+8][2t, 2t+1]
//     a[2] = A[g][2t+8, 2t+9]    a[3] = A[g+8][2t+8, 2t+9]
//     b[0] = B[2t, 2t+1][g]      b[1] = B[2t+8, 2t+9][g]
//     c[0], c[1] = C[g][2t, 2t+1]   c[2], c[3] = C[g+8][2t, 2t+1]     (d likewise)
//   two bf16 per register, the first in bits 0-15 (pack_bf16x2). d may alias c.
// ldmatrix_x4 / x2 (and _trans): ldmatrix.sync.aligned.m8n8.{x4,x2}[.trans].shared.b16. Loads
//   4 (2) 8x8 b16 matrices from shared memory; lane i gives the address of row i % 8 of
//   matrix i / 8 (16 bytes, 16-byte aligned). Register q of lane l receives row l / 4,
//   columns 2 (l % 4) and 2 (l % 4) + 1 of matrix q; .trans delivers the transpose, i.e.
//   rows 2 (l % 4), 2 (l % 4) + 1 of column l / 4: the B fragment from a row-major K x N tile.
#pragma once

#include <cstdint>

#include "cuda/simt/common.hpp"

namespace simt {

#if defined(__CUDACC__)
inline namespace native {

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#define SIMT_TENSOR_CORE_UNSUPPORTED 1  // mma/ldmatrix need sm_80; the functions trap there
#endif

SIMT_DEVICE void mma_m16n8k16_bf16(float d[4], const uint32_t a[4], const uint32_t b[2],
                                   const float c[4]) {
#if defined(SIMT_TENSOR_CORE_UNSUPPORTED)
  (void)d, (void)a, (void)b, (void)c;
  __trap();
#else
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};\n"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]), "f"(c[1]),
        "f"(c[2]), "f"(c[3]));
#endif
}

SIMT_DEVICE uint32_t shared_address(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

SIMT_DEVICE void ldmatrix_x4(uint32_t r[4], const void* smem_row) {
#if defined(SIMT_TENSOR_CORE_UNSUPPORTED)
  (void)r, (void)smem_row;
  __trap();
#else
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(shared_address(smem_row)));
#endif
}

SIMT_DEVICE void ldmatrix_x4_trans(uint32_t r[4], const void* smem_row) {
#if defined(SIMT_TENSOR_CORE_UNSUPPORTED)
  (void)r, (void)smem_row;
  __trap();
#else
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(shared_address(smem_row)));
#endif
}

SIMT_DEVICE void ldmatrix_x2(uint32_t r[2], const void* smem_row) {
#if defined(SIMT_TENSOR_CORE_UNSUPPORTED)
  (void)r, (void)smem_row;
  __trap();
#else
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(shared_address(smem_row)));
#endif
}

SIMT_DEVICE void ldmatrix_x2_trans(uint32_t r[2], const void* smem_row) {
#if defined(SIMT_TENSOR_CORE_UNSUPPORTED)
  (void)r, (void)smem_row;
  __trap();
#else
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(shared_address(smem_row)));
#endif
}

#undef SIMT_TENSOR_CORE_UNSUPPORTED

}  // namespace native

#else  // the emulator (cuda/simt/warp.cpp computes the fragments)
}  // namespace simt

#include "cuda/simt/emulator.hpp"

namespace simt {
inline namespace emulated {

inline void mma_m16n8k16_bf16(float d[4], const uint32_t a[4], const uint32_t b[2],
                              const float c[4]) {
  detail::LaneIO io;
  for (int i = 0; i < 4; ++i) io.in[i] = a[i];
  io.in[4] = b[0];
  io.in[5] = b[1];
  for (int i = 0; i < 4; ++i) io.in[6 + i] = float_bits(c[i]);
  detail::warp_collective(detail::WarpOp::mma_m16n8k16_bf16, 0xffffffffu, io);
  for (int i = 0; i < 4; ++i) d[i] = bits_float(io.out[i]);
}

namespace detail {
inline void ldmatrix(WarpOp op, uint32_t* r, int count, const void* smem_row) {
  LaneIO io;
  io.ptr = smem_row;
  warp_collective(op, 0xffffffffu, io);
  for (int i = 0; i < count; ++i) r[i] = io.out[i];
}
}  // namespace detail

inline void ldmatrix_x4(uint32_t r[4], const void* smem_row) {
  detail::ldmatrix(detail::WarpOp::ldmatrix_x4, r, 4, smem_row);
}
inline void ldmatrix_x4_trans(uint32_t r[4], const void* smem_row) {
  detail::ldmatrix(detail::WarpOp::ldmatrix_x4_trans, r, 4, smem_row);
}
inline void ldmatrix_x2(uint32_t r[2], const void* smem_row) {
  detail::ldmatrix(detail::WarpOp::ldmatrix_x2, r, 2, smem_row);
}
inline void ldmatrix_x2_trans(uint32_t r[2], const void* smem_row) {
  detail::ldmatrix(detail::WarpOp::ldmatrix_x2_trans, r, 2, smem_row);
}

}  // namespace emulated

#endif

}  // namespace simt
