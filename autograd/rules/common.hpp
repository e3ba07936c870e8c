// Shared checks for the op rules: every rule validates its arguments here, so error messages
// read the same across ops ("[add] dtypes f32 and f64 do not match").
#pragma once

#include <utility>
#include <vector>

#include "autograd/autograd.hpp"
#include "tensor/op_table.hpp"
#include "tensor/ops.hpp"

namespace cotan::rules {

inline Backend& backend_of(const Tensor& x) { return backend(x.device()); }

// The contiguous tensor of `shape` whose slices along `axis`, from each part's start on, are the
// parts, when they already lie so in one storage: tensors laid out side by side (nn::adjoin) that
// concat joins, or the cotangents of slices a kernel returned side by side (the engine). Else
// undefined. The caller makes sure the parts cover the shape.
inline Tensor whole_in_place(const std::vector<std::pair<int64_t, Tensor>>& parts, int64_t axis,
                             const Shape& shape) {
  const Strides strides = contiguous_strides(shape);
  const Tensor& first = parts.front().second;
  const int64_t origin = first.offset() - parts.front().first * strides[size_t(axis)];
  for (const auto& [start, t] : parts)
    if (!t.same_storage(first) || t.strides() != strides || t.offset() != origin + start * strides[size_t(axis)])
      return Tensor();
  return first.as_strided(shape, strides, origin);
}

inline void check_defined(const char* op, const Tensor& x) {
  if (!x.defined()) fail(op, "got an undefined tensor");
}

inline void check_floating(const char* op, const Tensor& x) {
  if (!is_floating(x.dtype())) fail(op, "expects a floating dtype, got ", x.dtype());
}

inline void check_index(const char* op, const Tensor& index) {
  if (!is_integral(index.dtype())) fail(op, "index must be i32 or i64, got ", index.dtype());
}

inline void check_same_device(const char* op, const Tensor& a, const Tensor& b) {
  if (a.device() != b.device()) fail(op, "devices ", to_string(a.device()), " and ", to_string(b.device()), " do not match");
}

inline void check_same_dtype(const char* op, const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype()) fail(op, "dtypes ", a.dtype(), " and ", b.dtype(), " do not match");
}

// Checks dtype and device, then broadcasts both operands (as views) to their common shape.
inline std::pair<Tensor, Tensor> broadcast_pair(const char* op, const Tensor& a, const Tensor& b) {
  check_defined(op, a);
  check_defined(op, b);
  check_same_device(op, a, b);
  check_same_dtype(op, a, b);
  Shape shape = broadcast_shapes(a.shape(), b.shape(), op);
  return {broadcast_to(a, shape), broadcast_to(b, shape)};
}

inline Tensor scalar_like(const Tensor& x, double value) { return full({}, value, x.dtype(), x.device()); }

// The shape `x` has after reducing `axes` with keepdim, for broadcasting a cotangent back.
inline Shape keepdim_shape(const Shape& shape, const std::vector<int64_t>& axes) {
  Shape out = shape;
  for (int64_t a : axes) out[size_t(a)] = 1;
  return out;
}

}  // namespace cotan::rules
