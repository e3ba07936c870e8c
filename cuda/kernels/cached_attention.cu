// The cached attention launcher (kernel in cached_attention.cuh, contract in launch.hpp and
// tensor/fused_ops.hpp): one launch on the current stream.
#include <cmath>

#include "cuda/kernels/cached_attention.cuh"
#include "cuda/kernels/launch.hpp"

namespace cotan::COTAN_KERNELS {
namespace {

constexpr const char* kOp = "cached_attention";

}  // namespace

namespace launch {

Tensor cached_attention(const CachedAttentionSpec& spec) {
  for (const Tensor* x : {&spec.q, &spec.k, &spec.v, &spec.visible, &spec.sigma, &spec.alpha, &spec.alpha_ma,
                          &spec.u, &spec.count})
    if (x->defined()) check_on_target(kOp, *x);
  const DType dtype = spec.q.dtype();
  check(dtype == DType::f32 || dtype == DType::bf16, kOp, "the kernel takes f32 or bf16, got ", dtype);
  const int64_t b = spec.q.size(0), h = spec.q.size(1), tq = spec.q.size(2), d = spec.q.size(3);
  check(d >= 1 && d <= kCachedMaxHeadDim, kOp, "head dim ", d, " is not in [1, ", kCachedMaxHeadDim, "]");
  // k and v are read through their strides (the KV cache views longer buffers), copied only when
  // their last dim is not contiguous.
  auto rows_contiguous = [](const Tensor& x) {
    return x.size(3) <= 1 || x.strides()[3] == 1 ? x : contiguous_on_target(x);
  };
  const Tensor q = contiguous_on_target(spec.q), k = rows_contiguous(spec.k), v = rows_contiguous(spec.v),
               visible = contiguous_on_target(spec.visible), sigma = contiguous_on_target(spec.sigma),
               alpha = contiguous_on_target(spec.alpha), alpha_ma = contiguous_on_target(spec.alpha_ma),
               u = contiguous_on_target(spec.u), count = contiguous_on_target(spec.count);
  Tensor out = empty_tensor(q.shape(), dtype);
  if (q.numel() == 0) return out;
  auto run = [&](auto tag) {
    using T = decltype(tag);
    CachedAttentionArgs<T> a{};
    a.kind = spec.kind;
    a.heads = int(h);
    a.kv_heads = int(k.size(1));
    a.tq = int(tq);
    a.slots = int(k.size(2));
    a.d = int(d);
    a.scale = float(1.0 / std::sqrt(double(d)));
    a.q = ptr_or_null<T>(q);
    a.k = ptr_or_null<T>(k);
    a.v = ptr_or_null<T>(v);
    a.sigma = ptr_or_null<T>(sigma);
    a.alpha = ptr_or_null<T>(alpha);
    a.alpha_ma = ptr_or_null<T>(alpha_ma);
    a.u = ptr_or_null<T>(u);
    for (int axis = 0; axis < 3; ++axis) {
      a.k_strides[axis] = k.strides()[size_t(axis)];
      a.v_strides[axis] = v.strides()[size_t(axis)];
    }
    a.visible = ptr_or_null<bool>(visible);
    a.count = ptr_or_null<int64_t>(count);
    simt::launch(cached_attention_kernel<T>, simt::Dim3{unsigned(tq), unsigned(h), unsigned(b)},
                 simt::Dim3{kRowBlock, 1, 1}, 0, a, static_cast<T*>(out.data_ptr()));
  };
  if (dtype == DType::bf16) run(bf16());
  else run(float());
  return out;
}

}  // namespace launch
}  // namespace cotan::COTAN_KERNELS
