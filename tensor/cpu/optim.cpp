// The CPU backend's optimizer kernels (tensor/fused_ops.hpp; the ops in train/optim.hpp):
//   adamw_update  one pass over a parameter, its gradient and its two moments, the element math
//                 of tensor/adamw_element.hpp (shared with the CUDA kernel), in chunks of 2^14
//                 elements run in parallel;
//   squared_norm  sum(x^2) in f64 per tensor through this backend's own kernels (cast, square,
//                 sum: the same bits as the composed ops), added in the tensors' order.
#include <vector>

#include "tensor/adamw_element.hpp"
#include "tensor/cpu/backend.hpp"
#include "tensor/cpu/parallel.hpp"

namespace cotan::cpu {

namespace {

template <class W>
AdamWTensors adamw_typed(const Tensor& p, const Tensor& g, const Tensor& m, const Tensor& v,
                         const AdamWScalars<double>& s) {
  const AdamWScalars<W> k = narrow<W>(s);
  AdamWTensors out{Tensor::empty(p.shape(), p.dtype()), Tensor::empty(p.shape(), p.dtype()),
                   Tensor::empty(p.shape(), p.dtype())};
  const W *pp = p.data<W>(), *gp = g.data<W>(), *mp = m.data<W>(), *vp = v.data<W>();
  W *po = out.p.data<W>(), *mo = out.m.data<W>(), *vo = out.v.data<W>();
  parallel_for(p.numel(), 1 << 14, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      W pi = pp[i], mi = mp[i], vi = vp[i];
      adamw_element(pi, gp[i], mi, vi, k);
      po[i] = pi;
      mo[i] = mi;
      vo[i] = vi;
    }
  });
  return out;
}

}  // namespace

AdamWTensors CpuBackend::adamw_update(const Tensor& p, const Tensor& g, const Tensor& m, const Tensor& v,
                                      const AdamWScalars<double>& s) {
  return p.dtype() == DType::f64 ? adamw_typed<double>(p, g, m, v, s) : adamw_typed<float>(p, g, m, v, s);
}

Tensor CpuBackend::squared_norm(const std::vector<Tensor>& xs) {
  std::vector<int64_t> all_axes;
  Tensor total;
  for (const Tensor& x : xs) {
    all_axes.resize(size_t(x.dim()));
    for (int64_t a = 0; a < x.dim(); ++a) all_axes[size_t(a)] = a;
    const Tensor wide = x.dtype() == DType::f64 ? x : contiguous_as(x, DType::f64);
    const Tensor part = reduce(ReduceOp::sum, unary(UnaryOp::square, wide, 0, 0), all_axes, false);
    total = total.defined() ? binary(BinaryOp::add, total, part) : part;
  }
  if (!total.defined()) {
    total = Tensor::empty({}, DType::f64);
    fill(total, 0);
  }
  return total;
}

}  // namespace cotan::cpu
