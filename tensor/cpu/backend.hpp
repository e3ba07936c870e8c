// The CPU backend: every kernel of the op table (tensor/op_table.hpp), one file per family:
//   memory.cpp (allocate, assign, fill, arange, random), elementwise.cpp (unary, binary, where),
//   reduce.cpp (reduce, softmax, log_softmax, logsumexp, cumsum), matmul.cpp (Eigen GEMM),
//   index.cpp (gather, scatter_add, index_select, index_add), and the fused ops
//   (tensor/fused_ops.hpp): attention.cpp (tiled attention, tiles in attention_tiles.hpp),
//   cached_attention.cpp (the decode step's attention against the KV cache),
//   rows.cpp (rms_norm, swiglu, rope), kd_loss.cpp (the KD loss), optim.cpp (AdamW, squared norm).
#pragma once

#include "tensor/op_table.hpp"

namespace cotan::cpu {

class CpuBackend final : public Backend {
 public:
  std::string_view name() const override { return "cpu"; }

  std::shared_ptr<Storage> allocate(size_t nbytes) override;
  void assign_kernel(const Tensor& dst, const Tensor& src) override;
  void fill(const Tensor& dst, double value) override;
  Tensor arange_kernel(double start, double step, int64_t n, DType dtype) override;
  Tensor random_kernel(RandomOp op, const Shape& shape, DType dtype, Generator& gen, double a, double b) override;

  Tensor unary_kernel(UnaryOp op, const Tensor& x, double a, double b) override;
  Tensor binary_kernel(BinaryOp op, const Tensor& a, const Tensor& b) override;
  Tensor where_kernel(const Tensor& cond, const Tensor& a, const Tensor& b) override;

  Tensor reduce_kernel(ReduceOp op, const Tensor& x, const std::vector<int64_t>& axes, bool keepdim) override;
  Tensor softmax_kernel(const Tensor& x, int64_t axis) override;
  Tensor log_softmax_kernel(const Tensor& x, int64_t axis) override;
  Tensor logsumexp_kernel(const Tensor& x, int64_t axis) override;
  Tensor cumsum_kernel(const Tensor& x, int64_t axis, bool reverse) override;

  Tensor matmul_kernel(const Tensor& a, const Tensor& b) override;
  void matmul_accumulate_kernel(const Tensor& a, const Tensor& b, const Tensor& c) override;

  Tensor gather_kernel(const Tensor& x, int64_t axis, const Tensor& index) override;
  Tensor scatter_add_kernel(const Tensor& base, int64_t axis, const Tensor& index, const Tensor& src) override;
  Tensor index_select_kernel(const Tensor& x, int64_t axis, const Tensor& index) override;
  Tensor index_add_kernel(const Tensor& base, int64_t axis, const Tensor& index, const Tensor& src) override;

  AttentionForward attention_forward(const AttentionSpec& core) override;
  AttentionGrads attention_backward(const AttentionSpec& core, const AttentionForward& saved,
                                    const Tensor& d_out) override;
  Tensor cached_attention(const CachedAttentionSpec& spec) override;

  RmsNormForward rms_norm_forward(const Tensor& x, const Tensor& weight, double eps) override;
  RmsNormGrads rms_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight,
                                 const Tensor& rstd) override;
  Tensor swiglu_forward(const Tensor& g, const Tensor& u) override;
  SwigluGrads swiglu_backward(const Tensor& dy, const Tensor& g, const Tensor& u) override;
  Tensor rope_forward(const Tensor& x, const Tensor& cos, const Tensor& sin) override;
  Tensor rope_backward(const Tensor& dy, const Tensor& cos, const Tensor& sin) override;

  KdLossResult kd_loss(const Tensor& student, const Tensor& teacher, const Tensor& targets,
                       const KdLossConfig& config, bool want_grad, const Tensor& grad_into) override;

  AdamWTensors adamw_update(const Tensor& p, const Tensor& g, const Tensor& m, const Tensor& v,
                            const AdamWScalars<double>& s) override;
  void adamw_update_all(std::vector<AdamWJob>& jobs) override;
  Tensor squared_norm(const std::vector<Tensor>& xs) override;
};

// x itself when it is contiguous and of `dtype`, else a contiguous copy converted to `dtype`
// (undefined stays undefined): what the fused kernels read.
inline Tensor contiguous_as(const Tensor& x, DType dtype) {
  if (!x.defined() || (x.is_contiguous() && x.dtype() == dtype)) return x;
  Tensor out = Tensor::empty(x.shape(), dtype);
  cpu_backend().assign(out, x);
  return out;
}
inline Tensor contiguous_as(const Tensor& x) { return x.defined() ? contiguous_as(x, x.dtype()) : x; }

}  // namespace cotan::cpu
