#include "tensor/shape.hpp"

#include <algorithm>

#include "tensor/error.hpp"

namespace cotan {

int64_t numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    if (__builtin_mul_overflow(n, d, &n)) fail("shape", "shape ", to_string(shape), " has more elements than an int64 holds");
  return n;
}

Strides contiguous_strides(const Shape& shape) {
  Strides strides(shape.size());
  int64_t s = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = s;
    if (i > 0 && __builtin_mul_overflow(s, shape[i], &s))
      fail("shape", "shape ", to_string(shape), " is too large to address: its strides overflow an int64");
  }
  return strides;
}

size_t checked_nbytes(const Shape& shape, size_t element_size, const char* op) {
  size_t bytes = 0;
  const int64_t n = numel(shape);
  if (n < 0 || __builtin_mul_overflow(size_t(n), element_size, &bytes) || bytes > kMaxTensorBytes)
    fail(op, "shape ", to_string(shape), " needs more than the limit of ", kMaxTensorBytes, " bytes");
  return bytes;
}

std::string to_string(const Shape& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(shape[i]);
  }
  return out + "]";
}

int64_t normalize_axis(int64_t axis, int64_t ndim, const char* op) {
  int64_t a = axis < 0 ? axis + ndim : axis;
  if (a < 0 || a >= ndim) fail(op, "axis ", axis, " is out of range for ", ndim, " dims");
  return a;
}

std::vector<int64_t> normalize_axes(const std::vector<int64_t>& axes, int64_t ndim, const char* op) {
  std::vector<int64_t> out;
  if (axes.empty()) {
    for (int64_t i = 0; i < ndim; ++i) out.push_back(i);
    return out;
  }
  for (int64_t a : axes) out.push_back(normalize_axis(a, ndim, op));
  std::sort(out.begin(), out.end());
  if (std::adjacent_find(out.begin(), out.end()) != out.end())
    fail(op, "axes ", to_string(axes), " repeat an axis");
  return out;
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (da != db && da != 1 && db != 1)
      fail(op, "shapes ", to_string(a), " and ", to_string(b), " cannot be broadcast");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

char operand_layout(int64_t rows, int64_t cols, int64_t row_stride, int64_t col_stride) {
  if ((cols == 1 || col_stride == 1) && (rows == 1 || row_stride >= cols)) return 'n';
  if ((rows == 1 || row_stride == 1) && (cols == 1 || col_stride >= rows)) return 't';
  return 'g';
}

}  // namespace cotan
