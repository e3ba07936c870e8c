#include "tensor/tensor.hpp"

#include <iomanip>
#include <sstream>

#include "tensor/ops.hpp"

namespace cotan {

Tensor::Tensor(std::shared_ptr<Storage> storage, Shape shape, Strides strides, int64_t offset, DType dtype)
    : impl_(std::make_shared<TensorImpl>()) {
  if (shape.size() != strides.size())
    fail("tensor", "shape ", to_string(shape), " and strides ", to_string(strides), " differ in rank");
  for (int64_t d : shape)
    if (d < 0) fail("tensor", "negative dimension in shape ", to_string(shape));
  impl_->storage = std::move(storage);
  impl_->shape = std::move(shape);
  impl_->strides = std::move(strides);
  impl_->offset = offset;
  impl_->dtype = dtype;
}

Tensor Tensor::empty(const Shape& shape, DType dtype, Device device) {
  for (int64_t d : shape)
    if (d < 0) fail("empty", "negative dimension in shape ", to_string(shape));
  auto storage = allocate(checked_nbytes(shape, dtype_size(dtype), "empty"), device);
  return Tensor(std::move(storage), shape, contiguous_strides(shape), 0, dtype);
}

int64_t Tensor::size(int64_t axis) const { return shape()[size_t(normalize_axis(axis, dim(), "size"))]; }

bool Tensor::is_contiguous() const {
  int64_t expected = 1;
  for (size_t i = shape().size(); i-- > 0;) {
    if (shape()[i] == 1) continue;
    if (strides()[i] != expected) return false;
    expected *= shape()[i];
  }
  return true;
}

void* Tensor::data_ptr() const {
  return static_cast<char*>(storage()->data) + offset() * int64_t(dtype_size(dtype()));
}

Tensor Tensor::as_strided(const Shape& shape, const Strides& strides, int64_t offset) const {
  // The lowest and highest element the view can touch must lie inside the storage.
  int64_t lo = offset, hi = offset;
  bool empty_view = false;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 0) empty_view = true;
    int64_t reach = (shape[i] - 1) * strides[i];
    (reach < 0 ? lo : hi) += reach;
  }
  int64_t capacity = int64_t(storage()->nbytes / dtype_size(dtype()));
  if (!empty_view && (lo < 0 || hi >= capacity))
    fail("as_strided", "view ", to_string(shape), " with strides ", to_string(strides), " at offset ", offset,
         " reaches outside a storage of ", capacity, " elements");
  return Tensor(storage(), shape, strides, offset, dtype());
}

Tensor Tensor::detach() const { return Tensor(storage(), shape(), strides(), offset(), dtype()); }

template <class T>
std::vector<T> Tensor::to_vector() const {
  Tensor host = contiguous(to(detach(), Device::cpu()));
  if (host.dtype() != dtype_v<T>) host = cast(host, dtype_v<T>);
  const T* p = host.data<T>();
  return std::vector<T>(p, p + host.numel());
}

template <class T>
T Tensor::item() const {
  if (numel() != 1) fail("item", "tensor of shape ", to_string(shape()), " has ", numel(), " elements, not 1");
  return to_vector<T>()[0];
}

template std::vector<double> Tensor::to_vector<double>() const;
template std::vector<float> Tensor::to_vector<float>() const;
template std::vector<int32_t> Tensor::to_vector<int32_t>() const;
template std::vector<int64_t> Tensor::to_vector<int64_t>() const;
template double Tensor::item<double>() const;
template float Tensor::item<float>() const;
template int32_t Tensor::item<int32_t>() const;
template int64_t Tensor::item<int64_t>() const;

template <>
std::vector<bool> Tensor::to_vector<bool>() const {
  auto bytes = cast(*this, DType::i32).to_vector<int32_t>();
  return std::vector<bool>(bytes.begin(), bytes.end());
}
template <>
bool Tensor::item<bool>() const {
  return item<int32_t>() != 0;
}

std::string Tensor::str() const {
  std::ostringstream out;
  out << "tensor(";
  if (!defined()) return "tensor(undefined)";
  constexpr int64_t kShown = 6;  // elements shown at each end of the last axis, rows at each end
  auto values = is_floating(dtype()) ? to_vector<double>() : std::vector<double>();
  auto ints = is_floating(dtype()) ? std::vector<int64_t>() : to_vector<int64_t>();
  auto print = [&](int64_t i) {
    if (is_floating(dtype())) out << std::setprecision(6) << values[size_t(i)];
    else if (dtype() == DType::boolean) out << (ints[size_t(i)] ? "true" : "false");
    else out << ints[size_t(i)];
  };
  int64_t n = numel();
  int64_t row = dim() == 0 ? 1 : shape().back();
  int64_t rows = row == 0 ? 0 : n / row;
  out << (dim() == 0 ? "" : "[");
  for (int64_t r = 0; r < rows; ++r) {
    if (rows > 2 * kShown && r == kShown) {
      out << "\n  ...,";
      r = rows - kShown;
    }
    if (r) out << "\n  ";
    if (dim() > 1) out << "[";
    for (int64_t c = 0; c < row; ++c) {
      if (row > 2 * kShown && c == kShown) {
        out << ", ...";
        c = row - kShown;
      }
      if (c) out << ", ";
      print(r * row + c);
    }
    if (dim() > 1) out << "]";
  }
  out << (dim() == 0 ? "" : "]") << ", shape=" << to_string(shape()) << ", dtype=" << dtype();
  if (!device().is_cpu()) out << ", device=" << to_string(device());
  out << ")";
  return out.str();
}

std::ostream& operator<<(std::ostream& out, const Tensor& t) { return out << t.str(); }

}  // namespace cotan
