// The op table: every kernel a backend provides. The differentiable ops (tensor/ops.hpp) broadcast
// their operands and call the primitives below, which check the arguments once for every backend
// (tensor/op_checks.cpp, with the messages users see) before the backend's *_kernel. So a kernel
// may assume:
//   - binary and where: operands of one shape (strides may be 0) and one dtype (comparisons
//     produce bool), no arithmetic on bool; where's condition bool;
//   - unary: a dtype the op accepts (accepts_integers; never bool but for logical_not);
//   - axes normalized (0 <= axis < ndim) and sorted; argmax/argmin over one axis, max, min and
//     the arg ops not over zero elements, nor on bool;
//   - softmax, log_softmax, logsumexp and matmul on floating dtypes; matmul operands of one dtype
//     and matching shapes;
//   - indexing: i32 or i64 indices whose shape fits, base and source of one dtype;
//   - arange's n >= 0; random's dtype fits the op and randint's range is not empty;
//   - inputs on this backend's device (the CUDA launchers check it), with any strides unless a
//     kernel says otherwise. What needs the data (an index out of range, an integer division by
//     zero) the kernels check themselves.
// Kernels return fresh contiguous tensors, except assign and fill, which write into `dst`.
// Adding an op touches its rule (autograd/rules), the op list below, and each backend's kernel.
#pragma once

#include <memory>
#include <string_view>
#include <type_traits>
#include <vector>

#include "tensor/fused_ops.hpp"
#include "tensor/random.hpp"
#include "tensor/tensor.hpp"

