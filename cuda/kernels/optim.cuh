// The fused AdamW update (train/optim.hpp, tensor/fused_ops.hpp): one pass over a parameter, its
// gradient and its two moments, each element read once and the three results written once,
// instead of the dozen elementwise kernels of the composed update. The element math is
// adamw_element() (tensor/adamw_element.hpp), shared with the CPU loop in tensor/cpu/optim.cpp,
// so the two compute the same expression.
#pragma once

#include "cuda/kernels/common.cuh"
#include "tensor/adamw_element.hpp"

namespace cotan::COTAN_KERNELS {

// All five arrays contiguous with n elements of the working dtype W (f32 or f64); the outputs
// are fresh buffers (the update is functional: the inputs are never written).
template <class W>
SIMT_GLOBAL void adamw_kernel(int64_t n, AdamWScalars<W> s, const W* p, const W* g, const W* m, const W* v,
                              W* p_out, W* m_out, W* v_out) {
  for (int64_t i = first_index(); i < n; i += index_stride()) {
    W pi = p[i], mi = m[i], vi = v[i];
    adamw_element(pi, g[i], mi, vi, s);
    p_out[i] = pi;
    m_out[i] = mi;
    v_out[i] = vi;
  }
}

}  // namespace cotan::COTAN_KERNELS
