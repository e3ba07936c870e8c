// One element of the AdamW update (train/optim.hpp), for the CPU loop (tensor/cpu/optim.cpp) and
// the CUDA kernel (cuda/kernels/optim.cuh) alike: plain arithmetic in the working dtype W, in the
// order of the composed update. COTAN_HOST_DEVICE (tensor/host_device.hpp) lets nvcc compile it
// for the device.
#pragma once

#include <cmath>

#include "tensor/host_device.hpp"

namespace cotan {

// The step's constants in W (shrink is 1 for parameters without weight decay; grad_scale is the
// clipping factor, 1 when the gradients are not clipped).
template <class W>
struct AdamWScalars {
  W shrink, beta1, one_minus_beta1, beta2, one_minus_beta2, bias2_sqrt, eps, step_size;
  W grad_scale = W(1);
};

// The constants in the working dtype W (computed in double, rounded once).
template <class W>
AdamWScalars<W> narrow(const AdamWScalars<double>& s) {
  return {W(s.shrink), W(s.beta1), W(s.one_minus_beta1), W(s.beta2),      W(s.one_minus_beta2),
          W(s.bias2_sqrt), W(s.eps),  W(s.step_size),       W(s.grad_scale)};
}

// g <- g * grad_scale (in W, as clipping's g * scale rounds it; exact when it is 1);
// p <- p * shrink; m <- beta1 m + (1 - beta1) g; v <- beta2 v + (1 - beta2) g^2;
// p <- p - step_size * m / (sqrt(v) / bias2_sqrt + eps)
template <class W>
COTAN_HOST_DEVICE inline void adamw_element(W& p, W g, W& m, W& v, const AdamWScalars<W>& s) {
  g = g * s.grad_scale;
  p = p * s.shrink;
  m = m * s.beta1 + g * s.one_minus_beta1;
  v = v * s.beta2 + (g * g) * s.one_minus_beta2;
#if defined(__CUDA_ARCH__)
  const W root = ::sqrt(v);  // CUDA's float and double overloads
#else
  const W root = std::sqrt(v);
#endif
  const W denom = root / s.bias2_sqrt + s.eps;
  p = p - (m / denom) * s.step_size;
}

}  // namespace cotan