namespace cotan {

// The op lists. Each X-macro entry generates the enum value, its name (op_name) and its place in
// the k*Ops arrays (which the kernel tests and the gradcheck coverage test iterate), and each
// backend's dispatch switch is generated from the same list, so adding an op means one line here
// plus its kernels (see the README's "Adding an op").
//
// Unary ops: X(name, integers) where `integers` says whether the op is defined on integer dtypes
// (the others reject them). clamp takes a = lo, b = hi; pow takes the exponent a.
#define COTAN_UNARY_OPS(X) \
  X(neg, true)              \
  X(exp, false)             \
  X(log, false)             \
  X(sqrt, false)            \
  X(rsqrt, false)           \
  X(tanh, false)            \
  X(sigmoid, false)         \
  X(silu, false)            \
  X(relu, true)             \
  X(gelu_tanh, false)       \
  X(abs, true)              \
  X(clamp, true)            \
  X(pow, false)             \
  X(sign, true)             \
  X(logical_not, true)      \
  X(square, true)           \
  X(reciprocal, false)      \
  X(softplus, false)
// Binary ops: X(name, comparison) where comparison ops (and the logical ones) give bool.
#define COTAN_BINARY_OPS(X) \
  X(add, false)              \
  X(sub, false)              \
  X(mul, false)              \
  X(div, false)              \
  X(maximum, false)          \
  X(minimum, false)          \
  X(eq, true)                \
  X(ne, true)                \
  X(lt, true)                \
  X(le, true)                \
  X(gt, true)                \
  X(ge, true)                \
  X(logical_and, true)       \
  X(logical_or, true)
#define COTAN_REDUCE_OPS(X) X(sum) X(max) X(min) X(argmax) X(argmin)

#define COTAN_OP_ENUM_VALUE(name, ...) name,
#define COTAN_OP_ENUM_VALUE_1(name) name,
enum class UnaryOp { COTAN_UNARY_OPS(COTAN_OP_ENUM_VALUE) };
enum class BinaryOp { COTAN_BINARY_OPS(COTAN_OP_ENUM_VALUE) };
enum class ReduceOp { COTAN_REDUCE_OPS(COTAN_OP_ENUM_VALUE_1) };
#undef COTAN_OP_ENUM_VALUE
#undef COTAN_OP_ENUM_VALUE_1

enum class RandomOp {
  uniform,    // U[a, b)
  normal,     // N(a, b^2)
  randint,    // integers in [a, b)
  bernoulli,  // true with probability a
};

#define COTAN_OP_LIST_ENTRY(name, ...) UnaryOp::name,
inline constexpr UnaryOp kUnaryOps[] = {COTAN_UNARY_OPS(COTAN_OP_LIST_ENTRY)};
#undef COTAN_OP_LIST_ENTRY
#define COTAN_OP_LIST_ENTRY(name, ...) BinaryOp::name,
inline constexpr BinaryOp kBinaryOps[] = {COTAN_BINARY_OPS(COTAN_OP_LIST_ENTRY)};
#undef COTAN_OP_LIST_ENTRY
#define COTAN_OP_LIST_ENTRY(name) ReduceOp::name,
inline constexpr ReduceOp kReduceOps[] = {COTAN_REDUCE_OPS(COTAN_OP_LIST_ENTRY)};
#undef COTAN_OP_LIST_ENTRY

constexpr std::string_view op_name(UnaryOp op) {
#define COTAN_OP_NAME_CASE(name, ...) case UnaryOp::name: return #name;
  switch (op) { COTAN_UNARY_OPS(COTAN_OP_NAME_CASE) }
#undef COTAN_OP_NAME_CASE
  return "?";
}
constexpr std::string_view op_name(BinaryOp op) {
#define COTAN_OP_NAME_CASE(name, ...) case BinaryOp::name: return #name;
  switch (op) { COTAN_BINARY_OPS(COTAN_OP_NAME_CASE) }
#undef COTAN_OP_NAME_CASE
  return "?";
}
constexpr std::string_view op_name(ReduceOp op) {
#define COTAN_OP_NAME_CASE(name) case ReduceOp::name: return #name;
  switch (op) { COTAN_REDUCE_OPS(COTAN_OP_NAME_CASE) }
#undef COTAN_OP_NAME_CASE
  return "?";
}
// Whether a unary op is defined on integer dtypes (neg, abs, sign, square, relu, clamp,
// logical_not); the others are floating only.
constexpr bool accepts_integers(UnaryOp op) {
#define COTAN_OP_INTEGERS_CASE(name, integers) case UnaryOp::name: return integers;
  switch (op) { COTAN_UNARY_OPS(COTAN_OP_INTEGERS_CASE) }
#undef COTAN_OP_INTEGERS_CASE
  return false;
}
// eq .. ge, logical_and, logical_or: bool result.
constexpr bool is_comparison(BinaryOp op) {
#define COTAN_OP_COMPARISON_CASE(name, comparison) case BinaryOp::name: return comparison;
  switch (op) { COTAN_BINARY_OPS(COTAN_OP_COMPARISON_CASE) }
#undef COTAN_OP_COMPARISON_CASE
  return false;
}

// Calls f(std::integral_constant<UnaryOp, op>()): turns a runtime op into a template argument
// (the CUDA kernels are templates on the op). Every op of the list is a case.
template <class F>
decltype(auto) with_unary_op(UnaryOp op, F&& f) {
  switch (op) {
#define COTAN_OP_TAG_CASE(name, ...) \
  case UnaryOp::name: return f(std::integral_constant<UnaryOp, UnaryOp::name>());
    COTAN_UNARY_OPS(COTAN_OP_TAG_CASE)
#undef COTAN_OP_TAG_CASE
  }
  return f(std::integral_constant<UnaryOp, UnaryOp::neg>());  // not reached: every op is a case
}
template <class F>
decltype(auto) with_binary_op(BinaryOp op, F&& f) {
  switch (op) {
#define COTAN_OP_TAG_CASE(name, ...) \
  case BinaryOp::name: return f(std::integral_constant<BinaryOp, BinaryOp::name>());
    COTAN_BINARY_OPS(COTAN_OP_TAG_CASE)
#undef COTAN_OP_TAG_CASE
  }
  return f(std::integral_constant<BinaryOp, BinaryOp::add>());  // not reached
}

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string_view name() const = 0;
  // Waits until every kernel queued so far has finished (timing); the CPU runs ops synchronously.
  virtual void synchronize() {}

  // The primitives. Each public method checks its arguments once, for every backend, with the
  // messages users see (tensor/op_checks.cpp: dtypes, shapes, axes, which it normalizes), then
  // calls the backend's *_kernel, which may assume them checked. The kernels keep only the checks
  // that need the data (an index out of range, an integer division by zero) or the device.

  // Memory.
  virtual std::shared_ptr<Storage> allocate(size_t nbytes) = 0;
  // dst[...] = convert(src[...]); same shape, any strides and dtypes. dst must not overlap src.
  void assign(const Tensor& dst, const Tensor& src);
  virtual void fill(const Tensor& dst, double value) = 0;
  Tensor arange(double start, double step, int64_t n, DType dtype);
  Tensor random(RandomOp op, const Shape& shape, DType dtype, Generator& gen, double a, double b);

