// Strided loops shared by the elementwise and memory kernels. K operands of one shape, each with
// its own strides (in elements), are walked in row-major order as "runs": stretches along the
// innermost dimension, where operand k advances by inner_stride(k) per element. Dimensions of
// size 1 are dropped and neighbouring dimensions that are contiguous for every operand are
// merged first, so contiguous tensors become one run, and a row broadcast ([N, D] + [D]) becomes
// N runs of D unit-stride elements.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <tuple>
#include <vector>

#include "tensor/cpu/parallel.hpp"
#include "tensor/shape.hpp"
#include "tensor/tensor.hpp"

namespace cotan::cpu {

// Elements per parallel chunk of an elementwise loop: large enough that a chunk costs far more
// than scheduling it, small enough that 16M elements still spread over many cores.
constexpr int64_t kElementwiseGrain = 1 << 16;

template <size_t K>
struct StridedLoop {
  Shape shape;                    // collapsed; at least one dimension
  std::array<Strides, K> strides;  // per operand, same rank as shape
  int64_t numel = 0;

  int64_t inner_stride(size_t k) const { return strides[k].back(); }
  int64_t inner_size() const { return shape.back(); }
};

// Collapses `shape` for operands with the given strides (each of shape's rank).
template <size_t K>
StridedLoop<K> collapse(const Shape& shape, const std::array<const Strides*, K>& strides) {
  StridedLoop<K> loop;
  loop.numel = cotan::numel(shape);
  // Built innermost first, reversed at the end.
  for (size_t i = shape.size(); i-- > 0;) {
    int64_t size = shape[i];
    if (size == 1) continue;
    bool merge = !loop.shape.empty();
    for (size_t k = 0; k < K && merge; ++k)
      merge = (*strides[k])[i] == loop.strides[k].back() * loop.shape.back();
    if (merge) {
      loop.shape.back() *= size;
      continue;
    }
    loop.shape.push_back(size);
    for (size_t k = 0; k < K; ++k) loop.strides[k].push_back((*strides[k])[i]);
  }
  if (loop.shape.empty()) {
    loop.shape.push_back(1);
    for (size_t k = 0; k < K; ++k) loop.strides[k].push_back(0);
  }
  std::reverse(loop.shape.begin(), loop.shape.end());
  for (size_t k = 0; k < K; ++k) std::reverse(loop.strides[k].begin(), loop.strides[k].end());
  return loop;
}

template <class... Ts>
StridedLoop<sizeof...(Ts)> collapse_tensors(const Ts&... tensors) {
  const Shape& shape = std::get<0>(std::tie(tensors...)).shape();
  return collapse<sizeof...(Ts)>(shape, {&tensors.strides()...});
}

// Calls run(offsets, n) for the runs covering row-major elements [begin, end); offsets[k] is the
// element offset of operand k at the run's first element.
template <size_t K, class Run>
void for_each_run(const StridedLoop<K>& loop, int64_t begin, int64_t end, Run&& run) {
  const size_t ndim = loop.shape.size();
  const size_t inner = ndim - 1;
  // Multi-index of `begin` (at most a handful of dimensions after collapsing).
  std::array<int64_t, 16> index_small{};
  std::vector<int64_t> index_large;
  int64_t* index = index_small.data();
  if (ndim > index_small.size()) {
    index_large.assign(ndim, 0);
    index = index_large.data();
  }
  std::array<int64_t, K> offsets{};
  int64_t rest = begin;
  for (size_t d = ndim; d-- > 0;) {
    index[d] = rest % loop.shape[d];
    rest /= loop.shape[d];
    for (size_t k = 0; k < K; ++k) offsets[k] += index[d] * loop.strides[k][d];
  }
  int64_t pos = begin;
  while (pos < end) {
    int64_t n = std::min(loop.shape[inner] - index[inner], end - pos);
    run(offsets, n);
    pos += n;
    if (pos >= end) break;
    // Advance to the next run: finish the inner dimension, then carry outwards.
    index[inner] += n;
    for (size_t k = 0; k < K; ++k) offsets[k] += n * loop.strides[k][inner];
    for (size_t d = inner; index[d] == loop.shape[d] && d > 0; --d) {
      index[d] = 0;
      index[d - 1] += 1;
      for (size_t k = 0; k < K; ++k) offsets[k] += loop.strides[k][d - 1] - loop.shape[d] * loop.strides[k][d];
    }
  }
}

// for_each_run over all elements, in parallel chunks of `grain` elements.
template <size_t K, class Run>
void parallel_runs(const StridedLoop<K>& loop, int64_t grain, Run&& run) {
  parallel_for(loop.numel, grain, [&](int64_t begin, int64_t end) { for_each_run(loop, begin, end, run); });
}

}  // namespace cotan::cpu
