// Reduction policies (sum, max, min, argmax, argmin) and the two inner kernels every reduction
// is made of: a contiguous row chunk folded into one accumulator, and a row of columns folded
// into a vector of accumulators. The order of every fold depends only on sizes.
//
// A policy P has In (element type), Acc (accumulator), Out (result element), identity(),
// value(In) -> the value folded, finish(Acc) -> Out, and either
//   fold(Acc, Acc): one associative step, also applied lane-wise to GCC vectors of Acc; or
//   (kIndexed) step(Acc, value, index) and combine(earlier, later), for argmax / argmin.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "tensor/dtype.hpp"

namespace cotan::cpu {

// Explicit SIMD through GCC vector extensions (also Clang): Vec<T, W> is W lanes of T.
#if defined(__AVX__)
inline constexpr int kVectorBytes = 32;
#else
inline constexpr int kVectorBytes = 16;
#endif
template <class T, int W>
using Vec [[gnu::vector_size(W * sizeof(T))]] = T;

template <class T>
inline compute_t<T> to_compute(T v) {
  if constexpr (std::is_same_v<T, bf16>) return float(v);
  else return v;
}

template <class T>
constexpr bool kFloating = std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, bf16>;

// f32 and bf16 sums accumulate in f64; integer and bool sums in i64 (bool sums to i64).
template <class T>
struct SumPolicy {
  using In = T;
  using Acc = std::conditional_t<kFloating<T>, double, int64_t>;
  using Out = std::conditional_t<std::is_same_v<T, bool>, int64_t, T>;
  static constexpr bool kIndexed = false;
  static Acc identity() { return Acc(0); }
  static Acc value(In v) { return Acc(to_compute(v)); }
  template <class X>
  static X fold(X a, X v) { return a + v; }
  static Out finish(Acc a) { return convert<Out>(a); }
};

// max / min; a NaN anywhere makes the result NaN.
template <class T, bool kMax>
struct ExtremumPolicy {
  using In = T;
  using Acc = compute_t<T>;
  using Out = T;
  static constexpr bool kIndexed = false;
  static Acc identity() {
    using Limits = std::numeric_limits<Acc>;
    if constexpr (kFloating<T>) return kMax ? -Limits::infinity() : Limits::infinity();
    else return kMax ? Limits::lowest() : Limits::max();
  }
  static Acc value(In v) { return to_compute(v); }
  // A branch-free select (bitwise `|`), so it also works lane-wise.
  template <class X>
  static X fold(X a, X v) {
    if constexpr (kFloating<T>) {
      if constexpr (kMax) return ((v > a) | (v != v)) ? v : a;
      else return ((v < a) | (v != v)) ? v : a;
    } else {
      if constexpr (kMax) return v > a ? v : a;
      else return v < a ? v : a;
    }
  }
  static Out finish(Acc a) { return convert<Out>(a); }
};

// argmax / argmin: the first position of the extremum; the first NaN wins over any number.
template <class T, bool kMax>
struct ArgPolicy {
  using In = T;
  using Value = compute_t<T>;
  struct Acc {
    Value value;
    int64_t index;  // -1: nothing seen yet
  };
  using Out = int64_t;
  using Extremum = ExtremumPolicy<T, kMax>;
  static constexpr bool kIndexed = true;
  static Acc identity() { return {Value(0), -1}; }
  static Value value(In v) { return to_compute(v); }
  static bool beats(Value v, Value best) {
    if constexpr (kFloating<T>) {
      if (best != best) return false;
      if (v != v) return true;
    }
    return kMax ? v > best : v < best;
  }
  static Acc step(Acc a, Value v, int64_t index) { return (a.index < 0 || beats(v, a.value)) ? Acc{v, index} : a; }
  static Acc combine(Acc a, Acc b) {
    if (b.index < 0) return a;
    return (a.index < 0 || beats(b.value, a.value)) ? b : a;
  }
  static Out finish(Acc a) { return a.index; }
};

// W lanes of Acc from p[0..W), converted from In.
template <class Acc, int W, class In>
inline Vec<Acc, W> load_lanes(const In* p) {
  if constexpr (std::is_same_v<In, bf16>) {
    Vec<uint16_t, W> raw;
    std::memcpy(&raw, p, sizeof raw);
    Vec<uint32_t, W> bits = __builtin_convertvector(raw, Vec<uint32_t, W>) << 16;
    Vec<float, W> wide;
    std::memcpy(&wide, &bits, sizeof wide);
    return __builtin_convertvector(wide, Vec<Acc, W>);
  } else {
    using Raw = std::conditional_t<std::is_same_v<In, bool>, uint8_t, In>;
    Vec<Raw, W> raw;
    std::memcpy(&raw, p, sizeof raw);
    return __builtin_convertvector(raw, Vec<Acc, W>);
  }
}

// Folds p[0..n) (positions first..first+n along the reduced axis).
//   fold policies: four vector accumulators over blocks of 4 W elements, joined in a fixed tree,
//   then the lanes in order, then the tail;
//   argmax / argmin: the vectorized max (min) first, then the first position holding it.
template <class P>
typename P::Acc fold_row(const typename P::In* p, int64_t n, int64_t first) {
  using Acc = typename P::Acc;
  if constexpr (P::kIndexed) {
    if (n == 0) return P::identity();
    const auto best = fold_row<typename P::Extremum>(p, n, 0);
    int64_t i = 0;
    if (best != best) {
      while (!(P::value(p[i]) != P::value(p[i]))) ++i;
    } else {
      while (P::value(p[i]) != best) ++i;
    }
    return Acc{best, first + i};
  } else {
    constexpr int W = kVectorBytes / int(sizeof(Acc));
    using V = Vec<Acc, W>;
    V acc[4];
    for (V& a : acc)
      for (int j = 0; j < W; ++j) a[j] = P::identity();
    int64_t i = 0;
    for (; i + 4 * W <= n; i += 4 * W)
      for (int k = 0; k < 4; ++k) acc[k] = P::fold(acc[k], load_lanes<Acc, W>(p + i + k * W));
    const V joined = P::fold(P::fold(acc[0], acc[1]), P::fold(acc[2], acc[3]));
    Acc out = joined[0];
    for (int j = 1; j < W; ++j) out = P::fold(out, Acc(joined[j]));
    Acc tail = P::identity();
    for (; i < n; ++i) tail = P::fold(tail, P::value(p[i]));
    return P::fold(out, tail);
  }
}

// acc[j] = fold(acc[j], p[j]) for j < c: one row of a column reduction at position `index`.
template <class P>
void fold_columns(typename P::Acc* acc, const typename P::In* p, int64_t c, int64_t index) {
  if constexpr (P::kIndexed) {
    for (int64_t j = 0; j < c; ++j) acc[j] = P::step(acc[j], P::value(p[j]), index);
  } else {
    (void)index;
    for (int64_t j = 0; j < c; ++j) acc[j] = P::fold(acc[j], P::value(p[j]));
  }
}

// Joins two partials, the earlier first.
template <class P>
typename P::Acc combine(typename P::Acc a, typename P::Acc b) {
  if constexpr (P::kIndexed) return P::combine(a, b);
  else return P::fold(a, b);
}

}  // namespace cotan::cpu
