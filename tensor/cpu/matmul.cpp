// CPU matmul: [B..., M, K] x [B..., K, N] -> [B..., M, N], a fresh contiguous tensor.
//
// Two GEMMs, chosen at compile time:
//   - with AVX2 and FMA, a packed GEMM in the GotoBLAS/BLIS style: B is packed into panels of
//     NR columns (shared by all threads), A into panels of MR rows (one block per task), and a
//     register-blocked MR x NR micro-kernel runs over them. Packing reads any strides and
//     converts bf16 to f32, so no operand is ever copied whole. Eigen's single-threaded GEMM
//     reaches about 60% of OpenBLAS here; this kernel matches it (bench/torch_reference.py).
//   - otherwise Eigen's GEMM over fixed blocks of output rows; operands are mapped row- or
//     column-major through their strides, and copied only when they are neither.
//
// Determinism: the same bits whatever the thread count. Packed: K is cut into fixed chunks of KC
// (a constant per dtype); an output element is the micro-kernel's sequential FMA sum over each
// chunk, added to C chunk by chunk in order; how rows, columns and batches are spread across
// tasks never changes that sum. Eigen: the row blocks depend only on the shapes, and Eigen's own
// blocking only on each block's shape.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <optional>
#include <type_traits>
#include <vector>

#include <tbb/global_control.h>
#include <tbb/task_arena.h>

#include "tensor/cpu/backend.hpp"
#include "tensor/cpu/parallel.hpp"

#if defined(__AVX2__) && defined(__FMA__)
#define COTAN_PACKED_GEMM 1
#include <immintrin.h>
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

// 64-byte aligned scratch memory, uninitialised.
template <class T>
class Buffer {
 public:
  explicit Buffer(int64_t n) : data_(static_cast<T*>(::operator new(size_t(n) * sizeof(T), std::align_val_t(64)))) {}
  ~Buffer() { ::operator delete(data_, std::align_val_t(64)); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  T* get() const { return data_; }

 private:
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

#ifdef COTAN_PACKED_GEMM

// ---- packed GEMM (AVX2 + FMA) ----

// Threads a parallel loop may use: the arena's, capped by tbb::global_control (set_num_threads).
int64_t worker_threads() {
  return std::min<int64_t>(tbb::this_task_arena::max_concurrency(),
                           int64_t(tbb::global_control::active_value(tbb::global_control::max_allowed_parallelism)));
}

// One AVX2 register of T and the operations the micro-kernel uses. A micro-tile is MR rows of
// two registers each: NR = 2 * kWidth columns, 12 accumulators.
template <class T> struct Simd;
template <> struct Simd<float> {
  using V = __m256;
  static constexpr int64_t kWidth = 8;
  static V zero() { return _mm256_setzero_ps(); }
  static V load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, V v) { _mm256_storeu_ps(p, v); }
  static V broadcast(const float* p) { return _mm256_broadcast_ss(p); }
  static V fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static V add(V a, V b) { return _mm256_add_ps(a, b); }
};
template <> struct Simd<double> {
  using V = __m256d;
  static constexpr int64_t kWidth = 4;
  static V zero() { return _mm256_setzero_pd(); }
  static V load(const double* p) { return _mm256_loadu_pd(p); }
  static void store(double* p, V v) { _mm256_storeu_pd(p, v); }
  static V broadcast(const double* p) { return _mm256_broadcast_sd(p); }
  static V fma(V a, V b, V c) { return _mm256_fmadd_pd(a, b, c); }
  static V add(V a, V b) { return _mm256_add_pd(a, b); }
};

// Blocking. KC fixes the summation order (see the header); MC rows of packed A (MC x KC) stay in
// L2, a KC x NR panel of packed B in L1; packed B for one column block (K x nc) is kept under
// kPackedBBytes (half the L3 of this 2-core Zen3): each column block repacks A.
template <class T>
struct Blocking {
  static constexpr int64_t MR = 6;
  static constexpr int64_t NR = 2 * Simd<T>::kWidth;
  static constexpr int64_t KC = 256;
  static constexpr int64_t MC = sizeof(T) == 8 ? 96 : 144;  // 144 x 256 f32, 96 x 256 f64: under half of L2
};
constexpr int64_t kPackedBBytes = int64_t(16) << 20;

// C[MR x NR] = (first ? 0 : C) + sum over k < kc of a[k][i] * b[k][j], for the rows x cols
// corner of the tile that lies inside C. a: kc x MR packed, b: kc x NR packed.
template <class T>
void micro_kernel(int64_t kc, const T* __restrict a, const T* __restrict b, T* c, int64_t ldc, int64_t rows,
                  int64_t cols, bool first) {
  using S = Simd<T>;
  using V = typename S::V;
  constexpr int64_t MR = Blocking<T>::MR, NR = Blocking<T>::NR, W = S::kWidth;
  if (!first)  // C is read at the end: fetch it while the sum runs
    for (int64_t i = 0; i < rows; ++i) {
      _mm_prefetch(reinterpret_cast<const char*>(c + i * ldc), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(c + i * ldc + cols - 1), _MM_HINT_T0);
    }
  // Named accumulators: an array here makes GCC keep them in memory.
  V c00 = S::zero(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00;
  V c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
  for (int64_t k = 0; k < kc; ++k, a += MR, b += NR) {
    V b0 = S::load(b), b1 = S::load(b + W), ai;
    ai = S::broadcast(a + 0), c00 = S::fma(ai, b0, c00), c01 = S::fma(ai, b1, c01);
    ai = S::broadcast(a + 1), c10 = S::fma(ai, b0, c10), c11 = S::fma(ai, b1, c11);
    ai = S::broadcast(a + 2), c20 = S::fma(ai, b0, c20), c21 = S::fma(ai, b1, c21);
    ai = S::broadcast(a + 3), c30 = S::fma(ai, b0, c30), c31 = S::fma(ai, b1, c31);
    ai = S::broadcast(a + 4), c40 = S::fma(ai, b0, c40), c41 = S::fma(ai, b1, c41);
    ai = S::broadcast(a + 5), c50 = S::fma(ai, b0, c50), c51 = S::fma(ai, b1, c51);
  }
  const V acc[MR][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31}, {c40, c41}, {c50, c51}};
  if (rows == MR && cols == NR) {
    for (int64_t i = 0; i < MR; ++i) {
      T* ci = c + i * ldc;
      V lo = first ? acc[i][0] : S::add(S::load(ci), acc[i][0]);
      V hi = first ? acc[i][1] : S::add(S::load(ci + W), acc[i][1]);
      S::store(ci, lo);
      S::store(ci + W, hi);
    }
    return;
  }
  alignas(64) T tile[MR * NR];
  for (int64_t i = 0; i < MR; ++i) {
    S::store(tile + i * NR, acc[i][0]);
    S::store(tile + i * NR + W, acc[i][1]);
  }
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) c[i * ldc + j] = first ? tile[i * NR + j] : c[i * ldc + j] + tile[i * NR + j];
}

