// Vector math with the special values of the scalar functions. Eigen's packet exp, log, sqrt,
// tanh and pow depart from <cmath> on special inputs, and differently for each vector width: seen
// on x86-64, f32 sqrt(inf) is NaN (every width), sqrt(-0) is +0, exp(-inf) is 2.9e-39 in f32 and
// 5.6e-309 in f64 (SSE, AVX2), exp(88.7) is inf instead of 3.3e38 and exp(-88.7) flushes to 0
// (AVX-512), and the log of a subnormal is off by 16. A kernel that runs the packet code and then
// recomputes the lanes outside the packet code's exact range with <cmath> gives the same value as
// the scalar path (and the CUDA kernels) on every CPU: inf, -inf, NaN, signed zeros, overflow and
// underflow included.
//
// The exact range of each function is conservative: inside it the packet result is a normal
// finite number (possibly an ulp away from libm's); everything else, the rare lanes, takes libm.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

namespace cotan::cpu {

template <class C>
struct VectorRange {
  static_assert(std::is_floating_point_v<C>);
  static constexpr bool f32 = std::is_same_v<C, float>;
  // exp(x) is a normal finite number, and the packet exp's 2^n scaling neither overflows nor
  // leaves the normal range, for x in [exp_lo, exp_hi] (log(max) is 88.72 in f32, 709.78 in f64;
  // log(min normal) is -87.34 and -708.40).
  static constexpr C exp_lo = f32 ? C(-87) : C(-708);
  static constexpr C exp_hi = f32 ? C(88) : C(709);
  // exp(x) rounds to exactly +0 below this (half the smallest subnormal is e^-104.0 in f32 and
  // e^-745.1 in f64): masked scores (-inf) take a vectorized select instead of libm.
  static constexpr C exp_zero_below = f32 ? C(-104) : C(-746);
  // The packet tanh clamps its input near 7.9 (f32) and so saturates a little early; libm takes
  // the lanes beyond tanh_max, so that tanh(x) is exactly +-1 where libm says so. gelu_tanh's
  // argument k (x + c x^3) reaches tanh_max at |x| = 3.9; libm takes it beyond gelu_max.
  static constexpr C tanh_max = C(7.5);
  static constexpr C gelu_max = C(3);
  static constexpr C min_normal = std::numeric_limits<C>::min();
  static constexpr C max_finite = std::numeric_limits<C>::max();

  // Finite, not zero and not subnormal (NaN fails every comparison). The predicates combine with
// & and |, not && and ||: no branch, so the scans over them vectorize.
  static constexpr bool normal(C x) { return (std::abs(x) >= min_normal) & (std::abs(x) <= max_finite); }
  static constexpr bool positive_normal(C x) { return (x >= min_normal) & (x <= max_finite); }
  static constexpr bool exp_exact(C x) { return (x >= exp_lo) & (x <= exp_hi); }
  // Exact, or exactly 0 (repair_exp): what is left for libm is NaN, overflow and subnormals.
  static constexpr bool exp_settled(C x) { return exp_exact(x) | (x < exp_zero_below); }
  static constexpr bool tanh_exact(C x) { return normal(x) & (std::abs(x) <= tanh_max); }
  static constexpr bool gelu_exact(C x) { return normal(x) & (std::abs(x) <= gelu_max); }
};

// y[i] = scalar(x[i]) where !exact(x[i]); other lanes keep what the vector code wrote. One
// vectorizable pass finds whether any lane needs it; the fix-up loop runs only then.
template <class C, class Exact, class Scalar>
inline void redo_inexact(const C* x, C* y, int64_t n, Exact exact, Scalar scalar) {
  int inexact = 0;  // an int, not a bool: gcc vectorizes an integer or-reduction
  for (int64_t i = 0; i < n; ++i) inexact |= int(!exact(x[i]));
  if (!inexact) return;
  for (int64_t i = 0; i < n; ++i)
    if (!exact(x[i])) y[i] = scalar(x[i]);
}

// y[i] = exp(x[i] - shift) with libm's values outside the exact range (exp(-inf) = 0, underflow to
// subnormals and 0, overflow to inf, NaN): a select zeroes what underflows to exactly 0 (masked
// scores of -inf), libm takes NaN, overflow and the thin band of subnormal results. The vector part is the caller's: it has written
// exp(x - shift) for all n lanes with Eigen; this repairs the rest.
template <class C>
inline void repair_exp(const C* x, C shift, C* y, int64_t n) {
  using R = VectorRange<C>;
  int inexact = 0;
  for (int64_t i = 0; i < n; ++i) {  // one vectorized pass: zero the underflow, find the rest
    const C v = x[i] - shift;
    y[i] = v < R::exp_zero_below ? C(0) : y[i];
    inexact |= int(!R::exp_settled(v));
  }
  if (!inexact) return;
  for (int64_t i = 0; i < n; ++i)
    if (!R::exp_settled(x[i] - shift)) y[i] = std::exp(x[i] - shift);
}

}  // namespace cotan::cpu
