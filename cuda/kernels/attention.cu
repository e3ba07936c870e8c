// The fused attention launchers (kernels in attention.cuh and attention_mma.cuh, contract in
// launch.hpp and tensor/fused_ops.hpp). Forward: one launch on the current stream. Backward: the dq kernel (which also
// writes D_i, dalpha and the sink's per-row terms), then the dkdv kernel that reads D_i, then the
// dsigma sum (sink). bf16 with head dim 64 or 128 runs the tensor-core kernels (on the GPU when
// the device is sm_80 or newer), everything else the SIMT ones.
#include <atomic>
#include <cmath>
#include <type_traits>

#include "cuda/kernels/attention.cuh"
#include "cuda/kernels/attention_mma.cuh"
#include "cuda/kernels/launch.hpp"

#if !COTAN_SIMT_EMULATED
#include "cuda/runtime.hpp"
#endif

namespace cotan::COTAN_KERNELS {
namespace {

constexpr const char* kOp = "attention";

// The core with its inputs contiguous on the target, checked for what the kernels take (the op
// checked the shapes).
AttentionSpec prepare(const AttentionSpec& in) {
  for (const Tensor* x : {&in.q, &in.k, &in.v, &in.alpha, &in.alpha_ma, &in.sigma})
    if (x->defined()) check_on_target(kOp, *x);
  check(in.q.dtype() == DType::f32 || in.q.dtype() == DType::bf16, kOp, "the kernels take f32 or bf16, got ",
        in.q.dtype());
  check(in.q.size(3) >= 1 && in.q.size(3) <= kAttnMaxHeadDim, kOp, "head dim ", in.q.size(3), " is not in [1, ",
        kAttnMaxHeadDim, "]");
  AttentionSpec p = in;
  p.q = contiguous_on_target(in.q);
  p.k = contiguous_on_target(in.k);
  p.v = contiguous_on_target(in.v);
  p.alpha = contiguous_on_target(in.alpha);
  p.alpha_ma = contiguous_on_target(in.alpha_ma);
  p.sigma = contiguous_on_target(in.sigma);
  return p;
}

template <class T>
AttentionArgs<T> args_of(const AttentionSpec& c) {
  AttentionArgs<T> a{};
  a.kind = c.kind;
  a.causal = c.causal;
  a.full_count = c.affine_n == AffineN::full;
  a.batch = int(c.q.size(0));
  a.heads = int(c.q.size(1));
  a.kv_heads = int(c.k.size(1));
  a.t = int(c.q.size(2));
  a.d = int(c.q.size(3));
  a.scale = float(1.0 / std::sqrt(double(a.d)));
  a.q = ptr_or_null<T>(c.q);
  a.k = ptr_or_null<T>(c.k);
  a.v = ptr_or_null<T>(c.v);
  a.alpha = ptr_or_null<T>(c.alpha);
  a.alpha_ma = ptr_or_null<T>(c.alpha_ma);
  a.sigma = ptr_or_null<T>(c.sigma);
  return a;
}

// Calls f(T()) for the core's storage type (f32 or bf16; checked by prepare).
template <class F>
void dispatch_attention(DType dtype, F&& f) {
  if (dtype == DType::bf16) f(bf16());
  else f(float());
}

simt::Dim3 tile_grid(int64_t rows, int64_t heads, int64_t batch) {
  return simt::Dim3{unsigned((rows + kAttnTileRows - 1) / kAttnTileRows), unsigned(heads), unsigned(batch)};
}

const simt::Dim3 kBlock{kAttnThreads, 1, 1};

std::atomic<bool> tensor_cores_enabled{true};

// Whether the core runs the tensor-core kernels: bf16, head dim 64 or 128, not switched off, and
// on the GPU a device of compute capability 8.0 or newer (mma.sync and ldmatrix).
bool use_tensor_cores(const AttentionSpec& p) {
  if (!tensor_cores_enabled.load() || p.q.dtype() != DType::bf16 || !mma_head_dim(int(p.q.size(3))))
    return false;
#if COTAN_SIMT_EMULATED
  return true;
#else
  int major = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, target_device().index));
  return major >= 8;
#endif
}

simt::Dim3 mma_grid(int64_t rows, int64_t heads, int64_t batch) {
  return simt::Dim3{unsigned((rows + kMmaAttnRows - 1) / kMmaAttnRows), unsigned(heads), unsigned(batch)};
}

const simt::Dim3 kMmaBlock{kMmaAttnThreads, 1, 1};

// The tensor-core kernel for head dim d (64 or 128).
template <class K64, class K128>
auto by_head_dim(int d, K64 k64, K128 k128) {
  return d == 64 ? k64 : k128;
}

}  // namespace

