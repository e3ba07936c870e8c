// Elementwise kernels: unary, binary (operands broadcast through their strides), where. The unary
// functions are the ones the CPU backend uses (tensor/unary_math.hpp); the binary ones are the CPU
// backend's (tensor/cpu/elementwise.cpp) term for term: integers wrap (two's complement),
// comparisons and logical ops give bool, NaN propagates through maximum and minimum.
// Every kernel has a contiguous form (all operands indexed by i) and a strided one
// (StridedLayout over the inputs; the output is always fresh and contiguous).
#pragma once

#include "cuda/kernels/common.cuh"
#include "tensor/op_table.hpp"
#include "tensor/unary_math.hpp"

namespace cotan::COTAN_KERNELS {

// ---- unary ----

// y = op(x) for storage type T; a and b already in T's compute type (clamp bounds of integer
// types already rounded inwards and saturated).
template <UnaryOp Op, class T>
SIMT_DEVICE T unary_value(T x, compute_t<T> a, compute_t<T> b) {
  if constexpr (Op == UnaryOp::logical_not) return x;  // see logical_not_kernel
  else if constexpr (std::is_integral_v<T>) return unary_math::integer<Op>(x, T(a), T(b));
  else return convert_to<T>(unary_math::floating<Op>(convert_to<compute_t<T>>(x), a, b));
}

template <UnaryOp Op, class T>
SIMT_GLOBAL void unary_contiguous_kernel(int64_t n, const T* x, T* y, compute_t<T> a, compute_t<T> b) {
  for (int64_t i = first_index(); i < n; i += index_stride()) y[i] = unary_value<Op>(x[i], a, b);
}

template <UnaryOp Op, class T>
SIMT_GLOBAL void unary_strided_kernel(int64_t n, StridedLayout<1> layout, const T* x, T* y, compute_t<T> a,
                                      compute_t<T> b) {
  for (int64_t i = first_index(); i < n; i += index_stride()) {
    int64_t at[1];
    layout.offsets(i, at);
    y[i] = unary_value<Op>(x[at[0]], a, b);
  }
}

// logical_not: true where x is zero (NaN counts as nonzero), for any dtype.
template <class T>
SIMT_GLOBAL void logical_not_kernel(int64_t n, StridedLayout<1> layout, const T* x, bool* y) {
  for (int64_t i = first_index(); i < n; i += index_stride()) {
    int64_t at[1];
    layout.offsets(i, at);
    y[i] = convert_to<compute_t<T>>(x[at[0]]) == compute_t<T>(0);
  }
}

// ---- binary ----

// The result of op on compute-type values: C for arithmetic, bool for comparisons and logical
// ops. Integer division by zero is ruled out by the launcher; x / -1 wraps like negation.
template <BinaryOp Op, class C>
SIMT_DEVICE auto binary_value(C x, C y) {
  constexpr bool integer = std::is_integral_v<C> && !std::is_same_v<C, bool>;
  using U = std::conditional_t<integer, std::make_unsigned_t<std::conditional_t<integer, C, int>>, C>;
  if constexpr (Op == BinaryOp::add) return C(U(x) + U(y));
  else if constexpr (Op == BinaryOp::sub) return C(U(x) - U(y));
  else if constexpr (Op == BinaryOp::mul) return C(U(x) * U(y));
  else if constexpr (Op == BinaryOp::div) {
    if constexpr (integer) return y == C(-1) ? C(U(0) - U(x)) : C(x / y);
    else return C(x / y);
  } else if constexpr (Op == BinaryOp::maximum) return (math::is_nan(x) || x > y) ? x : y;
  else if constexpr (Op == BinaryOp::minimum) return (math::is_nan(x) || x < y) ? x : y;
  else if constexpr (Op == BinaryOp::eq) return x == y;
  else if constexpr (Op == BinaryOp::ne) return x != y;
  else if constexpr (Op == BinaryOp::lt) return x < y;
  else if constexpr (Op == BinaryOp::le) return x <= y;
  else if constexpr (Op == BinaryOp::gt) return x > y;
  else if constexpr (Op == BinaryOp::ge) return x >= y;
  else if constexpr (Op == BinaryOp::logical_and) return bool((x != C(0)) & (y != C(0)));
  else return bool((x != C(0)) | (y != C(0)));  // logical_or
}

// The storage type of op's result on T operands: bool for comparisons and logical ops, T for
// arithmetic. Computed from is_comparison, never from binary_value's return type: nvcc's host pass
// sees a device function as returning void, and its launch stubs and kernel registrations spell
// this alias (the template argument R below is written with it), so a type that only the device
// pass can compute named different kernels there: the comparisons on numbers launched kernels
// that were never registered ("invalid device function" on a GPU; the emulator, compiled by g++
// alone, never saw it).
// (A variable, not a call: device code may read a constexpr variable, not call a host function.)
template <BinaryOp Op>
inline constexpr bool kBoolResult = is_comparison(Op);
template <BinaryOp Op, class T>
using BinaryResult = std::conditional_t<kBoolResult<Op>, bool, T>;

template <BinaryOp Op, class T, class R>
SIMT_DEVICE R binary_element(T x, T y) {
  using Value = decltype(binary_value<Op>(compute_t<T>(), compute_t<T>()));
  static_assert(std::is_same_v<Value, std::conditional_t<kBoolResult<Op>, bool, compute_t<T>>>,
                "binary_value returns bool for comparisons and logical ops, the compute type otherwise");
  return convert_to<R>(binary_value<Op>(convert_to<compute_t<T>>(x), convert_to<compute_t<T>>(y)));
}

template <BinaryOp Op, class T, class R>
SIMT_GLOBAL void binary_contiguous_kernel(int64_t n, const T* a, const T* b, R* out) {
  for (int64_t i = first_index(); i < n; i += index_stride()) out[i] = binary_element<Op, T, R>(a[i], b[i]);
}

// Operand 0 is a, 1 is b.
template <BinaryOp Op, class T, class R>
SIMT_GLOBAL void binary_strided_kernel(int64_t n, StridedLayout<2> layout, const T* a, const T* b, R* out) {
  for (int64_t i = first_index(); i < n; i += index_stride()) {
    int64_t at[2];
    layout.offsets(i, at);
    out[i] = binary_element<Op, T, R>(a[at[0]], b[at[1]]);
  }
}

// Sets *found when any element of the layout's operand is zero (integer divisors).
template <class T>
SIMT_GLOBAL void any_zero_kernel(int64_t n, StridedLayout<1> layout, const T* x, int32_t* found) {
  for (int64_t i = first_index(); i < n; i += index_stride()) {
    int64_t at[1];
    layout.offsets(i, at);
    if (x[at[0]] == T(0)) *found = 1;
  }
}

// ---- where ----

// out = cond ? a : b, on bit patterns (Bits: the unsigned integer of the element's size).
// Operand 0 is cond, 1 is a, 2 is b.
template <class Bits>
SIMT_GLOBAL void where_strided_kernel(int64_t n, StridedLayout<3> layout, const bool* cond, const Bits* a,
                                      const Bits* b, Bits* out) {
  for (int64_t i = first_index(); i < n; i += index_stride()) {
    int64_t at[3];
    layout.offsets(i, at);
    out[i] = cond[at[0]] ? a[at[1]] : b[at[2]];
  }
}

template <class Bits>
SIMT_GLOBAL void where_contiguous_kernel(int64_t n, const bool* cond, const Bits* a, const Bits* b, Bits* out) {
  for (int64_t i = first_index(); i < n; i += index_stride()) out[i] = cond[i] ? a[i] : b[i];
}

}  // namespace cotan::COTAN_KERNELS
