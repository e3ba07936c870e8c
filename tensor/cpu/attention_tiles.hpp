// Tiles for the CPU attention kernels (tensor/cpu/attention.cpp, nn/attention_stats.cpp).
//
// One (batch row, head) problem is packed into padded, contiguous copies: rows [tp][dp] for Q
// (pre-scaled by c = 1/sqrt(d)), V, K, the cotangents, and transposed key tiles (K^T, V^T, see
// pack_key_tiles) where a product contracts over d. tp rounds T up to a key tile and dp rounds
// d up to lanes<T>, and the padding is zero, so every tile product runs on whole micro-tiles
// with no tail code; masked and padded keys get zero weight explicitly, never through exp(-inf).
//
// Tiles are a block of kQueryRows queries by a block of kKeyCols keys, row-major [M][N] with
// leading dimension kKeyCols, M rounded up to kRowGranule and N to lanes<T>. One register-blocked
// micro-kernel does every product: mma computes C (+)= A B, mma_at C += A^T B, all row-major,
// vectorised along C's rows.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-variable"  // inside Eigen's AVX bf16 conversion
#include <Eigen/Core>
#pragma GCC diagnostic pop

#include "tensor/fused_ops.hpp"
#include "tensor/tensor.hpp"

namespace cotan::cpu::tiles {

constexpr int64_t kQueryRows = 32;  // queries per tile
constexpr int64_t kKeyCols = 64;    // keys per tile
// Rows of C the micro-kernel keeps in registers: 8 (16 of the 32 zmm registers) with AVX-512,
// so that a block of 32 queries is four whole micro-tiles; 6 (12 of 16) otherwise.
#if defined(__AVX512F__)
constexpr int kMicroRows = 8;
#else
constexpr int kMicroRows = 6;
#endif
constexpr int64_t kRowGranule = 4;  // tile rows are rounded up to it (tails of 2 or 4 rows)

// One SIMD register through GCC's vector extensions, so that one kernel serves f32 and f64 on
// any target: 32 bytes with AVX, 16 otherwise (SSE, NEON; wider vectors would be split and
// change the ABI of the functions that return them).
#if defined(__AVX512F__)
constexpr int kVectorBytes = 64;
#elif defined(__AVX__)
constexpr int kVectorBytes = 32;
#else
constexpr int kVectorBytes = 16;
#endif

template <class T>
struct Simd {
  static constexpr int width = int(kVectorBytes / sizeof(T));
  typedef T V __attribute__((vector_size(kVectorBytes)));
  static V load(const T* p) {
    V v;
    std::memcpy(&v, p, sizeof v);
    return v;
  }
  static void store(T* p, const V& v) { std::memcpy(p, &v, sizeof v); }
  // The sum and the max of the lanes, pairwise (the two halves, then their halves, ...): a chain
  // of log2(width) steps in registers where a lane-by-lane loop is `width` dependent adds, which a
  // row's softmax waits for.
  static T sum(const V& v) { return fold<width>(v, [](auto a, auto b) { return a + b; }); }
  static T max(const V& v) { return fold<width>(v, [](auto a, auto b) { return a > b ? a : b; }); }

