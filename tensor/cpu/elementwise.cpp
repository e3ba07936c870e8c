// CPU elementwise kernels: unary, binary, where. Outputs are fresh contiguous tensors. Every
// kernel walks its operands as runs along the innermost collapsed dimension
// (elementwise_loops.hpp); a run whose operands are all unit-stride (or broadcast scalars) takes
// a vectorizable loop, anything else a strided one. Floating unary math goes through Eigen's
// array maps (SIMD exp, log, tanh, sqrt), with libm on the lanes where Eigen's special values
// differ from it (vector_math.hpp); bf16 is computed in f32 tiles.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

// Eigen 3.4's AVX bf16 packet code declares a variable it never uses.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-variable"
#include <Eigen/Core>
#pragma GCC diagnostic pop

#include "tensor/cpu/backend.hpp"
#include "tensor/cpu/elementwise_loops.hpp"
#include "tensor/cpu/vector_math.hpp"
#include "tensor/unary_math.hpp"

namespace cotan::cpu {

namespace {

template <int64_t N>
using Stride = std::integral_constant<int64_t, N>;

// Elements of a bf16 (or strided) run converted to the compute type at a time.
constexpr int64_t kTile = 256;

// The unsigned integer with the size of a T.
template <size_t N> struct SameSizeBits;
template <> struct SameSizeBits<1> { using type = uint8_t; };
template <> struct SameSizeBits<2> { using type = uint16_t; };
template <> struct SameSizeBits<4> { using type = uint32_t; };
template <> struct SameSizeBits<8> { using type = uint64_t; };

// ---- unary ----

// The vector form of a floating unary op over n contiguous compute-type elements: Eigen's packet
// math, then the scalar definition (`scalar`, tensor/unary_math.hpp) on the lanes outside the
// packet code's exact range (vector_math.hpp), so that special values come out as in the scalar
// path and the CUDA kernels. Returns false for ops without a vector form: the caller loops.
template <UnaryOp Op, class C, class Scalar>
bool vector_unary(const C* xp, C* yp, int64_t n, C a, Scalar scalar) {
  using Array = Eigen::Array<C, Eigen::Dynamic, 1>;
  using R = VectorRange<C>;
  Eigen::Map<const Array> x(xp, n);
  Eigen::Map<Array> y(yp, n);
  constexpr C one = C(1), half = C(0.5);
  auto positive = [](C v) { return R::positive_normal(v); };
  auto exp_of_minus = [](C v) { return R::exp_exact(-v); };
  // neg is not here: Eigen's AVX-512 negation is 0 - x, which makes -(+0) +0.
  if constexpr (Op == UnaryOp::abs) y = x.abs();
  else if constexpr (Op == UnaryOp::square) y = x.square();
  else if constexpr (Op == UnaryOp::reciprocal) y = x.inverse();
  else if constexpr (Op == UnaryOp::exp) {
    y = x.exp();
    repair_exp(xp, C(0), yp, n);
  } else if constexpr (Op == UnaryOp::log) {
    y = x.log();
    redo_inexact(xp, yp, n, positive, scalar);
  } else if constexpr (Op == UnaryOp::sqrt) {
    y = x.sqrt();
    redo_inexact(xp, yp, n, positive, scalar);
  } else if constexpr (Op == UnaryOp::rsqrt) {
    y = x.sqrt().inverse();
    redo_inexact(xp, yp, n, positive, scalar);
  } else if constexpr (Op == UnaryOp::tanh) {
    y = x.tanh();
    redo_inexact(xp, yp, n, [](C v) { return R::tanh_exact(v); }, scalar);
  } else if constexpr (Op == UnaryOp::sigmoid) {
    y = (one + (-x).exp()).inverse();
    redo_inexact(xp, yp, n, exp_of_minus, scalar);
  } else if constexpr (Op == UnaryOp::silu) {
    y = x * (one + (-x).exp()).inverse();
    redo_inexact(xp, yp, n, exp_of_minus, scalar);
  } else if constexpr (Op == UnaryOp::gelu_tanh) {
    y = half * x * (one + (unary_math::kGeluK<C> * (x + unary_math::kGeluCubic<C> * x.cube())).tanh());
    redo_inexact(xp, yp, n, [](C v) { return R::gelu_exact(v); }, scalar);
  } else if constexpr (Op == UnaryOp::pow) {
    if (a == C(2)) y = x.square();
    else if (a == C(1)) y = x;
    else if (a == C(-1)) y = x.inverse();
    else if (a == C(0.5)) {
      y = x.sqrt();
      redo_inexact(xp, yp, n, positive, scalar);
    } else {
      // The packet pow is exact for positive normal x with a normal result; the scalar
      // definition elsewhere (x <= 0, where integer exponents keep the sign; overflow, underflow).
      y = x.pow(a);
      auto exact = [&](int64_t i) { return R::positive_normal(xp[i]) & R::normal(yp[i]); };
      int inexact = 0;
      for (int64_t i = 0; i < n; ++i) inexact |= int(!exact(i));
      if (inexact)
        for (int64_t i = 0; i < n; ++i)
          if (!exact(i)) yp[i] = scalar(xp[i]);
    }
  } else {
    return false;  // neg, relu, clamp, sign (the scalar loop vectorizes), softplus
  }
  return true;
}

// y = op(x) over n contiguous compute-type elements.
template <class C>
void float_unary(UnaryOp op, const C* xp, C* yp, int64_t n, C a, C b) {
  with_unary_op(op, [&](auto tag) {
    constexpr UnaryOp Op = decltype(tag)::value;
    if constexpr (Op == UnaryOp::logical_not) {
      fail(op_name(op), "has a bool result: no floating kernel");  // unary_logical_not serves it
    } else {
      auto scalar = [a, b](C v) { return unary_math::floating<Op>(v, a, b); };
      // In chunks that stay in L1, so that the repair's scans read what the packet code just wrote.
      constexpr int64_t kChunk = 2048;
      for (int64_t i0 = 0; i0 < n; i0 += kChunk) {
        const int64_t len = std::min(kChunk, n - i0);
        if (!vector_unary<Op>(xp + i0, yp + i0, len, a, scalar))
          for (int64_t i = i0; i < i0 + len; ++i) yp[i] = scalar(xp[i]);
      }
    }
  });
}

// Integer clamp bounds: the tightest integers inside [lo, hi], saturated to T's range.
template <class T>
T int_bound(double v, bool lower) {
  double r = lower ? std::ceil(v) : std::floor(v);
  if (!(r > double(std::numeric_limits<T>::min()))) return std::numeric_limits<T>::min();
  if (!(r < double(std::numeric_limits<T>::max()))) return std::numeric_limits<T>::max();
  return T(r);
}

// Integer arithmetic wraps (two's complement) instead of overflowing (tensor/unary_math.hpp).
template <class T>
void int_unary(UnaryOp op, const T* x, T* y, int64_t n, T lo, T hi) {
  with_unary_op(op, [&](auto tag) {
    constexpr UnaryOp Op = decltype(tag)::value;
    if constexpr (!accepts_integers(Op) || Op == UnaryOp::logical_not) {
      fail(op_name(op), "no integer kernel");
    } else {
      for (int64_t i = 0; i < n; ++i) y[i] = unary_math::integer<Op>(x[i], lo, hi);
    }
  });
}

template <class T>
Tensor unary_typed(UnaryOp op, const Tensor& x, double a, double b) {
  using C = compute_t<T>;
  Tensor out = Tensor::empty(x.shape(), x.dtype());
  T* out_data = static_cast<T*>(out.data_ptr());
  const T* in_data = static_cast<const T*>(x.data_ptr());
  auto loop = collapse_tensors(out, x);
  const int64_t sx = loop.inner_stride(1);
  parallel_runs(loop, kElementwiseGrain, [&](const std::array<int64_t, 2>& at, int64_t n) {
    T* y = out_data + at[0];  // the output is contiguous: unit stride
    const T* xs = in_data + at[1];
    if constexpr (std::is_integral_v<T>) {
      const T lo = op == UnaryOp::clamp ? int_bound<T>(a, true) : T(0);
      const T hi = op == UnaryOp::clamp ? int_bound<T>(b, false) : T(0);
      if (sx == 1) {
        int_unary<T>(op, xs, y, n, lo, hi);
        return;
      }
      T tile[kTile];
      for (int64_t t = 0; t < n; t += kTile) {
        int64_t m = std::min(kTile, n - t);
        for (int64_t k = 0; k < m; ++k) tile[k] = xs[(t + k) * sx];
        int_unary<T>(op, tile, y + t, m, lo, hi);
      }
    } else {
      if constexpr (std::is_same_v<T, C>) {
        if (sx == 1) {
          float_unary<C>(op, xs, y, n, C(a), C(b));
          return;
        }
      }
      alignas(64) C in_tile[kTile];
      alignas(64) C out_tile[kTile];
      for (int64_t t = 0; t < n; t += kTile) {
        int64_t m = std::min(kTile, n - t);
        for (int64_t k = 0; k < m; ++k) in_tile[k] = convert<C>(xs[(t + k) * sx]);
        float_unary<C>(op, in_tile, out_tile, m, C(a), C(b));
        for (int64_t k = 0; k < m; ++k) y[t + k] = convert<T>(out_tile[k]);
      }
    }
  });
  return out;
}

// logical_not: true where x is zero (NaN counts as nonzero), for any dtype.
template <class T>
Tensor unary_logical_not(const Tensor& x) {
  Tensor out = Tensor::empty(x.shape(), DType::boolean);
  bool* out_data = static_cast<bool*>(out.data_ptr());
  const T* in_data = static_cast<const T*>(x.data_ptr());
  auto loop = collapse_tensors(out, x);
  const int64_t sx = loop.inner_stride(1);
  parallel_runs(loop, kElementwiseGrain, [&](const std::array<int64_t, 2>& at, int64_t n) {
    bool* y = out_data + at[0];
    const T* xs = in_data + at[1];
    if (sx == 1) for (int64_t i = 0; i < n; ++i) y[i] = convert<compute_t<T>>(xs[i]) == compute_t<T>(0);
    else for (int64_t i = 0; i < n; ++i) y[i] = convert<compute_t<T>>(xs[i * sx]) == compute_t<T>(0);
  });
  return out;
}

// ---- binary ----

template <class C>
bool is_nan(C v) {
  if constexpr (std::is_floating_point_v<C>) return v != v;
  else return false;
}

// Calls body(f) with f the scalar function of `op` on compute-type values (C for arithmetic,
// bool for comparisons and logical ops).
template <class C, class Body>
void with_binary_fn(BinaryOp op, Body&& body) {
  constexpr bool integer = std::is_integral_v<C> && !std::is_same_v<C, bool>;
  using U = std::conditional_t<integer, std::make_unsigned_t<std::conditional_t<integer, C, int>>, C>;
  // Integers wrap on overflow (the most negative value divided by -1 included; the caller has
  // ruled out division by zero); NaN propagates through maximum and minimum.
  switch (op) {
    case BinaryOp::add: return body([](C x, C y) { return C(U(x) + U(y)); });
    case BinaryOp::sub: return body([](C x, C y) { return C(U(x) - U(y)); });
    case BinaryOp::mul: return body([](C x, C y) { return C(U(x) * U(y)); });
    case BinaryOp::div:
      if constexpr (integer) return body([](C x, C y) { return y == C(-1) ? C(U(0) - U(x)) : C(x / y); });
      else return body([](C x, C y) { return C(x / y); });
    case BinaryOp::maximum: return body([](C x, C y) { return (is_nan(x) || x > y) ? x : y; });
    case BinaryOp::minimum: return body([](C x, C y) { return (is_nan(x) || x < y) ? x : y; });
    case BinaryOp::eq: return body([](C x, C y) { return x == y; });
    case BinaryOp::ne: return body([](C x, C y) { return x != y; });
    case BinaryOp::lt: return body([](C x, C y) { return x < y; });
    case BinaryOp::le: return body([](C x, C y) { return x <= y; });
    case BinaryOp::gt: return body([](C x, C y) { return x > y; });
    case BinaryOp::ge: return body([](C x, C y) { return x >= y; });
    case BinaryOp::logical_and: return body([](C x, C y) { return bool((x != C(0)) & (y != C(0))); });
    case BinaryOp::logical_or: return body([](C x, C y) { return bool((x != C(0)) | (y != C(0))); });
  }
  fail(op_name(op), "unknown binary op ", int(op));
}

template <class T>
Tensor binary_typed(BinaryOp op, const Tensor& a, const Tensor& b) {
  using C = compute_t<T>;
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    // Integer division truncates toward zero; a zero divisor is an error, not a crash.
    if (op == BinaryOp::div) {
      Tensor zero = cpu_backend().unary(UnaryOp::logical_not, b, 0, 0);
      const bool* z = static_cast<const bool*>(zero.data_ptr());
      for (int64_t i = 0; i < zero.numel(); ++i)
        if (z[i]) fail("div", "integer division by zero");
    }
  }
  const DType out_dtype = is_comparison(op) ? DType::boolean : a.dtype();
  Tensor out = Tensor::empty(a.shape(), out_dtype);
  const T* a_data = static_cast<const T*>(a.data_ptr());
  const T* b_data = static_cast<const T*>(b.data_ptr());
  auto loop = collapse_tensors(out, a, b);
  const int64_t sa = loop.inner_stride(1), sb = loop.inner_stride(2);
  with_binary_fn<C>(op, [&](auto f) {
    using R = std::conditional_t<std::is_same_v<decltype(f(C(), C())), bool>, bool, T>;
    R* out_data = static_cast<R*>(out.data_ptr());
    parallel_runs(loop, kElementwiseGrain, [&](const std::array<int64_t, 3>& at, int64_t n) {
      R* y = out_data + at[0];
      const T* xa = a_data + at[1];
      const T* xb = b_data + at[2];
      // Strides 1 and 0 as compile-time constants give the compiler plain vector loops.
      auto run = [&](auto stride_a, auto stride_b) {
        for (int64_t i = 0; i < n; ++i)
          y[i] = convert<R>(f(convert<C>(xa[i * stride_a]), convert<C>(xb[i * stride_b])));
      };
      if (sa == 1 && sb == 1) run(Stride<1>(), Stride<1>());
      else if (sa == 1 && sb == 0) run(Stride<1>(), Stride<0>());
      else if (sa == 0 && sb == 1) run(Stride<0>(), Stride<1>());
      else run(sa, sb);
    });
  });
  return out;
}

}  // namespace

