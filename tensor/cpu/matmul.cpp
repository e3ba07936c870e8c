// CPU matmul: [B..., M, K] x [B..., K, N] -> [B..., M, N], a fresh contiguous tensor.
//
// Two GEMMs, chosen at compile time:
//   - with AVX-512, or AVX2 and FMA, a packed GEMM in the GotoBLAS/BLIS style: A is packed into
//     panels of MR rows, unless it is row-major in the compute type and the product narrow (and,
//     with AVX-512, deep and f32), when the micro-kernel reads A's rows in place; B into panels
//     of NR columns (shared by all threads) unless, with AVX-512, it is row-major in the compute
//     type and either a K chunk of it fits in half of L2 or A has few rows, when the micro-kernel
//     reads it in place too; a register-blocked MR x NR
//     micro-kernel runs over them (AVX-512: 14 x 32 f32, 14 x 16 f64 in zmm registers; AVX2:
//     6 x 16, 6 x 8). A product of at most 32 rows (a decoding step's x W^T for a small batch)
//     reads B only once: B is never packed whole there but read in place or packed a few panels
//     at a time just before all the rows use them, one or two rows run on a kernel that sums
//     several panels at once, and rows against a transposed B (x W^T) read W's rows where they
//     lie, transposing them in registers (micro_kernel_lines).
//     Packing reads any strides and converts bf16 to f32 (or, with AVX512_BF16 and
//     COTAN_GEMM_BF16=avx512_bf16, packs it in pairs along K for a vdpbf16ps micro-kernel, see
//     Simd<Bf16Pairs>), so no operand is ever copied whole;
//     an operand whose packed lines are contiguous in memory (A row-major, B transposed, as in
//     x W^T) is packed through register transposes (16 x 16 zmm, 8 x 8 ymm).
//     On Zen 4 (one zmm FMA a cycle) it reaches 80-90% of the FMA peak at 512-4096 squares and
//     at a training step's products, on 1 and 2 threads; on a Xeon with two zmm FMA ports, 76-87%
//     at squares and 57-87% at a step's products (docs/architecture.md).
//   - otherwise Eigen's GEMM over fixed blocks of output rows; operands are mapped row- or
//     column-major through their strides, and copied only when they are neither.
//
// Determinism: the same bits whatever the thread count. Packed: K is cut into fixed chunks of KC,
// which depends only on the dtype and this machine's L2 size (read once per process), never on
// the thread count or the shapes; an output element is the micro-kernel's sequential FMA sum over
// each chunk, added to C chunk by chunk in order. How rows, columns and batches are spread across
// tasks, whether B is packed, which micro-kernel height serves a short row panel and how many
// panels of B it sums at once never change that sum, and K is never split across threads. The
// bits can differ between machines with different L2 sizes. (bf16 on the opt-in vdpbf16ps
// kernel takes each chunk in the order 1, 0, 3, 2, ... of K, with subnormals flushed: other
// bits, equally fixed; see Simd<Bf16Pairs>.) Eigen: the row blocks depend only on the shapes,
// and Eigen's own blocking only on each block's shape.
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "tensor/cpu/backend.hpp"
#include "tensor/cpu/gemm_info.hpp"
#include "tensor/cpu/parallel.hpp"
#include "tensor/cpu/memory_cache.hpp"

#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
#define COTAN_PACKED_GEMM 1
#include <immintrin.h>
#include <unistd.h>
#else
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-variable"  // inside Eigen's AVX bf16 conversion
#include <Eigen/Core>
#pragma GCC diagnostic pop
#endif

namespace cotan::cpu {
namespace {

// Multiply-adds below which a product stays on one thread, and the work one task should get
// when many small products of a batch are spread across threads.
constexpr int64_t kParallelWork = int64_t(1) << 20;
constexpr int64_t kTaskWork = int64_t(1) << 20;

// A matrix operand: element (i, j) is data[i * row_stride + j * col_stride]. S is the stored type.
template <class S>
struct Operand {
  const S* data;
  int64_t row_stride, col_stride;
};

// 64-byte aligned scratch memory, uninitialised, from the CPU allocator's block cache: packed
// panels of a few hundred KiB, asked for at every product, would otherwise be fresh pages
// (faulted and zeroed by the kernel) each time.
template <class T>
class Buffer {
 public:
  explicit Buffer(int64_t n) : bytes_(size_t(n) * sizeof(T)), data_(static_cast<T*>(take_scratch(bytes_))) {}
  ~Buffer() { give_scratch(data_, bytes_); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  T* get() const { return data_; }

 private:
  size_t bytes_;
  T* data_;
};

// Element offsets (from each tensor's first element) of every matrix of the batch, in row-major
// batch order. Broadcast batch dims have stride 0 and repeat offsets.
std::vector<int64_t> batch_offsets(const Tensor& t, int64_t batch_dims) {
  Shape batch(t.shape().begin(), t.shape().begin() + batch_dims);
  std::vector<int64_t> offsets(size_t(numel(batch)), 0);
  std::vector<int64_t> index(size_t(batch_dims), 0);
  int64_t offset = 0;
  for (size_t n = 0; n < offsets.size(); ++n) {
    offsets[n] = offset;
    for (int64_t d = batch_dims - 1; d >= 0; --d) {  // odometer increment
      offset += t.strides()[size_t(d)];
      if (++index[size_t(d)] < batch[size_t(d)]) break;
      offset -= index[size_t(d)] * t.strides()[size_t(d)];
      index[size_t(d)] = 0;
    }
  }
  return offsets;
}

// Runs product(i, split) for the `count` matrices of a batch, each `work` multiply-adds: many
// small products go one per task across threads; large ones run in turn, each split across
// threads (split = true).
template <class F>
void for_each_product(int64_t count, int64_t work, F&& product) {
  if (count > 1 && work < kTaskWork) {
    int64_t grain = std::max<int64_t>(1, kTaskWork / std::max<int64_t>(work, 1));
    parallel_for(count, grain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) product(i, false);
    });
  } else {
    for (int64_t i = 0; i < count; ++i) product(i, work >= kParallelWork);
  }
}

// Where products of S operands are written, in the compute type T: the output itself, or for
// bf16 an f32 buffer that finish() rounds into the output once, after all K chunks are summed.
template <class S>
class ComputeOutput {
 public:
  using T = compute_t<S>;
  explicit ComputeOutput(const Tensor& out) : out_(out) {
    if constexpr (std::is_same_v<S, T>) data_ = out.data<T>();
    else data_ = (wide_ = std::make_unique<Buffer<T>>(out.numel()))->get();
  }
  T* data() const { return data_; }
  void finish() const {
    if constexpr (!std::is_same_v<S, T>) {
      S* dst = out_.data<S>();
      parallel_for(out_.numel(), kSerialElements, [&](int64_t i0, int64_t i1) {
        for (int64_t i = i0; i < i1; ++i) dst[i] = S(data_[i]);
      });
    }
  }