namespace launch {

void set_attention_tensor_cores(bool enabled) { tensor_cores_enabled.store(enabled); }

AttentionForward attention_forward(const AttentionSpec& core) {
  const AttentionSpec p = prepare(core);
  const Tensor& q = p.q;
  const int64_t b = q.size(0), h = q.size(1), t = q.size(2);
  AttentionForward out;
  out.s = empty_tensor(q.shape(), q.dtype());
  out.o = p.kind == CoreKind::affine ? empty_tensor(q.shape(), q.dtype()) : out.s;
  out.lse = empty_tensor({b, h, t}, DType::f32);
  if (q.numel() == 0) return out;
  if (use_tensor_cores(p)) {
    const AttentionArgs<bf16> a = args_of<bf16>(p);
    simt::launch(by_head_dim(a.d, attention_fwd_mma_kernel<64>, attention_fwd_mma_kernel<128>), mma_grid(t, h, b),
                 kMmaBlock, 0, a, static_cast<bf16*>(out.s.data_ptr()), static_cast<bf16*>(out.o.data_ptr()),
                 static_cast<float*>(out.lse.data_ptr()));
    return out;
  }
  dispatch_attention(q.dtype(), [&](auto tag) {
    using T = decltype(tag);
    simt::launch(attention_fwd_kernel<T>, tile_grid(t, h, b), kBlock, 0, args_of<T>(p),
                 static_cast<T*>(out.s.data_ptr()), static_cast<T*>(out.o.data_ptr()),
                 static_cast<float*>(out.lse.data_ptr()));
  });
  return out;
}

AttentionGrads attention_backward(const AttentionSpec& core, const AttentionForward& saved, const Tensor& d_out) {
  const AttentionSpec p = prepare(core);
  const Tensor& q = p.q;
  const int64_t b = q.size(0), h = q.size(1), hkv = p.k.size(1), t = q.size(2);
  for (const Tensor* x : {&saved.s, &saved.lse, &d_out}) check_on_target(kOp, *x);
  check(d_out.shape() == q.shape() && d_out.dtype() == q.dtype(), kOp, "d_out ", d_out.dtype(), " ",
        to_string(d_out.shape()), " does not match q ", q.dtype(), " ", to_string(q.shape()));
  check(saved.s.shape() == q.shape() && saved.s.dtype() == q.dtype() && saved.lse.shape() == Shape{b, h, t} &&
            saved.lse.dtype() == DType::f32,
        kOp, "the saved forward does not belong to this core");
  const Tensor g = contiguous_on_target(d_out), s = contiguous_on_target(saved.s),
               lse = contiguous_on_target(saved.lse);

  AttentionGrads grads;
  grads.dq = empty_tensor(q.shape(), q.dtype());
  grads.dk = empty_tensor(p.k.shape(), q.dtype());
  grads.dv = empty_tensor(p.v.shape(), q.dtype());
  if (p.kind == CoreKind::affine) grads.dalpha = empty_tensor(p.alpha.shape(), q.dtype());
  if (p.kind == CoreKind::sink) grads.dsigma = empty_tensor(p.sigma.shape(), q.dtype());
  if (q.numel() == 0) {
    for (Tensor* x : {&grads.dk, &grads.dv, &grads.dsigma})
      if (x->defined()) launch::fill(*x, 0);
    return grads;
  }
  Tensor delta = empty_tensor({b, h, t}, DType::f32);
  Tensor sigma_terms = p.kind == CoreKind::sink ? empty_tensor({b, h, t}, DType::f32) : Tensor();

  const bool tensor_cores = use_tensor_cores(p);
  dispatch_attention(q.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const AttentionArgs<T> a = args_of<T>(p);
    const T* g_ptr = static_cast<const T*>(g.data_ptr());
    const float* lse_ptr = static_cast<const float*>(lse.data_ptr());
    float* delta_ptr = static_cast<float*>(delta.data_ptr());
    float* terms_ptr = sigma_terms.defined() ? static_cast<float*>(sigma_terms.data_ptr()) : nullptr;
    T* dalpha_ptr = grads.dalpha.defined() ? static_cast<T*>(grads.dalpha.data_ptr()) : nullptr;
    bool done = false;  // by the tensor-core kernels
    if constexpr (std::is_same_v<T, bf16>) {
      if (tensor_cores) {
        simt::launch(by_head_dim(a.d, attention_bwd_dq_mma_kernel<64>, attention_bwd_dq_mma_kernel<128>),
                     mma_grid(t, h, b), kMmaBlock, 0, a, g_ptr, static_cast<const T*>(s.data_ptr()), lse_ptr,
                     static_cast<T*>(grads.dq.data_ptr()), delta_ptr, dalpha_ptr, terms_ptr);
        simt::launch(by_head_dim(a.d, attention_bwd_dkdv_mma_kernel<64>, attention_bwd_dkdv_mma_kernel<128>),
                     mma_grid(t, hkv, b), kMmaBlock, 0, a, g_ptr, lse_ptr, static_cast<const float*>(delta_ptr),
                     static_cast<T*>(grads.dk.data_ptr()), static_cast<T*>(grads.dv.data_ptr()));
        done = true;
      }
    }
    if (!done) {
      simt::launch(attention_bwd_dq_kernel<T>, tile_grid(t, h, b), kBlock, 0, a, g_ptr,
                   static_cast<const T*>(s.data_ptr()), lse_ptr, static_cast<T*>(grads.dq.data_ptr()), delta_ptr,
                   dalpha_ptr, terms_ptr);
      simt::launch(attention_bwd_dkdv_kernel<T>, tile_grid(t, hkv, b), kBlock, 0, a, g_ptr, lse_ptr,
                   static_cast<const float*>(delta_ptr), static_cast<T*>(grads.dk.data_ptr()),
                   static_cast<T*>(grads.dv.data_ptr()));
    }
    if (p.kind == CoreKind::sink)
      simt::launch(attention_bwd_dsigma_kernel<T>, simt::Dim3{1, 1, 1}, kBlock, 0, int(b), int(h), int(t),
                   static_cast<const float*>(terms_ptr), static_cast<T*>(grads.dsigma.data_ptr()));
  });
  return grads;
}

}  // namespace launch
}  // namespace cotan::COTAN_KERNELS
