// Shared pieces of the row kernels (reduce, softmax, cumsum): thread groups that own one row
// each, their collectives (reduce, inclusive scan) in a fixed combination order, and the layout
// of the lines of a tensor along one axis.
//
// A row kernel runs blocks of kRowBlock threads (x only). A group is one warp (short rows) or
// the whole block; the group walks rows first_row(), first_row() + row_stride(), ... so any grid
// covers any number of rows, and every thread of a group takes the same trip through the loop
// (the collectives below need every thread of the group). Combination orders depend only on the
// group size, never on timing: results are deterministic for a given launch shape.
#pragma once

#include <cstring>
#include <type_traits>

#include "cuda/kernels/common.cuh"

namespace cotan::COTAN_KERNELS {

constexpr unsigned kWarpSize = 32;
constexpr unsigned kFullMask = 0xffffffffu;
constexpr unsigned kRowBlock = 256;  // threads per block of every row kernel
constexpr unsigned kWarpsPerRowBlock = kRowBlock / kWarpSize;

// The accumulator of a sum of T: f64 for floating types (as the CPU backend), i64 for integers
// and bool.
template <class T>
using SumAcc = std::conditional_t<std::is_floating_point_v<compute_t<T>>, double, int64_t>;

// a + b; integers wrap (two's complement) instead of overflowing.
template <class A>
SIMT_HOST_DEVICE A wrapping_add(A a, A b) {
  if constexpr (std::is_integral_v<A>) return A(uint64_t(a) + uint64_t(b));
  else return a + b;
}

// ---- shuffles of any trivially copyable value ----
// Arithmetic types move in one shuffle, anything else (an argmax accumulator) word by word.

template <class T, class Shuffle>
SIMT_DEVICE T shuffle_value(T v, Shuffle shuffle) {
  static_assert(std::is_trivially_copyable_v<T>, "shuffled values must be trivially copyable");
  if constexpr (std::is_arithmetic_v<T>) {
    return shuffle(v);
  } else {
    static_assert(sizeof(T) % sizeof(uint32_t) == 0, "shuffled structs must be whole 32-bit words");
    uint32_t words[sizeof(T) / sizeof(uint32_t)];
    std::memcpy(words, &v, sizeof(T));
    for (uint32_t& w : words) w = shuffle(w);
    std::memcpy(&v, words, sizeof(T));
    return v;
  }
}

// Lane + delta's value (a lane past the end keeps its own).
template <class T>
SIMT_DEVICE T shuffle_down(T v, unsigned delta) {
  return shuffle_value(v, [delta](auto w) { return simt::shfl_down(kFullMask, w, delta); });
}
// Lane - delta's value (lanes below delta keep their own).
template <class T>
SIMT_DEVICE T shuffle_up(T v, unsigned delta) {
  return shuffle_value(v, [delta](auto w) { return simt::shfl_up(kFullMask, w, delta); });
}
// Lane `lane`'s value.
template <class T>
SIMT_DEVICE T shuffle_from(T v, int lane) {
  return shuffle_value(v, [lane](auto w) { return simt::shfl(kFullMask, w, lane); });
}

// ---- groups ----

template <unsigned Group>
struct RowGroup {
  static_assert(Group == kWarpSize || Group == kRowBlock, "a row group is a warp or the block");
  static constexpr unsigned kPerBlock = kRowBlock / Group;

