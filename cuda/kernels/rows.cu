// The row kernels' launchers (kernels in rows.cuh, contract in launch.hpp and
// tensor/fused_ops.hpp): rms_norm runs one launch forward and two backward (rows, then the
// fixed-order dweight sum over the groups' partials); swiglu and rope one launch each. All on the
// current stream.
#include <type_traits>

#include "cuda/kernels/launch.hpp"
#include "cuda/kernels/rows.cuh"

namespace cotan::COTAN_KERNELS {
namespace {

// Blocks of the rms_norm backward: each group keeps a row of dweight partials (f64, D long).
constexpr int64_t kMaxWeightBlocks = 256;

template <class T>
const T* in(const Tensor& t) {
  return static_cast<const T*>(t.data_ptr());
}
template <class T>
T* out(const Tensor& t) {
  return static_cast<T*>(t.data_ptr());
}

void check_rms_norm(const Tensor& x, const Tensor& weight) {
  check_on_target("rms_norm", x);
  check_on_target("rms_norm", weight);
  check(x.dim() == 2 && weight.dim() == 1 && weight.size(0) == x.size(1) && weight.dtype() == x.dtype(), "rms_norm",
        "x ", x.dtype(), " ", to_string(x.shape()), " and weight ", weight.dtype(), " ", to_string(weight.shape()),
        " do not fit");
}

void check_same(const char* op, const Tensor& a, const Tensor& b) {
  check_on_target(op, a);
  check_on_target(op, b);
  check(a.shape() == b.shape() && a.dtype() == b.dtype(), op, "operands ", a.dtype(), " ", to_string(a.shape()),
        " and ", b.dtype(), " ", to_string(b.shape()), " do not match");
}

// rope's three operands of one shape [..., d], d even, each with a unit last stride.
StridedLayout<3> rope_layout(const Tensor& a, const Tensor& cos, const Tensor& sin) {
  check_same("rope", a, cos);
  check_same("rope", a, sin);
  check(a.dim() >= 1 && a.size(-1) % 2 == 0, "rope", "needs an even last axis, got ", to_string(a.shape()));
  for (const Tensor* t : {&a, &cos, &sin})
    check(t->strides().back() == 1, "rope", "operands need a unit last stride, got strides ",
          to_string(t->strides()));
  const Shape lead(a.shape().begin(), a.shape().end() - 1);
  Strides strides[3];
  const Tensor* ts[3] = {&a, &cos, &sin};
  for (int k = 0; k < 3; ++k) strides[k].assign(ts[k]->strides().begin(), ts[k]->strides().end() - 1);
  return make_layout<3>(lead, {&strides[0], &strides[1], &strides[2]});
}

template <bool kBackward>
Tensor rope_launch(const Tensor& a, const Tensor& cos, const Tensor& sin) {
  const StridedLayout<3> lead = rope_layout(a, cos, sin);
  Tensor y = empty_tensor(a.shape(), a.dtype());
  const int64_t half = a.size(-1) / 2, rows = half == 0 ? 0 : a.numel() / (2 * half);
  if (rows * half == 0) return y;
  dispatch_floating("rope", a.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const LaunchSize size = grid_stride_launch(rows * half);
    simt::launch(rope_kernel<T, kBackward>, size.grid, size.block, 0, rows, half, lead, in<T>(a), in<T>(cos),
                 in<T>(sin), out<T>(y));
  });
  return y;
}

}  // namespace

namespace launch {

RmsNormForward rms_norm_forward(const Tensor& x, const Tensor& weight, double eps) {
  check_rms_norm(x, weight);
  const int64_t n_rows = x.size(0), dim = x.size(1);
  RmsNormForward result{empty_tensor(x.shape(), x.dtype()),
                              empty_tensor({n_rows}, row_compute_dtype(x.dtype()))};
  if (x.numel() == 0) return result;
  const Tensor xc = contiguous_on_target(x), wc = contiguous_on_target(weight);
  dispatch_floating("rms_norm", x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using C = compute_t<T>;
    auto run = [&](auto group) {
      constexpr unsigned Group = decltype(group)::value;
      const LaunchSize size = row_launch<Group>(n_rows);
      simt::launch(rms_norm_fwd_kernel<T, Group>, size.grid, size.block, 0, n_rows, dim, eps, in<T>(xc), in<T>(wc),
                   out<T>(result.y), out<C>(result.rstd));
    };
    if (dim <= kShortRow) run(std::integral_constant<unsigned, kWarpSize>{});
    else run(std::integral_constant<unsigned, kRowBlock>{});
  });
  return result;
}