 private:
  Tensor out_;
  std::unique_ptr<Buffer<T>> wide_;
  T* data_;
};

// Whether bf16 products run on the Bf16Pairs kernel (gemm_info().bf16 "avx512_bf16") instead of
// being widened to f32 as they are packed ("f32", the default): COTAN_GEMM_BF16, read once per
// process. Opt-in, for measuring: on the 2-core AVX-512 Xeon measured so far, vdpbf16ps retired
// half as many multiply-adds a second as the f32 FMA (docs/architecture.md). The two give
// different bits (another order of the sum, bf16 subnormals read as zero).
constexpr const char* kBf16Variable = "COTAN_GEMM_BF16";
#ifdef __AVX512BF16__
constexpr const char* kBf16Kernels = "f32,avx512_bf16";
#else
constexpr const char* kBf16Kernels = "f32";
#endif
bool bf16_pairs() {
  static const bool pairs = [] {
    const char* value = std::getenv(kBf16Variable);
    const std::string text = value ? value : "";
    if (text.empty() || text == "f32") return false;
    if (text != "avx512_bf16") fail("matmul", kBf16Variable, "=\"", text, "\": expected f32 or avx512_bf16");
#ifndef __AVX512BF16__
    fail("matmul", kBf16Variable, "=avx512_bf16: this build has no AVX512_BF16 kernel (it was compiled for a CPU "
           "without AVX512_BF16)");
#endif
    return true;
  }();
  return pairs;
}

#ifdef COTAN_PACKED_GEMM

// ---- packed GEMM (AVX-512, or AVX2 + FMA) ----

// One vector register of T and the operations the micro-kernel uses; load_first / store_first
// touch only the first n lanes (0 <= n <= kWidth), for the ragged right edge of C and of an
// unpacked B.
template <class T> struct Simd;
// The micro-kernel type of bf16 products on AVX512_BF16: packed pairs of bf16, summed into f32.
struct Bf16Pairs {};
// What a micro-kernel of type T reads from its packed panels and writes to C: T itself, except
// for Bf16Pairs (pairs of bf16 as 32-bit integers, and f32).
template <class T> struct KernelTypes { using Packed = T; using Out = T; };
template <> struct KernelTypes<Bf16Pairs> { using Packed = uint32_t; using Out = float; };
template <class T> using Packed = typename KernelTypes<T>::Packed;
template <class T> using Out = typename KernelTypes<T>::Out;
#ifdef __AVX512F__
template <> struct Simd<float> {
  using V = __m512;
  static constexpr int64_t kWidth = 16;
  static V zero() { return _mm512_setzero_ps(); }
  static V load(const float* p) { return _mm512_loadu_ps(p); }
  static V load(const bf16* p) {  // widened exactly: the bits move to the top half
    const __m512i wide = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    return _mm512_castsi512_ps(_mm512_slli_epi32(wide, 16));
  }
  static void store(float* p, V v) { _mm512_storeu_ps(p, v); }
  static V load_first(const float* p, int64_t n) { return _mm512_maskz_loadu_ps(__mmask16((1u << n) - 1), p); }
  static void store_first(float* p, V v, int64_t n) { _mm512_mask_storeu_ps(p, __mmask16((1u << n) - 1), v); }
  static V broadcast(const float* p) { return _mm512_set1_ps(*p); }
  static V fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  static V add(V a, V b) { return _mm512_add_ps(a, b); }
  static V unpacklo(V a, V b) { return _mm512_unpacklo_ps(a, b); }
  static V unpackhi(V a, V b) { return _mm512_unpackhi_ps(a, b); }
  template <int Imm> static V shuffle(V a, V b) { return _mm512_shuffle_ps(a, b, Imm); }
};
template <> struct Simd<double> {
  using V = __m512d;
  static constexpr int64_t kWidth = 8;
  static V zero() { return _mm512_setzero_pd(); }
  static V load(const double* p) { return _mm512_loadu_pd(p); }
  static void store(double* p, V v) { _mm512_storeu_pd(p, v); }
  static V load_first(const double* p, int64_t n) { return _mm512_maskz_loadu_pd(__mmask8((1u << n) - 1), p); }
  static void store_first(double* p, V v, int64_t n) { _mm512_mask_storeu_pd(p, __mmask8((1u << n) - 1), v); }
  static V broadcast(const double* p) { return _mm512_set1_pd(*p); }
  static V fma(V a, V b, V c) { return _mm512_fmadd_pd(a, b, c); }
  static V add(V a, V b) { return _mm512_add_pd(a, b); }
};
#ifdef __AVX512BF16__
// bf16 operands on AVX512_BF16's dot-product instruction (vdpbf16ps): each 32-bit lane of an
// operand holds a pair of bf16 along K (element 2p in the low half, 2p + 1 in the high half),
// and one instruction adds both products of each pair to an f32 accumulator: the high (odd)
// one first, then the low one, each an FMA rounded to nearest even, with bf16 subnormals read as zero and
// subnormal results flushed to zero. A bf16 product is exact in f32, so the sum is the same FMA
// chain as the widened f32 kernel's, taken in the order 1, 0, 3, 2, 5, 4, ... of K. The panels
// are carried bit for bit (pairs of bf16 as 32-bit integers); C is f32.
template <> struct Simd<Bf16Pairs> {
  using V = __m512;
  static constexpr int64_t kWidth = 16;
  static V zero() { return _mm512_setzero_ps(); }
  static V load(const uint32_t* p) { return _mm512_castsi512_ps(_mm512_loadu_si512(p)); }
  static V load_first(const uint32_t* p, int64_t n) {
    return _mm512_castsi512_ps(_mm512_maskz_loadu_epi32(__mmask16((1u << n) - 1), p));
  }
  static V broadcast(const uint32_t* p) { return _mm512_castsi512_ps(_mm512_set1_epi32(int(*p))); }
  static V fma(V a, V b, V c) { return _mm512_dpbf16_ps(c, (__m512bh)a, (__m512bh)b); }
  static V load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, V v) { _mm512_storeu_ps(p, v); }
  static V load_first(const float* p, int64_t n) { return _mm512_maskz_loadu_ps(__mmask16((1u << n) - 1), p); }
  static void store_first(float* p, V v, int64_t n) { _mm512_mask_storeu_ps(p, __mmask16((1u << n) - 1), v); }
  static V add(V a, V b) { return _mm512_add_ps(a, b); }
};
#endif
// 14 rows of two registers: 28 accumulators, 2 loads of B and 14 broadcasts of A per 28 FMAs,
// in the 32 zmm registers.
constexpr int64_t kMR = 14;
constexpr bool kReadBInPlace = true;
// The micro-kernel fetches packed A and B this many K steps ahead (2 KiB of B). On a 2-core Xeon
// with two zmm FMA ports (Sapphire Rapids class, 2 MiB L2) the 14 x 32 kernel ran at 80% of the
// FMA peak without it and 85-86% with it (1024^3 on 1 thread: 199 -> 215 GFLOP/s; 2 threads:
// 390 -> 420); 8 steps measured the same, 4 less. The hardware prefetcher alone falls behind a
// kernel that consumes 184 bytes every 14 cycles.
constexpr int64_t kPrefetchSteps = 16;
// Products at most this narrow and at least this deep read A's rows in place (see packed_gemm).
constexpr int64_t kRowsAColumns = 384, kRowsADepth = 256;
// With this many threads or fewer, a packed B that fits in a quarter of L2 is packed by each
// thread for itself (see packed_gemm).
constexpr int64_t kPrivateBThreads = 2;
#else
template <> struct Simd<float> {
  using V = __m256;
  static constexpr int64_t kWidth = 8;
  static __m256i lanes_below(int64_t n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(int(n)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
  static V zero() { return _mm256_setzero_ps(); }
  static V load(const float* p) { return _mm256_loadu_ps(p); }
  static V load(const bf16* p) {  // widened exactly: the bits move to the top half
    const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
  }
  static void store(float* p, V v) { _mm256_storeu_ps(p, v); }
  static V load_first(const float* p, int64_t n) { return _mm256_maskload_ps(p, lanes_below(n)); }
  static void store_first(float* p, V v, int64_t n) { _mm256_maskstore_ps(p, lanes_below(n), v); }
  static V broadcast(const float* p) { return _mm256_broadcast_ss(p); }
  static V fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static V add(V a, V b) { return _mm256_add_ps(a, b); }
  static V unpacklo(V a, V b) { return _mm256_unpacklo_ps(a, b); }
  static V unpackhi(V a, V b) { return _mm256_unpackhi_ps(a, b); }
  template <int Imm> static V shuffle(V a, V b) { return _mm256_shuffle_ps(a, b, Imm); }
};
template <> struct Simd<double> {
  using V = __m256d;
  static constexpr int64_t kWidth = 4;
  static __m256i lanes_below(int64_t n) { return _mm256_cmpgt_epi64(_mm256_set1_epi64x(n), _mm256_setr_epi64x(0, 1, 2, 3)); }
  static V zero() { return _mm256_setzero_pd(); }
  static V load(const double* p) { return _mm256_loadu_pd(p); }
  static void store(double* p, V v) { _mm256_storeu_pd(p, v); }
  static V load_first(const double* p, int64_t n) { return _mm256_maskload_pd(p, lanes_below(n)); }
  static void store_first(double* p, V v, int64_t n) { _mm256_maskstore_pd(p, lanes_below(n), v); }
  static V broadcast(const double* p) { return _mm256_broadcast_sd(p); }
  static V fma(V a, V b, V c) { return _mm256_fmadd_pd(a, b, c); }
  static V add(V a, V b) { return _mm256_add_pd(a, b); }
};
// 6 rows of two registers: 12 accumulators in the 16 ymm registers.
constexpr int64_t kMR = 6;
constexpr bool kReadBInPlace = false;
constexpr int64_t kPrefetchSteps = 0;  // not measured on the AVX2 hosts (Zen 3): left to the hardware
// Products with at most this many columns read A's rows in place (see packed_gemm).
constexpr int64_t kRowsAColumns = 320, kRowsADepth = 0;
constexpr int64_t kPrivateBThreads = 0;  // not measured on the AVX2 hosts: B packed once, shared
#endif

// A micro-tile is MR rows of NR = 2 registers of columns.
template <class T>
constexpr int64_t kNR = 2 * Simd<T>::kWidth;

// f(std::integral_constant<int64_t, i>) for i < N, unrolled: the accumulators stay an array yet
// every index is a constant, so GCC keeps them in registers.
template <int64_t N, class F>
[[gnu::always_inline]] inline void unroll(F&& f) {
  [&]<int64_t... I>(std::integer_sequence<int64_t, I...>) {
    (f(std::integral_constant<int64_t, I>{}), ...);
  }(std::make_integer_sequence<int64_t, N>{});
}

// C[R x NR] = (first ? 0 : C) + sum over k < kc of a[k][i] * b[k][j], for the rows x cols corner
// of the tile that lies inside C. a: a packed panel, kc x kMR, or with kRowsA A's own R rows,
// lda apart (R = kMR: the caller passes only whole panels); b: kc rows of NR, ldb apart (a
// packed panel, zero-padded: ldb = NR; or B itself, whose row ends past `cols` are not read).
// R <= kMR rows are computed: a small R keeps short row panels from paying for a full one. Each
// element's sum is the same FMA chain whatever R, `cols` or ldb. Never inlined: inlined into
// packed_gemm's loops, GCC 12 kept the f64 accumulators on the stack (a store per FMA, a third of
// the speed); on its own the function holds them in registers. With AVX-512 it is flattened
// (everything it calls inlined into it first): without that, GCC 13.3 left the 14-row kernel's
// accumulator array in memory, 21 stores per K step (the gemm_registers test looks for that), and
// a GCC 13.3 build ran the GEMM at 30-39% of the FMA peak on an AVX-512 Xeon. (The AVX2 kernels
// need nothing of the kind with GCC 12 or 13, and keep the code that was measured.)
#ifdef __AVX512F__
#define COTAN_MICRO_KERNEL_FLATTEN [[gnu::flatten]]
#else
#define COTAN_MICRO_KERNEL_FLATTEN
#endif
// With T = Bf16Pairs, kc counts pairs of K. J = 1 computes only the first register of columns
// (cols <= W): a last panel of a few columns (N = 257: one) then costs half of a whole one.
template <class T, int64_t R, bool kRowsA = false, int64_t J = 2>
[[gnu::noinline]] COTAN_MICRO_KERNEL_FLATTEN void micro_kernel(int64_t kc, const Packed<T>* __restrict a,
                                                               const Packed<T>* __restrict b, int64_t ldb, Out<T>* c,
                                                               int64_t ldc, int64_t rows, int64_t cols, bool first,
                                                               int64_t lda = 0) {
  using S = Simd<T>;
  using V = typename S::V;
  constexpr int64_t W = S::kWidth, NR = kNR<T>;
  if (!first)  // C is read at the end: fetch it while the sum runs
    for (int64_t i = 0; i < rows; ++i) {
      _mm_prefetch(reinterpret_cast<const char*>(c + i * ldc), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(c + i * ldc + cols - 1), _MM_HINT_T0);
    }
  static_assert(J == 1 || J == 2);
  V acc[R][J];
  unroll<R>([&](auto i) { unroll<J>([&](auto j) { acc[i][j] = S::zero(); }); });
  // A packed: kc steps of kMR; A's own rows (kRowsA): R rows lda apart, each read along K.
  constexpr int64_t a_step = kRowsA ? 1 : kMR;
  auto sum = [&](auto load_b) {
    for (int64_t p = 0; p < kc; ++p, a += a_step, b += ldb) {
      V bj[J];
      unroll<J>([&](auto j) { bj[j] = load_b(b, j); });
      unroll<R>([&](auto i) {
        const V ai = S::broadcast(kRowsA ? a + i * lda : a + i);
        unroll<J>([&](auto j) { acc[i][j] = S::fma(ai, bj[j], acc[i][j]); });
      });
    }
  };
  if (ldb == NR) {  // packed B: kc rows of NR, one after the other
    sum([&](const Packed<T>* p, int64_t j) {
      if constexpr (kPrefetchSteps > 0) {
        _mm_prefetch(reinterpret_cast<const char*>(p + kPrefetchSteps * NR + j * W), _MM_HINT_T0);
        if (!kRowsA && j == 0) _mm_prefetch(reinterpret_cast<const char*>(a + kPrefetchSteps * kMR), _MM_HINT_T0);
      }
      return S::load(p + j * W);
    });
  } else if (cols == NR) {  // B unpacked: its rows are ldb apart, in as many pages; fetch the next panel's
    sum([](const Packed<T>* p, int64_t j) {
      _mm_prefetch(reinterpret_cast<const char*>(p + NR + j * W), _MM_HINT_T0);
      return S::load(p + j * W);
    });
  } else {
    sum([&](const Packed<T>* p, int64_t j) {
      return S::load_first(p + j * W, std::clamp<int64_t>(cols - j * W, 0, W));
    });
  }

  unroll<R>([&](auto i) {
    if (i >= rows) return;
    Out<T>* ci = c + i * ldc;
    unroll<J>([&](auto j) {
      const int64_t lanes = std::min(W, cols - j * W);
      if (lanes == W) S::store(ci + j * W, first ? acc[i][j] : S::add(S::load(ci + j * W), acc[i][j]));
      else if (lanes > 0)
        S::store_first(ci + j * W, first ? acc[i][j] : S::add(S::load_first(ci + j * W, lanes), acc[i][j]), lanes);
    });
  });
}

#ifdef __AVX512F__
// The f32 micro-kernel reading A's 14 rows where they lie (lda apart, each along K) instead of
// a packed panel: C[14 x NR] (+)= A[14 x kc] B[kc x NR], B as in micro_kernel (packed: ldb = NR;
// or in place, cols <= NR of it read). Written out register by register: through micro_kernel's
// generic form GCC 12 kept the 28 accumulators in memory. Rows are addressed from two bases,
// rows 0-6 and 7-13, at 0..6 times lda, so the loop needs no pointer per row. The next line of
// each row is fetched 16 K steps ahead (one row per step), as the packed kernel does.
[[gnu::noinline]] void micro_kernel_rows_a(int64_t kc, const float* __restrict a, int64_t lda, const float* __restrict b,
                                           int64_t ldb, float* c, int64_t ldc, int64_t cols, bool first) {
  __m512 c00 = _mm512_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00, c30 = c00, c31 = c00,
         c40 = c00, c41 = c00, c50 = c00, c51 = c00, c60 = c00, c61 = c00, c70 = c00, c71 = c00, c80 = c00,
         c81 = c00, c90 = c00, c91 = c00, ca0 = c00, ca1 = c00, cb0 = c00, cb1 = c00, cc0 = c00, cc1 = c00,
         cd0 = c00, cd1 = c00;
  const float* lo = a;
  const float* hi = a + 7 * lda;
  const int64_t l1 = lda, l2 = 2 * lda, l3 = 3 * lda, l4 = 4 * lda, l5 = 5 * lda, l6 = 6 * lda;
  const __mmask16 m0 = cols >= 16 ? __mmask16(0xffff) : __mmask16((1u << cols) - 1);
  const __mmask16 m1 = cols >= 32 ? __mmask16(0xffff) : cols <= 16 ? __mmask16(0) : __mmask16((1u << (cols - 16)) - 1);
#define COTAN_ROW(acc0, acc1, base, off)               \
  {                                                    \
    const __m512 x = _mm512_set1_ps((base)[off]);      \
    acc0 = _mm512_fmadd_ps(x, b0, acc0);               \
    acc1 = _mm512_fmadd_ps(x, b1, acc1);               \
  }
#define COTAN_STEP(load0, load1)                                                                          \
  {                                                                                                       \
    const __m512 b0 = load0, b1 = load1;                                                                  \
    COTAN_ROW(c00, c01, lo, 0) COTAN_ROW(c10, c11, lo, l1) COTAN_ROW(c20, c21, lo, l2)                    \
    COTAN_ROW(c30, c31, lo, l3) COTAN_ROW(c40, c41, lo, l4) COTAN_ROW(c50, c51, lo, l5)                   \
    COTAN_ROW(c60, c61, lo, l6) COTAN_ROW(c70, c71, hi, 0) COTAN_ROW(c80, c81, hi, l1)                    \
    COTAN_ROW(c90, c91, hi, l2) COTAN_ROW(ca0, ca1, hi, l3) COTAN_ROW(cb0, cb1, hi, l4)                   \
    COTAN_ROW(cc0, cc1, hi, l5) COTAN_ROW(cd0, cd1, hi, l6)                                               \
  }
  int64_t p = 0;
  auto fetch = [&](int64_t row) {  // the line 16 steps ahead in `row`
    const float* base = row < 7 ? lo + row * lda : hi + (row - 7) * lda;
    _mm_prefetch(reinterpret_cast<const char*>(base + 16), _MM_HINT_T0);
  };
  if (ldb == kNR<float>) {
    for (; p < kc; ++p, ++lo, ++hi, b += ldb) {
      if ((p & 15) < 14) fetch(p & 15);
      _mm_prefetch(reinterpret_cast<const char*>(b + 16 * kNR<float>), _MM_HINT_T0);
      COTAN_STEP(_mm512_loadu_ps(b), _mm512_loadu_ps(b + 16))
    }
  } else if (cols == kNR<float>) {
    for (; p < kc; ++p, ++lo, ++hi, b += ldb) {
      if ((p & 15) < 14) fetch(p & 15);
      _mm_prefetch(reinterpret_cast<const char*>(b + kNR<float>), _MM_HINT_T0);
      COTAN_STEP(_mm512_loadu_ps(b), _mm512_loadu_ps(b + 16))
    }
  } else {
    for (; p < kc; ++p, ++lo, ++hi, b += ldb) {
      if ((p & 15) < 14) fetch(p & 15);
      COTAN_STEP(_mm512_maskz_loadu_ps(m0, b), _mm512_maskz_loadu_ps(m1, b + 16))
    }
  }
#undef COTAN_STEP
#undef COTAN_ROW
  __m512* acc[14][2] = {{&c00, &c01}, {&c10, &c11}, {&c20, &c21}, {&c30, &c31}, {&c40, &c41},
                        {&c50, &c51}, {&c60, &c61}, {&c70, &c71}, {&c80, &c81}, {&c90, &c91},
                        {&ca0, &ca1}, {&cb0, &cb1}, {&cc0, &cc1}, {&cd0, &cd1}};
  for (int i = 0; i < 14; ++i) {
    float* ci = c + i * ldc;
    if (first) {
      _mm512_mask_storeu_ps(ci, m0, *acc[i][0]);
      _mm512_mask_storeu_ps(ci + 16, m1, *acc[i][1]);
    } else {
      _mm512_mask_storeu_ps(ci, m0, _mm512_add_ps(_mm512_maskz_loadu_ps(m0, ci), *acc[i][0]));
      _mm512_mask_storeu_ps(ci + 16, m1, _mm512_add_ps(_mm512_maskz_loadu_ps(m1, ci + 16), *acc[i][1]));
    }
  }
}
#endif

// Whether an in-place A kernel serves T (see packed_gemm's rows_a), and that kernel: with
// AVX-512, the f32 one written out above; with AVX2, micro_kernel's kRowsA form.
#ifdef __AVX512F__
template <class T>
constexpr bool kHasRowsAKernel = std::is_same_v<T, float>;
#else
template <class T>
constexpr bool kHasRowsAKernel = true;
#endif
template <class T>
void micro_kernel_in_place_a(int64_t kc, const T* a, int64_t lda, const T* b, int64_t ldb, T* c, int64_t ldc,
                             int64_t cols, bool first) {
  if (cols <= Simd<T>::kWidth) return micro_kernel<T, kMR, true, 1>(kc, a, b, ldb, c, ldc, kMR, cols, first, lda);
#ifdef __AVX512F__
  micro_kernel_rows_a(kc, a, lda, b, ldb, c, ldc, cols, first);
#else
  micro_kernel<T, kMR, true>(kc, a, b, ldb, c, ldc, kMR, cols, first, lda);
#endif
}

// Products of one or two rows (a decoding step's x W^T) run R x 2G accumulators across G panels
// of B side by side, G = kWidePanels / R: on one panel, a single row's sums are only two FMA
// chains, each waiting out the latency of its last FMA (two FMA ports of latency 4 need eight).
constexpr int64_t kWidePanels = 4;
// Rows of a product (all in one task's tile) up to which B is streamed (see packed_gemm).
constexpr int64_t kStreamRows = 32;

// C[R x G NR] = (first ? 0 : C) + A B for R <= 2 rows of packed A (kc steps of kMR) and the G
// whole panels of B: panel g at b + g * panel_stride, its kc rows ldb apart (packed: panel_stride
// = kc * NR, ldb = NR; or B in place: NR and B's row stride). Each element's sum is
// micro_kernel's FMA chain, so its bits are those of any other product that holds the same row
// and column. A last group with fewer columns runs panel by panel on micro_kernel: with a masked
// load per register (8 masks beside 8 accumulators and 8 loaded registers), this kernel left two
// accumulators on the stack.
template <class T, int64_t R>
[[gnu::noinline, gnu::flatten]] void micro_kernel_wide(int64_t kc, const Packed<T>* __restrict a,
                                                       const Packed<T>* __restrict b, int64_t panel_stride,
                                                       int64_t ldb, Out<T>* c, int64_t ldc, bool first) {
  using S = Simd<T>;
  using V = typename S::V;
  constexpr int64_t W = S::kWidth, NR = kNR<T>, L = 2 * (kWidePanels / R);  // registers per row
  static_assert(NR == 2 * W);
  V acc[R][L];  // register l holds columns l * W ...
  unroll<R>([&](auto i) { unroll<L>([&](auto l) { acc[i][l] = S::zero(); }); });
  for (int64_t p = 0; p < kc; ++p, a += kMR, b += ldb) {
    V bl[L];
    unroll<L>([&](auto l) { bl[l] = S::load(b + l / 2 * panel_stride + l % 2 * W); });
    unroll<R>([&](auto i) {
      const V ai = S::broadcast(a + i);
      unroll<L>([&](auto l) { acc[i][l] = S::fma(ai, bl[l], acc[i][l]); });
    });
  }
  unroll<R>([&](auto i) {
    Out<T>* ci = c + i * ldc;
    unroll<L>([&](auto l) { S::store(ci + l * W, first ? acc[i][l] : S::add(S::load(ci + l * W), acc[i][l])); });
  });
}

// The micro-kernel for a panel of `rows` <= kMR rows and `cols` <= NR columns: the smallest R
// that holds the rows, on one register of columns when they fit in it (also for A read in place,
// micro_kernel_in_place_a). A 257th column took a whole panel's FMAs: on a 2-core Xeon
// (AVX-512), a training step's 256 x 257 x 128 as x W^T went from 0.085 to 0.080-0.081 ms on two
// threads (256 x 256 x 128: 0.074) and 0.121 to 0.117 on one; 1024 x 260 x 128 from 0.242 to
// 0.227 on two and 0.475-0.497 to 0.447-0.451 on one.
template <class T, int64_t J>
void micro_kernel_rows_of(int64_t kc, const Packed<T>* a, const Packed<T>* b, int64_t ldb, Out<T>* c, int64_t ldc,
                          int64_t rows, int64_t cols, bool first) {
  if (rows > 8 || (kMR <= 8 && rows > 4)) micro_kernel<T, kMR, false, J>(kc, a, b, ldb, c, ldc, rows, cols, first);
  else if (rows > 4) {
    if constexpr (kMR > 8) micro_kernel<T, 8, false, J>(kc, a, b, ldb, c, ldc, rows, cols, first);
  } else if (rows > 2) micro_kernel<T, 4, false, J>(kc, a, b, ldb, c, ldc, rows, cols, first);
  else if (rows > 1) micro_kernel<T, 2, false, J>(kc, a, b, ldb, c, ldc, rows, cols, first);
  else micro_kernel<T, 1, false, J>(kc, a, b, ldb, c, ldc, rows, cols, first);
}
template <class T>
void micro_kernel_rows(int64_t kc, const Packed<T>* a, const Packed<T>* b, int64_t ldb, Out<T>* c, int64_t ldc,
                       int64_t rows, int64_t cols, bool first) {
  if (cols <= Simd<T>::kWidth) micro_kernel_rows_of<T, 1>(kc, a, b, ldb, c, ldc, rows, cols, first);
  else micro_kernel_rows_of<T, 2>(kc, a, b, ldb, c, ldc, rows, cols, first);
}

// GCC 12's AVX-512 shuffles start from _mm512_undefined_ps(), which it then warns may be used
// uninitialised (a false positive: every lane is written).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
// The first half of a W x W transpose of f32 registers (W = Simd<float>::kWidth): each 4 x 4
// block inside a 128-bit lane is transposed in place; the lane-crossing half is the ISA's own.
[[gnu::always_inline]] inline void transpose_lane_blocks(Simd<float>::V* v) {
  using S = Simd<float>;
  constexpr int W = int(S::kWidth);
  S::V t[W];
  for (int i = 0; i < W; i += 2) {
    t[i] = S::unpacklo(v[i], v[i + 1]);
    t[i + 1] = S::unpackhi(v[i], v[i + 1]);
  }
  for (int i = 0; i < W; i += 4) {
    v[i] = S::shuffle<_MM_SHUFFLE(1, 0, 1, 0)>(t[i], t[i + 2]);
    v[i + 1] = S::shuffle<_MM_SHUFFLE(3, 2, 3, 2)>(t[i], t[i + 2]);
    v[i + 2] = S::shuffle<_MM_SHUFFLE(1, 0, 1, 0)>(t[i + 1], t[i + 3]);
    v[i + 3] = S::shuffle<_MM_SHUFFLE(3, 2, 3, 2)>(t[i + 1], t[i + 3]);
  }
}

#ifdef __AVX512F__
// v[j] = lane j of every v[i], i < 16: the 16 x 16 transpose, in 64 shuffles.
[[gnu::always_inline]] inline void transpose_square(__m512 v[16]) {
  transpose_lane_blocks(v);
  __m512 t[16];
  for (int i = 0; i < 4; ++i) {
    t[i] = _mm512_shuffle_f32x4(v[i], v[i + 4], 0x88);
    t[i + 4] = _mm512_shuffle_f32x4(v[i], v[i + 4], 0xdd);
    t[i + 8] = _mm512_shuffle_f32x4(v[i + 8], v[i + 12], 0x88);
    t[i + 12] = _mm512_shuffle_f32x4(v[i + 8], v[i + 12], 0xdd);
  }
  for (int i = 0; i < 8; ++i) {
    v[i] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0x88);
    v[i + 8] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0xdd);
  }
}

