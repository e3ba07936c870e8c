// Indexing launchers: gather, scatter_add, index_select, index_add (kernels in index.cuh).
// Shapes, axes and index dtypes are checked by Backend (tensor/op_checks.cpp).
//
// Indices are checked by the kernels themselves: each records the first out-of-range position
// in a device flag, which the launcher reads back after the launch (a wait on the stream) and
// turns into "[op] index 17 is out of range for axis 1 of size 10". The index is never read
// twice and nothing is validated on the host.
#include "cuda/kernels/index.cuh"
#include "cuda/kernels/launch.hpp"

namespace cotan::COTAN_KERNELS {
namespace {

template <class F>
decltype(auto) with_index_type(std::string_view op, const Tensor& index, F&& f) {
  if (index.dtype() == DType::i32) return f(int32_t{});
  if (index.dtype() == DType::i64) return f(int64_t{});
  fail(op, "index must be i32 or i64, got ", index.dtype());
}

// The unsigned integer with the size of an element of dtype t.
template <class F>
decltype(auto) with_bits_type(DType t, F&& f) {
  switch (dtype_size(t)) {
    case 1: return f(uint8_t{});
    case 2: return f(uint16_t{});
    case 4: return f(uint32_t{});
    default: return f(uint64_t{});
  }
}

// x's strides with the one along `axis` set to 0: the kernels add index * step themselves.
Strides without_axis(Strides strides, int64_t axis) {
  strides[size_t(axis)] = 0;
  return strides;
}

// A 1-D index seen in `shape`: index[j] at every position whose axis coordinate is j.
Tensor spread_index(const Tensor& index, const Shape& shape, int64_t axis) {
  Strides strides(shape.size(), 0);
  strides[size_t(axis)] = index.strides()[0];
  return index.as_strided(shape, strides, index.offset());
}

// The device flag the kernels record the first out-of-range position in.
class BadIndexFlag {
 public:
  BadIndexFlag() : flag_(empty_tensor({1}, DType::i64)) {
    const unsigned long long none = kNoBadIndex;
    copy_bytes(flag_.data_ptr(), &none, sizeof none);
  }
  unsigned long long* get() const { return static_cast<unsigned long long*>(flag_.data_ptr()); }

  // Throws the CPU backend's error when a kernel recorded a position of `index` (row-major).
  void check(std::string_view op, const Tensor& index, int64_t axis, int64_t size) const {
    unsigned long long found = kNoBadIndex;
    copy_bytes(&found, flag_.data_ptr(), sizeof found);
    if (found == kNoBadIndex) return;
    int64_t rest = int64_t(found), offset = 0;
    for (size_t d = index.shape().size(); d-- > 0;) {
      offset += rest % index.shape()[d] * index.strides()[d];
      rest /= index.shape()[d];
    }
    const int64_t value = with_index_type(op, index, [&](auto tag) {
      decltype(tag) v{};
      copy_bytes(&v, static_cast<const decltype(tag)*>(index.data_ptr()) + offset, sizeof v);
      return int64_t(v);
    });
    fail(op, "index ", value, " is out of range for axis ", axis, " of size ", size);
  }

