// The differentiable ops: what models and losses are written with. Each op checks its arguments
// (errors name the op, the shapes and dtypes), broadcasts, calls the backend kernel from the op
// table and records its pullback on the autograd tape (autograd/rules/*.cpp: forward and
// pullback side by side). Binary ops require one dtype; scalars take the tensor's dtype.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "tensor/random.hpp"
#include "tensor/tensor.hpp"

namespace cotan {

using Axes = std::vector<int64_t>;

// ---- creation (not differentiable) ----
Tensor zeros(const Shape& shape, DType dtype = DType::f32, Device device = Device::cpu());
Tensor ones(const Shape& shape, DType dtype = DType::f32, Device device = Device::cpu());
Tensor full(const Shape& shape, double value, DType dtype = DType::f32, Device device = Device::cpu());
Tensor scalar(double value, DType dtype = DType::f32, Device device = Device::cpu());
Tensor arange(int64_t start, int64_t stop, int64_t step = 1, DType dtype = DType::i64,
              Device device = Device::cpu());
Tensor zeros_like(const Tensor& x);
Tensor ones_like(const Tensor& x);
Tensor full_like(const Tensor& x, double value);
// Copies `values` (row-major) into a new tensor of dtype_v<T>; numel(shape) must match.
template <class T>
Tensor from_vector(const std::vector<T>& values, const Shape& shape, Device device = Device::cpu());

// ---- random (Philox; see tensor/random.hpp) ----
Tensor rand(const Shape& shape, Generator& gen, DType dtype = DType::f32, Device device = Device::cpu());
Tensor randn(const Shape& shape, Generator& gen, DType dtype = DType::f32, Device device = Device::cpu());
Tensor randint(const Shape& shape, int64_t low, int64_t high, Generator& gen, DType dtype = DType::i64,
               Device device = Device::cpu());
Tensor bernoulli(const Shape& shape, double p, Generator& gen, Device device = Device::cpu());
// Zeroes each element with probability p and scales the rest by 1 / (1 - p). Differentiable.
Tensor dropout(const Tensor& x, double p, Generator& gen);

// ---- unary ----
Tensor neg(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor rsqrt(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor silu(const Tensor& x);
Tensor relu(const Tensor& x);
Tensor gelu_tanh(const Tensor& x);
Tensor softplus(const Tensor& x);  // log(1 + e^x), computed without overflow
Tensor abs(const Tensor& x);
Tensor square(const Tensor& x);
Tensor reciprocal(const Tensor& x);
Tensor clamp(const Tensor& x, double lo, double hi);
Tensor pow(const Tensor& x, double exponent);
Tensor sign(const Tensor& x);         // not differentiable (zero gradient)
Tensor logical_not(const Tensor& x);  // bool

// ---- binary, numpy broadcasting ----
Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor logical_and(const Tensor& a, const Tensor& b);
Tensor logical_or(const Tensor& a, const Tensor& b);
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);

Tensor operator-(const Tensor& x);
Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator+(const Tensor& a, double b);
Tensor operator-(const Tensor& a, double b);
Tensor operator*(const Tensor& a, double b);
Tensor operator/(const Tensor& a, double b);
Tensor operator+(double a, const Tensor& b);
Tensor operator-(double a, const Tensor& b);
Tensor operator*(double a, const Tensor& b);
Tensor operator/(double a, const Tensor& b);

// ---- reductions (axes empty = all axes) ----
Tensor sum(const Tensor& x, const Axes& axes = {}, bool keepdim = false);
Tensor mean(const Tensor& x, const Axes& axes = {}, bool keepdim = false);
Tensor max(const Tensor& x, const Axes& axes = {}, bool keepdim = false);
Tensor min(const Tensor& x, const Axes& axes = {}, bool keepdim = false);
// Variance with `correction` subtracted from the count (0: population, 1: sample).
Tensor var(const Tensor& x, const Axes& axes = {}, bool keepdim = false, int64_t correction = 0);
Tensor argmax(const Tensor& x, int64_t axis, bool keepdim = false);  // i64, not differentiable
Tensor argmin(const Tensor& x, int64_t axis, bool keepdim = false);
// Sums x down to `shape` (the reverse of broadcasting `shape` to x's shape).
Tensor sum_to(const Tensor& x, const Shape& shape);

// ---- softmax family ----
Tensor softmax(const Tensor& x, int64_t axis = -1);
Tensor log_softmax(const Tensor& x, int64_t axis = -1);
Tensor logsumexp(const Tensor& x, const Axes& axes = {-1}, bool keepdim = false);

// ---- linear algebra ----
// [..., M, K] @ [..., K, N] with broadcast batch dims; a 1-D operand is a vector as in numpy.
Tensor matmul(const Tensor& a, const Tensor& b);

// ---- indexing (index tensors: i32 or i64; no gradient flows into them) ----
Tensor gather(const Tensor& x, int64_t axis, const Tensor& index);
Tensor scatter_add(const Tensor& base, int64_t axis, const Tensor& index, const Tensor& src);
Tensor index_select(const Tensor& x, int64_t axis, const Tensor& index);
Tensor index_add(const Tensor& base, int64_t axis, const Tensor& index, const Tensor& src);
// weight [V, D], ids [...] -> [..., D].
Tensor embedding(const Tensor& weight, const Tensor& ids);

// ---- scans ----
Tensor cumsum(const Tensor& x, int64_t axis, bool reverse = false);

// ---- shape and views (views share storage; all differentiable) ----
Tensor reshape(const Tensor& x, const Shape& shape);  // one -1 allowed; copies only when it must
Tensor flatten(const Tensor& x, int64_t start_axis = 0, int64_t end_axis = -1);
Tensor permute(const Tensor& x, const Axes& order);
Tensor transpose(const Tensor& x, int64_t axis0 = -2, int64_t axis1 = -1);
Tensor slice(const Tensor& x, int64_t axis, int64_t start, int64_t stop, int64_t step = 1);
Tensor broadcast_to(const Tensor& x, const Shape& shape);
Tensor expand(const Tensor& x, const Shape& shape);  // same as broadcast_to
Tensor squeeze(const Tensor& x, int64_t axis);
Tensor squeeze(const Tensor& x);  // every axis of size 1
Tensor unsqueeze(const Tensor& x, int64_t axis);
Tensor contiguous(const Tensor& x);  // x itself when already contiguous
Tensor concat(const std::vector<Tensor>& xs, int64_t axis = 0);
Tensor stack(const std::vector<Tensor>& xs, int64_t axis = 0);
std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes, int64_t axis = 0);
std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t axis = 0);
Tensor cast(const Tensor& x, DType dtype);  // differentiable between float dtypes
Tensor to(const Tensor& x, Device device);  // differentiable
Tensor clone(const Tensor& x);              // a contiguous copy that owns its storage

// ---- threads ----
// Caps the CPU backend's worker threads (0 = all cores); results do not depend on it.
void set_num_threads(int n);
int num_threads();
// Runs a() on the calling thread and b() as a task beside it, taken by another of the CPU
// backend's threads when one is free (the ops in each still spread over every thread, and a
// thread done with one helps the other), when `side_by_side`, `device` is the CPU and there are
// at least two threads; else a() then b() on the calling thread. Each op gives the same bits
// either way. Both always run to their end; then the first exception, a's before b's, is
// rethrown. State kept per thread by the layers above (autograd's grad mode) is not carried into
// b: model code goes through autograd's concurrently().
void run_concurrently(Device device, const std::function<void()>& a, const std::function<void()>& b,
                      bool side_by_side = true);
// Whether run_concurrently runs its two functions side by side on `device`: the CPU, with at least
// two threads (else one after the other).
bool runs_side_by_side(Device device);

}  // namespace cotan