  // This thread's rank in its group.
  SIMT_DEVICE static unsigned rank() { return simt::thread_idx().x % Group; }
  SIMT_DEVICE static int64_t first_row() {
    return int64_t(simt::block_idx().x) * kPerBlock + simt::thread_idx().x / Group;
  }
  SIMT_DEVICE static int64_t row_stride() { return int64_t(simt::grid_dim().x) * kPerBlock; }
};

// Groups of Group threads for n > 0 rows, up to kMaxBlocks blocks.
template <unsigned Group>
LaunchSize row_launch(int64_t n) {
  constexpr int64_t per_block = RowGroup<Group>::kPerBlock;
  const int64_t blocks = std::min<int64_t>((n + per_block - 1) / per_block, kMaxBlocks);
  return {simt::Dim3{unsigned(blocks), 1, 1}, simt::Dim3{kRowBlock, 1, 1}};
}

// combine(v of every thread of the group), in every thread of the group. Lanes fold as a tree
// (lane i takes lane i + delta: the lower rank stays on the left), then the warps of a block in
// warp order.
template <unsigned Group, class T, class Combine>
SIMT_DEVICE T group_reduce(T v, Combine combine) {
  for (unsigned delta = kWarpSize / 2; delta > 0; delta /= 2) v = combine(v, shuffle_down(v, delta));
  if constexpr (Group == kWarpSize) {
    return shuffle_from(v, 0);
  } else {
    SIMT_SHARED(T, warp_result, [kWarpsPerRowBlock]);
    if (simt::lane_id() == 0) warp_result[simt::warp_id()] = v;
    simt::sync_threads();
    T all = warp_result[0];
    for (unsigned w = 1; w < kWarpsPerRowBlock; ++w) all = combine(all, warp_result[w]);
    simt::sync_threads();  // warp_result is free for the next call
    return all;
  }
}

// The inclusive prefix sum of v over the group's ranks; `total` receives the sum of the group.
template <unsigned Group, class T>
SIMT_DEVICE T group_inclusive_scan(T v, T& total) {
  const unsigned lane = simt::lane_id();
  for (unsigned delta = 1; delta < kWarpSize; delta *= 2) {
    const T before = shuffle_up(v, delta);
    if (lane >= delta) v = wrapping_add(before, v);
  }
  if constexpr (Group == kWarpSize) {
    total = shuffle_from(v, int(kWarpSize) - 1);
    return v;
  } else {
    SIMT_SHARED(T, warp_total, [kWarpsPerRowBlock]);
    if (lane == kWarpSize - 1) warp_total[simt::warp_id()] = v;
    simt::sync_threads();
    T earlier = T(0), sum = T(0);
    for (unsigned w = 0; w < kWarpsPerRowBlock; ++w) {
      if (w == simt::warp_id()) earlier = sum;
      sum = wrapping_add(sum, warp_total[w]);
    }
    simt::sync_threads();  // warp_total is free for the next call
    total = sum;
    return wrapping_add(earlier, v);
  }
}

// ---- lines along an axis ----

// x seen as lines along `axis`: one per position of the other dims (in row-major order of the
// other dims), `length` elements `step` apart in x, `out_step` apart in the contiguous output
// (which keeps the axis, or drops it: out_step 0).
struct AxisLines {
  int64_t count = 0;
  int64_t length = 0;
  int64_t step = 0;
  int64_t out_step = 0;
  StridedLayout<2> others;  // line -> x offset, out offset of its first element
  // Neighbouring lines are neighbours in x and in out (the innermost other dim has stride 1 in
  // both, and at least a warp of lines): one thread per line reads and writes coalesced.
  bool columns = false;
};

constexpr int64_t kMinColumnLines = kWarpSize;

inline AxisLines lines_along(const Tensor& x, int64_t axis, bool keep_axis) {
  AxisLines lines;
  Shape out_shape = x.shape();
  if (!keep_axis) out_shape.erase(out_shape.begin() + axis);
  const Strides out_strides = contiguous_strides(out_shape);
  Shape sizes;
  Strides x_strides, o_strides;
  for (int64_t d = 0, k = 0; d < x.dim(); ++d) {
    if (d == axis) {
      if (keep_axis) lines.out_step = out_strides[size_t(k++)];
      continue;
    }
    sizes.push_back(x.size(d));
    x_strides.push_back(x.strides()[size_t(d)]);
    o_strides.push_back(out_strides[size_t(k++)]);
  }
  lines.count = numel(sizes);
  lines.length = x.size(axis);
  lines.step = x.strides()[size_t(axis)];
  lines.others = make_layout<2>(sizes, {&x_strides, &o_strides});
  const int inner = lines.others.ndim - 1;
  lines.columns = lines.others.strides[0][inner] == 1 && lines.others.strides[1][inner] == 1 &&
                  lines.others.sizes[inner] >= kMinColumnLines;
  return lines;
}

}  // namespace cotan::COTAN_KERNELS
