// Tensor: a strided view (shape, strides in elements, offset in elements, dtype) of a Storage.
// Copying a Tensor copies a handle, never data. Views (reshape, permute, slice, expand, ...) share
// storage. A tensor on the autograd tape carries the Node that produced it.
#pragma once

#include <cstdint>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "tensor/device.hpp"
#include "tensor/dtype.hpp"
#include "tensor/error.hpp"
#include "tensor/shape.hpp"
#include "tensor/storage.hpp"

namespace cotan {

struct Node;

struct TensorImpl {
  std::shared_ptr<Storage> storage;
  Shape shape;
  Strides strides;
  int64_t offset = 0;  // in elements
  DType dtype = DType::f32;
  std::shared_ptr<Node> node;  // the op that produced this tensor, when it is on the tape
};

class Tensor {
 public:
  Tensor() = default;
  Tensor(std::shared_ptr<Storage> storage, Shape shape, Strides strides, int64_t offset, DType dtype);

  // Uninitialised contiguous tensor.
  static Tensor empty(const Shape& shape, DType dtype = DType::f32, Device device = Device::cpu());

  bool defined() const { return bool(impl_); }
  const Shape& shape() const { return impl().shape; }
  const Strides& strides() const { return impl().strides; }
  int64_t offset() const { return impl().offset; }
  DType dtype() const { return impl().dtype; }
  Device device() const { return impl().storage->device; }
  int64_t dim() const { return int64_t(impl().shape.size()); }
  int64_t size(int64_t axis) const;  // negative axes count from the end
  int64_t numel() const { return cotan::numel(impl().shape); }
  size_t nbytes() const { return size_t(numel()) * dtype_size(dtype()); }
  bool is_contiguous() const;
  const std::shared_ptr<Storage>& storage() const { return impl().storage; }

  // Pointer to the first element (at offset). data<T>() checks that T matches the dtype.
  void* data_ptr() const;
  template <class T>
  T* data() const {
    if (dtype_v<T> != dtype()) fail("data", "tensor has dtype ", dtype(), ", not ", dtype_v<T>);
    return static_cast<T*>(data_ptr());
  }

  // Copies to the CPU, converts to T and returns the elements in row-major order.
  template <class T>
  std::vector<T> to_vector() const;
  // The single element of a one-element tensor, converted to T.
  template <class T>
  T item() const;

  // A raw view over the same storage (no autograd, bounds checked against the storage).
  Tensor as_strided(const Shape& shape, const Strides& strides, int64_t offset) const;
  // The same data, off the autograd tape.
  Tensor detach() const;

  const std::shared_ptr<Node>& node() const { return impl().node; }
  void set_node(std::shared_ptr<Node> node) { impl().node = std::move(node); }
  bool tracked() const { return impl_ && impl_->node != nullptr; }

  bool same_storage(const Tensor& other) const { return storage() == other.storage(); }
  // Whether this handle is the only reference to its data: no copy of the handle, no view and no
  // value saved by a pullback shares it. A function that takes a Tensor&& may then reuse the memory.
  bool sole_owner() const { return impl_ && impl_.use_count() == 1 && impl_->storage.use_count() == 1; }
  std::string str() const;  // values with shape and dtype, elided when large

 private:
  TensorImpl& impl() const {
    if (!impl_) throw Error("[tensor] use of an undefined tensor");
    return *impl_;
  }
  std::shared_ptr<TensorImpl> impl_;
};

std::ostream& operator<<(std::ostream& out, const Tensor& t);

}  // namespace cotan