 private:
  template <int N>
  struct LanesOf {
    typedef T type __attribute__((vector_size(N * sizeof(T))));
  };
  template <int N>
  using Lanes = typename LanesOf<N>::type;
  template <int N, class F>
  static T fold(const Lanes<N>& v, F&& f) {
    if constexpr (N == 1) {
      return v[0];
    } else {
      const Lanes<N / 2> lo = [&]<int... I>(std::integer_sequence<int, I...>) {
        return __builtin_shufflevector(v, v, I...);
      }(std::make_integer_sequence<int, N / 2>{});
      const Lanes<N / 2> hi = [&]<int... I>(std::integer_sequence<int, I...>) {
        return __builtin_shufflevector(v, v, (I + N / 2)...);
      }(std::make_integer_sequence<int, N / 2>{});
      return fold<N / 2>(f(lo, hi), f);
    }
  }
};

// Columns of C one micro-kernel covers: two vectors (with AVX 16 f32, 8 f64). dp and N round
// up to it.
template <class T>
constexpr int64_t lanes = 2 * Simd<T>::width;

constexpr int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

// C[rows][lanes] (+)= A[rows][k] B[k][lanes]: the accumulators stay in registers, each step
// broadcasts one A element per row against two B vectors. A is read through its leading
// dimension either way round: A(r, p) = a[r * lda + p], or a[p * lda + r] when kTransposedA
// (C += A^T B with A stored [k][rows], which saves transposing the tile first).
template <class T, bool kTransposedA, int kRows>
inline void micro_kernel(T* __restrict c, int64_t ldc, const T* __restrict a, int64_t lda, const T* __restrict b,
                         int64_t ldb, int64_t k, bool accumulate) {
  using S = Simd<T>;
  using V = typename S::V;
  V acc[kRows][2];
  for (int r = 0; r < kRows; ++r)
    for (int w = 0; w < 2; ++w) acc[r][w] = accumulate ? S::load(c + r * ldc + w * S::width) : V{};
  for (int64_t p = 0; p < k; ++p) {
    const T* bp = b + p * ldb;
    V b0 = S::load(bp), b1 = S::load(bp + S::width);
#if defined(__AVX512F__)
    asm("" : "+v"(b0), "+v"(b1));
#elif defined(__x86_64__) || defined(__i386__)
    // Keep the two B vectors in registers: otherwise GCC folds them into every FMA as memory
    // operands, twice the loads per FMA, and the kernel becomes load-bound.
    asm("" : "+x"(b0), "+x"(b1));
#endif
    for (int r = 0; r < kRows; ++r) {
      const T ar = kTransposedA ? a[p * lda + r] : a[r * lda + p];
      acc[r][0] += ar * b0;
      acc[r][1] += ar * b1;
    }
  }
  for (int r = 0; r < kRows; ++r)
    for (int w = 0; w < 2; ++w) S::store(c + r * ldc + w * S::width, acc[r][w]);
}

// C[m][n] (+)= op(A) B over micro-tiles of kMicroRows rows and a tail of 2, 4 or 6 rows; with
// kTransposedA, op(A) = A^T and A is stored [k][m]. m % 2 == 0 and n % lanes<T> == 0 (callers
// pass padded sizes). Each C element is one sequential sum over k.
template <class T, bool kTransposedA>
void product(T* c, int64_t ldc, const T* a, int64_t lda, const T* b, int64_t ldb, int64_t m, int64_t n, int64_t k,
             bool accumulate) {
  auto rows_at = [&](int64_t i) { return kTransposedA ? a + i : a + i * lda; };
  for (int64_t j = 0; j < n; j += lanes<T>) {
    int64_t i = 0;
    for (; i + kMicroRows <= m; i += kMicroRows)
      micro_kernel<T, kTransposedA, kMicroRows>(c + i * ldc + j, ldc, rows_at(i), lda, b + j, ldb, k, accumulate);
    if (kMicroRows > 6 && m - i == 6)
      micro_kernel<T, kTransposedA, 6>(c + i * ldc + j, ldc, rows_at(i), lda, b + j, ldb, k, accumulate);
    if (m - i == 4) micro_kernel<T, kTransposedA, 4>(c + i * ldc + j, ldc, rows_at(i), lda, b + j, ldb, k, accumulate);
    if (m - i == 2) micro_kernel<T, kTransposedA, 2>(c + i * ldc + j, ldc, rows_at(i), lda, b + j, ldb, k, accumulate);
  }
}

// C[m][n] (+)= A[m][k] B[k][n], all row-major with leading dimensions.
template <class T>
void mma(T* c, int64_t ldc, const T* a, int64_t lda, const T* b, int64_t ldb, int64_t m, int64_t n, int64_t k,
         bool accumulate) {
  product<T, false>(c, ldc, a, lda, b, ldb, m, n, k, accumulate);
}

// C[m][n] += A^T B with A stored row-major [k][m] (leading dimension lda), B [k][n].
template <class T>
void mma_at(T* c, int64_t ldc, const T* a, int64_t lda, const T* b, int64_t ldb, int64_t m, int64_t n, int64_t k) {
  product<T, true>(c, ldc, a, lda, b, ldb, m, n, k, true);
}

// dst[tp][dp] = scale * src[t][d] (src's rows `stride` apart), zero padded.
template <class T>
void pack_rows(T* __restrict dst, int64_t tp, int64_t dp, const T* __restrict src, int64_t stride, int64_t t,
               int64_t d, T scale = T(1)) {
  for (int64_t i = 0; i < t; ++i) {
    T* __restrict row = dst + i * dp;
    const T* __restrict from = src + i * stride;
    for (int64_t x = 0; x < d; ++x) row[x] = scale * from[x];
    for (int64_t x = d; x < dp; ++x) row[x] = T(0);
  }
  std::fill(dst + t * dp, dst + tp * dp, T(0));
}

// src[t][d]^T (src's rows `stride` apart) in key tiles: dst[tp / kKeyCols][dp][kKeyCols], zero
// padded. The tile of keys [j0, j0 + kKeyCols) starts at dst + j0 * dp, with leading dimension
// kKeyCols: a product's B panel is then one contiguous block instead of dp rows a whole T apart
// (which would also fall into a handful of L1 sets).
template <class T>
void pack_key_tiles(T* dst, int64_t tp, int64_t dp, const T* src, int64_t stride, int64_t t, int64_t d) {
  std::fill(dst, dst + dp * tp, T(0));
  for (int64_t j = 0; j < t; ++j) {
    T* tile = dst + (j / kKeyCols) * kKeyCols * dp + j % kKeyCols;
    for (int64_t x = 0; x < d; ++x) tile[x * kKeyCols] = src[j * stride + x];
  }
}

// exp on a vector of f32: Cephes' expf (exp(x) = 2^n exp(r), |r| <= ln 2 / 2, a degree-7
// polynomial for exp(r)), within 2 ulp of std::exp for the x <= 0 the kernels pass; x below
// -87.3 gives the smallest normal float rather than 0 (masked entries are zeroed explicitly);
// NaN stays NaN.
inline Simd<float>::V exp(Simd<float>::V x) {
  using V = Simd<float>::V;
  typedef int32_t I __attribute__((vector_size(kVectorBytes)));
  constexpr float lowest = -87.3365447505f, highest = 88.0f;
  constexpr float log2e = 1.44269504088896341f, ln2_hi = 0.693359375f, ln2_lo = -2.12194440e-4f;
  constexpr float round_shift = 12582912.0f;  // 1.5 * 2^23: x + it - it rounds x to an integer
  x = x > highest ? highest : x;  // written so that NaN passes through
  x = x < lowest ? lowest : x;
  const V n = (x * log2e + round_shift) - round_shift;
  const V r = (x - n * ln2_hi) - n * ln2_lo;
  V y = 1.9875691500e-4f * r + 1.3981999507e-3f;
  y = y * r + 8.3334519073e-3f;
  y = y * r + 4.1665795894e-2f;
  y = y * r + 1.6666665459e-1f;
  y = y * r + 5.0000001201e-1f;
  y = y * (r * r) + r + 1.0f;
  const I bits = (__builtin_convertvector(n, I) + 127) << 23;  // 2^n
  V two_n;
  std::memcpy(&two_n, &bits, sizeof two_n);
  return y * two_n;
}

// Row operations on a score tile row of n entries (n % lanes<T> == 0) whose first `seen` are
// visible keys and the rest masked (or padding). Both walk all n entries, masking lanes by their
// index, so their loops run the same number of times on every row of a tile: a loop that
// stopped at `seen` would end at a different place on each row of a diagonal tile, and the
// mispredicted exits cost more than the vectors they skip.

// The lane indices 0, 1, ... of a vector.
template <class T>
typename Simd<T>::V lane_indices() {
  typename Simd<T>::V lane;
  for (int w = 0; w < Simd<T>::width; ++w) lane[w] = T(w);
  return lane;
}

// max over the visible entries.
template <class T>
T visible_max(const T* row, int64_t seen, int64_t n) {
  using S = Simd<T>;
  using V = typename S::V;
  const V lane = lane_indices<T>(), lowest = V{} + std::numeric_limits<T>::lowest();
  V top = lowest;
  for (int64_t c = 0; c < n; c += S::width) {
    const V x = lane < T(seen - c) ? S::load(row + c) : lowest;
    top = x > top ? x : top;
  }
  return S::max(top);
}

// row = exp(row - shift) on the visible entries and 0 on the masked ones; returns the row's sum.
// f32 uses the vector exp above, each vector stored and summed while in registers; f64 uses
// Eigen's, so that f64 results stay within an ulp or two of std::exp (the composed oracle is
// compared to 1e-12).
template <class T>
T exp_visible(T* row, int64_t seen, int64_t n, T shift) {
  using S = Simd<T>;
  using V = typename S::V;
  V total{};
  if constexpr (std::is_same_v<T, float>) {
    const V lane = lane_indices<T>();
    for (int64_t c = 0; c < n; c += S::width) {
      const V y = exp(S::load(row + c) - shift);
      const V kept = lane < T(seen - c) ? y : V{};
      S::store(row + c, kept);
      total += kept;
    }
  } else {
    Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>> x(row, seen);
    x = (x - shift).exp();
    std::fill(row + seen, row + n, T(0));
    for (int64_t c = 0; c < n; c += S::width) total += S::load(row + c);
  }
  return S::sum(total);
}

// x[0, n) *= factor.
template <class T>
void scale_row(T* __restrict x, int64_t n, T factor) {
  for (int64_t c = 0; c < n; ++c) x[c] *= factor;
}

// a . b over n entries, in vectors (a scalar chain of n dependent FMAs per row of the backward
// would cost as much as a good part of its products).
template <class T>
T dot(const T* a, const T* b, int64_t n) {
  using S = Simd<T>;
  using V = typename S::V;
  V even{}, odd{};
  int64_t x = 0;
  for (; x + 2 * S::width <= n; x += 2 * S::width) {
    even += S::load(a + x) * S::load(b + x);
    odd += S::load(a + x + S::width) * S::load(b + x + S::width);
  }
  T sum = S::sum(even + odd);
  for (; x < n; ++x) sum += a[x] * b[x];
  return sum;
}

// A [B, H, T, d] tensor read in place, with any strides but a unit one along d: the T rows of
// head h of batch row b start at rows(b, h), `stride` elements apart. v is a view of the joint
// projection and O's cotangent a permuted view ([B, T, H, d] in memory): the kernels copy their
// rows into packed tiles anyway, so neither needs a transposing copy first. (O itself is written
// contiguous: written in [B, T, H, d] to spare the permute after the core, its rows and S's lie
// H d apart, and the kernels' strided writes and S's strided reads in the backward cost more
// than the copy they spare: on a 1-thread KD step, 170 samples in the forward kernel, S's dot
// products and the copies, against 136 with O contiguous.)
template <class P>
struct HeadRows {
  P* data = nullptr;
  int64_t batch_stride = 0, head_stride = 0, stride = 0;