// Packs `lines` lines of kc elements into panels of P lines: line l, element k goes to
// dst[(l / P) * kc * P + k * P + l % P], read from src[l * line_stride + k * step] and converted
// to T; the last panel is padded with zeros. A panels: lines are rows of A (step along K);
// B panels: lines are columns of B.
template <int64_t P, class T, class S>
void pack_panels(T* __restrict dst, const S* src, int64_t line_stride, int64_t step, int64_t lines, int64_t kc) {
  const int64_t full = lines / P, rest = lines % P;
  if (line_stride == 1) {  // the lines are adjacent: copy runs of P, row by row (B row-major)
    for (int64_t k = 0; k < kc; ++k) {
      const S* row = src + k * step;
      for (int64_t q = 0; q < full; ++q)
        for (int64_t i = 0; i < P; ++i) dst[q * kc * P + k * P + i] = T(row[q * P + i]);
      for (int64_t i = 0; i < rest; ++i) dst[full * kc * P + k * P + i] = T(row[full * P + i]);
    }
  } else {
    for (int64_t q = 0; q < full; ++q) {
      T* panel = dst + q * kc * P;
      const S* first = src + q * P * line_stride;
      if (step == 1) {  // each line is contiguous (A row-major): P streams, read in step
        for (int64_t k = 0; k < kc; ++k)
          for (int64_t i = 0; i < P; ++i) panel[k * P + i] = T(first[i * line_stride + k]);
      } else {
        for (int64_t k = 0; k < kc; ++k)
          for (int64_t i = 0; i < P; ++i) panel[k * P + i] = T(first[i * line_stride + k * step]);
      }
    }
    for (int64_t k = 0; k < kc; ++k)
      for (int64_t i = 0; i < rest; ++i)
        dst[full * kc * P + k * P + i] = T(src[(full * P + i) * line_stride + k * step]);
  }
  if (rest)
    for (int64_t k = 0; k < kc; ++k)
      for (int64_t i = rest; i < P; ++i) dst[full * kc * P + k * P + i] = T(0);
}

// Part p of `total` units cut into `parts` nearly equal ranges: [part_begin(p), part_begin(p + 1)).
int64_t part_begin(int64_t total, int64_t parts, int64_t p) { return total * p / parts; }

