// The launchers of the kernel backend: one per op of tensor/op_table.hpp, with the op table's
// contract (inputs on the target, checked and broadcast by the caller; fresh contiguous results
// except assign and fill) and, for the fused ops, the contracts of tensor/fused_ops.hpp. Each is
// defined in its family's .cu file next to the family's kernels (.cuh) and runs them on the
// current stream (simt::current_stream()). KernelBackend (cuda/kernels/backend.cu) forwards every
// virtual to these; tests call cotan::emu::launch directly.
#pragma once

#include <memory>
#include <vector>

#include "cuda/kernels/target.hpp"
#include "tensor/op_table.hpp"

namespace cotan::COTAN_KERNELS {
// The KernelBackend of this build (backend.cu).
Backend& backend();
}  // namespace cotan::COTAN_KERNELS

namespace cotan::COTAN_KERNELS::launch {

// memory.cu
std::shared_ptr<Storage> allocate(size_t nbytes);
void assign(const Tensor& dst, const Tensor& src);  // also host <-> device, either way
void fill(const Tensor& dst, double value);
Tensor arange(double start, double step, int64_t n, DType dtype);
Tensor random(RandomOp op, const Shape& shape, DType dtype, Generator& gen, double a, double b);

// elementwise.cu
Tensor unary(UnaryOp op, const Tensor& x, double a, double b);
Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b);
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);

// reduce.cu
Tensor reduce(ReduceOp op, const Tensor& x, const std::vector<int64_t>& axes, bool keepdim);

// softmax.cu
Tensor softmax(const Tensor& x, int64_t axis);
Tensor log_softmax(const Tensor& x, int64_t axis);
Tensor logsumexp(const Tensor& x, int64_t axis);

// cumsum.cu
Tensor cumsum(const Tensor& x, int64_t axis, bool reverse);

// matmul.cu
Tensor matmul(const Tensor& a, const Tensor& b);

// index.cu
Tensor gather(const Tensor& x, int64_t axis, const Tensor& index);
Tensor scatter_add(const Tensor& base, int64_t axis, const Tensor& index, const Tensor& src);
Tensor index_select(const Tensor& x, int64_t axis, const Tensor& index);
Tensor index_add(const Tensor& base, int64_t axis, const Tensor& index, const Tensor& src);

// attention.cu: f32 or bf16 cores (the only dtypes has_attention_kernel accepts), head dim d <= 128,
// any strides (non-contiguous inputs are copied first). The forward saves S in q's dtype and L in
// f32; d_out must be q's dtype and shape.
AttentionForward attention_forward(const AttentionSpec& core);
AttentionGrads attention_backward(const AttentionSpec& core, const AttentionForward& saved, const Tensor& d_out);
// Whether bf16 cores of head dim 64 or 128 run the tensor-core kernels (on the GPU only on sm_80
// and newer); on by default, off runs the SIMT kernels for every core (tests compare the two).
void set_attention_tensor_cores(bool enabled);

// cached_attention.cu: f32 or bf16, head dim d <= kCachedAttentionMaxHeadDim (what
// has_cached_attention_kernel accepts), any strides: k and v are read through their batch, head
// and slot strides (the KV cache's views of longer buffers cost no copy) and copied only when
// their last dim is not contiguous; the other inputs are copied when not contiguous.
inline constexpr int64_t kCachedAttentionMaxHeadDim = 128;
Tensor cached_attention(const CachedAttentionSpec& spec);

// rows.cu: rms_norm and swiglu copy non-contiguous inputs first; rope reads rows with any
// strides but a unit last stride.
RmsNormForward rms_norm_forward(const Tensor& x, const Tensor& weight, double eps);
RmsNormGrads rms_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& rstd);
Tensor swiglu_forward(const Tensor& g, const Tensor& u);
SwigluGrads swiglu_backward(const Tensor& dy, const Tensor& g, const Tensor& u);
Tensor rope_forward(const Tensor& x, const Tensor& cos, const Tensor& sin);
Tensor rope_backward(const Tensor& dy, const Tensor& cos, const Tensor& sin);

// kd_loss.cu: returns after the loss values are copied to the host (the gradient is ordered on
// the current stream).
KdLossResult kd_loss(const Tensor& student, const Tensor& teacher, const Tensor& targets, const KdLossConfig& config,
                     bool want_grad, const Tensor& grad_into = Tensor());

// optim.cu: p, g, m, v contiguous, one shape, all f32 (s in float) or all f64 (s in double).
AdamWTensors adamw_update(const Tensor& p, const Tensor& g, const Tensor& m, const Tensor& v,
                          const AdamWScalars<double>& s);
// sum(x^2) in f64 over every x, in order, from the elementwise and reduce launchers.
Tensor squared_norm(const std::vector<Tensor>& xs);

}  // namespace cotan::COTAN_KERNELS::launch

namespace cotan::COTAN_KERNELS {

// Helpers of the fused launchers.
// x itself when contiguous (or undefined), else a contiguous copy on the target.
inline Tensor contiguous_on_target(const Tensor& x) {
  if (!x.defined() || x.is_contiguous()) return x;
  Tensor out = empty_tensor(x.shape(), x.dtype());
  launch::assign(out, x);
  return out;
}
// x's first element as a T*, or null when x is undefined (a kind's absent operand).
template <class T>
const T* ptr_or_null(const Tensor& x) {
  return x.defined() ? static_cast<const T*>(x.data_ptr()) : nullptr;
}

}  // namespace cotan::COTAN_KERNELS