  HeadRows(P* data_, const Tensor& x)
      : data(data_), batch_stride(x.strides()[0]), head_stride(x.strides()[1]), stride(x.strides()[2]) {
    check(x.dim() == 4 && x.strides()[3] == 1, "attention",
          "the kernels read [B, H, T, d] tensors with a unit stride along d, got shape ", to_string(x.shape()),
          " with strides ", to_string(x.strides()));
  }
  P* rows(int64_t b, int64_t h) const { return data + b * batch_stride + h * head_stride; }
};

// Shapes, kind and raw inputs of one attention core (compute dtype T): q, k and v as HeadRows,
// the others contiguous.
template <class T>
struct Problem {
  int64_t batch = 0, heads = 0, kv_heads = 0, t = 0, d = 0;
  int64_t tp = 0, dp = 0;  // padded T (whole key tiles) and d (whole lanes)
  bool causal = true;
  AffineN affine_n = AffineN::visible;
  T scale = 0;  // c = 1 / sqrt(d)
  HeadRows<const T> q, k, v;    // [B, H, T, d], [B, Hkv, T, d], [B, Hkv, T, d]
  const T* alpha = nullptr;     // [B, H, T], affine only
  const T* alpha_ma = nullptr;  // [H], affine only
  const T* sigma = nullptr;     // [H], sink only

