// The CPU backend: every kernel of the op table (tensor/op_table.hpp), one file per family:
//   memory.cpp (allocate, assign, fill, arange, random), elementwise.cpp (unary, binary, where),
//   reduce.cpp (reduce, softmax, log_softmax, logsumexp, cumsum), matmul.cpp (Eigen GEMM),
//   index.cpp (gather, scatter_add, index_select, index_add).
#pragma once

#include "tensor/op_table.hpp"

namespace cotan::cpu {

class CpuBackend final : public Backend {
 public:
  std::string_view name() const override { return "cpu"; }

  std::shared_ptr<Storage> allocate(size_t nbytes) override;
  void assign(const Tensor& dst, const Tensor& src) override;
  void fill(const Tensor& dst, double value) override;
  Tensor arange(double start, double step, int64_t n, DType dtype) override;
  Tensor random(RandomOp op, const Shape& shape, DType dtype, Generator& gen, double a, double b) override;

  Tensor unary(UnaryOp op, const Tensor& x, double a, double b) override;
  Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b) override;
  Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) override;

  Tensor reduce(ReduceOp op, const Tensor& x, const std::vector<int64_t>& axes, bool keepdim) override;
  Tensor softmax(const Tensor& x, int64_t axis) override;
  Tensor log_softmax(const Tensor& x, int64_t axis) override;
  Tensor logsumexp(const Tensor& x, int64_t axis) override;
  Tensor cumsum(const Tensor& x, int64_t axis, bool reverse) override;

  Tensor matmul(const Tensor& a, const Tensor& b) override;

  Tensor gather(const Tensor& x, int64_t axis, const Tensor& index) override;
  Tensor scatter_add(const Tensor& base, int64_t axis, const Tensor& index, const Tensor& src) override;
  Tensor index_select(const Tensor& x, int64_t axis, const Tensor& index) override;
  Tensor index_add(const Tensor& base, int64_t axis, const Tensor& index, const Tensor& src) override;
};

}  // namespace cotan::cpu
