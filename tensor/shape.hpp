// Shapes and strides (in elements). A shape prints as [4, 8]; a scalar has shape [].
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

namespace cotan {

using Shape = std::vector<int64_t>;
using Strides = std::vector<int64_t>;

// numel and contiguous_strides use checked arithmetic: a shape whose element count or strides do
// not fit in an int64 throws "[shape] shape [..] has more elements than an int64 holds".
int64_t numel(const Shape& shape);
Strides contiguous_strides(const Shape& shape);

// The largest tensor: 2^48 bytes (256 TiB), far above any memory, far below size_t's range, so
// that rounding a size up for alignment cannot wrap.
constexpr size_t kMaxTensorBytes = size_t(1) << 48;
// numel(shape) * element_size, checked; throws "[op] shape [..] needs more than the limit of .. bytes".
size_t checked_nbytes(const Shape& shape, size_t element_size, const char* op);
std::string to_string(const Shape& shape);

// Normalizes a possibly negative axis against `ndim`; throws "[op] axis 3 is out of range for 2 dims".
int64_t normalize_axis(int64_t axis, int64_t ndim, const char* op);
// Normalizes, sorts and de-duplicates axes; an empty list means all axes.
std::vector<int64_t> normalize_axes(const std::vector<int64_t>& axes, int64_t ndim, const char* op);

// Numpy broadcasting of two shapes; throws "[op] shapes [..] and [..] cannot be broadcast".
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);

// How a matrix [rows, cols] with these strides lies, as a GEMM reads it: 'n' with its rows
// contiguous and apart by at least a row (row-major, leading dimension row_stride), 't' with its
// columns so (the transpose of a row-major matrix: x W^T reads W so; leading dimension
// col_stride), 'g' neither (general strides: a GEMM copies it first). A dim of size 1 takes any
// stride; a single row or column reads as 'n'.
char operand_layout(int64_t rows, int64_t cols, int64_t row_stride, int64_t col_stride);

}  // namespace cotan

namespace std {
inline ostream& operator<<(ostream& out, const cotan::Shape& shape) { return out << cotan::to_string(shape); }
}  // namespace std