// The first n <= 16 lanes of v at p: a full or a masked store.
[[gnu::always_inline]] inline void store_lanes(float* p, __m512 v, int64_t n) {
  if (n == 16) _mm512_storeu_ps(p, v);
  else _mm512_mask_storeu_ps(p, __mmask16((1u << n) - 1), v);
}
#else
// v[j] = lane j of every v[i], i < 8: the 8 x 8 transpose, in 24 shuffles.
[[gnu::always_inline]] inline void transpose_square(__m256 v[8]) {
  transpose_lane_blocks(v);
  __m256 t[8];
  for (int i = 0; i < 4; ++i) {
    t[i] = _mm256_permute2f128_ps(v[i], v[i + 4], 0x20);
    t[i + 4] = _mm256_permute2f128_ps(v[i], v[i + 4], 0x31);
  }
  for (int i = 0; i < 8; ++i) v[i] = t[i];
}

// The first n <= 8 lanes of v at p: a full store, or (the 6-row A panels) 4 + 2 lanes, or a
// masked store.
[[gnu::always_inline]] inline void store_lanes(float* p, __m256 v, int64_t n) {
  if (n == 8) {
    _mm256_storeu_ps(p, v);
  } else if (n == 6) {
    _mm_storeu_ps(p, _mm256_castps256_ps128(v));
    _mm_storel_pi(reinterpret_cast<__m64*>(p + 4), _mm256_extractf128_ps(v, 1));
  } else {
    _mm256_maskstore_ps(p, Simd<float>::lanes_below(n), v);
  }
}

