// The fused row ops (nn/fused.hpp): argument checks, one autograd node each, and the row kernels
// of the inputs' backend (Backend::rms_norm_forward ..., tensor/fused_ops.hpp: tensor/cpu/rows.cpp
// on the CPU, cuda/kernels/rows.cu on a CUDA device or the emulator serving one); then the
// composed oracles.
#include "nn/fused.hpp"

#include <cmath>

#include "autograd/autograd.hpp"
#include "tensor/op_table.hpp"
#include "tensor/ops.hpp"

namespace cotan::nn {

namespace {

void check_floating_input(const char* op, const char* name, const Tensor& t) {
  check(t.defined(), op, name, " is undefined");
  check(is_floating(t.dtype()), op, name, " must be floating, got ", t.dtype(), " ", to_string(t.shape()));
}

void check_pair(const char* op, const char* a_name, const Tensor& a, const char* b_name, const Tensor& b) {
  check(a.dtype() == b.dtype(), op, "dtypes of ", a_name, " ", to_string(a.shape()), " (", a.dtype(), ") and ",
        b_name, " ", to_string(b.shape()), " (", b.dtype(), ") do not match");
  check(a.device() == b.device(), op, a_name, " is on ", to_string(a.device()), " and ", b_name, " on ",
        to_string(b.device()));
}

// The cotangent in the output's dtype, contiguous.
Tensor cotangent_as(const Tensor& g, DType dtype) { return contiguous(g.dtype() == dtype ? g : cast(g, dtype)); }

// t with unit stride along its last axis (what the rope kernels read), a copy only when needed.
Tensor unit_last_stride(const Tensor& t) { return t.strides().back() == 1 || t.size(-1) <= 1 ? t : contiguous(t); }

}  // namespace

Tensor rms_norm(const Tensor& x, const Tensor& weight, double eps) {
  constexpr const char* kOp = "rms_norm";
  check_floating_input(kOp, "x", x);
  check_floating_input(kOp, "weight", weight);
  check(x.dim() >= 1 && weight.dim() == 1 && weight.size(0) == x.size(-1) && x.size(-1) > 0, kOp, "x ",
        to_string(x.shape()), " and weight ", to_string(weight.shape()),
        " do not match (weight must be [D], D the last axis of x, D > 0)");
  check_pair(kOp, "x", x, "weight", weight);
  check(std::isfinite(eps) && eps >= 0, kOp, "eps must be finite and non-negative, got ", eps);
  Backend* kernels = &backend(x.device());
  const int64_t dim = x.size(-1);
  const Tensor flat = reshape(x.detach(), {x.numel() / dim, dim}), w = weight.detach();
  RmsNormForward forward = kernels->rms_norm_forward(flat, w, eps);
  return record(kOp, reshape(forward.y, x.shape()), {x, weight},
                [kernels, flat, w, rstd = forward.rstd, shape = x.shape()](const Tensor& g) {
                  const Tensor dy = reshape(cotangent_as(g, flat.dtype()), flat.shape());
                  RmsNormGrads grads = kernels->rms_norm_backward(dy, flat, w, rstd);
                  return std::vector{reshape(grads.dx, shape), grads.dweight};
                });
}

Tensor swiglu(const Tensor& g, const Tensor& u) {
  constexpr const char* kOp = "swiglu";
  check_floating_input(kOp, "g", g);
  check_floating_input(kOp, "u", u);
  check_pair(kOp, "g", g, "u", u);
  const Shape shape = broadcast_shapes(g.shape(), u.shape(), kOp);
  Backend* kernels = &backend(g.device());
  // Broadcast before the node: the kernels see one shape, the pullback sums where it expanded.
  const Tensor gb = broadcast_to(g.detach(), shape), ub = broadcast_to(u.detach(), shape);
  Tensor y = kernels->swiglu_forward(gb, ub);
  return record(kOp, y, {g, u}, [kernels, gb, ub, g_shape = g.shape(), u_shape = u.shape()](const Tensor& dy) {
    SwigluGrads grads = kernels->swiglu_backward(cotangent_as(dy, gb.dtype()), gb, ub);
    return std::vector{grads.dg.shape() == g_shape ? grads.dg : sum_to(grads.dg, g_shape),
                       grads.du.shape() == u_shape ? grads.du : sum_to(grads.du, u_shape)};
  });
}

Tensor rope(const Tensor& x, const Tensor& cos, const Tensor& sin) {
  constexpr const char* kOp = "rope";
  check_floating_input(kOp, "x", x);
  check_floating_input(kOp, "cos", cos);
  check_floating_input(kOp, "sin", sin);
  check(cos.shape() == sin.shape(), kOp, "cos ", to_string(cos.shape()), " and sin ", to_string(sin.shape()),
        " do not match");
  check(x.dim() >= 1 && cos.dim() >= 1 && cos.size(-1) == x.size(-1), kOp, "x ", to_string(x.shape()),
        " and tables ", to_string(cos.shape()), " do not match (the last axes must be equal)");
  check(x.size(-1) % 2 == 0, kOp, "x ", to_string(x.shape()), " needs an even last axis to rotate halves");
  check_pair(kOp, "x", x, "cos", cos);
  check_pair(kOp, "x", x, "sin", sin);
  check(!grad_enabled() || (!cos.tracked() && !sin.tracked()), kOp,
        "cos and sin are constants and get no gradient; detach them (or use rope_composed)");
  const Shape shape = broadcast_shapes(x.shape(), cos.shape(), kOp);
  Backend* kernels = &backend(x.device());
  const Tensor xb = unit_last_stride(broadcast_to(x.detach(), shape));
  const Tensor cb = unit_last_stride(broadcast_to(cos.detach(), shape));
  const Tensor sb = unit_last_stride(broadcast_to(sin.detach(), shape));
  Tensor y = kernels->rope_forward(xb, cb, sb);
  return record(kOp, y, {x}, [kernels, cb, sb, x_shape = x.shape()](const Tensor& g) {
    Tensor dx = kernels->rope_backward(cotangent_as(g, cb.dtype()), cb, sb);
    return std::vector{dx.shape() == x_shape ? dx : sum_to(dx, x_shape)};
  });
}

// ---- composed ----

Tensor rms_norm_composed(const Tensor& x, const Tensor& weight, double eps) {
  const DType compute = x.dtype() == DType::f64 ? DType::f64 : DType::f32;
  Tensor h = cast(x, compute);
  h = h * rsqrt(mean(square(h), {-1}, true) + eps);
  return weight * cast(h, x.dtype());
}

Tensor swiglu_composed(const Tensor& g, const Tensor& u) { return silu(g) * u; }

Tensor rope_composed(const Tensor& x, const Tensor& cos, const Tensor& sin) {
  const int64_t d = x.size(-1), half = d / 2;
  // rotate_half(x) = cat(-x2, x1)
  Tensor rotated = concat({neg(slice(x, -1, half, d)), slice(x, -1, 0, half)}, -1);
  return x * cos + rotated * sin;
}

}  // namespace cotan::nn