RmsNormGrads rms_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& rstd) {
  check_rms_norm(x, weight);
  check_same("rms_norm", dy, x);
  check_on_target("rms_norm", rstd);
  const int64_t n_rows = x.size(0), dim = x.size(1);
  check(rstd.shape() == Shape{n_rows} && rstd.dtype() == row_compute_dtype(x.dtype()), "rms_norm", "rstd ",
        rstd.dtype(), " ", to_string(rstd.shape()), " does not fit x ", to_string(x.shape()));
  RmsNormGrads result{empty_tensor(x.shape(), x.dtype()), empty_tensor(weight.shape(), weight.dtype())};
  if (dim == 0) return result;
  if (n_rows == 0) {
    launch::fill(result.dweight, 0);
    return result;
  }
  const Tensor g = contiguous_on_target(dy), xc = contiguous_on_target(x), wc = contiguous_on_target(weight),
               rc = contiguous_on_target(rstd);
  dispatch_floating("rms_norm", x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using C = compute_t<T>;
    auto run = [&](auto group) {
      constexpr unsigned Group = decltype(group)::value;
      LaunchSize size = row_launch<Group>(n_rows);
      size.grid.x = unsigned(std::min<int64_t>(size.grid.x, kMaxWeightBlocks));
      const int64_t groups = int64_t(size.grid.x) * RowGroup<Group>::kPerBlock;
      Tensor partial = empty_tensor({groups, dim}, DType::f64);
      simt::launch(rms_norm_bwd_kernel<T, Group>, size.grid, size.block, 0, n_rows, dim, in<T>(g), in<T>(xc),
                   in<T>(wc), in<C>(rc), out<T>(result.dx), out<double>(partial));
      const LaunchSize columns = grid_stride_launch(dim);
      simt::launch(rms_norm_dweight_kernel<T>, columns.grid, columns.block, 0, groups, dim, in<double>(partial),
                   out<T>(result.dweight));
    };
    if (dim <= kShortRow) run(std::integral_constant<unsigned, kWarpSize>{});
    else run(std::integral_constant<unsigned, kRowBlock>{});
  });
  return result;
}

Tensor swiglu_forward(const Tensor& g, const Tensor& u) {
  check_same("swiglu", g, u);
  Tensor y = empty_tensor(g.shape(), g.dtype());
  const int64_t n = g.numel();
  if (n == 0) return y;
  const Tensor gc = contiguous_on_target(g), uc = contiguous_on_target(u);
  dispatch_floating("swiglu", g.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const LaunchSize size = grid_stride_launch(n);
    simt::launch(swiglu_fwd_kernel<T>, size.grid, size.block, 0, n, in<T>(gc), in<T>(uc), out<T>(y));
  });
  return y;
}

SwigluGrads swiglu_backward(const Tensor& dy, const Tensor& g, const Tensor& u) {
  check_same("swiglu", g, u);
  check_same("swiglu", dy, g);
  SwigluGrads result{empty_tensor(g.shape(), g.dtype()), empty_tensor(g.shape(), g.dtype())};
  const int64_t n = g.numel();
  if (n == 0) return result;
  const Tensor dc = contiguous_on_target(dy), gc = contiguous_on_target(g), uc = contiguous_on_target(u);
  dispatch_floating("swiglu", g.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const LaunchSize size = grid_stride_launch(n);
    simt::launch(swiglu_bwd_kernel<T>, size.grid, size.block, 0, n, in<T>(dc), in<T>(gc), in<T>(uc),
                 out<T>(result.dg), out<T>(result.du));
  });
  return result;
}

Tensor rope_forward(const Tensor& x, const Tensor& cos, const Tensor& sin) { return rope_launch<false>(x, cos, sin); }

Tensor rope_backward(const Tensor& dy, const Tensor& cos, const Tensor& sin) {
  return rope_launch<true>(dy, cos, sin);
}

}  // namespace launch
}  // namespace cotan::COTAN_KERNELS
