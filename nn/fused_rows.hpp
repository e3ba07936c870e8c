// The row kernels behind nn/fused.hpp: what every backend computes (the CPU's here, in
// nn/fused_rows.cpp; the kernel backends' in cuda/kernels/rows.hpp, with the same signatures),
// below the autograd node: no tape, no broadcasting, arguments checked by the caller.
//
// C is the compute type: f64 for f64, f32 for f32 and bf16. Every result is a fresh contiguous
// tensor on the inputs' device.
//
//   rms_norm_forward(x [R, D], weight [D], eps) -> y [R, D] (x's dtype), rstd [R] (C)
//       rstd = 1 / sqrt(mean(h^2) + eps), h = x in C; y = weight * round(h rstd), where round
//       rounds to x's dtype (the composed op's cast back).
//   rms_norm_backward(dy, x, weight, rstd) -> dx [R, D], dweight [D]
//       n = h rstd, dn = dy weight: dx = rstd (dn - n mean(dn n)); dweight = sum over rows of
//       dy round(n), summed in f64 over fixed blocks of rows in a fixed order (the same bits
//       whatever the thread count or schedule).
//   swiglu_forward(g, u) -> y = round(silu(g)) u;  swiglu_backward(dy, g, u) -> dg, du
//       (one shape, any length), silu(g) = g s, s = 1 / (1 + exp(-g)):
//       dg = dy u s (1 + g (1 - s)), du = dy silu(g).
//   rope_forward(x, cos, sin) -> y;  rope_backward(dy, cos, sin) -> dx
//       x (dy), cos and sin of one shape [..., d], d even, each with unit stride along the last
//       axis and any strides elsewhere (0 for broadcast dims); results contiguous. With halves
//       x = [x1, x2], c = [c1, c2], s = [s1, s2]:
//         y  = [x1 c1 - x2 s1,  x2 c2 + x1 s2]   (products rounded to x's dtype, as composed)
//         dx = [g1 c1 + g2 s2,  g2 c2 - g1 s1]
// rms_norm and swiglu inputs that are not contiguous are copied first.
#pragma once

#include "tensor/tensor.hpp"

namespace cotan::rows {

struct RmsNormForward {
  Tensor y;     // [R, D], x's dtype
  Tensor rstd;  // [R], the compute dtype: what the backward reads
};

struct RmsNormGrads {
  Tensor dx;       // [R, D], x's dtype
  Tensor dweight;  // [D], the weight's dtype
};

struct SwigluGrads {
  Tensor dg, du;
};

// The CPU kernels (oneTBB over rows or elements).
RmsNormForward rms_norm_forward(const Tensor& x, const Tensor& weight, double eps);
RmsNormGrads rms_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& rstd);
Tensor swiglu_forward(const Tensor& g, const Tensor& u);
SwigluGrads swiglu_backward(const Tensor& dy, const Tensor& g, const Tensor& u);
Tensor rope_forward(const Tensor& x, const Tensor& cos, const Tensor& sin);
Tensor rope_backward(const Tensor& dy, const Tensor& cos, const Tensor& sin);

// The compute dtype of `dtype`: f64 for f64, f32 otherwise.
inline DType compute_dtype(DType dtype) { return dtype == DType::f64 ? DType::f64 : DType::f32; }

}  // namespace cotan::rows