  // Elementwise; float-only ops reject integer dtypes.
  Tensor unary(UnaryOp op, const Tensor& x, double a = 0, double b = 0);
  Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b);
  Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);

  // Reductions over `axes` (argmax/argmin: exactly one axis; result i64). Deterministic: the
  // same bits whatever the number of threads.
  Tensor reduce(ReduceOp op, const Tensor& x, const std::vector<int64_t>& axes, bool keepdim);
  // Along one axis; the result keeps the input's shape (logsumexp drops the axis).
  Tensor softmax(const Tensor& x, int64_t axis);
  Tensor log_softmax(const Tensor& x, int64_t axis);
  Tensor logsumexp(const Tensor& x, int64_t axis);
  Tensor cumsum(const Tensor& x, int64_t axis, bool reverse);

  // [B..., M, K] x [B..., K, N] -> [B..., M, N]; batch dims equal (broadcast ones have stride 0);
  // either operand may be transposed through its strides.
  Tensor matmul(const Tensor& a, const Tensor& b);
  // c += a b for matrices a [M, K] and b [K, N] (either may be transposed through its strides)
  // into a contiguous c [M, N] of their dtype and device: a sum of products that needs no
  // [M, N] temporary (the head loss's weight gradient over chunks of rows). Deterministic like
  // matmul; the result may differ from c + matmul(a, b) in the last bits (the sum is added to c in
  // K blocks).
  void matmul_accumulate(const Tensor& a, const Tensor& b, const Tensor& c);
  // Whether f32 matmuls may round their operands to TF32 on tensor cores (the CUDA backend's
  // cuBLAS path; process-wide, off by default). A backend without the mode refuses to enable it.
  virtual bool tf32() const { return false; }
  virtual void set_tf32(bool enabled);

  // Indexing (index: i32 or i64). gather: out[.., i, ..] = x[.., index[.., i, ..], ..] along axis,
  // index with x's ndim, out with index's shape. scatter_add: the transpose of gather, added to base.
  Tensor gather(const Tensor& x, int64_t axis, const Tensor& index);
  Tensor scatter_add(const Tensor& base, int64_t axis, const Tensor& index, const Tensor& src);
  // index_select: picks whole slices along axis (index 1-D); index_add is its transpose, added to base.
  Tensor index_select(const Tensor& x, int64_t axis, const Tensor& index);
  Tensor index_add(const Tensor& base, int64_t axis, const Tensor& index, const Tensor& src);

  // Fused ops (descriptors and contracts in tensor/fused_ops.hpp), called by their differentiable
  // op once the arguments are checked. A backend without a kernel throws "[op] the <backend>
  // backend has no kernel".

  // Attention: forward saves what the backward reads; backward takes d_out = dLoss/dO in q's
  // dtype, contiguous. has_attention_kernel says which dtypes the kernels take: the op composes
  // the core from primitives for the others.
  virtual bool has_attention_kernel(DType) const { return true; }
  virtual AttentionForward attention_forward(const AttentionSpec&) { no_kernel("attention"); }
  virtual AttentionGrads attention_backward(const AttentionSpec&, const AttentionForward& /*saved*/,
                                            const Tensor& /*d_out*/) {
    no_kernel("attention");
  }

  // Cached attention (incremental decoding): O [B, H, Tq, d]. has_cached_attention_kernel says
  // which dtypes and head dims the kernel takes: nn::cached_attention composes the others.
  virtual bool has_cached_attention_kernel(DType, int64_t /*head_dim*/) const { return true; }
  virtual Tensor cached_attention(const CachedAttentionSpec&) { no_kernel("cached_attention"); }

  // Rows: x [R, D] for rms_norm, one shape for swiglu and rope.
  virtual RmsNormForward rms_norm_forward(const Tensor& /*x*/, const Tensor& /*weight*/, double /*eps*/) {
    no_kernel("rms_norm");
  }
  virtual RmsNormGrads rms_norm_backward(const Tensor& /*dy*/, const Tensor& /*x*/, const Tensor& /*weight*/,
                                         const Tensor& /*rstd*/) {
    no_kernel("rms_norm");
  }
  virtual Tensor swiglu_forward(const Tensor& /*g*/, const Tensor& /*u*/) { no_kernel("swiglu"); }
  virtual SwigluGrads swiglu_backward(const Tensor& /*dy*/, const Tensor& /*g*/, const Tensor& /*u*/) {
    no_kernel("swiglu");
  }
  virtual Tensor rope_forward(const Tensor& /*x*/, const Tensor& /*cos*/, const Tensor& /*sin*/) { no_kernel("rope"); }
  virtual Tensor rope_backward(const Tensor& /*dy*/, const Tensor& /*cos*/, const Tensor& /*sin*/) {
    no_kernel("rope");
  }

  // The KD loss and its gradient in one pass (arguments in tensor/fused_ops.hpp).
  virtual KdLossResult kd_loss(const Tensor& /*student*/, const Tensor& /*teacher*/, const Tensor& /*targets*/,
                               const KdLossConfig&, bool /*want_grad*/, const Tensor& /*grad_into*/) {
    no_kernel("kd_loss");
  }

  // The LM heads and the KD loss in chunks of rows (arguments in tensor/fused_ops.hpp): for each
  // chunk, the student's and the teacher's logits (matmul), the loss and its gradient written
  // over the student's chunk (kd_loss), then d_hidden = G W and d_head += G^T H. Neither model's
  // [N, V] logits ever exist. Chunks run in order and each GEMM is deterministic, so the result
  // has the same bits whatever the thread count. This default runs on any backend with matmul
  // and kd_loss kernels (cuBLAS and the fused row kernel on CUDA); a backend may override it.
  virtual HeadLossResult head_loss(const HeadLossSpec& spec, const KdLossConfig& config, bool want_grad);

  // AdamW: p, g, m, v contiguous, one shape, all f32 or all f64 (s narrowed to it).
  virtual AdamWTensors adamw_update(const Tensor& /*p*/, const Tensor& /*g*/, const Tensor& /*m*/,
                                    const Tensor& /*v*/, const AdamWScalars<double>&) {
    no_kernel("adamw");
  }
  // Every parameter of a step: each job's p, m and v replaced by its updated tensors (written
  // over the old ones where job.in_place allows). By default, one adamw_update per job.
  virtual void adamw_update_all(std::vector<AdamWJob>& jobs) {
    for (AdamWJob& job : jobs) {
      AdamWTensors next = adamw_update(job.p, job.g, job.m, job.v, job.s);
      job.p = std::move(next.p);
      job.m = std::move(next.m);
      job.v = std::move(next.v);
    }
  }
  // sum over xs of sum(x^2), each x (floating, any strides) converted to f64 and summed in a
  // fixed order, the tensors in order: a 0-d f64 tensor on this device (global_norm's square).
  virtual Tensor squared_norm(const std::vector<Tensor>&) { no_kernel("global_norm"); }

 protected:
  [[noreturn]] void no_kernel(std::string_view op) const { fail(op, "the ", name(), " backend has no kernel"); }

  // The kernels of the primitives above, called with checked arguments: axes normalized (and
  // sorted), binary and where operands of one shape and dtype, dtypes the op accepts.
  virtual void assign_kernel(const Tensor& dst, const Tensor& src) = 0;
  virtual Tensor arange_kernel(double start, double step, int64_t n, DType dtype) = 0;
  virtual Tensor random_kernel(RandomOp op, const Shape& shape, DType dtype, Generator& gen, double a, double b) = 0;
  virtual Tensor unary_kernel(UnaryOp op, const Tensor& x, double a, double b) = 0;
  virtual Tensor binary_kernel(BinaryOp op, const Tensor& a, const Tensor& b) = 0;
  virtual Tensor where_kernel(const Tensor& cond, const Tensor& a, const Tensor& b) = 0;
  virtual Tensor reduce_kernel(ReduceOp op, const Tensor& x, const std::vector<int64_t>& axes, bool keepdim) = 0;
  virtual Tensor softmax_kernel(const Tensor& x, int64_t axis) = 0;
  virtual Tensor log_softmax_kernel(const Tensor& x, int64_t axis) = 0;
  virtual Tensor logsumexp_kernel(const Tensor& x, int64_t axis) = 0;
  virtual Tensor cumsum_kernel(const Tensor& x, int64_t axis, bool reverse) = 0;
  virtual Tensor matmul_kernel(const Tensor& a, const Tensor& b) = 0;
  // The default is matmul_kernel, then an add assigned into c (a temporary of c's size); the CPU
  // backend accumulates inside its GEMM for f32 and f64.
  virtual void matmul_accumulate_kernel(const Tensor& a, const Tensor& b, const Tensor& c);
  virtual Tensor gather_kernel(const Tensor& x, int64_t axis, const Tensor& index) = 0;
  virtual Tensor scatter_add_kernel(const Tensor& base, int64_t axis, const Tensor& index, const Tensor& src) = 0;
  virtual Tensor index_select_kernel(const Tensor& x, int64_t axis, const Tensor& index) = 0;
  virtual Tensor index_add_kernel(const Tensor& base, int64_t axis, const Tensor& index, const Tensor& src) = 0;
};

// The backend for a device; throws a clear error when the device is not available.
Backend& backend(Device device);
Backend& cpu_backend();

// The environment variable that makes the SIMT emulator serve cuda:0 (cuda/emulated/backend.hpp):
// COTAN_CUDA_EMULATOR=1 runs every CUDA code path, kernels included, on the CPU, slowly, with
// tensors that report cuda:0. For testing the device paths of the trainer and the CLI without a GPU.
inline constexpr const char* kCudaEmulatorVariable = "COTAN_CUDA_EMULATOR";
// Whether kCudaEmulatorVariable asks for the emulator (set, not empty, not "0").
bool cuda_emulator_requested();

}  // namespace cotan
