// Creation and random ops: not differentiable, so they call the op table directly.
#include "tensor/op_table.hpp"
#include "tensor/ops.hpp"

#include <cstring>

namespace cotan {

Tensor full(const Shape& shape, double value, DType dtype, Device device) {
  Tensor t = Tensor::empty(shape, dtype, device);
  backend(device).fill(t, value);
  return t;
}
Tensor zeros(const Shape& shape, DType dtype, Device device) { return full(shape, 0.0, dtype, device); }
Tensor ones(const Shape& shape, DType dtype, Device device) { return full(shape, 1.0, dtype, device); }
Tensor scalar(double value, DType dtype, Device device) { return full({}, value, dtype, device); }
Tensor zeros_like(const Tensor& x) { return zeros(x.shape(), x.dtype(), x.device()); }
Tensor ones_like(const Tensor& x) { return ones(x.shape(), x.dtype(), x.device()); }
Tensor full_like(const Tensor& x, double value) { return full(x.shape(), value, x.dtype(), x.device()); }

Tensor arange(int64_t start, int64_t stop, int64_t step, DType dtype, Device device) {
  check(step != 0, "arange", "step must not be 0");
  int64_t n = step > 0 ? (stop - start + step - 1) / step : (start - stop - step - 1) / -step;
  return backend(device).arange(double(start), double(step), std::max<int64_t>(n, 0), dtype);
}

template <class T>
Tensor from_vector(const std::vector<T>& values, const Shape& shape, Device device) {
  if (int64_t(values.size()) != numel(shape))
    fail("from_vector", values.size(), " values do not fill shape ", to_string(shape), " (", numel(shape),
         " elements)");
  Tensor host = Tensor::empty(shape, dtype_v<T>, Device::cpu());
  if (!values.empty()) std::memcpy(host.data_ptr(), values.data(), values.size() * sizeof(T));
  return device.is_cpu() ? host : to(host, device);
}
template Tensor from_vector(const std::vector<double>&, const Shape&, Device);
template Tensor from_vector(const std::vector<float>&, const Shape&, Device);
template Tensor from_vector(const std::vector<int32_t>&, const Shape&, Device);
template Tensor from_vector(const std::vector<int64_t>&, const Shape&, Device);
template Tensor from_vector(const std::vector<bf16>&, const Shape&, Device);

template <>
Tensor from_vector(const std::vector<bool>& values, const Shape& shape, Device device) {
  std::vector<int32_t> ints(values.begin(), values.end());
  return cast(from_vector(ints, shape, device), DType::boolean);
}

Tensor rand(const Shape& shape, Generator& gen, DType dtype, Device device) {
  check(is_floating(dtype), "rand", "expects a floating dtype, got ", dtype);
  return backend(device).random(RandomOp::uniform, shape, dtype, gen, 0.0, 1.0);
}

Tensor randn(const Shape& shape, Generator& gen, DType dtype, Device device) {
  check(is_floating(dtype), "randn", "expects a floating dtype, got ", dtype);
  return backend(device).random(RandomOp::normal, shape, dtype, gen, 0.0, 1.0);
}

Tensor randint(const Shape& shape, int64_t low, int64_t high, Generator& gen, DType dtype, Device device) {
  check(is_integral(dtype), "randint", "expects an integer dtype, got ", dtype);
  check(low < high, "randint", "empty range [", low, ", ", high, ")");
  return backend(device).random(RandomOp::randint, shape, dtype, gen, double(low), double(high));
}

Tensor bernoulli(const Shape& shape, double p, Generator& gen, Device device) {
  check(p >= 0 && p <= 1, "bernoulli", "probability ", p, " is outside [0, 1]");
  return backend(device).random(RandomOp::bernoulli, shape, DType::boolean, gen, p, 0.0);
}

Tensor dropout(const Tensor& x, double p, Generator& gen) {
  check(p >= 0 && p < 1, "dropout", "probability ", p, " is outside [0, 1)");
  if (p == 0) return x;
  Tensor keep = bernoulli(x.shape(), 1.0 - p, gen, x.device());
  return where(keep, x * (1.0 / (1.0 - p)), zeros({}, x.dtype(), x.device()));
}

}  // namespace cotan
