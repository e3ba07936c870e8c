// The launchers of the kernel backend: one per op of tensor/op_table.hpp, with the op table's
// contract (inputs on the target, checked and broadcast by the caller; fresh contiguous results
// except assign and fill). Each is defined in its family's .cu file next to the family's kernels
// (.cuh) and runs them on the current stream (simt::current_stream()). KernelBackend
// (cuda/kernels/backend.cu) forwards every virtual to these.
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

}  // namespace cotan::COTAN_KERNELS::launch