Tensor CpuBackend::unary_kernel(UnaryOp op, const Tensor& x, double a, double b) {
  const DType t = x.dtype();
  if (op == UnaryOp::logical_not)
    return dispatch_dtype(t, [&](auto tag) { return unary_logical_not<decltype(tag)>(x); });
  switch (t) {
    case DType::f64: return unary_typed<double>(op, x, a, b);
    case DType::f32: return unary_typed<float>(op, x, a, b);
    case DType::bf16: return unary_typed<bf16>(op, x, a, b);
    case DType::i32: return unary_typed<int32_t>(op, x, a, b);
    case DType::i64: return unary_typed<int64_t>(op, x, a, b);
    case DType::boolean: break;
  }
  fail(op_name(op), "unsupported dtype ", t);
}

Tensor CpuBackend::binary_kernel(BinaryOp op, const Tensor& a, const Tensor& b) {
  return dispatch_dtype(a.dtype(), [&](auto tag) { return binary_typed<decltype(tag)>(op, a, b); });
}

Tensor CpuBackend::where_kernel(const Tensor& cond, const Tensor& a, const Tensor& b) {
  return dispatch_dtype(a.dtype(), [&](auto tag) {
    // The select works on the bit patterns (an unsigned integer of T's size) and reads the
    // condition as bytes: gcc vectorizes neither a load of bool nor a select of bf16.
    using T = typename SameSizeBits<sizeof(decltype(tag))>::type;
    Tensor out = Tensor::empty(a.shape(), a.dtype());
    T* out_data = static_cast<T*>(out.data_ptr());
    const uint8_t* c_data = static_cast<const uint8_t*>(cond.data_ptr());
    const T* a_data = static_cast<const T*>(a.data_ptr());
    const T* b_data = static_cast<const T*>(b.data_ptr());
    auto loop = collapse_tensors(out, cond, a, b);
    const int64_t sc = loop.inner_stride(1), sa = loop.inner_stride(2), sb = loop.inner_stride(3);
    parallel_runs(loop, kElementwiseGrain, [&](const std::array<int64_t, 4>& at, int64_t n) {
      T* y = out_data + at[0];
      const uint8_t* c = c_data + at[1];
      const T* xa = a_data + at[2];
      const T* xb = b_data + at[3];
      auto run = [&](auto stride_c, auto stride_a, auto stride_b) {
        for (int64_t i = 0; i < n; ++i) {
          const T mask = T(T(0) - T(c[i * stride_c] != 0));  // all ones where cond holds
          y[i] = T((xa[i * stride_a] & mask) | (xb[i * stride_b] & T(~mask)));
        }
      };
      if (sc == 1 && sa == 1 && sb == 1) run(Stride<1>(), Stride<1>(), Stride<1>());
      else if (sc == 1 && sa == 1 && sb == 0) run(Stride<1>(), Stride<1>(), Stride<0>());
      else if (sc == 1 && sa == 0 && sb == 1) run(Stride<1>(), Stride<0>(), Stride<1>());
      else run(sc, sa, sb);
    });
    return out;
  });
}

}  // namespace cotan::cpu
