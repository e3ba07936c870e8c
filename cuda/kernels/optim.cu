// The optimizer launchers (contract in launch.hpp and tensor/fused_ops.hpp): the fused AdamW
// update (kernel in optim.cuh), one grid-stride launch; the squared norm of the gradients, from
// the elementwise and reduce launchers (cast, square, sum: the composed ops' kernels).
#include <vector>

#include "cuda/kernels/launch.hpp"
#include "cuda/kernels/optim.cuh"

namespace cotan::COTAN_KERNELS {
namespace {

constexpr const char* kOp = "adamw";

template <class W>
AdamWTensors run(const Tensor& p, const Tensor& g, const Tensor& m, const Tensor& v, const AdamWScalars<double>& s) {
  const int64_t n = p.numel();
  AdamWTensors out{empty_tensor(p.shape(), p.dtype()), empty_tensor(p.shape(), p.dtype()),
                   empty_tensor(p.shape(), p.dtype())};
  if (n == 0) return out;
  const LaunchSize size = grid_stride_launch(n);
  simt::launch(adamw_kernel<W>, size.grid, size.block, 0, n, narrow<W>(s), p.data<W>(), g.data<W>(), m.data<W>(),
               v.data<W>(), out.p.data<W>(), out.m.data<W>(), out.v.data<W>());
  return out;
}

}  // namespace

namespace launch {

AdamWTensors adamw_update(const Tensor& p, const Tensor& g, const Tensor& m, const Tensor& v,
                          const AdamWScalars<double>& s) {
  for (const Tensor* t : {&p, &g, &m, &v}) {
    check_on_target(kOp, *t);
    check(t->is_contiguous() && t->shape() == p.shape() && t->dtype() == p.dtype(), kOp,
          "expects contiguous tensors of one shape and dtype, got ", t->dtype(), " ", to_string(t->shape()), " and ",
          p.dtype(), " ", to_string(p.shape()));
  }
  if (p.dtype() == DType::f32) return run<float>(p, g, m, v, s);
  if (p.dtype() == DType::f64) return run<double>(p, g, m, v, s);
  fail(kOp, "works in f32 or f64, got ", p.dtype());
}

Tensor squared_norm(const std::vector<Tensor>& xs) {
  std::vector<int64_t> all_axes;
  Tensor total;
  for (const Tensor& x : xs) {
    check_on_target("global_norm", x);
    all_axes.resize(size_t(x.dim()));
    for (int64_t a = 0; a < x.dim(); ++a) all_axes[size_t(a)] = a;
    Tensor wide = x;
    if (x.dtype() != DType::f64) {
      wide = empty_tensor(x.shape(), DType::f64);
      assign(wide, x);
    }
    const Tensor part = reduce(ReduceOp::sum, unary(UnaryOp::square, wide, 0, 0), all_axes, false);
    total = total.defined() ? binary(BinaryOp::add, total, part) : part;
  }
  if (!total.defined()) {
    total = empty_tensor({}, DType::f64);
    fill(total, 0);
  }
  return total;
}

}  // namespace launch
}  // namespace cotan::COTAN_KERNELS
