// Softmax, log_softmax and logsumexp along one axis, for f64, f32 and bf16 (computed in f32).
//
// Each line (cuda/kernels/row_group.cuh) is read in place with its strides, in two passes, with
// the CPU backend's arithmetic (tensor/cpu/reduce.cpp):
//   m = max of the line, NaN propagating; 0 when not finite (lines of -inf or +inf then give
//       NaN or -inf as on the CPU instead of inf - inf);
//   s = sum of exp(x - m), accumulated in f64;
//   softmax = exp(x - m) * (1 / s), log_softmax = (x - m) - log s, logsumexp = m + log s.
// Rows kernel: a group (a warp for short lines, else the block) owns a line; the group's max and
// sum are tree reductions in a fixed order. Columns kernel (neighbouring lines contiguous, the
// axis not innermost): one thread per line walks it sequentially, so that each step of a warp
// reads 32 neighbouring elements.
#pragma once

#include "cuda/kernels/row_group.cuh"

namespace cotan::COTAN_KERNELS {

enum class SoftmaxKind { softmax, log_softmax, logsumexp };

// The max of a and b; a NaN wins.
template <class C>
SIMT_DEVICE C max_with_nan(C a, C b) {
  return (b > a || math::is_nan(b)) ? b : a;
}

// The shift m of a line whose max is `max`: 0 unless finite.
template <class C>
SIMT_DEVICE C softmax_shift(C max) {
  return math::abs(max) < C(INFINITY) ? max : C(0);
}

// Writes the line's results given its shift m and sum s of exp(x - m). `first`, `stride`: the
// positions this thread writes (logsumexp: the thread of position 0 writes the one result).
template <SoftmaxKind Kind, class T>
SIMT_DEVICE void softmax_store(const T* line, int64_t step, T* dst, int64_t out_step, int64_t length, int64_t first,
                               int64_t stride, compute_t<T> m, double s) {
  using C = compute_t<T>;
  if constexpr (Kind == SoftmaxKind::logsumexp) {
    if (first == 0) *dst = convert_to<T>(double(m) + math::log(s));
  } else if constexpr (Kind == SoftmaxKind::softmax) {
    const C scale = C(1.0 / s);
    for (int64_t i = first; i < length; i += stride)
      dst[i * out_step] = convert_to<T>(math::exp(load(line + i * step) - m) * scale);
  } else {
    const C log_s = C(math::log(s));
    for (int64_t i = first; i < length; i += stride)
      dst[i * out_step] = convert_to<T>((load(line + i * step) - m) - log_s);
  }
}

template <SoftmaxKind Kind, class T, unsigned Group>
SIMT_GLOBAL void softmax_rows_kernel(AxisLines lines, const T* x, T* out) {
  using C = compute_t<T>;
  using G = RowGroup<Group>;
  const int64_t length = lines.length, step = lines.step;
  for (int64_t n = G::first_row(); n < lines.count; n += G::row_stride()) {
    int64_t at[2];
    lines.others.offsets(n, at);
    const T* line = x + at[0];
    C max = C(-INFINITY);
    for (int64_t i = G::rank(); i < length; i += Group) max = max_with_nan(max, load(line + i * step));
    const C m = softmax_shift(group_reduce<Group>(max, [](C a, C b) { return max_with_nan(a, b); }));
    double s = 0;
    for (int64_t i = G::rank(); i < length; i += Group) s += double(math::exp(load(line + i * step) - m));
    s = group_reduce<Group>(s, [](double a, double b) { return a + b; });
    softmax_store<Kind>(line, step, out + at[1], lines.out_step, length, G::rank(), Group, m, s);
  }
}

// One thread per line (AxisLines::columns).
template <SoftmaxKind Kind, class T>
SIMT_GLOBAL void softmax_columns_kernel(AxisLines lines, const T* x, T* out) {
  using C = compute_t<T>;
  const int64_t length = lines.length, step = lines.step;
  for (int64_t n = first_index(); n < lines.count; n += index_stride()) {
    int64_t at[2];
    lines.others.offsets(n, at);
    const T* line = x + at[0];
    C max = C(-INFINITY);
    for (int64_t i = 0; i < length; ++i) max = max_with_nan(max, load(line + i * step));
    const C m = softmax_shift(max);
    double s = 0;
    for (int64_t i = 0; i < length; ++i) s += double(math::exp(load(line + i * step) - m));
    softmax_store<Kind>(line, step, out + at[1], lines.out_step, length, 0, 1, m, s);
  }
}

}  // namespace cotan::COTAN_KERNELS