#endif

// One panel of P f32 or bf16 lines (A row-major, or B transposed), each contiguous, into f32:
// dst[k * P + l] = src[l * line_stride + k] for the first `lines` <= P lines, and 0 for the
// others (the padding of a last, short panel), a square of W lines x W elements at a time
// through transpose_square (W the f32 lanes of a register; bf16 is widened as it is loaded). The
// scalar copy reads P streams element by element: about 0.6 ns an element on Zen 4, against
// 0.25 (bf16 on Zen 3: the GEMM's packing fell from 8.0% of a KD step's time to 6.4%).
template <int64_t P, class S>
void pack_lines_transposed(float* __restrict dst, const S* src, int64_t line_stride, int64_t kc, int64_t lines) {
  using F = Simd<float>;
  constexpr int64_t W = F::kWidth;
  for (int64_t l0 = 0; l0 < P; l0 += W) {
    const int64_t width = std::min<int64_t>(W, P - l0), loaded = std::clamp<int64_t>(lines - l0, 0, width);
    int64_t k0 = 0;
    for (; k0 + W <= kc; k0 += W) {
      typename F::V v[W];
      for (int64_t i = 0; i < W; ++i) v[i] = i < loaded ? F::load(src + (l0 + i) * line_stride + k0) : F::zero();
      transpose_square(v);
      for (int64_t j = 0; j < W; ++j) store_lanes(dst + (k0 + j) * P + l0, v[j], width);
    }
    for (; k0 < kc; ++k0)
      for (int64_t i = 0; i < width; ++i)
        dst[k0 * P + l0 + i] = i < loaded ? float(src[(l0 + i) * line_stride + k0]) : 0.0f;
  }
}

// C[R x W] = (first ? 0 : C) + A B for R rows of a packed A panel (kc steps, kMR apart; C's rows
// ldc apart) and W columns of B given as lines along K (column j at b + j * line_stride, contiguous: W in x W^T), f32 or
// bf16 widened as it is loaded (W = the f32 lanes of a register). W steps of the W lines at a
// time are loaded, transposed in registers (transpose_square) and summed straight into one
// accumulator: a one-row product reads B once, and packing it first (written out, read back)
// cost more than the product. One line group at a time: lines a multiple of 4 KiB apart share
// an L1 set, so more lines in flight evict each other (on Zen 3 at 2048 x 2048, two groups took
// 1.6 times as long as one). Each element's sum is micro_kernel's FMA chain, in the same order.
// `next` (or nullptr) is where the following call's W lines start (line_stride apart, as b's,
// next_kc elements each): each step of W fetches one cache line of them, line by line, from their
// starts. A decoding model's W comes from memory, and the hardware prefetcher starts each of its
// rows (a 4 KiB page at K = 1024) with misses. Fetched ahead, on a 2-core Zen 3, 1 x 151936 x 1024
// as x W^T took 32 ms instead of 37 on one thread and 17-19 instead of 20.7 on two (bf16: 28
// instead of 35, 14 instead of 18), products in L3 within 3% of before. (In a standalone loop,
// two fetches a step gained little more at K = 1024 and lost at K = 2816 on two threads; four
// were slower on one.)
template <class S, int64_t R>
[[gnu::noinline]] void micro_kernel_lines(int64_t kc, const float* __restrict a, const S* __restrict b,
                                          int64_t line_stride, float* c, int64_t ldc, bool first, const S* next,
                                          int64_t next_kc) {
  using F = Simd<float>;
  constexpr int64_t W = F::kWidth;
  constexpr int64_t kLineElements = 64 / int64_t(sizeof(S));
  typename F::V acc[R];
  unroll<R>([&](auto r) { acc[r] = F::zero(); });
  const int64_t to_fetch = next ? (next_kc + kLineElements - 1) / kLineElements * W : 0;
  int64_t k0 = 0, fetched = 0;  // cache lines of `next` fetched: line fetched % W, at fetched / W
  for (; k0 + W <= kc; k0 += W) {
    if (fetched < to_fetch) {
      _mm_prefetch(reinterpret_cast<const char*>(next + fetched % W * line_stride + fetched / W * kLineElements),
                   _MM_HINT_T0);
      ++fetched;
    }
    typename F::V v[W];
    for (int64_t l = 0; l < W; ++l) v[l] = F::load(b + l * line_stride + k0);
    transpose_square(v);
    // With AVX-512 (W = 16) unrolled over t too: GCC 12 left a loop over t for 4 rows and more,
    // with v in memory. With AVX2 it unrolls the loop itself and keeps every v in a register,
    // which it did not, for one row, when given the loop unrolled.
    if constexpr (W > 8) {
      unroll<W>([&](auto t) {
        unroll<R>([&](auto r) { acc[r] = F::fma(F::broadcast(a + (k0 + t) * kMR + r), v[t], acc[r]); });
      });
    } else {
      for (int64_t t = 0; t < W; ++t)
        unroll<R>([&](auto r) { acc[r] = F::fma(F::broadcast(a + (k0 + t) * kMR + r), v[t], acc[r]); });
    }
  }
  for (; k0 < kc; ++k0) {  // the last kc % W steps, one at a time
    alignas(64) float column[W];
    for (int64_t l = 0; l < W; ++l) column[l] = float(b[l * line_stride + k0]);
    const typename F::V col = F::load(column);
    unroll<R>([&](auto r) { acc[r] = F::fma(F::broadcast(a + k0 * kMR + r), col, acc[r]); });
  }
  unroll<R>([&](auto r) { F::store(c + r * ldc, first ? acc[r] : F::add(F::load(c + r * ldc), acc[r])); });
}

// Rows micro_kernel_lines takes at most: its accumulators, the W transposed vectors and the
// transpose's temporaries must fit in the registers. With AVX-512 (W = 16), GCC 12 kept up to 11
// rows in registers and spilled from 12 on, so a 14-row panel runs as two halves of 7.
#ifdef __AVX512F__
constexpr int64_t kLinesRows = 7;
#else
constexpr int64_t kLinesRows = kMR;
#endif
// micro_kernel_lines for `rows` (1 to kLinesRows) rows.
template <class S>
using LinesKernel = void (*)(int64_t, const float*, const S*, int64_t, float*, int64_t, bool, const S*, int64_t);
template <class S, size_t... R>
constexpr std::array<LinesKernel<S>, sizeof...(R)> lines_kernels(std::index_sequence<R...>) {
  return {&micro_kernel_lines<S, int64_t(R) + 1>...};
}
template <class S>
LinesKernel<S> lines_kernel(int64_t rows) {
  static constexpr auto kernels = lines_kernels<S>(std::make_index_sequence<size_t(kLinesRows)>());
  return kernels[size_t(rows - 1)];
}
#pragma GCC diagnostic pop