 private:
  Tensor flag_;
};

// Checks the indices of an index with no elements to move (see check_index_kernel).
void check_indices_only(std::string_view op, const Tensor& index, int64_t axis, int64_t size) {
  const int64_t n = index.numel();
  if (n == 0) return;
  BadIndexFlag bad;
  with_index_type(op, index, [&](auto itag) {
    using I = decltype(itag);
    const LaunchSize launch = grid_stride_launch(n);
    simt::launch(check_index_kernel<I>, launch.grid, launch.block, 0, n, layout_of(index),
                 static_cast<const I*>(index.data_ptr()), size, bad.get());
  });
  bad.check(op, index, axis, size);
}

// out[p] = x[p with axis coordinate index[p]] for p in index's shape (index: x's ndim, checked).
Tensor gather_along(std::string_view op, const Tensor& x, int64_t axis, const Tensor& index) {
  const int64_t size = x.size(axis);
  Tensor out = empty_tensor(index.shape(), x.dtype());
  const int64_t n = index.numel();
  if (n == 0) return out;
  const Strides xs = without_axis(x.strides(), axis);
  const StridedLayout<2> layout = make_layout<2>(index.shape(), {&xs, &index.strides()});
  BadIndexFlag bad;
  with_index_type(op, index, [&](auto itag) {
    with_bits_type(x.dtype(), [&](auto btag) {
      using I = decltype(itag);
      using Bits = decltype(btag);
      const LaunchSize launch = grid_stride_launch(n);
      simt::launch(gather_kernel<Bits, I>, launch.grid, launch.block, 0, n, layout,
                   static_cast<const Bits*>(x.data_ptr()), x.strides()[size_t(axis)], size,
                   static_cast<const I*>(index.data_ptr()), static_cast<Bits*>(out.data_ptr()), bad.get());
    });
  });
  bad.check(op, index, axis, size);
  return out;
}

// A contiguous copy of base with src[p] added at p's axis coordinate replaced by index[p], for p
// in index's shape (index: base's ndim, checked; src at least index's shape).
Tensor scatter_add_along(std::string_view op, const Tensor& base, int64_t axis, const Tensor& index,
                         const Tensor& src) {
  if (base.dtype() == DType::boolean) fail(op, "does not support dtype bool");
  const int64_t size = base.size(axis);
  Tensor out = empty_tensor(base.shape(), base.dtype());
  launch::assign(out, base);
  const int64_t n = index.numel();
  if (n == 0) return out;
  const Strides os = without_axis(out.strides(), axis);
  const StridedLayout<3> layout = make_layout<3>(index.shape(), {&os, &index.strides(), &src.strides()});
  BadIndexFlag bad;
  with_index_type(op, index, [&](auto itag) {
    dispatch_dtype(base.dtype(), [&](auto tag) {
      using I = decltype(itag);
      using T = decltype(tag);
      if constexpr (!std::is_same_v<T, bool>) {
        const LaunchSize launch = grid_stride_launch(n);
        simt::launch(scatter_add_kernel<T, I>, launch.grid, launch.block, 0, n, layout,
                     static_cast<T*>(out.data_ptr()), out.strides()[size_t(axis)], size,
                     static_cast<const I*>(index.data_ptr()), static_cast<const T*>(src.data_ptr()), bad.get());
      }
    });
  });
  bad.check(op, index, axis, size);
  return out;
}

}  // namespace

namespace launch {

// Arguments checked by Backend's gather, scatter_add, index_select and index_add: axis normalized,
// i32 or i64 indices, shapes that fit. The launchers check the device and the index values.
Tensor gather(const Tensor& x, int64_t axis, const Tensor& index) {
  check_on_target("gather", x);
  check_on_target("gather", index);
  return gather_along("gather", x, axis, index);
}

Tensor scatter_add(const Tensor& base, int64_t axis, const Tensor& index, const Tensor& src) {
  check_on_target("scatter_add", base);
  check_on_target("scatter_add", index);
  check_on_target("scatter_add", src);
  return scatter_add_along("scatter_add", base, axis, index, src);
}

Tensor index_select(const Tensor& x, int64_t axis, const Tensor& index) {
  check_on_target("index_select", x);
  check_on_target("index_select", index);
  Shape shape = x.shape();
  shape[size_t(axis)] = index.size(0);
  if (numel(shape) == 0) {
    check_indices_only("index_select", index, axis, x.size(axis));
    return empty_tensor(shape, x.dtype());
  }
  // out[o, j, i] = x[o, index[j], i]: a gather with index[j] at every (o, j, i).
  return gather_along("index_select", x, axis, spread_index(index, shape, axis));
}

Tensor index_add(const Tensor& base, int64_t axis, const Tensor& index, const Tensor& src) {
  check_on_target("index_add", base);
  check_on_target("index_add", index);
  check_on_target("index_add", src);
  if (src.numel() == 0) {
    check_indices_only("index_add", index, axis, base.size(axis));
    if (base.dtype() == DType::boolean) fail("index_add", "does not support dtype bool");
    Tensor out = empty_tensor(base.shape(), base.dtype());
    launch::assign(out, base);
    return out;
  }
  // out[o, index[j], i] += src[o, j, i]: a scatter_add with index[j] at every (o, j, i).
  return scatter_add_along("index_add", base, axis, spread_index(index, src.shape(), axis), src);
}

}  // namespace launch
}  // namespace cotan::COTAN_KERNELS
