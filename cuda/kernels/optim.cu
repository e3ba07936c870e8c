// The fused AdamW launcher (kernel in optim.cuh, contract in optim.hpp): one grid-stride launch.
#include "cuda/kernels/optim.hpp"

#include "cuda/kernels/launch.hpp"
#include "cuda/kernels/optim.cuh"

namespace cotan::COTAN_KERNELS {
namespace {

constexpr const char* kOp = "adamw";

template <class W>
void run(const Tensor& p, const Tensor& g, const Tensor& m, const Tensor& v, const train::AdamWScalars<double>& s,
         Tensor& p_out, Tensor& m_out, Tensor& v_out) {
  const int64_t n = p.numel();
  p_out = empty_tensor(p.shape(), p.dtype());
  m_out = empty_tensor(p.shape(), p.dtype());
  v_out = empty_tensor(p.shape(), p.dtype());
  if (n == 0) return;
  const LaunchSize size = grid_stride_launch(n);
  simt::launch(adamw_kernel<W>, size.grid, size.block, 0, n, train::narrow<W>(s), p.data<W>(), g.data<W>(), m.data<W>(),
               v.data<W>(), p_out.data<W>(), m_out.data<W>(), v_out.data<W>());
}

}  // namespace

namespace launch {

void adamw_update(const Tensor& p, const Tensor& g, const Tensor& m, const Tensor& v,
                  const train::AdamWScalars<double>& s, Tensor& p_out, Tensor& m_out, Tensor& v_out) {
  for (const Tensor* t : {&p, &g, &m, &v}) {
    check_on_target(kOp, *t);
    check(t->is_contiguous() && t->shape() == p.shape() && t->dtype() == p.dtype(), kOp,
          "expects contiguous tensors of one shape and dtype, got ", t->dtype(), " ", to_string(t->shape()), " and ",
          p.dtype(), " ", to_string(p.shape()));
  }
  if (p.dtype() == DType::f32) run<float>(p, g, m, v, s, p_out, m_out, v_out);
  else if (p.dtype() == DType::f64) run<double>(p, g, m, v, s, p_out, m_out, v_out);
  else fail(kOp, "works in f32 or f64, got ", p.dtype());
}

}  // namespace launch
}  // namespace cotan::COTAN_KERNELS