// Packs `lines` lines of kc elements into panels of P lines: line l, element k goes to
// dst[(l / P) * kc * P + k * P + l % P], read from src[l * line_stride + k * step] and converted
// to T; the last panel is padded with zeros. A panels: lines are rows of A (step along K);
// B panels: lines are columns of B.
template <int64_t P, class T, class S>
void pack_panels(T* __restrict dst, const S* src, int64_t line_stride, int64_t step, int64_t lines, int64_t kc) {
  const int64_t full = lines / P, rest = lines % P, panels = full + (rest > 0);
  T* const last = dst + full * kc * P;  // the short panel, when rest > 0
  if (line_stride == 1) {  // the lines are adjacent: copy runs of P from each of the kc rows
    if constexpr (P * sizeof(T) >= 64) {  // B row-major: row by row, each run a whole cache line or more
      for (int64_t k = 0; k < kc; ++k) {
        const S* row = src + k * step;
        for (int64_t q = 0; q < full; ++q)
          for (int64_t i = 0; i < P; ++i) dst[q * kc * P + k * P + i] = T(row[q * P + i]);
        if (rest)
          for (int64_t i = 0; i < P; ++i) last[k * P + i] = i < rest ? T(row[full * P + i]) : T(0);
      }
    } else {
      // A column-major (the X^T of a weight gradient): blocks of kRows rows of K across all full
      // panels, panel by panel, so that each panel receives a contiguous run of kRows * P and the
      // kRows rows being read stay in L1. Row by row, a run shorter than a line would be stored
      // into every panel, kc * P * 4 bytes apart: a multiple of 4 KiB when kc is, all in one set
      // of L1, and 3-4x slower. Going down all kc rows a few panels at a time instead touches kc
      // rows lda apart per pass, a page each once lda is 4 KiB or more: at 4096^3 tn on AVX-512
      // (2 threads) 349 GFLOP/s, against 383 with blocks of 16 rows (8 rows: 376).
      constexpr int64_t kRows = 16;
      for (int64_t k0 = 0; k0 < kc; k0 += kRows) {
        const int64_t k1 = std::min(kc, k0 + kRows);
        for (int64_t q = 0; q < full; ++q) {
          const S* col = src + q * P;
          T* d = dst + q * kc * P;
          for (int64_t k = k0; k < k1; ++k)
            for (int64_t i = 0; i < P; ++i) d[k * P + i] = T(col[k * step + i]);
        }
      }
      if (rest)
        for (int64_t k = 0; k < kc; ++k)
          for (int64_t i = 0; i < P; ++i) last[k * P + i] = i < rest ? T(src[k * step + full * P + i]) : T(0);
    }
    return;
  }
  for (int64_t q = 0; q < panels; ++q) {
    T* panel = dst + q * kc * P;
    const S* first = src + q * P * line_stride;
    const int64_t n = q < full ? P : rest;
    if constexpr ((std::is_same_v<S, float> || std::is_same_v<S, bf16>) && std::is_same_v<T, float>)
      if (step == 1) {  // each line is contiguous (A row-major, B transposed): in registers
        pack_lines_transposed<P>(panel, first, line_stride, kc, n);
        continue;
      }
    if (n == P) {  // P streams, read in step
      for (int64_t k = 0; k < kc; ++k)
        for (int64_t i = 0; i < P; ++i) panel[k * P + i] = T(first[i * line_stride + k * step]);
    } else {
      for (int64_t k = 0; k < kc; ++k)
        for (int64_t i = 0; i < P; ++i) panel[k * P + i] = i < n ? T(first[i * line_stride + k * step]) : T(0);
    }
  }
}

#ifdef __AVX512BF16__
// Packs `lines` lines of kc bf16 into panels of P lines of pairs along K, for the Bf16Pairs
// micro-kernel: line l, pair p goes to dst[(l / P) * kp * P + p * P + l % P] (kp = ceil(kc / 2)),
// element 2p of the line in its low half and element 2p + 1 (zero past kc) in its high half,
// read from src[l * line_stride + k * step]; the last panel is padded with zero pairs. The bits
// are moved, never converted.
template <int64_t P>
void pack_pair_panels(uint32_t* __restrict dst, const bf16* src, int64_t line_stride, int64_t step, int64_t lines,
                      int64_t kc) {
  constexpr int64_t W = 16;  // 32-bit lanes of a zmm register
  const int64_t kp = (kc + 1) / 2, panels = (lines + P - 1) / P;
  auto pair = [&](int64_t l, int64_t p) {  // line l's pair p, from memory element by element
    auto half = [&](int64_t k) -> uint32_t { return l < lines && k < kc ? src[l * line_stride + k * step].bits : 0; };
    return half(2 * p) | half(2 * p + 1) << 16;
  };
  if (line_stride == 1) {
    // Adjacent lines (B row-major, A column-major): rows 2p and 2p + 1 of K, W lines at a time,
    // each widened to 32-bit lanes and the second shifted into the high halves. In blocks of 8
    // pairs across all panels, as pack_panels reads a column-major A (its comment says why).
    constexpr int64_t kPairs = 8;
    for (int64_t p0 = 0; p0 < kp; p0 += kPairs) {
      const int64_t p1 = std::min(kp, p0 + kPairs);
      for (int64_t q = 0; q < panels; ++q)
        for (int64_t l0 = 0; l0 < P; l0 += W) {
          const int64_t width = std::min(W, P - l0), n = std::clamp<int64_t>(lines - q * P - l0, 0, width);
          const __mmask16 loaded = __mmask16((1u << n) - 1), stored = __mmask16((1u << width) - 1);
          const bf16* line = src + q * P + l0;
          uint32_t* out = dst + q * kp * P + l0;
          for (int64_t p = p0; p < p1; ++p) {
            const __m512i lo = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(loaded, line + 2 * p * step));
            const __m512i hi = 2 * p + 1 < kc
                                   ? _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(loaded, line + (2 * p + 1) * step))
                                   : _mm512_setzero_si512();
            _mm512_mask_storeu_epi32(out + p * P, stored, _mm512_or_si512(lo, _mm512_slli_epi32(hi, 16)));
          }
        }
    }
    return;
  }
  for (int64_t q = 0; q < panels; ++q) {
    uint32_t* panel = dst + q * kp * P;
    for (int64_t l0 = 0; l0 < P; l0 += W) {
      const int64_t width = std::min(W, P - l0), first = q * P + l0;
      int64_t p0 = 0;
      if (step == 1) {
        // Each line contiguous along K (A row-major, B transposed): its pairs are consecutive
        // 32-bit words, so the panel is the transpose of a lines x pairs matrix of words, W x W
        // words at a time through transpose_square (shuffles only: the bits pass unchanged).
        const int64_t loaded = std::clamp<int64_t>(lines - first, 0, width);
        for (; p0 + W <= kc / 2; p0 += W) {
          __m512 v[W];
          for (int64_t i = 0; i < W; ++i)
            v[i] = i < loaded ? _mm512_castsi512_ps(_mm512_loadu_si512(src + (first + i) * line_stride + 2 * p0))
                              : _mm512_setzero_ps();
          transpose_square(v);
          for (int64_t j = 0; j < W; ++j) store_lanes(reinterpret_cast<float*>(panel + (p0 + j) * P + l0), v[j], width);
        }
      }
      for (int64_t p = p0; p < kp; ++p)
        for (int64_t i = 0; i < width; ++i) panel[p * P + l0 + i] = pair(first + i, p);
    }
  }
}
#endif

// Packs panels for the micro-kernel of type Kernel: pack_panels, or pack_pair_panels for Bf16Pairs.
template <int64_t P, class Kernel, class S>
void pack_kernel_panels(Packed<Kernel>* dst, const S* src, int64_t line_stride, int64_t step, int64_t lines,
                        int64_t kc) {
#ifdef __AVX512BF16__
  if constexpr (std::is_same_v<Kernel, Bf16Pairs>) {
    pack_pair_panels<P>(dst, src, line_stride, step, lines, kc);
    return;
  }
#endif
  if constexpr (!std::is_same_v<Kernel, Bf16Pairs>) pack_panels<P>(dst, src, line_stride, step, lines, kc);
}

// The L2 and L3 sizes of this CPU, in bytes: from COTAN_GEMM_CACHE_SIZES ("L2,L3", each a number
// of bytes with an optional K or M suffix: "2M,32M"), else sysfs (cpu0), else sysconf, else
// typical sizes; a size out of a plausible range counts as unknown (sysconf reports 320 MiB of L3
// on some virtual machines). The variable is for measuring: the blocking, and with KC the order
// of the f32 sums, follow it.
struct CacheSizes {
  int64_t l2, l3;
  const char* l2_source;
  const char* l3_source;
};
constexpr const char* kCacheSizesVariable = "COTAN_GEMM_CACHE_SIZES";

// "512K" -> 524288; -1 for anything but digits with an optional K or M.
int64_t parse_bytes(std::string_view text) {
  int64_t unit = 1;
  if (!text.empty() && (text.back() == 'K' || text.back() == 'M')) {
    unit = text.back() == 'K' ? 1 << 10 : 1 << 20;
    text.remove_suffix(1);
  }
  if (text.empty() || text.size() > 12 || text.find_first_not_of("0123456789") != std::string_view::npos) return -1;
  return std::stoll(std::string(text)) * unit;
}

CacheSizes read_cache_sizes() {
  const int64_t low[4] = {0, 0, 128 << 10, 1 << 20}, high[4] = {0, 0, 64 << 20, 256 << 20};
  if (const char* value = std::getenv(kCacheSizesVariable); value && *value) {
    const std::string_view text(value);
    const size_t comma = text.find(',');
    const int64_t l2 = comma == std::string_view::npos ? -1 : parse_bytes(text.substr(0, comma));
    const int64_t l3 = comma == std::string_view::npos ? -1 : parse_bytes(text.substr(comma + 1));
    if (l2 < low[2] || l2 > high[2] || l3 < low[3] || l3 > high[3])
      fail("matmul", kCacheSizesVariable, "=\"", text,
           "\": expected L2,L3 such as 2M,32M, with L2 in 128K..64M and L3 in 1M..256M");
    return {l2, l3, "environment", "environment"};
  }
  int64_t by_level[4] = {0, 0, 0, 0};
  for (int index = 0;; ++index) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index) + "/";
    std::ifstream level_file(dir + "level"), type_file(dir + "type"), size_file(dir + "size");
    int level = 0;
    std::string type, size;
    if (!(level_file >> level && type_file >> type && size_file >> size)) break;
    if (type == "Instruction" || level < 1 || level > 3) continue;
    const int64_t unit = size.back() == 'K' ? 1 << 10 : size.back() == 'M' ? 1 << 20 : 1;
    by_level[level] = std::atoll(size.c_str()) * unit;
  }
  const int names[4] = {0, 0, _SC_LEVEL2_CACHE_SIZE, _SC_LEVEL3_CACHE_SIZE};
  const int64_t typical[4] = {0, 0, 1 << 20, 16 << 20};
  const char* source[4] = {"", "", "sysfs", "sysfs"};
  for (int level = 2; level <= 3; ++level) {
    int64_t& bytes = by_level[level];
    if (bytes < low[level] || bytes > high[level]) bytes = sysconf(names[level]), source[level] = "sysconf";
    if (bytes < low[level] || bytes > high[level]) bytes = typical[level], source[level] = "typical";
  }
  return {by_level[2], by_level[3], source[2], source[3]};
}

const CacheSizes& cache_sizes() {
  static const CacheSizes sizes = read_cache_sizes();
  return sizes;
}

