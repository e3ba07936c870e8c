// Elementwise launchers: unary, binary, where, called with arguments Backend has checked
// (tensor/op_checks.cpp); each op picks the contiguous kernel when every operand is contiguous, the strided
// one otherwise.
#include <cmath>
#include <limits>
#include <type_traits>

#include "cuda/kernels/elementwise.cuh"
#include "cuda/kernels/launch.hpp"

namespace cotan::COTAN_KERNELS {
namespace {

// Integer clamp bounds: the tightest integers inside [lo, hi], saturated to T's range.
template <class T>
T int_bound(double v, bool lower) {
  double r = lower ? std::ceil(v) : std::floor(v);
  if (!(r > double(std::numeric_limits<T>::min()))) return std::numeric_limits<T>::min();
  if (!(r < double(std::numeric_limits<T>::max()))) return std::numeric_limits<T>::max();
  return T(r);
}

template <class T>
Tensor unary_typed(UnaryOp op, const Tensor& x, double a, double b) {
  using C = compute_t<T>;
  Tensor out = empty_tensor(x.shape(), x.dtype());
  const int64_t n = x.numel();
  if (n == 0) return out;
  C ca = C(0), cb = C(0);
  if constexpr (std::is_integral_v<T>) {
    if (op == UnaryOp::clamp) ca = int_bound<T>(a, true), cb = int_bound<T>(b, false);
  } else {
    ca = C(a), cb = C(b);
  }
  const T* in = static_cast<const T*>(x.data_ptr());
  T* y = static_cast<T*>(out.data_ptr());
  const LaunchSize size = grid_stride_launch(n);
  with_unary_op(op, [&](auto tag) {
    constexpr UnaryOp Op = decltype(tag)::value;
    if constexpr (Op == UnaryOp::logical_not || (std::is_integral_v<T> && !accepts_integers(Op))) {
      fail(op_name(op), "no kernel for dtype ", dtype_v<T>);  // ruled out by unary()
    } else if (x.is_contiguous()) {
      simt::launch(unary_contiguous_kernel<Op, T>, size.grid, size.block, 0, n, in, y, ca, cb);
    } else {
      simt::launch(unary_strided_kernel<Op, T>, size.grid, size.block, 0, n, layout_of(x), in, y, ca, cb);
    }
  });
  return out;
}

template <class T>
Tensor logical_not_typed(const Tensor& x) {
  Tensor out = empty_tensor(x.shape(), DType::boolean);
  const int64_t n = x.numel();
  if (n == 0) return out;
  const LaunchSize size = grid_stride_launch(n);
  simt::launch(logical_not_kernel<T>, size.grid, size.block, 0, n, layout_of(x), static_cast<const T*>(x.data_ptr()),
               static_cast<bool*>(out.data_ptr()));
  return out;
}

// Throws "[div] integer division by zero" when any element of the divisor b is zero.
template <class T>
void check_no_zero(const Tensor& b) {
  const int64_t n = b.numel();
  if (n == 0) return;
  Tensor flag = empty_tensor({}, DType::i32);
  const int32_t zero = 0;
  copy_bytes(flag.data_ptr(), &zero, sizeof zero);
  const LaunchSize size = grid_stride_launch(n);
  simt::launch(any_zero_kernel<T>, size.grid, size.block, 0, n, layout_of(b), static_cast<const T*>(b.data_ptr()),
               static_cast<int32_t*>(flag.data_ptr()));
  int32_t found = 0;
  copy_bytes(&found, flag.data_ptr(), sizeof found);
  if (found) fail("div", "integer division by zero");
}

template <class T>
Tensor binary_typed(BinaryOp op, const Tensor& a, const Tensor& b) {
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>)
    if (op == BinaryOp::div) check_no_zero<T>(b);
  Tensor out = empty_tensor(a.shape(), is_comparison(op) ? DType::boolean : a.dtype());
  const int64_t n = a.numel();
  if (n == 0) return out;
  const T* pa = static_cast<const T*>(a.data_ptr());
  const T* pb = static_cast<const T*>(b.data_ptr());
  const LaunchSize size = grid_stride_launch(n);
  with_binary_op(op, [&](auto tag) {
    constexpr BinaryOp Op = decltype(tag)::value;
    if constexpr (std::is_same_v<T, bool> && Op <= BinaryOp::div) {
      fail(op_name(op), "expects a numeric dtype, got bool");  // ruled out by binary()
    } else {
      using R = BinaryResult<Op, T>;
      R* y = static_cast<R*>(out.data_ptr());
      if (all_contiguous(a, b))
        simt::launch(binary_contiguous_kernel<Op, T, R>, size.grid, size.block, 0, n, pa, pb, y);
      else
        simt::launch(binary_strided_kernel<Op, T, R>, size.grid, size.block, 0, n, layout_of(a, b), pa, pb, y);
    }
  });
  return out;
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

}  // namespace

namespace launch {

Tensor unary(UnaryOp op, const Tensor& x, double a, double b) {
  check_on_target(op_name(op), x);
  const DType t = x.dtype();
  if (op == UnaryOp::logical_not)
    return dispatch_dtype(t, [&](auto tag) { return logical_not_typed<decltype(tag)>(x); });
  switch (t) {  // dtypes checked by Backend::unary
    case DType::f64: return unary_typed<double>(op, x, a, b);
    case DType::f32: return unary_typed<float>(op, x, a, b);
    case DType::bf16: return unary_typed<bf16>(op, x, a, b);
    case DType::i32: return unary_typed<int32_t>(op, x, a, b);
    case DType::i64: return unary_typed<int64_t>(op, x, a, b);
    case DType::boolean: break;
  }
  fail(op_name(op), "expects a numeric dtype, got bool");
}

Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b) {
  check_on_target(op_name(op), a);
  check_on_target(op_name(op), b);
  return dispatch_dtype(a.dtype(), [&](auto tag) { return binary_typed<decltype(tag)>(op, a, b); });
}

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  check_on_target("where", cond);
  check_on_target("where", a);
  check_on_target("where", b);
  Tensor out = empty_tensor(a.shape(), a.dtype());
  const int64_t n = a.numel();
  if (n == 0) return out;
  with_bits_type(a.dtype(), [&](auto tag) {
    using Bits = decltype(tag);
    const bool* c = static_cast<const bool*>(cond.data_ptr());
    const Bits* pa = static_cast<const Bits*>(a.data_ptr());
    const Bits* pb = static_cast<const Bits*>(b.data_ptr());
    Bits* y = static_cast<Bits*>(out.data_ptr());
    const LaunchSize size = grid_stride_launch(n);
    if (all_contiguous(cond, a, b))
      simt::launch(where_contiguous_kernel<Bits>, size.grid, size.block, 0, n, c, pa, pb, y);
    else
      simt::launch(where_strided_kernel<Bits>, size.grid, size.block, 0, n, layout_of(cond, a, b), c, pa, pb, y);
  });
  return out;
}

}  // namespace launch
}  // namespace cotan::COTAN_KERNELS
