// Memory kernels: assign (strided copy with dtype conversion), fill, arange and the random draws.
// The random kernels follow the Philox layout documented in tensor/random.hpp element for
// element: thread t of the grid-stride loop turns Philox block `start + b` into the elements
// b * per_block .. b * per_block + per_block - 1, written as the CPU backend writes them, so both
// backends draw the same numbers. The formulas keep the CPU's operation order (a * b + c stays
// one expression, which both compilers contract to the same fused multiply-add).
#pragma once

#include <numbers>

#include "cuda/kernels/common.cuh"
#include "tensor/random.hpp"

namespace cotan::COTAN_KERNELS {

// ---- assign, fill, arange ----

template <class D, class S>
SIMT_GLOBAL void assign_contiguous_kernel(int64_t n, D* dst, const S* src) {
  for (int64_t i = first_index(); i < n; i += index_stride()) dst[i] = convert_to<D>(src[i]);
}

// Operand 0 is dst, 1 is src.
template <class D, class S>
SIMT_GLOBAL void assign_strided_kernel(int64_t n, StridedLayout<2> layout, D* dst, const S* src) {
  for (int64_t i = first_index(); i < n; i += index_stride()) {
    int64_t at[2];
    layout.offsets(i, at);
    dst[at[0]] = convert_to<D>(src[at[1]]);
  }
}

template <class T>
SIMT_GLOBAL void fill_kernel(int64_t n, StridedLayout<1> layout, T* dst, T value) {
  for (int64_t i = first_index(); i < n; i += index_stride()) {
    int64_t at[1];
    layout.offsets(i, at);
    dst[at[0]] = value;
  }
}

template <class T>
SIMT_GLOBAL void arange_kernel(int64_t n, T* out, double start, double step) {
  for (int64_t i = first_index(); i < n; i += index_stride()) out[i] = convert_to<T>(start + double(i) * step);
}

// ---- random ----

// Where a draw starts: block `start` under key `seed`; `n` elements in all.
struct PhiloxDraw {
  uint64_t start, key;
  int64_t n;
};

// Writes the values of Philox block b (elements b * PerBlock ...) that exist.
template <int PerBlock, class T>
SIMT_DEVICE void write_block(const PhiloxDraw& draw, int64_t b, T* out, const T (&values)[PerBlock]) {
  const int64_t first = b * PerBlock;
  const int64_t count = draw.n - first < PerBlock ? draw.n - first : PerBlock;
  for (int64_t j = 0; j < count; ++j) out[first + j] = values[j];
}

SIMT_DEVICE int64_t block_count(const PhiloxDraw& draw, int per_block) { return (draw.n + per_block - 1) / per_block; }

// U[lo, lo + span): values that round up to the excluded bound `high` become `top`, the largest
// value of T below it (when clamp is set, that is when lo < high).
template <class T>
struct UniformParams {
  compute_t<T> lo, span;
  bool clamp;
  T top;
  double high;
};

template <class T>
SIMT_DEVICE T uniform_value(const UniformParams<T>& p, compute_t<T> u) {
  using C = compute_t<T>;
  T t = convert_to<T>(C(p.lo + u * p.span));
  return p.clamp && convert_to<double>(t) >= p.high ? p.top : t;
}

// f32/bf16: four 24-bit uniforms per block; f64: two 53-bit ones.
template <class T>
SIMT_GLOBAL void uniform_kernel(PhiloxDraw draw, UniformParams<T> p, T* out) {
  constexpr bool wide = std::is_same_v<T, double>;
  constexpr int per_block = wide ? 2 : 4;
  const int64_t blocks = block_count(draw, per_block);
  for (int64_t b = first_index(); b < blocks; b += index_stride()) {
    const PhiloxWords w = Philox::words(draw.start + uint64_t(b), draw.key);
    T v[per_block];
    if constexpr (wide) {
      v[0] = uniform_value(p, Philox::uniform53(w.w[0], w.w[1]));
      v[1] = uniform_value(p, Philox::uniform53(w.w[2], w.w[3]));
    } else {
      for (int j = 0; j < 4; ++j) v[j] = uniform_value(p, Philox::uniform24(w.w[j]));
    }
    write_block<per_block>(draw, b, out, v);
  }
}

// Box-Muller over one block: radius from the first uniform (as 1 - u: log never sees 0), angle
// from the second; element 2b takes the cosine, 2b + 1 the sine.
template <class T>
SIMT_GLOBAL void normal_kernel(PhiloxDraw draw, compute_t<T> mean, compute_t<T> stddev, T* out) {
  using C = compute_t<T>;
  constexpr C two_pi = C(2) * std::numbers::pi_v<C>;
  const int64_t blocks = block_count(draw, 2);
  for (int64_t b = first_index(); b < blocks; b += index_stride()) {
    const PhiloxWords w = Philox::words(draw.start + uint64_t(b), draw.key);
    C u1, u2;
    if constexpr (std::is_same_v<T, double>) {
      u1 = Philox::uniform53(w.w[0], w.w[1]);
      u2 = Philox::uniform53(w.w[2], w.w[3]);
    } else {
      u1 = Philox::uniform24(w.w[0]);
      u2 = Philox::uniform24(w.w[1]);
    }
    C radius = math::sqrt(C(-2) * math::log(C(1) - u1));
    C angle = two_pi * u2;
    T v[2];
    v[0] = convert_to<T>(C(mean + stddev * radius * math::cos(angle)));
    v[1] = convert_to<T>(C(mean + stddev * radius * math::sin(angle)));
    write_block<2>(draw, b, out, v);
  }
}

// Integers low + floor(u * span), u a 53-bit uniform; two per block.
template <class T>
SIMT_GLOBAL void randint_kernel(PhiloxDraw draw, int64_t low, int64_t span, T* out) {
  const int64_t blocks = block_count(draw, 2);
  for (int64_t b = first_index(); b < blocks; b += index_stride()) {
    const PhiloxWords w = Philox::words(draw.start + uint64_t(b), draw.key);
    T v[2];
    for (int j = 0; j < 2; ++j) {
      const int64_t k = int64_t(math::floor(Philox::uniform53(w.w[2 * j], w.w[2 * j + 1]) * double(span)));
      v[j] = convert_to<T>(low + (k < span - 1 ? k : span - 1));
    }
    write_block<2>(draw, b, out, v);
  }
}

// True (1) with probability p: a 24-bit uniform below p; four per block.
template <class T>
SIMT_GLOBAL void bernoulli_kernel(PhiloxDraw draw, double p, T* out) {
  const int64_t blocks = block_count(draw, 4);
  for (int64_t b = first_index(); b < blocks; b += index_stride()) {
    const PhiloxWords w = Philox::words(draw.start + uint64_t(b), draw.key);
    T v[4];
    for (int j = 0; j < 4; ++j) v[j] = convert_to<T>(double(Philox::uniform24(w.w[j])) < p);
    write_block<4>(draw, b, out, v);
  }
}

}  // namespace cotan::COTAN_KERNELS