// Blocking, fixed per machine (computed once, from the cache sizes). KC fixes the summation
// order (see the header), so it depends on nothing but the machine: a KC x NR panel of packed B
// takes 1/16 of L2 (KC = 512 with 1 MiB of L2, measured best on Zen 4 against 128 to 768: a
// longer sum per tile spreads the load and store of C over more FMAs; the panel is read from L2
// at 2 loads per 2 * MR FMAs). MC rows of packed A (MC x KC) take half of L2; packed B for one
// column block (K x nc) is kept under half of L3, and each column block repacks A. B is read in
// place (kReadBInPlace) when a K chunk of it (kc x N) fits in half of L2, or A has few rows
// (packed_gemm says when).
struct Blocking {
  int64_t kc, mc, packed_b_bytes, direct_b_bytes;
};
template <class T>
const Blocking& blocking() {
  static const Blocking fixed = [] {
    const CacheSizes& caches = cache_sizes();
    const int64_t kc = std::clamp<int64_t>(caches.l2 / 16 / (kNR<T> * int64_t(sizeof(T))) / 64 * 64, 256, 1024);
    const int64_t mc = std::max<int64_t>(kMR, caches.l2 / 2 / (kc * int64_t(sizeof(T))) / kMR * kMR);
    return Blocking{kc, mc, caches.l3 / 2, caches.l2 / 2};
  }();
  return fixed;
}

// Part p of `total` units cut into `parts` nearly equal ranges: [part_begin(p), part_begin(p + 1)).
int64_t part_begin(int64_t total, int64_t parts, int64_t p) { return total * p / parts; }