  Problem(bool causal_, AffineN affine_n_, const Tensor& q_, const Tensor& k_, const Tensor& v_,
          const Tensor& alpha_, const Tensor& alpha_ma_, const Tensor& sigma_)
      : batch(q_.size(0)), heads(q_.size(1)), kv_heads(k_.size(1)), t(q_.size(2)), d(q_.size(3)),
        tp(round_up(t, kKeyCols)), dp(round_up(d, lanes<T>)), causal(causal_), affine_n(affine_n_),
        scale(T(1) / std::sqrt(T(d))), q(q_.data<T>(), q_), k(k_.data<T>(), k_), v(v_.data<T>(), v_),
        alpha(alpha_.defined() ? alpha_.data<T>() : nullptr),
        alpha_ma(alpha_ma_.defined() ? alpha_ma_.data<T>() : nullptr),
        sigma(sigma_.defined() ? sigma_.data<T>() : nullptr) {}

  bool affine() const { return alpha != nullptr; }
  bool sink() const { return sigma != nullptr; }
  int64_t group() const { return heads / kv_heads; }  // query heads per kv head
  int64_t row(int64_t b, int64_t h) const { return (b * heads + h) * t; }  // first row of (b, h)
  int64_t kv_row(int64_t b, int64_t g) const { return (b * kv_heads + g) * t; }
  // One past the last key query i sees: keys [0, visible_end(i)) are visible.
  int64_t visible_end(int64_t i) const { return causal ? i + 1 : t; }
  // N_i of the affine bias: the visible key count, or T.
  T affine_count(int64_t i) const { return T(affine_n == AffineN::visible ? visible_end(i) : t); }
};

// Keys of the tile starting at j0 that row i sees: [0, visible_keys) of the tile's n keys.
template <class T>
int64_t visible_keys(const Problem<T>& pr, int64_t i, int64_t j0, int64_t n) {
  return std::clamp<int64_t>(pr.visible_end(i) - j0, 0, n);
}

// Reusable per-thread scratch, carved into arrays; grows, never shrinks. Kernels write every
// element they read (padding included), so the contents left by a previous task never matter.
template <class T>
class Scratch {
 public:
  // One array per entry of `sizes` (elements), each starting on its own cache line.
  std::vector<T*> carve(std::initializer_list<int64_t> sizes) {
    constexpr int64_t line = 64 / int64_t(sizeof(T));
    int64_t total = line;
    for (int64_t s : sizes) total += round_up(s, line);
    if (int64_t(buffer_.size()) < total) buffer_.resize(size_t(total));
    T* base = buffer_.data();
    base += (line - int64_t(reinterpret_cast<uintptr_t>(base) / sizeof(T)) % line) % line;
    std::vector<T*> out;
    for (int64_t s : sizes) {
      out.push_back(base);
      base += round_up(s, line);
    }
    return out;
  }

 private:
  std::vector<T> buffer_;
};

}  // namespace cotan::cpu::tiles
