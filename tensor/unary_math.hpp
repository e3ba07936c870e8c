// The scalar definition of every floating and integer unary op, shared by the CPU backend (its
// scalar path, and the lanes its vector path cannot compute exactly: tensor/cpu/vector_math.hpp)
// and the CUDA kernels (cuda/kernels/elementwise.cuh, on the GPU and in the emulator), so that
// both give the same value on every input, special values included. Floating ops compute in
// compute_t<T> (bf16 in float); integers wrap (two's complement); NaN propagates through relu,
// clamp and sign (a NaN fails every comparison and falls through to x).
//
// A new unary op is one `if constexpr` branch here (and its entry in the op list,
// tensor/op_table.hpp); a vectorized CPU form is optional (tensor/cpu/elementwise.cpp).
#pragma once

#include <cmath>
#include <type_traits>

#include "tensor/op_table.hpp"

#include "tensor/host_device.hpp"

namespace cotan {

// The C library names, which nvcc (device) and g++ (host libm) both provide for float and double.
namespace math {
COTAN_HOST_DEVICE inline float exp(float x) { return ::expf(x); }
COTAN_HOST_DEVICE inline double exp(double x) { return ::exp(x); }
COTAN_HOST_DEVICE inline float log(float x) { return ::logf(x); }
COTAN_HOST_DEVICE inline double log(double x) { return ::log(x); }
COTAN_HOST_DEVICE inline float log1p(float x) { return ::log1pf(x); }
COTAN_HOST_DEVICE inline double log1p(double x) { return ::log1p(x); }
COTAN_HOST_DEVICE inline float sqrt(float x) { return ::sqrtf(x); }
COTAN_HOST_DEVICE inline double sqrt(double x) { return ::sqrt(x); }
COTAN_HOST_DEVICE inline float tanh(float x) { return ::tanhf(x); }
COTAN_HOST_DEVICE inline double tanh(double x) { return ::tanh(x); }
COTAN_HOST_DEVICE inline float sin(float x) { return ::sinf(x); }
COTAN_HOST_DEVICE inline double sin(double x) { return ::sin(x); }
COTAN_HOST_DEVICE inline float cos(float x) { return ::cosf(x); }
COTAN_HOST_DEVICE inline double cos(double x) { return ::cos(x); }
COTAN_HOST_DEVICE inline float pow(float x, float y) { return ::powf(x, y); }
COTAN_HOST_DEVICE inline double pow(double x, double y) { return ::pow(x, y); }
COTAN_HOST_DEVICE inline float abs(float x) { return ::fabsf(x); }
COTAN_HOST_DEVICE inline double abs(double x) { return ::fabs(x); }
COTAN_HOST_DEVICE inline double floor(double x) { return ::floor(x); }
template <class C>
COTAN_HOST_DEVICE inline bool is_nan(C v) {
  if constexpr (std::is_floating_point_v<C>) return v != v;
  else return false;
}
}  // namespace math

namespace unary_math {

// gelu_tanh's constants: y = x/2 (1 + tanh(k (x + c x^3))).
template <class C> inline constexpr C kGeluK = C(0.7978845608028654);  // sqrt(2 / pi)
template <class C> inline constexpr C kGeluCubic = C(0.044715);

// A floating unary op on a compute-type value; a and b are clamp's bounds and pow's exponent.
template <UnaryOp Op, class C>
COTAN_HOST_DEVICE inline C floating(C x, C a, C b) {
  constexpr C zero = C(0), one = C(1), half = C(0.5);
  if constexpr (Op == UnaryOp::neg) return -x;
  else if constexpr (Op == UnaryOp::exp) return math::exp(x);
  else if constexpr (Op == UnaryOp::log) return math::log(x);
  else if constexpr (Op == UnaryOp::sqrt) return math::sqrt(x);
  else if constexpr (Op == UnaryOp::rsqrt) return one / math::sqrt(x);
  else if constexpr (Op == UnaryOp::tanh) return math::tanh(x);
  // 1 / (1 + e^-x): e^-x overflows to inf (result 0) or underflows to 0 (result 1), never NaN.
  else if constexpr (Op == UnaryOp::sigmoid) return one / (one + math::exp(-x));
  else if constexpr (Op == UnaryOp::silu) return x * (one / (one + math::exp(-x)));
  else if constexpr (Op == UnaryOp::gelu_tanh)
    return half * x * (one + math::tanh(kGeluK<C> * (x + kGeluCubic<C> * (x * x * x))));
  else if constexpr (Op == UnaryOp::abs) return math::abs(x);
  else if constexpr (Op == UnaryOp::square) return x * x;
  else if constexpr (Op == UnaryOp::reciprocal) return one / x;
  else if constexpr (Op == UnaryOp::relu) return x < zero ? zero : x;
  else if constexpr (Op == UnaryOp::clamp) {  // min(max(x, lo), hi): hi wins when lo > hi
    const C v = x < a ? a : x;
    return v > b ? b : v;
  } else if constexpr (Op == UnaryOp::sign) return x > zero ? one : (x < zero ? -one : x);
  else if constexpr (Op == UnaryOp::pow) {
    if (a == C(2)) return x * x;
    if (a == C(1)) return x;
    if (a == C(0.5)) return math::sqrt(x);
    if (a == C(-1)) return one / x;
    return math::pow(x, a);
  }
  // log(1 + e^x) = max(x, 0) + log1p(e^-|x|): no overflow for large x; softplus(-inf) = 0,
  // softplus(inf) = inf.
  else if constexpr (Op == UnaryOp::softplus) return (x > zero ? x : zero) + math::log1p(math::exp(-math::abs(x)));
  else {
    static_assert(Op == UnaryOp::logical_not, "no floating definition for this op");
    return x;  // logical_not has a bool result: the backends treat it on its own
  }
}

// An integer unary op (the ops with accepts_integers); lo and hi are clamp's integer bounds.
template <UnaryOp Op, class T>
COTAN_HOST_DEVICE inline T integer(T x, T lo, T hi) {
  using U = std::make_unsigned_t<T>;
  if constexpr (Op == UnaryOp::neg) return T(U(0) - U(x));
  else if constexpr (Op == UnaryOp::abs) return x < 0 ? T(U(0) - U(x)) : x;
  else if constexpr (Op == UnaryOp::square) return T(U(x) * U(x));
  else if constexpr (Op == UnaryOp::sign) return T((x > 0) - (x < 0));
  else if constexpr (Op == UnaryOp::relu) return x < 0 ? T(0) : x;
  else if constexpr (Op == UnaryOp::clamp) {
    const T v = x < lo ? lo : x;
    return v > hi ? hi : v;
  } else {
    static_assert(!accepts_integers(Op) || Op == UnaryOp::logical_not, "an integer op without a definition");
    return x;
  }
}

}  // namespace unary_math
}  // namespace cotan
