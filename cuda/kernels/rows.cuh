// The row kernels of the fused layers (nn/fused.hpp; the math and rounding of the CPU's kernels,
// tensor/fused_ops.hpp and tensor/cpu/rows.cpp): RMSNorm and RoPE forward and backward over
// rows, SwiGLU's activation over elements. C = compute_t<T>: f64 computes in f64, f32 and bf16
// in f32.
//
// rms_norm, one row per group (a warp for rows up to kShortRow, else the block), x [R, D]:
//   rms_norm_fwd     one read of the row for sum(h^2) (f64, the group's fixed tree), then
//                    y = weight * round(h rstd). Saves rstd [R] (C) for the backward.
//   rms_norm_bwd     dx = rstd (dn - n mean(dn n)), n = h rstd, dn = dy weight (one group sum);
//                    the weight gradient goes to this group's row of partial [groups, D] (f64):
//                    column j belongs to the group's thread j % Group, which adds the group's rows
//                    in order. No atomics.
//   rms_norm_dweight dweight_j = sum over groups, in group order, of partial[., j]: the same bits
//                    for a given launch shape, whatever the schedule.
// swiglu, one element per thread of a grid-stride loop (contiguous operands):
//   swiglu_fwd       y = round(silu(g)) u
//   swiglu_bwd       dg = dy u s (1 + g (1 - s)), du = dy round(silu(g)), s = sigmoid(g)
// rope, one pair (k, k + d/2) of a row per thread; rows of x (dy), cos and sin are found through a
// StridedLayout of the leading dims (any strides, 0 for broadcast), the output is contiguous:
//   rope_fwd         y = [x1 c1 - x2 s1, x2 c2 + x1 s2]   (products rounded to T, as composed)
//   rope_bwd         dx = [g1 c1 + g2 s2, g2 c2 - g1 s1]
#pragma once

#include <type_traits>

#include "cuda/kernels/row_group.cuh"