// C[M x N] (row-major, leading dimension N) = A B, T the compute type, S the stored type.
// With `accumulate` the products are added to C instead of replacing it.
// Kernel is the micro-kernel's type: T, or for bf16 operands Bf16Pairs (see bf16_pairs()), whose
// panels hold one element per two steps of K (a last odd step padded with zero).
template <class T, class S, class Kernel = T>
void packed_gemm(Operand<S> a, Operand<S> b, T* c, int64_t m, int64_t n, int64_t k, bool split, bool accumulate = false) {
  using Elem = Packed<Kernel>;  // what the packed panels hold
  constexpr int64_t kSteps = std::is_same_v<Kernel, Bf16Pairs> ? 2 : 1;  // steps of K per packed element
  // Packed elements of K steps. A chunk's start p * KC is even (KC is a multiple of 64), so a
  // pair never straddles two chunks and depth(p * KC) is p times depth(KC).
  auto depth = [](int64_t steps) { return (steps + kSteps - 1) / kSteps; };
  constexpr int64_t MR = kMR, NR = kNR<Kernel>;
  const Blocking& blocks = blocking<T>();
  const int64_t KC = blocks.kc, MC = blocks.mc;
  const int64_t k_blocks = (k + KC - 1) / KC;
  const int64_t threads = split ? worker_threads() : 1;
  // Row tiles of at most MC rows, whole panels each. With fewer than two per thread, and B not
  // much wider than A is tall, rows are cut finer, down to kMinTilePanels panels a tile: a column
  // split instead would pack each row of A once per column tile (at K = 1024 and a few hundred
  // rows and columns, 15-25% of the time), while each row tile reads all of packed B. When there
  // are at least as many tiles as threads, as many as a multiple of the thread count.
  constexpr int64_t kMinTilePanels = 4;
  const int64_t row_panels = (m + MR - 1) / MR;
  int64_t row_tiles = (row_panels + MC / MR - 1) / (MC / MR);
  if (threads > 1 && row_tiles < 2 * threads && n <= 4 * m)
    row_tiles = std::max(row_tiles, std::min(2 * threads, row_panels / kMinTilePanels));
  if (row_tiles >= threads) row_tiles = std::min(row_panels, (row_tiles + threads - 1) / threads * threads);
  // Column tiles per row tile, at most: with fewer row tiles than threads (few rows), the threads
  // split the columns.
  const int64_t col_split = threads > 1 && row_tiles < threads ? std::max<int64_t>(1, 4 * threads / row_tiles) : 1;
  // With few rows (one tile), the threads split the columns and share A, packed once whole (the
  // threads sharing the work): chunk p at depth(p * KC) * row_panels * MR, `row_panels` panels
  // of depth(kc) x MR. Many rows: each task packs its own rows, chunk by chunk, once per column block,
  // into L2. (Sharing a whole A of several tiles measured 2x slower: each task then reads its
  // panels from L3, once per column panel.)
  const bool shared_a = row_tiles == 1;
  // A row-major in the compute type, and few columns: the micro-kernel reads A's rows where they
  // lie (MR streams along K) instead of a packed copy. Packing costs the same whatever N, while
  // the products it feeds shrink with N: at N = 192 it was a tenth of a tile's time. On Zen 3
  // (AVX2), the training step's products with N <= 320 ran 4-60% faster this way (geometric
  // means of three runs, each against BLIS in the same run) and the whole KD step 8-12%; at
  // N = 512 and above packed A was faster.
  // With AVX-512 (f32 only), on a Xeon with two zmm FMA ports, it paid only for deep, narrow
  // products (K >= 256, N <= 384: 4-11% at the step's 1024x192x512, 1024x128x384 and
  // 1024x128x260, alternating with packed A in one process, operands cold); at K <= 192 it was
  // 0-5% slower, and at 1024^3 73% of the FMA peak instead of 81%.
  const bool rows_a = kHasRowsAKernel<T> && !shared_a && std::is_same_v<S, T> && a.col_stride == 1 &&
                      n <= kRowsAColumns && k >= kRowsADepth;
  std::optional<Buffer<Elem>> whole_a;
  auto pack_a = [&](Elem* dst, int64_t i0, int64_t rows, int64_t p) {
    const int64_t k0 = p * KC, kc = std::min(KC, k - k0);
    pack_kernel_panels<MR, Kernel>(dst, a.data + i0 * a.row_stride + k0 * a.col_stride, a.row_stride, a.col_stride,
                                   rows, kc);
  };
  if (shared_a) {
    whole_a.emplace(row_panels * MR * depth(k));
    // Tasks: a K chunk x a run of panels each.
    constexpr int64_t kPanelsPerTask = 8;
    const int64_t runs = (row_panels + kPanelsPerTask - 1) / kPanelsPerTask;
    auto pack_runs = [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) {
        const int64_t p = t / runs, q0 = t % runs * kPanelsPerTask, q1 = std::min(row_panels, q0 + kPanelsPerTask);
        const int64_t kc = std::min(KC, k - p * KC);
        pack_a(whole_a->get() + depth(p * KC) * row_panels * MR + q0 * depth(kc) * MR, q0 * MR,
               std::min(m, q1 * MR) - q0 * MR, p);
      }
    };
    if (split) parallel_for(k_blocks * runs, 1, pack_runs);
    else pack_runs(0, k_blocks * runs);
  }
  // B row-major in the compute type, with AVX-512, and a K chunk of it (kc x N) in half of L2: the
  // micro-kernel reads B where it lies, kc rows of NR, and saves the copy and the wait for it. On
  // a 2-core Xeon (2 MiB L2), 2 threads, that gave the step's products 4-27% more GFLOP/s than
  // packed B (256x257x192 nn: 264 -> 335). A larger B is packed: read in place, its rows (row
  // stride apart) compete for few cache sets (4 KiB apart: 64 of L2's 2048 sets) and come from L3
  // each time; unpacked, 2048x512x2048 ran at 179 GFLOP/s instead of 421, 1024x1536x1536 at 200
  // instead of 398, 1000^3 at 350 instead of 409. The AVX2 kernel packs (but for one row
  // panel, below): it wants a row every 6 cycles and slowed to a third unpacked at 4096 squares.
  // With few rows, B is read only a few times and packing it costs more than it saves, even when
  // it is large, unless its rows are a multiple of 2 KiB apart and it is read more than once
  // (2 threads, in place vs packed, GFLOP/s): one row panel, 9x700x2000 114 vs 73, 1x4096x4096
  // 10.1 vs 8.5; up to 8 panels, 28x768x768 368 vs 219, 64x768x3072 288 vs 262; but 42x4096x1024
  // 154 vs 229 and 64x2048x2048 138 vs 270; at 10-19 panels (128-256 rows) both are within 5%.
  // One row panel (M <= MR, as in a decoding step's x W^T) reads B once whatever is done, so B is
  // never packed whole there: it is read in place when it can be (the AVX2 kernel too), and
  // otherwise each panel of B is packed right before the micro-kernel reads it, into a buffer of
  // one K chunk that stays in L1/L2. Packed whole, B was written out and read back from L3 or
  // memory: 2 threads on Zen 3, 1x2048x2048 took 0.91 ms as x W^T (now 0.43) and 1.06 ms with B
  // row-major (now 0.21; PyTorch 0.33 and 0.48).
  const bool one_panel = row_panels == 1;
  const int64_t b_row_bytes = b.row_stride * int64_t(sizeof(T));
  const bool few_rows = one_panel || (row_panels <= 8 && b_row_bytes % 2048 != 0);
  // (In place on AVX2 only for one or two rows, on micro_kernel_wide and, for a last, narrower
  // group of panels, the one- and two-row micro_kernel: the full-height AVX2 micro_kernel always
  // reads packed panels, ldb == NR, and GCC 12 compiles it to the measured, register-only loop
  // only when it can see that.)
  const bool b_chunk_fits = std::min(k, KC) * n * int64_t(sizeof(T)) <= blocks.direct_b_bytes;
  // The micro-kernels take B's rows NR apart for packed panels and load them whole, so B in place
  // whose rows happen to be NR apart must have whole panels: a narrower last one (a view of fewer
  // columns) would be read past its columns, past the end of B's memory in its last row.
  const bool stride_like_panel = b.row_stride == NR && n % NR != 0;
  const bool direct_b = std::is_same_v<S, T> && b.col_stride == 1 && !stride_like_panel &&
                        ((one_panel && (kReadBInPlace || m <= 2)) || (kReadBInPlace && (few_rows || b_chunk_fits)));
  // A few rows shared by every task (a decoding step of a small batch): B streamed as for one
  // panel, each panel of it (or, x W^T, each group of W's lines, on micro_kernel_lines) used by
  // all the row panels right after it is read, and not packed whole, written out to L3 and read
  // back once per row panel. On a 2-core Zen 3, 2 threads, x W^T: 8 x 151936 x 1024 took 33-36 ms
  // instead of 43-57, 8 x 5632 x 1024 1.15-1.35 instead of 1.5-2.3, 24 x 5632 x 1024 2.6 instead
  // of 3.2-3.4, 32 x 5632 x 1024 4.0-4.4 instead of 4.7-5.2; from 48 rows on, packed B was as fast
  // or faster (120 x 3072 x 1024: 5.0-6.3 ms against 7.8-8.8).
  const bool stream_b = !direct_b && (one_panel || (shared_a && m <= kStreamRows));
  // Streamed rows (a few row panels, or one) against B's columns as lines along K (x W^T), f32 or
  // bf16: micro_kernel_lines reads them where they lie, W columns at a time, for each row panel in
  // turn (the second finds them in L1 or L2); a last, narrower group is packed.
  constexpr bool kLinesKernel = std::is_same_v<Kernel, float> && (std::is_same_v<S, float> || std::is_same_v<S, bf16>);
  const bool lines_b = kLinesKernel && stream_b && b.row_stride == 1;
  const Elem* b_direct = nullptr;
  if constexpr (std::is_same_v<S, Elem>) b_direct = b.data;
  // Packed B shared by the threads, each packing some of its panels and every row tile reading
  // all of them, is written each call where the other core's cache holds it from the last: on a
  // 2-core Xeon (AVX-512), 2 threads, packing B took 4 times as long per element as on one thread
  // (pack_lines_transposed: 17% of the micro-kernels' time, against 4%), and the threads then
  // waited for each other between packing and the tiles. With two threads and a small packed B
  // (a copy in a quarter of L2), each thread takes one row tile instead and packs the whole of B
  // into its own buffer first. The training step's products as x W^T, 2 threads, ms: 256 x 257 x
  // 128 0.082-0.084 -> 0.076-0.077, 256 x 128 x 257 0.082 -> 0.068, 1024 x 128 x 128 0.124-0.126
  // -> 0.111-0.112, 1024 x 192 x 192 0.258 -> 0.239-0.245, 1024 x 320 x 192 0.425 -> 0.393-0.398.
  // With copies up to half of L2, 512^3 took 0.955-0.981 ms instead of 0.927 (1 MiB of B, its
  // copy and a tile's A no longer in L2 together). The sums, and so the bits, are the same: tiles
  // only split rows. A tile's packed A (its rows x a K chunk) must fit where MC rows of a whole
  // chunk do.
  const bool private_b = split && threads <= kPrivateBThreads && !direct_b && !stream_b && !shared_a &&
                         depth(k) * n * int64_t(sizeof(Elem)) <= blocks.direct_b_bytes / 2 &&
                         (row_panels + threads - 1) / threads * MR * depth(std::min(k, KC)) <= MC * depth(KC);
  if (private_b) row_tiles = threads;
  // Columns per block: packed B (k x nc) under packed_b_bytes, a multiple of NR.
  const int64_t packed_columns = blocks.packed_b_bytes / int64_t(sizeof(Elem)) / depth(k) / NR * NR;
  const int64_t nc_max = direct_b || stream_b || private_b ? n : std::max<int64_t>(NR, packed_columns);

  for (int64_t jc = 0; jc < n; jc += nc_max) {
    const int64_t nc = std::min(nc_max, n - jc);
    const int64_t panels = (nc + NR - 1) / NR;
    // Packed B, by K chunk, then by panel: chunk p starts at depth(p * KC) * panels * NR and holds
    // `panels` panels of depth(kc) x NR.
    // Panels q0 to q1 of B into `to`, a buffer of all the panels.
    auto pack_b = [&](Elem* to, int64_t q0, int64_t q1) {
      const int64_t j0 = jc + q0 * NR, cols = std::min(q1 * NR, nc) - q0 * NR;
      for (int64_t p = 0; p < k_blocks; ++p) {
        const int64_t k0 = p * KC, kc = std::min(KC, k - k0);
        pack_kernel_panels<NR, Kernel>(to + depth(k0) * panels * NR + q0 * depth(kc) * NR,
                                       b.data + k0 * b.row_stride + j0 * b.col_stride, b.col_stride, b.row_stride,
                                       cols, kc);
      }
    };
    std::optional<Buffer<Elem>> packed_b;
    if (!direct_b && !stream_b && !private_b) {
      packed_b.emplace(panels * NR * depth(k));
      auto pack_shared = [&](int64_t q0, int64_t q1) { pack_b(packed_b->get(), q0, q1); };
      if (split) parallel_for(panels, std::clamp<int64_t>(panels / (2 * threads), 1, 8), pack_shared);
      else pack_shared(0, panels);
    }

    // Tasks: row tiles x column tiles; columns are split only when there are too few row tiles
    // to keep every thread busy.
    const int64_t col_tiles = std::min(panels, col_split);
    auto tile = [&](int64_t t) {
      const int64_t rt = t / col_tiles, ct = t % col_tiles;
      const int64_t i0 = part_begin(row_panels, row_tiles, rt) * MR;
      const int64_t mc = std::min(m, part_begin(row_panels, row_tiles, rt + 1) * MR) - i0;
      const int64_t j0 = part_begin(panels, col_tiles, ct) * NR;
      const int64_t j1 = std::min(nc, part_begin(panels, col_tiles, ct + 1) * NR);
      // With rows_a, full panels read A's rows in place and only a last, short panel is packed.
      const int64_t full_rows = rows_a ? mc / MR * MR : 0;
      std::optional<Buffer<Elem>> own_a, own_b, own_packed_b;
      if (private_b) {
        own_packed_b.emplace(panels * NR * depth(k));
        pack_b(own_packed_b->get(), 0, panels);
      }
      const Elem* whole_b = private_b ? own_packed_b->get() : packed_b ? packed_b->get() : nullptr;
      if (!shared_a && full_rows < mc) own_a.emplace((mc - full_rows + MR - 1) / MR * MR * depth(std::min(k, KC)));
      if (stream_b) own_b.emplace(kWidePanels * NR * depth(std::min(k, KC)));
      // Panels of B per micro-kernel call: with one row panel of one or two rows, several
      // (micro_kernel_wide); otherwise one.
      const int64_t group = one_panel && mc <= 2 ? kWidePanels / mc : 1;
      // The columns from j_packed on go through panels of B (packed, streamed or in place); before
      // them, with lines_b, groups of W columns go through micro_kernel_lines.
      int64_t j_packed = j0;
      constexpr int64_t W = Simd<float>::kWidth;
      if (lines_b) j_packed = j0 + (j1 - j0) / W * W;
      // `group` panels of B from column jr against K chunk p: C's columns there get the chunk's
      // sums, added in (or, for the first chunk, stored).
      // A's packed panels for K chunk p: the shared A's chunk, or this tile's own (packed per chunk).
      auto chunk_a_at = [&](int64_t p) -> const Elem* {
        return shared_a ? whole_a->get() + depth(p * KC) * row_panels * MR : own_a ? own_a->get() : nullptr;
      };
      auto panels_step = [&](int64_t p, int64_t jr) {
        const int64_t k0 = p * KC, kc = std::min(KC, k - k0);
        const Elem* chunk_a = chunk_a_at(p);
        const T* rows_of_a = nullptr;  // with rows_a: A's rows of this tile, from column k0
        if constexpr (std::is_same_v<S, T>)
          if (rows_a) rows_of_a = a.data + i0 * a.row_stride + k0;
        const int64_t cols = std::min(group * NR, j1 - jr);
        const Elem* panel_b = direct_b ? b_direct + k0 * b.row_stride + jc + jr
                              : stream_b ? own_b->get()
                                         : whole_b + depth(k0) * panels * NR + jr * depth(kc);
        if (stream_b)
          pack_kernel_panels<NR, Kernel>(own_b->get(), b.data + k0 * b.row_stride + (jc + jr) * b.col_stride,
                                         b.col_stride, b.row_stride, cols, kc);
        T* c_panel = c + i0 * n + jc + jr;
        const bool first = p == 0 && !accumulate;
        if (group > 1) {  // one row panel of mc <= 2 rows (shared A)
          const int64_t panel_stride = direct_b ? NR : depth(kc) * NR, ldb = direct_b ? b.row_stride : NR;
          if (cols == group * NR && mc == 1)
            micro_kernel_wide<Kernel, 1>(depth(kc), chunk_a, panel_b, panel_stride, ldb, c_panel, n, first);
          else if (cols == group * NR)
            micro_kernel_wide<Kernel, 2>(depth(kc), chunk_a, panel_b, panel_stride, ldb, c_panel, n, first);
          else  // a last, narrower group: panel by panel
            for (int64_t g = 0; g * NR < cols; ++g)
              micro_kernel_rows<Kernel>(depth(kc), chunk_a, panel_b + g * panel_stride, ldb, c_panel + g * NR, n, mc,
                                        std::min(NR, cols - g * NR), first);
          return;
        }
        // Without kReadBInPlace (AVX2), B is in place only for one panel of one or two rows, which
        // the branch above takes (group > 1): here it is always packed.
        static_assert(kWidePanels / 2 > 1);
        const int64_t ldb = kReadBInPlace && direct_b ? b.row_stride : NR;
        if constexpr (kHasRowsAKernel<T> && std::is_same_v<Elem, T>)
          for (int64_t ir = 0; ir < full_rows; ir += MR)
            micro_kernel_in_place_a<T>(kc, rows_of_a + ir * a.row_stride, a.row_stride, panel_b, ldb, c_panel + ir * n,
                                       n, cols, first);
        for (int64_t ir = full_rows; ir < mc; ir += MR)
          micro_kernel_rows<Kernel>(depth(kc), chunk_a + (ir - full_rows) * depth(kc), panel_b, ldb, c_panel + ir * n, n,
                                    std::min(MR, mc - ir), cols, first);
      };
      if (one_panel || stream_b) {
        // One row panel, or a few rows streaming B (shared A, packed whole): each group of
        // columns (with lines_b, for each row panel in turn) runs all of K, chunk after
        // chunk, before the next group. The sums and their order are those of the chunk-major
        // order below (each chunk's sum is added to C in turn), but B's lines along K (x W^T) are
        // read start to end in one pass: chunk by chunk across all of B, each line was visited
        // once per chunk, far apart. On a 2-core Zen 3, 1 x 151936 x 1024 as x W^T (a vocabulary's
        // head) went from 26-32 to 20-22 ms on two threads (bf16: 27-33 to 18-21), 49 to 37-40 on
        // one, and greedy decoding of qwen1.5-0.5b's shape (f32, random weights) from 11.9-12.2 to
        // 15.6-15.7 tokens/s on two threads, 7.1 to 8.8 on one; smaller B, in L3, ran as fast.
        // Each call fetches the start of the next one's lines: the same lines' next K chunk, or,
        // after the last chunk, the next group's first.
        if constexpr (kLinesKernel)
          for (int64_t jl = j0; jl < j_packed; jl += W)
            for (int64_t ir = 0; ir < mc; ir += MR)  // each row panel, kLinesRows rows at a time
              for (int64_t r0 = 0; r0 < std::min(MR, mc - ir); r0 += kLinesRows) {
                const int64_t rows = std::min({kLinesRows, MR - r0, mc - ir - r0});
                const LinesKernel<S> kernel = lines_kernel<S>(rows);
                const bool last_rows = ir + r0 + rows == mc;
                for (int64_t p = 0; p < k_blocks; ++p) {
                  const int64_t kc = std::min(KC, k - p * KC);
                  const S* lines = b.data + p * KC + (jc + jl) * b.col_stride;
                  const bool same_lines = p + 1 < k_blocks, next_group = !same_lines && last_rows && jl + W < j_packed;
                  const S* next = same_lines ? lines + KC : next_group ? b.data + (jc + jl + W) * b.col_stride : nullptr;
                  const int64_t next_kc = same_lines ? std::min(KC, k - (p + 1) * KC) : next_group ? std::min(KC, k) : 0;
                  kernel(kc, chunk_a_at(p) + ir * depth(kc) + r0, lines, b.col_stride, c + (i0 + ir + r0) * n + jc + jl,
                         n, p == 0 && !accumulate, next, next_kc);
                }
              }
        for (int64_t jr = j_packed; jr < j1; jr += group * NR)
          for (int64_t p = 0; p < k_blocks; ++p) panels_step(p, jr);
        return;
      }
      for (int64_t p = 0; p < k_blocks; ++p) {
        if (!shared_a && full_rows < mc) pack_a(own_a->get(), i0 + full_rows, mc - full_rows, p);
        for (int64_t jr = j_packed; jr < j1; jr += group * NR) panels_step(p, jr);
      }
    };
    const int64_t tiles = row_tiles * col_tiles;
    if (split) parallel_for(tiles, 1, [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) tile(t);
    });
    else for (int64_t t = 0; t < tiles; ++t) tile(t);
  }
}

