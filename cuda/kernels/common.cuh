// Shared pieces of the kernels (compiled by nvcc, and by g++ for the emulator): element
// conversions identical to tensor/dtype.hpp, device math, strided indexing, grid-stride loops
// and launch sizes.
//
// A kernel touches tensors through raw pointers to their first element (Tensor::data_ptr) and,
// unless every operand is contiguous, a StridedLayout<K> passed by value: the operands' shared
// shape (collapsed to at most kMaxDims dimensions) and each one's element strides, so that
// element i of the row-major order sits at offsets[k] of operand k.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <string_view>
#include <tuple>
#include <type_traits>

#include "cuda/kernels/target.hpp"
#include "tensor/dtype.hpp"
#include "tensor/shape.hpp"
#include "tensor/unary_math.hpp"

namespace cotan::COTAN_KERNELS {

// ---- element types ----
// Storage types are the engine's (double, float, cotan::bf16, int32_t, int64_t, bool); kernels
// compute bf16 in float (cotan::compute_t) and never call bf16's host-only constructors.

SIMT_HOST_DEVICE float to_float(bf16 v) { return simt::bf16_to_float(v.bits); }
SIMT_HOST_DEVICE bf16 to_bf16(float v) {
  bf16 out;
  out.bits = simt::float_to_bf16(v);  // round to nearest even, NaN stays NaN
  return out;
}

// cotan::convert on the device: the same conversions, bf16 through float.
template <class To, class From>
SIMT_HOST_DEVICE To convert_to(From v) {
  if constexpr (std::is_same_v<To, From>) return v;
  else if constexpr (std::is_same_v<To, bf16>) return to_bf16(float(v));
  else if constexpr (std::is_same_v<From, bf16>) return To(to_float(v));
  else return To(v);
}

template <class T>
SIMT_HOST_DEVICE compute_t<T> load(const T* p) {
  return convert_to<compute_t<T>>(*p);
}

// ---- device math: cotan::math (tensor/unary_math.hpp), the C library names on both sides ----

// ---- strided indexing ----

constexpr int kMaxDims = 8;

// K operands walked in the row-major order of one shape. Plain data: passed to kernels by value.
template <int K>
struct StridedLayout {
  int ndim;      // >= 1
  bool narrow;   // every linear index fits 32 bits: the index arithmetic divides in 32 bits
  int64_t sizes[kMaxDims];
  int64_t strides[K][kMaxDims];  // per operand, in elements

  // Element offsets of every operand at row-major position i.
  SIMT_HOST_DEVICE void offsets(int64_t i, int64_t (&out)[K]) const {
    if (ndim == 1) {
      for (int k = 0; k < K; ++k) out[k] = i * strides[k][0];
      return;
    }
    for (int k = 0; k < K; ++k) out[k] = 0;
    if (narrow) {
      uint32_t rest = uint32_t(i);
      for (int d = ndim - 1; d >= 0; --d) {
        const uint32_t size = uint32_t(sizes[d]);
        const uint32_t index = rest % size;
        rest /= size;
        for (int k = 0; k < K; ++k) out[k] += int64_t(index) * strides[k][d];
      }
    } else {
      int64_t rest = i;
      for (int d = ndim - 1; d >= 0; --d) {
        const int64_t index = rest % sizes[d];
        rest /= sizes[d];
        for (int k = 0; k < K; ++k) out[k] += index * strides[k][d];
      }
    }
  }
};

// The layout of K operands of `shape` with the given strides. Size-1 dimensions are dropped and
// neighbours that are contiguous in every operand are merged (a contiguous tensor is one
// dimension; [N, D] + [D] is [N, D] with strides (D, 1) and (0, 1)). Throws when more than
// kMaxDims dimensions remain.
template <int K>
StridedLayout<K> make_layout(const Shape& shape, const std::array<const Strides*, K>& strides) {
  StridedLayout<K> layout{};
  int64_t n = numel(shape);
  layout.narrow = n <= int64_t(UINT32_MAX);
  // Built innermost first, then reversed.
  Shape sizes;
  std::array<Strides, K> kept;
  for (size_t d = shape.size(); d-- > 0;) {
    if (shape[d] == 1) continue;
    bool merge = !sizes.empty();
    for (int k = 0; k < K && merge; ++k) merge = (*strides[size_t(k)])[d] == kept[size_t(k)].back() * sizes.back();
    if (merge) {
      sizes.back() *= shape[d];
      continue;
    }
    sizes.push_back(shape[d]);
    for (int k = 0; k < K; ++k) kept[size_t(k)].push_back((*strides[size_t(k)])[d]);
  }
  if (sizes.empty()) {
    sizes.push_back(1);
    for (auto& s : kept) s.push_back(0);
  }
  if (sizes.size() > size_t(kMaxDims))
    fail("cuda", "shape ", to_string(shape), " keeps ", sizes.size(),
         " dimensions after merging; kernels take at most ", kMaxDims);
  layout.ndim = int(sizes.size());
  for (int d = 0; d < layout.ndim; ++d) {
    const size_t from = sizes.size() - 1 - size_t(d);
    layout.sizes[d] = sizes[from];
    for (int k = 0; k < K; ++k) layout.strides[k][d] = kept[size_t(k)][from];
  }
  return layout;
}

// The layout of tensors of one shape (the first tensor's).
template <class... Ts>
StridedLayout<int(sizeof...(Ts))> layout_of(const Ts&... tensors) {
  const Shape& shape = std::get<0>(std::tie(tensors...)).shape();
  return make_layout<int(sizeof...(Ts))>(shape, {&tensors.strides()...});
}

// ---- grid-stride loops and launch sizes ----

// for (int64_t i = first_index(); i < n; i += index_stride()): every thread of the grid takes
// every index_stride()-th element, so any grid covers any n.
SIMT_DEVICE int64_t first_index() {
  return int64_t(simt::block_idx().x) * simt::block_dim().x + simt::thread_idx().x;
}
SIMT_DEVICE int64_t index_stride() { return int64_t(simt::grid_dim().x) * simt::block_dim().x; }

constexpr unsigned kThreadsPerBlock = 256;
// Grid-stride kernels need no more blocks than keep the GPU busy. The emulator runs every thread
// as a fiber: a small grid is faster there and makes the tests walk the grid-stride loops.
#if COTAN_SIMT_EMULATED
constexpr int64_t kMaxBlocks = 2;
#else
constexpr int64_t kMaxBlocks = 8192;
#endif

struct LaunchSize {
  simt::Dim3 grid, block;
};

// One thread per work item (up to kMaxBlocks blocks), for a grid-stride loop over n > 0 items.
inline LaunchSize grid_stride_launch(int64_t n) {
  const int64_t blocks = std::min<int64_t>((n + kThreadsPerBlock - 1) / kThreadsPerBlock, kMaxBlocks);
  return {simt::Dim3{unsigned(blocks), 1, 1}, simt::Dim3{kThreadsPerBlock, 1, 1}};
}

// Whether every tensor is contiguous (one shape): the kernels then index them all by i.
template <class... Ts>
bool all_contiguous(const Ts&... tensors) {
  return (tensors.is_contiguous() && ...);
}

}  // namespace cotan::COTAN_KERNELS
