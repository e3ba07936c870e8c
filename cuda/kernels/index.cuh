// Indexing kernels: gather and scatter_add along one axis. index_select and index_add run the
// same two kernels, with their 1-D index seen as a tensor of the output's (the source's) shape
// whose strides are 0 except along the axis.
//
// Both walk the positions p of the index's shape in row-major order, one thread per position
// (grid-stride):
//   gather:       out[p] = x[p with its axis coordinate replaced by index[p]]
//   scatter_add:  out[p with its axis coordinate replaced by index[p]] += src[p]
// Operand offsets come from a StridedLayout over the index's shape; the operand indexed along
// the axis gets stride 0 there, and the kernel adds index[p] * step.
//
// Bounds: an index outside [0, size) is skipped and the smallest such position p is recorded in
// *bad (atomic min; the launcher sets it to kNoBadIndex first and reads it back afterwards, then
// throws the CPU backend's error for that index).
//
// scatter_add adds with atomics (add_atomic): two positions may share a destination (duplicate
// indices, the embedding backward). The order of those adds is unspecified, so floating sums may
// differ from the CPU's (which adds in index order) in the last bits; integer sums are exact.
#pragma once

#include <type_traits>

#include "cuda/kernels/common.cuh"

namespace cotan::COTAN_KERNELS {

// *bad while no index was out of range.
constexpr unsigned long long kNoBadIndex = ~0ull;

template <class I>
SIMT_DEVICE bool index_in_range(I v, int64_t size) {
  return v >= 0 && int64_t(v) < size;
}

SIMT_DEVICE void record_bad_index(unsigned long long* bad, int64_t position) {
  simt::atomic_min(bad, static_cast<unsigned long long>(position));
}

// *p += v as one atomic read-modify-write, rounded to T as the CPU's add is: float and double by
// the hardware's atomic add; i32 and i64 wrap around (two's complement; i64 through the unsigned
// 64-bit add CUDA provides); bf16 by a compare-and-swap loop on the 16-bit element, adding in
// float and rounding to nearest even.
template <class T>
SIMT_DEVICE void add_atomic(T* p, T v) {
  if constexpr (std::is_same_v<T, bf16>) {
    unsigned short* element = reinterpret_cast<unsigned short*>(p);
    const float addend = to_float(v);
    unsigned short seen = *element, expected;
    do {
      expected = seen;
      const unsigned short sum = simt::float_to_bf16(simt::bf16_to_float(expected) + addend);
      seen = simt::atomic_cas(element, expected, sum);
    } while (seen != expected);
  } else if constexpr (std::is_same_v<T, int64_t>) {
    simt::atomic_add(reinterpret_cast<unsigned long long*>(p), static_cast<unsigned long long>(v));
  } else {
    static_assert(std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, int32_t>,
                  "add_atomic: f64, f32, bf16, i32 or i64");
    simt::atomic_add(p, v);
  }
}

// Operand 0 is x (stride 0 along the axis), 1 the index; out is contiguous in the index's shape.
// Elements move as bit patterns (Bits: the unsigned integer of the element's size).
template <class Bits, class I>
SIMT_GLOBAL void gather_kernel(int64_t n, StridedLayout<2> layout, const Bits* x, int64_t step, int64_t size,
                               const I* index, Bits* out, unsigned long long* bad) {
  for (int64_t p = first_index(); p < n; p += index_stride()) {
    int64_t at[2];
    layout.offsets(p, at);
    const I v = index[at[1]];
    if (!index_in_range(v, size)) {
      record_bad_index(bad, p);
      continue;
    }
    out[p] = x[at[0] + int64_t(v) * step];
  }
}

// Operand 0 is out (stride 0 along the axis), 1 the index, 2 src.
template <class T, class I>
SIMT_GLOBAL void scatter_add_kernel(int64_t n, StridedLayout<3> layout, T* out, int64_t step, int64_t size,
                                    const I* index, const T* src, unsigned long long* bad) {
  for (int64_t p = first_index(); p < n; p += index_stride()) {
    int64_t at[3];
    layout.offsets(p, at);
    const I v = index[at[1]];
    if (!index_in_range(v, size)) {
      record_bad_index(bad, p);
      continue;
    }
    add_atomic(out + at[0] + int64_t(v) * step, src[at[2]]);
  }
}

// Only the bounds check, for an index whose gather or scatter has no elements to move (the
// slices it selects are empty) but whose indices must still be valid.
template <class I>
SIMT_GLOBAL void check_index_kernel(int64_t n, StridedLayout<1> layout, const I* index, int64_t size,
                                    unsigned long long* bad) {
  for (int64_t p = first_index(); p < n; p += index_stride()) {
    int64_t at[1];
    layout.offsets(p, at);
    if (!index_in_range(index[at[0]], size)) record_bad_index(bad, p);
  }
}

}  // namespace cotan::COTAN_KERNELS
