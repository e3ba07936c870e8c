// Fused row ops of the Llama/Qwen2 layers (docs/models.md, "The fused row ops"), each one pass over its rows and
// one autograd node with a hand-written pullback, next to the composed version built from
// primitive ops that is its test oracle (STYLE.md 5).
//
//   rms_norm(x, weight, eps)  x [..., D], weight [D], one dtype
//       y = weight * cast(h * rsqrt(mean(h^2) + eps), x's dtype),  h = x in f32 (f64 stays f64):
//       HF's LlamaRMSNorm, with the composed ops' roundings (the cast back to x's dtype before
//       the weight). Gradients for x and weight; the forward saves rstd per row.
//   swiglu(g, u)              g, u broadcastable, one dtype: y = silu(g) * u (bf16 rounds silu(g)
//       to bf16 before the product, as the composed ops do). Gradients for g and u.
//   rope(x, cos, sin)         x [..., d] (d even), cos and sin [..., d] broadcastable to x, x's
//       dtype: y = x cos + rotate_half(x) sin, rotate_half(x) = cat(-x2, x1) (HF, split halves,
//       the tables of nn::Rope::tables). Gradient for x only: the tables are constants, and
//       tracked tables are refused (rope_composed differentiates them).
//
// f64, f32 and bf16; bf16 computes in f32 and gradients are rounded once. Inputs may have any
// strides (rms_norm and swiglu copy non-contiguous ones first; rope reads rows in place). Tensors
// run the row kernels of their backend (tensor/fused_ops.hpp). Bad input throws "[op] ..." naming
// the shapes or dtypes.
#pragma once

#include "tensor/tensor.hpp"

namespace cotan::nn {

Tensor rms_norm(const Tensor& x, const Tensor& weight, double eps);
Tensor swiglu(const Tensor& g, const Tensor& u);
Tensor rope(const Tensor& x, const Tensor& cos, const Tensor& sin);

// The same functions from primitive ops (casts, square, mean, rsqrt, silu, slice, concat, mul):
// the oracles of the tests.
Tensor rms_norm_composed(const Tensor& x, const Tensor& weight, double eps);
Tensor swiglu_composed(const Tensor& g, const Tensor& u);
Tensor rope_composed(const Tensor& x, const Tensor& cos, const Tensor& sin);

}  // namespace cotan::nn