// C[M x N] (row-major, leading dimension N) = A B, T the compute type, S the stored type.
template <class T, class S>
void packed_gemm(Operand<S> a, Operand<S> b, T* c, int64_t m, int64_t n, int64_t k, bool split) {
  using B = Blocking<T>;
  constexpr int64_t MR = B::MR, NR = B::NR, KC = B::KC, MC = B::MC;
  const int64_t k_blocks = (k + KC - 1) / KC;
  const int64_t threads = split ? worker_threads() : 1;
  // Row tiles of at most MC rows, whole panels each, as many as a multiple of the thread count.
  const int64_t row_panels = (m + MR - 1) / MR;
  int64_t row_tiles = (row_panels + MC / MR - 1) / (MC / MR);
  row_tiles = std::min(row_panels, (row_tiles + threads - 1) / threads * threads);
  // Columns per block: packed B (k x nc) under kPackedBBytes, a multiple of NR.
  const int64_t nc_max = std::max<int64_t>(NR, kPackedBBytes / int64_t(sizeof(T)) / k / NR * NR);

  for (int64_t jc = 0; jc < n; jc += nc_max) {
    const int64_t nc = std::min(nc_max, n - jc);
    const int64_t panels = (nc + NR - 1) / NR;
    // Packed B, by K chunk, then by panel: chunk p starts at p * KC * panels * NR and holds
    // `panels` panels of kc x NR.
    Buffer<T> packed_b(panels * NR * k);
    auto pack_b = [&](int64_t q0, int64_t q1) {
      const int64_t j0 = jc + q0 * NR, cols = std::min(q1 * NR, nc) - q0 * NR;
      for (int64_t p = 0; p < k_blocks; ++p) {
        const int64_t k0 = p * KC, kc = std::min(KC, k - k0);
        pack_panels<NR>(packed_b.get() + k0 * panels * NR + q0 * kc * NR, b.data + k0 * b.row_stride + j0 * b.col_stride,
                        b.col_stride, b.row_stride, cols, kc);
      }
    };
    if (split) parallel_for(panels, 8, pack_b);
    else pack_b(0, panels);

    // Tasks: row tiles x column tiles; columns are split only when there are too few row tiles
    // to keep every thread busy.
    const int64_t col_tiles = threads > 1 ? std::min(panels, std::max<int64_t>(1, 4 * threads / row_tiles)) : 1;
    auto tile = [&](int64_t t) {
      const int64_t rt = t / col_tiles, ct = t % col_tiles;
      const int64_t i0 = part_begin(row_panels, row_tiles, rt) * MR;
      const int64_t mc = std::min(m, part_begin(row_panels, row_tiles, rt + 1) * MR) - i0;
      const int64_t j0 = part_begin(panels, col_tiles, ct) * NR;
      const int64_t j1 = std::min(nc, part_begin(panels, col_tiles, ct + 1) * NR);
      Buffer<T> packed_a((mc + MR - 1) / MR * MR * std::min(k, KC));
      for (int64_t p = 0; p < k_blocks; ++p) {
        const int64_t k0 = p * KC, kc = std::min(KC, k - k0);
        pack_panels<MR>(packed_a.get(), a.data + i0 * a.row_stride + k0 * a.col_stride, a.row_stride, a.col_stride, mc,
                        kc);
        const T* chunk = packed_b.get() + k0 * panels * NR;
        for (int64_t jr = j0; jr < j1; jr += NR)
          for (int64_t ir = 0; ir < mc; ir += MR)
            micro_kernel<T>(kc, packed_a.get() + ir * kc, chunk + jr * kc, c + (i0 + ir) * n + jc + jr, n,
                            std::min(MR, mc - ir), std::min(NR, j1 - jr), p == 0);
      }
    };
    const int64_t tiles = row_tiles * col_tiles;
    if (split) parallel_for(tiles, 1, [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) tile(t);
    });
    else for (int64_t t = 0; t < tiles; ++t) tile(t);
  }
}

template <class S>
void matmul_batch(const Tensor& a, const Tensor& b, const Tensor& out, int64_t m, int64_t n, int64_t k) {
  using T = compute_t<S>;
  const int64_t nd = a.dim();
  const auto a_offsets = batch_offsets(a, nd - 2), b_offsets = batch_offsets(b, nd - 2);
  const S* a_data = a.data<S>();
  const S* b_data = b.data<S>();
  const ComputeOutput<S> c(out);
  for_each_product(int64_t(a_offsets.size()), m * n * k, [&](int64_t i, bool split) {
    Operand<S> ai{a_data + a_offsets[size_t(i)], a.strides()[size_t(nd - 2)], a.strides()[size_t(nd - 1)]};
    Operand<S> bi{b_data + b_offsets[size_t(i)], b.strides()[size_t(nd - 2)], b.strides()[size_t(nd - 1)]};
    packed_gemm<T, S>(ai, bi, c.data() + i * m * n, m, n, k, split);
  });
  c.finish();
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
  if ((cols == 1 || col_stride == 1) && (rows == 1 || row_stride >= cols))
    return Layout{true, rows == 1 ? cols : row_stride};
  if ((rows == 1 || row_stride == 1) && (cols == 1 || col_stride >= rows))
    return Layout{false, cols == 1 ? rows : col_stride};
  return std::nullopt;
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