// The multiply-adds a product counts as when deciding whether to split it across threads. One
// of fewer than MR rows is bound by reading B, not by its FMAs: it costs about what a whole row
// panel would, and is split as one.
int64_t product_work(int64_t m, int64_t n, int64_t k) { return std::max(m, kMR) * n * k; }

template <class S>
void matmul_batch(const Tensor& a, const Tensor& b, const Tensor& out, int64_t m, int64_t n, int64_t k) {
  using T = compute_t<S>;
  const int64_t nd = a.dim();
  const auto a_offsets = batch_offsets(a, nd - 2), b_offsets = batch_offsets(b, nd - 2);
  const S* a_data = a.data<S>();
  const S* b_data = b.data<S>();
  // Read here, on the calling thread: a COTAN_GEMM_BF16 this build cannot honour is an error.
  [[maybe_unused]] const bool pairs = std::is_same_v<S, bf16> && bf16_pairs();
  const ComputeOutput<S> c(out);
  for_each_product(int64_t(a_offsets.size()), product_work(m, n, k), [&](int64_t i, bool split) {
    Operand<S> ai{a_data + a_offsets[size_t(i)], a.strides()[size_t(nd - 2)], a.strides()[size_t(nd - 1)]};
    Operand<S> bi{b_data + b_offsets[size_t(i)], b.strides()[size_t(nd - 2)], b.strides()[size_t(nd - 1)]};
#ifdef __AVX512BF16__
    if constexpr (std::is_same_v<S, bf16>)
      if (pairs) return packed_gemm<T, S, Bf16Pairs>(ai, bi, c.data() + i * m * n, m, n, k, split);
#endif
    packed_gemm<T, S>(ai, bi, c.data() + i * m * n, m, n, k, split);
  });
  c.finish();
}

// C += A B for one product into a contiguous C, the GEMM adding its K blocks to C.
template <class T>
void matmul_accumulate_packed(const Tensor& a, const Tensor& b, const Tensor& c) {
  const int64_t m = a.size(0), k = a.size(1), n = b.size(1);
  Operand<T> ai{a.data<T>(), a.strides()[0], a.strides()[1]};
  Operand<T> bi{b.data<T>(), b.strides()[0], b.strides()[1]};
  packed_gemm<T, T>(ai, bi, c.data<T>(), m, n, k, product_work(m, n, k) >= kParallelWork, true);
}

#else  // no AVX2 + FMA: Eigen

// ---- Eigen GEMM ----

// Output rows per Eigen product: a constant, so the blocks never depend on the thread count.
constexpr int64_t kEigenRows = 128;

// How a matrix's strides map onto Eigen: row-major (unit column stride) or column-major (unit
// row stride) with a leading dimension; neither means a copy.
struct Layout {
  bool row_major;
  int64_t leading;
};
std::optional<Layout> layout_of(int64_t rows, int64_t cols, int64_t row_stride, int64_t col_stride) {
  switch (operand_layout(rows, cols, row_stride, col_stride)) {
    case 'n': return Layout{true, rows == 1 ? cols : row_stride};
    case 't': return Layout{false, cols == 1 ? rows : col_stride};
    default: return std::nullopt;
  }
}

// A copy of x converted to T, its last two dims row-major; batch dims of stride 0 keep stride 0,
// so a broadcast operand is copied once.
template <class T, class S>
Tensor compact_copy(const Tensor& x) {
  const int64_t nd = x.dim(), rows = x.shape()[size_t(nd - 2)], cols = x.shape()[size_t(nd - 1)];
  Shape distinct = x.shape();  // broadcast batch dims cut to 1
  for (int64_t d = 0; d < nd - 2; ++d)
    if (x.strides()[size_t(d)] == 0) distinct[size_t(d)] = 1;
  const Tensor src = x.as_strided(distinct, x.strides(), x.offset());
  Tensor dense = Tensor::empty(distinct, dtype_v<T>);
  const auto src_offsets = batch_offsets(src, nd - 2);
  const S* s = src.data<S>();
  T* dst = dense.data<T>();
  const int64_t rs = x.strides()[size_t(nd - 2)], cs = x.strides()[size_t(nd - 1)];
  parallel_for(int64_t(src_offsets.size()), 1, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      const S* from = s + src_offsets[size_t(i)];
      T* to = dst + i * rows * cols;
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c) to[r * cols + c] = T(from[r * rs + c * cs]);
    }
  });
  Strides strides = dense.strides();
  for (int64_t d = 0; d < nd - 2; ++d)
    if (x.strides()[size_t(d)] == 0) strides[size_t(d)] = 0;
  return dense.as_strided(x.shape(), strides, 0);
}

template <class T, int Order>
using ConstMap = Eigen::Map<const Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Order>, Eigen::Unaligned,
                            Eigen::OuterStride<>>;
template <class T>
using RowMajorMap = Eigen::Map<Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>, Eigen::Unaligned,
                               Eigen::OuterStride<>>;

// C[M x N] = A B over row blocks of kEigenRows; A row-major when OrderA is RowMajor, etc.
template <class T, int OrderA, int OrderB>
void eigen_gemm(const T* a, int64_t lda, const T* b, int64_t ldb, T* c, int64_t m, int64_t n, int64_t k, bool split) {
  ConstMap<T, OrderB> bm(b, k, n, Eigen::OuterStride<>(ldb));
  auto block = [&](int64_t r0, int64_t r1) {
    for (int64_t i0 = r0; i0 < r1; i0 += kEigenRows) {
      const int64_t rows = std::min(kEigenRows, r1 - i0);
      ConstMap<T, OrderA> am(a + i0 * (OrderA == Eigen::RowMajor ? lda : 1), rows, k, Eigen::OuterStride<>(lda));
      RowMajorMap<T> cm(c + i0 * n, rows, n, Eigen::OuterStride<>(n));
      cm.noalias() = am * bm;
    }
  };
  if (split) parallel_for(m, kEigenRows, block);
  else block(0, m);
}

template <class S>
void matmul_batch(const Tensor& a_in, const Tensor& b_in, const Tensor& out, int64_t m, int64_t n, int64_t k) {
  using T = compute_t<S>;
  const int64_t nd = a_in.dim();
  auto mapped = [&](const Tensor& x, int64_t rows, int64_t cols) {
    const int64_t rs = x.strides()[size_t(nd - 2)], cs = x.strides()[size_t(nd - 1)];
    bool copy = !std::is_same_v<S, T> || !layout_of(rows, cols, rs, cs);
    return copy ? compact_copy<T, S>(x) : x;
  };
  if constexpr (std::is_same_v<S, bf16>) bf16_pairs();  // a COTAN_GEMM_BF16 this build cannot honour is an error
  const Tensor a = mapped(a_in, m, k), b = mapped(b_in, k, n);
  const Layout la = *layout_of(m, k, a.strides()[size_t(nd - 2)], a.strides()[size_t(nd - 1)]);
  const Layout lb = *layout_of(k, n, b.strides()[size_t(nd - 2)], b.strides()[size_t(nd - 1)]);
  const auto a_offsets = batch_offsets(a, nd - 2), b_offsets = batch_offsets(b, nd - 2);
  const T* a_data = a.data<T>();
  const T* b_data = b.data<T>();
  const ComputeOutput<S> c(out);
  auto run = [&]<int OrderA, int OrderB>() {
    for_each_product(int64_t(a_offsets.size()), m * n * k, [&](int64_t i, bool split) {
      eigen_gemm<T, OrderA, OrderB>(a_data + a_offsets[size_t(i)], la.leading, b_data + b_offsets[size_t(i)],
                                    lb.leading, c.data() + i * m * n, m, n, k, split);
    });
  };
  constexpr int R = Eigen::RowMajor, C = Eigen::ColMajor;
  if (la.row_major && lb.row_major) run.template operator()<R, R>();
  else if (la.row_major) run.template operator()<R, C>();
  else if (lb.row_major) run.template operator()<C, R>();
  else run.template operator()<C, C>();
  c.finish();
}

#endif  // COTAN_PACKED_GEMM

}  // namespace

GemmInfo gemm_info() {
#ifdef COTAN_PACKED_GEMM
#ifdef __AVX512F__
  constexpr const char* kKernel = "avx512";
#else
  constexpr const char* kKernel = "avx2+fma";
#endif
  const Blocking& blocks = blocking<float>();
  const CacheSizes& caches = cache_sizes();
  return {.kernel = kKernel, .mr = kMR, .nr_f32 = kNR<float>, .kc_f32 = blocks.kc, .mc_f32 = blocks.mc,
          .bf16 = bf16_pairs() ? "avx512_bf16" : "f32", .bf16_kernels = kBf16Kernels,
          .l2_bytes = caches.l2, .l3_bytes = caches.l3, .l2_source = caches.l2_source, .l3_source = caches.l3_source};
#else
  GemmInfo info;
  info.kernel = "eigen";
  info.bf16 = bf16_pairs() ? "avx512_bf16" : "f32";
  info.bf16_kernels = kBf16Kernels;
  return info;
#endif
}

void CpuBackend::matmul_accumulate_kernel(const Tensor& a, const Tensor& b, const Tensor& c) {
  check(a.device().is_cpu() && b.device().is_cpu() && c.device().is_cpu(), "matmul_accumulate", "expects CPU tensors");
#ifdef COTAN_PACKED_GEMM
  if (a.dtype() == DType::f32) {
    matmul_accumulate_packed<float>(a, b, c);
    return;
  }
  if (a.dtype() == DType::f64) {
    matmul_accumulate_packed<double>(a, b, c);
    return;
  }
#endif
  Backend::matmul_accumulate_kernel(a, b, c);  // bf16 (a wide buffer per product) and the Eigen path
}

Tensor CpuBackend::matmul_kernel(const Tensor& a, const Tensor& b) {
  check(a.device().is_cpu() && b.device().is_cpu(), "matmul", "expects CPU tensors, got ", a.device(), " and ",
        b.device());
  const int64_t nd = a.dim();  // shapes and dtypes checked by Backend::matmul
  const Shape& as = a.shape();
  const Shape& bs = b.shape();
  const int64_t m = as[size_t(nd - 2)], k = as[size_t(nd - 1)], n = bs[size_t(nd - 1)];

  Shape out_shape(as.begin(), as.end() - 1);
  out_shape.push_back(n);
  Tensor out = Tensor::empty(out_shape, a.dtype());
  if (out.numel() == 0) return out;
  if (k == 0) {  // empty sums: zero bits are 0.0 in every floating dtype
    std::memset(out.data_ptr(), 0, out.nbytes());
    return out;
  }
  switch (a.dtype()) {
    case DType::f32: matmul_batch<float>(a, b, out, m, n, k); break;
    case DType::f64: matmul_batch<double>(a, b, out, m, n, k); break;
    case DType::bf16: matmul_batch<bf16>(a, b, out, m, n, k); break;
    default: break;
  }
  return out;
}

}  // namespace cotan::cpu