namespace cotan::COTAN_KERNELS {

constexpr int64_t kShortRow = 1024;  // rows up to this long: one warp per row

// v rounded to T's precision and back (the composed ops' intermediate casts; identity unless bf16).
template <class T>
SIMT_DEVICE compute_t<T> round_to(compute_t<T> v) {
  if constexpr (std::is_same_v<T, bf16>) return to_float(to_bf16(v));
  else return v;
}

struct AddF64 {
  SIMT_DEVICE double operator()(double a, double b) const { return a + b; }
};

// ---- rms_norm ----

template <class T, unsigned Group>
SIMT_GLOBAL void rms_norm_fwd_kernel(int64_t rows, int64_t dim, double eps, const T* x, const T* weight, T* y,
                                     compute_t<T>* rstd) {
  using C = compute_t<T>;
  using G = RowGroup<Group>;
  const C inv_dim = C(1.0 / double(dim)), eps_c = C(eps);
  for (int64_t r = G::first_row(); r < rows; r += G::row_stride()) {
    const T* xr = x + r * dim;
    double sum_sq = 0;
    for (int64_t j = G::rank(); j < dim; j += Group) {
      const C h = load(xr + j);
      sum_sq += double(h * h);
    }
    sum_sq = group_reduce<Group>(sum_sq, AddF64{});
    // mean(h^2) as the composed mean: the f64 sum rounded to C, times 1 / D in C.
    const C rs = C(1) / math::sqrt(C(sum_sq) * inv_dim + eps_c);
    if (G::rank() == 0) rstd[r] = rs;
    T* yr = y + r * dim;
    for (int64_t j = G::rank(); j < dim; j += Group) yr[j] = convert_to<T>(load(weight + j) * round_to<T>(load(xr + j) * rs));
  }
}

template <class T, unsigned Group>
SIMT_GLOBAL void rms_norm_bwd_kernel(int64_t rows, int64_t dim, const T* dy, const T* x, const T* weight,
                                     const compute_t<T>* rstd, T* dx, double* partial) {
  using C = compute_t<T>;
  using G = RowGroup<Group>;
  const C inv_dim = C(1.0 / double(dim));
  double* part = partial + G::first_row() * dim;  // this group's row of partial sums
  for (int64_t j = G::rank(); j < dim; j += Group) part[j] = 0;
  for (int64_t r = G::first_row(); r < rows; r += G::row_stride()) {
    const T *xr = x + r * dim, *gr = dy + r * dim;
    const C rs = rstd[r];
    double dot = 0;
    for (int64_t j = G::rank(); j < dim; j += Group)
      dot += double((load(gr + j) * load(weight + j)) * (load(xr + j) * rs));
    // The gradient through rstd: mean(dn n).
    const C mean_dn_n = C(group_reduce<Group>(dot, AddF64{})) * inv_dim;
    T* dxr = dx + r * dim;
    for (int64_t j = G::rank(); j < dim; j += Group) {
      const C g = load(gr + j), n = load(xr + j) * rs, dn = g * load(weight + j);
      dxr[j] = convert_to<T>(rs * (dn - n * mean_dn_n));
      part[j] += double(g * round_to<T>(n));
    }
  }
}

// dweight [D] = the sum of partial [groups, D] over groups, in group order, one column per thread.
template <class T>
SIMT_GLOBAL void rms_norm_dweight_kernel(int64_t groups, int64_t dim, const double* partial, T* dweight) {
  for (int64_t j = first_index(); j < dim; j += index_stride()) {
    double sum = 0;
    for (int64_t k = 0; k < groups; ++k) sum += partial[k * dim + j];
    dweight[j] = convert_to<T>(sum);
  }
}

// ---- swiglu ----

template <class C>
SIMT_DEVICE C sigmoid_of(C g) {
  return C(1) / (C(1) + math::exp(-g));
}

template <class T>
SIMT_GLOBAL void swiglu_fwd_kernel(int64_t n, const T* g, const T* u, T* y) {
  using C = compute_t<T>;
  for (int64_t i = first_index(); i < n; i += index_stride()) {
    const C gi = load(g + i);
    y[i] = convert_to<T>(round_to<T>(gi * sigmoid_of(gi)) * load(u + i));
  }
}

template <class T>
SIMT_GLOBAL void swiglu_bwd_kernel(int64_t n, const T* dy, const T* g, const T* u, T* dg, T* du) {
  using C = compute_t<T>;
  for (int64_t i = first_index(); i < n; i += index_stride()) {
    const C gi = load(g + i), di = load(dy + i), s = sigmoid_of(gi);
    dg[i] = convert_to<T>(di * load(u + i) * s * (C(1) + gi * (C(1) - s)));
    du[i] = convert_to<T>(di * round_to<T>(gi * s));
  }
}

// ---- rope ----

// rows x half pairs; lead: the leading dims of a (x or dy), cos and sin, in that order.
template <class T, bool kBackward>
SIMT_GLOBAL void rope_kernel(int64_t rows, int64_t half, StridedLayout<3> lead, const T* a, const T* cos,
                             const T* sin, T* out) {
  using C = compute_t<T>;
  for (int64_t i = first_index(); i < rows * half; i += index_stride()) {
    const int64_t r = i / half, k = i % half;
    int64_t at[3];
    lead.offsets(r, at);
    const C x1 = load(a + at[0] + k), x2 = load(a + at[0] + k + half);
    const C c1 = load(cos + at[1] + k), c2 = load(cos + at[1] + k + half);
    const C s1 = load(sin + at[2] + k), s2 = load(sin + at[2] + k + half);
    T* y = out + r * 2 * half;
    if constexpr (kBackward) {
      // The transpose of the rotation: x1 feeds y1 through c1 and y2 through s2.
      y[k] = convert_to<T>(x1 * c1 + x2 * s2);
      y[k + half] = convert_to<T>(x2 * c2 - x1 * s1);
    } else {
      y[k] = convert_to<T>(round_to<T>(x1 * c1) - round_to<T>(x2 * s1));
      y[k + half] = convert_to<T>(round_to<T>(x2 * c2) + round_to<T>(x1 * s2));
    }
  }
}

}  // namespace cotan::COTAN_KERNELS
