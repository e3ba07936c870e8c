// CPU matmul kernel (tensor/cpu/matmul.cpp) against a naive triple loop accumulated in long
// double: dtypes, transposed and sliced operands, broadcast batches, odd sizes, the edges of the
// micro-tile and of the K chunks, the parallel path, and the same bits with 1 and 2 threads.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <sys/mman.h>
#include <unistd.h>

#include <tbb/global_control.h>

#include "tensor/cpu/gemm_info.hpp"
#include "tensor/op_table.hpp"

using namespace cotan;

namespace {

std::mt19937_64 rng(20261129);

// A 1-D tensor of `capacity` uniform values in [-1, 1); the operands are views of it (as_strided).
template <class T>
Tensor random_storage(int64_t capacity) {
  Tensor t = Tensor::empty({capacity}, dtype_v<T>);
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  T* p = t.data<T>();
  for (int64_t i = 0; i < capacity; ++i) p[i] = convert<T>(dist(rng));
  return t;
}

template <class T>
Tensor random_tensor(const Shape& shape) {
  return random_storage<T>(numel(shape)).as_strided(shape, contiguous_strides(shape), 0);
}

// Checks `out` (contiguous) against sum_k a[.., i, k] b[.., k, j] computed in long double: every
// element within `tol` times sum_k |a_ik b_kj| (the scale of its rounding error).
template <class T>
void check_product(const Tensor& a, const Tensor& b, const Tensor& out, double tol) {
  const int64_t nd = a.dim(), m = a.size(-2), k = a.size(-1), n = b.size(-1);
  Shape expected_shape(a.shape().begin(), a.shape().end() - 1);
  expected_shape.push_back(n);
  REQUIRE(out.shape() == expected_shape);
  REQUIRE(out.dtype() == dtype_v<T>);
  REQUIRE(out.is_contiguous());
  const Strides& sa = a.strides();
  const Strides& sb = b.strides();
  const int64_t ar = sa[size_t(nd - 2)], ac = sa[size_t(nd - 1)], br = sb[size_t(nd - 2)], bc = sb[size_t(nd - 1)];
  const int64_t batches = numel(Shape(a.shape().begin(), a.shape().end() - 2));
  const T* o = out.data<T>();
  double worst = 0;
  for (int64_t bi = 0; bi < batches; ++bi) {
    int64_t a_off = 0, b_off = 0;
    for (int64_t d = nd - 3, rest = bi; d >= 0; --d) {
      const int64_t i = rest % a.shape()[size_t(d)];
      rest /= a.shape()[size_t(d)];
      a_off += i * sa[size_t(d)];
      b_off += i * sb[size_t(d)];
    }
    const T* pa = a.data<T>() + a_off;
    const T* pb = b.data<T>() + b_off;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        long double exact = 0, magnitude = 0;
        for (int64_t p = 0; p < k; ++p) {
          long double x = (long double)convert<double>(pa[i * ar + p * ac]) * convert<double>(pb[p * br + j * bc]);
          exact += x;
          magnitude += std::abs(x);
        }
        const double sum = double(exact), scale = double(magnitude);
        double got = convert<double>(o[(bi * m + i) * n + j]);
        double error = double(std::abs((long double)got - exact));
        // bf16 rounds an f32 sum to nearest: at most half an ulp, 2^-8 of the value, off.
        if constexpr (std::is_same_v<T, bf16>) error = std::max(0.0, error - std::ldexp(std::abs(sum), -8));
        worst = std::max(worst, error / std::max(scale, 1e-300));
      }
  }
  CHECK(worst <= tol);
}

template <class T> constexpr double tolerance = 0;
template <> constexpr double tolerance<float> = 1e-5;
template <> constexpr double tolerance<double> = 1e-12;
template <> constexpr double tolerance<bf16> = 1e-5;  // beyond the final rounding

template <class T>
void check_fresh(const Shape& a_shape, const Shape& b_shape) {
  Tensor a = random_tensor<T>(a_shape), b = random_tensor<T>(b_shape);
  check_product<T>(a, b, cpu_backend().matmul(a, b), tolerance<T>);
}

// [batch..., rows, cols] stored column-major in its last two dims: the transpose of a
// contiguous [batch..., cols, rows].
template <class T>
Tensor column_major(const Shape& shape) {
  const size_t nd = shape.size();
  Strides strides = contiguous_strides(shape);
  strides[nd - 2] = 1;
  strides[nd - 1] = shape[nd - 2];
  return random_storage<T>(numel(shape)).as_strided(shape, strides, 0);
}

std::vector<uint8_t> bytes(const Tensor& t) {
  std::vector<uint8_t> out(t.nbytes());
  std::memcpy(out.data(), t.data_ptr(), out.size());
  return out;
}

const int64_t kOddSizes[] = {1, 3, 17, 65, 130};

}  // namespace

TEST_CASE("matmul: odd sizes against a naive product, f32 f64 bf16") {
  for (int64_t m : kOddSizes)
    for (int64_t k : kOddSizes)
      for (int64_t n : kOddSizes) {
        CAPTURE(m);
        CAPTURE(k);
        CAPTURE(n);
        check_fresh<float>({m, k}, {k, n});
        check_fresh<double>({m, k}, {k, n});
        check_fresh<bf16>({m, k}, {k, n});
      }
}

TEST_CASE("matmul: batch sizes 1 to 5 and several batch dims") {
  for (int64_t batch = 1; batch <= 5; ++batch) {
    CAPTURE(batch);
    check_fresh<float>({batch, 17, 9}, {batch, 9, 33});
    check_fresh<double>({batch, 5, 65}, {batch, 65, 3});
    check_fresh<bf16>({batch, 30, 20}, {batch, 20, 10});
  }
  check_fresh<float>({2, 3, 7, 5}, {2, 3, 5, 4});
  check_fresh<float>({4, 1, 1}, {4, 1, 1});
}

TEST_CASE("matmul: operands transposed through their strides") {
  for (bool a_t : {false, true})
    for (bool b_t : {false, true}) {
      CAPTURE(a_t);
      CAPTURE(b_t);
      auto make = [](bool transposed, const Shape& shape) {
        return transposed ? column_major<float>(shape) : random_tensor<float>(shape);
      };
      for (Shape mkn : {Shape{17, 65, 3}, Shape{130, 1, 65}, Shape{64, 128, 96}}) {
        const int64_t m = mkn[0], k = mkn[1], n = mkn[2];
        Tensor a = make(a_t, {m, k}), b = make(b_t, {k, n});
        check_product<float>(a, b, cpu_backend().matmul(a, b), tolerance<float>);
        Tensor ab = make(a_t, {3, m, k}), bb = make(b_t, {3, k, n});
        check_product<float>(ab, bb, cpu_backend().matmul(ab, bb), tolerance<float>);
      }
      Tensor a = a_t ? column_major<double>({33, 20}) : random_tensor<double>({33, 20});
      Tensor b = b_t ? column_major<double>({20, 40}) : random_tensor<double>({20, 40});
      check_product<double>(a, b, cpu_backend().matmul(a, b), tolerance<double>);
      Tensor ah = a_t ? column_major<bf16>({2, 33, 20}) : random_tensor<bf16>({2, 33, 20});
      Tensor bh = b_t ? column_major<bf16>({2, 20, 40}) : random_tensor<bf16>({2, 20, 40});
      check_product<bf16>(ah, bh, cpu_backend().matmul(ah, bh), tolerance<bf16>);
    }
}

TEST_CASE("matmul: non-contiguous slices") {
  // Every other column of a [40, 2 * 27 + 3] buffer, from column 1: neither row- nor column-major.
  Tensor wide = random_storage<float>(40 * 57);
  Tensor a = wide.as_strided({40, 27}, {57, 2}, 1);
  Tensor b = random_tensor<float>({27, 19});
  check_product<float>(a, b, cpu_backend().matmul(a, b), tolerance<float>);
  // Rows with padding (leading dimension 57 > 27), and a column block of B.
  Tensor padded = wide.as_strided({40, 27}, {57, 1}, 5);
  Tensor b_wide = random_storage<float>(27 * 50);
  Tensor b_cols = b_wide.as_strided({27, 19}, {50, 1}, 7);
  check_product<float>(padded, b_cols, cpu_backend().matmul(padded, b_cols), tolerance<float>);
  // A batch slice with a step: batches 0, 2, 4 of a [5, 12, 9] tensor; B sliced along rows.
  Tensor batch5 = random_tensor<double>({5, 12, 9});
  Tensor every_other = batch5.as_strided({3, 12, 9}, {2 * 12 * 9, 9, 1}, 0);
  Tensor b_rows = random_storage<double>(3 * 18 * 6).as_strided({3, 9, 6}, {18 * 6, 12, 2}, 0);
  check_product<double>(every_other, b_rows, cpu_backend().matmul(every_other, b_rows), tolerance<double>);
  Tensor h = random_storage<bf16>(40 * 57).as_strided({40, 27}, {57, 2}, 1);
  Tensor hb = random_tensor<bf16>({27, 19});
  check_product<bf16>(h, hb, cpu_backend().matmul(h, hb), tolerance<bf16>);
}

TEST_CASE("matmul: broadcast batch dims (stride 0)") {
  // One weight [K, N] shared by 4 batches, and a [2, 3] batch where A repeats along the first dim.
  Tensor w = random_storage<float>(20 * 30).as_strided({4, 20, 30}, {0, 30, 1}, 0);
  Tensor x = random_tensor<float>({4, 17, 20});
  check_product<float>(x, w, cpu_backend().matmul(x, w), tolerance<float>);
  Tensor a = random_storage<double>(3 * 5 * 7).as_strided({2, 3, 5, 7}, {0, 35, 7, 1}, 0);
  Tensor b = random_tensor<double>({2, 3, 7, 4});
  check_product<double>(a, b, cpu_backend().matmul(a, b), tolerance<double>);
  // Broadcast and transposed at once.
  Tensor wt = random_storage<bf16>(20 * 30).as_strided({3, 20, 30}, {0, 1, 20}, 0);
  Tensor xh = random_tensor<bf16>({3, 6, 20});
  check_product<bf16>(xh, wt, cpu_backend().matmul(xh, wt), tolerance<bf16>);
}

TEST_CASE("matmul: shapes large enough for the parallel path") {
  check_fresh<float>({300, 520}, {520, 277});
  check_fresh<double>({257, 300}, {300, 130});
  check_fresh<bf16>({200, 260}, {260, 190});
  check_fresh<float>({8, 64, 64}, {8, 64, 64});  // many small products: one per task
  // Few rows, many columns: the columns are split across tasks.
  Tensor a = column_major<float>({7, 600});
  Tensor b = random_tensor<float>({600, 900});
  check_product<float>(a, b, cpu_backend().matmul(a, b), tolerance<float>);
}

// The packed GEMM's micro-tile is MR x NR (14 x 32 f32 and 14 x 16 f64 with AVX-512, 6 x 16 and
// 6 x 8 with AVX2) and K is summed in chunks of KC (256 to 1024, from the cache sizes): sizes
// around those multiples, with the rows, columns or sums of length 1.
TEST_CASE("matmul: edges of the micro-tile and of the K chunks") {
  for (int64_t m : {1, 2, 5, 6, 7, 13, 14, 15, 29})
    for (int64_t n : {1, 7, 8, 9, 15, 16, 17, 31, 32, 33, 65})
      for (int64_t k : {1, 2, 255, 257}) {
        CAPTURE(m);
        CAPTURE(n);
        CAPTURE(k);
        check_fresh<float>({m, k}, {k, n});
      }
  for (int64_t k : {511, 512, 513, 1023, 1025, 2100}) {
    CAPTURE(k);
    check_fresh<float>({29, k}, {k, 33});
    check_fresh<double>({15, k}, {k, 17});
    check_fresh<bf16>({13, k}, {k, 31});
    check_fresh<float>({1, k}, {k, 1});
    check_fresh<double>({3, k}, {k, 1});
    check_fresh<float>({1, k}, {k, 70});
  }
  // x W^T with a few rows (a decoding step of a small batch): B transposed, read as lines along K,
  // a row panel or a few at a time, K across chunks, and a last column group narrower than the
  // kernel's lines.
  for (int64_t m : {2, 7, 13, 20, 24, 25, 57})
    for (int64_t k : {255, 1025})
      for (int64_t n : {15, 33, 70}) {
        CAPTURE(m);
        CAPTURE(k);
        CAPTURE(n);
        const Tensor a = random_tensor<float>({m, k});
        const Tensor w = column_major<float>({k, n});
        check_product<float>(a, w, cpu_backend().matmul(a, w), tolerance<float>);
        const Tensor ah = random_tensor<bf16>({m, k});
        const Tensor wh = column_major<bf16>({k, n});
        check_product<bf16>(ah, wh, cpu_backend().matmul(ah, wh), tolerance<bf16>);
      }
}

TEST_CASE("matmul: transposed and strided operands across K chunks") {
  const int64_t m = 45, k = 1100, n = 67;
  for (bool a_t : {false, true})
    for (bool b_t : {false, true}) {
      CAPTURE(a_t);
      CAPTURE(b_t);
      Tensor a = a_t ? column_major<float>({m, k}) : random_tensor<float>({m, k});
      Tensor b = b_t ? column_major<float>({k, n}) : random_tensor<float>({k, n});
      check_product<float>(a, b, cpu_backend().matmul(a, b), tolerance<float>);
      Tensor ad = a_t ? column_major<double>({2, 17, k}) : random_tensor<double>({2, 17, k});
      Tensor bd = b_t ? column_major<double>({2, k, 20}) : random_tensor<double>({2, k, 20});
      check_product<double>(ad, bd, cpu_backend().matmul(ad, bd), tolerance<double>);
      Tensor ah = a_t ? column_major<bf16>({20, k}) : random_tensor<bf16>({20, k});
      Tensor bh = b_t ? column_major<bf16>({k, 40}) : random_tensor<bf16>({k, 40});
      check_product<bf16>(ah, bh, cpu_backend().matmul(ah, bh), tolerance<bf16>);
    }
  // Padded rows (leading dimensions past the row), and every other element along K.
  Tensor a_pad = random_storage<float>(m * 1111).as_strided({m, k}, {1111, 1}, 3);
  Tensor b_pad = random_storage<float>(k * 80).as_strided({k, n}, {80, 1}, 9);
  check_product<float>(a_pad, b_pad, cpu_backend().matmul(a_pad, b_pad), tolerance<float>);
  // Narrow products read A's rows in place (AVX2: N <= 320; AVX-512, f32: N <= 384 and K >= 256)
  // once A spans several row tiles: rows 1111 apart, a last short panel (301 rows), K chunks,
  // and a ragged last column panel of B read in place.
  Tensor a_rows = random_storage<float>(301 * 1111).as_strided({301, k}, {1111, 1}, 5);
  check_product<float>(a_rows, b_pad, cpu_backend().matmul(a_rows, b_pad), tolerance<float>);
  Tensor ad_rows = random_storage<double>(301 * 1111).as_strided({301, k}, {1111, 1}, 2);
  Tensor bd_narrow = random_tensor<double>({k, 250});
  check_product<double>(ad_rows, bd_narrow, cpu_backend().matmul(ad_rows, bd_narrow), tolerance<double>);
  Tensor a_step = random_storage<float>(m * 2 * k).as_strided({m, k}, {2 * k, 2}, 1);
  Tensor b_step = random_storage<double>(2 * k * n).as_strided({k, n}, {2 * n, 1}, 0);
  check_product<float>(a_step, b_pad, cpu_backend().matmul(a_step, b_pad), tolerance<float>);
  Tensor ad_step = random_storage<double>(m * 2 * k).as_strided({m, k}, {2 * k, 2}, 1);
  check_product<double>(ad_step, b_step, cpu_backend().matmul(ad_step, b_step), tolerance<double>);
}

TEST_CASE("matmul: a broadcast weight across a batch, large enough to split") {
  // x [4, 61, 600] against one w [600, 257] (batch stride 0), as a linear layer's forward, and
  // against w^T [257, 600]^T, as its input gradient.
  Tensor x = random_tensor<float>({4, 61, 600});
  Tensor w = random_storage<float>(600 * 257).as_strided({4, 600, 257}, {0, 257, 1}, 0);
  check_product<float>(x, w, cpu_backend().matmul(x, w), tolerance<float>);
  Tensor wt = random_storage<float>(600 * 257).as_strided({4, 600, 257}, {0, 1, 600}, 0);
  check_product<float>(x, wt, cpu_backend().matmul(x, wt), tolerance<float>);
  Tensor xh = random_tensor<bf16>({3, 33, 600});
  Tensor wh = random_storage<bf16>(600 * 100).as_strided({3, 600, 100}, {0, 100, 1}, 0);
  check_product<bf16>(xh, wh, cpu_backend().matmul(xh, wh), tolerance<bf16>);
  Tensor xd = random_tensor<double>({2, 70, 600});
  Tensor wd = random_storage<double>(600 * 90).as_strided({2, 600, 90}, {0, 90, 1}, 0);
  check_product<double>(xd, wd, cpu_backend().matmul(xd, wd), tolerance<double>);
}

TEST_CASE("matmul: empty sums and empty outputs") {
  Tensor a = random_tensor<float>({3, 0}), b = random_tensor<float>({0, 4});
  Tensor out = cpu_backend().matmul(a, b);
  REQUIRE(out.shape() == Shape{3, 4});
  for (int64_t i = 0; i < 12; ++i) CHECK(out.data<float>()[i] == 0.0f);
  CHECK(cpu_backend().matmul(random_tensor<double>({2, 0, 5}), random_tensor<double>({2, 5, 3})).shape() ==
        Shape{2, 0, 3});
  CHECK(cpu_backend().matmul(random_tensor<double>({0, 4, 5}), random_tensor<double>({0, 5, 3})).shape() ==
        Shape{0, 4, 3});
}

// bf16 x bf16 sums that f32 holds exactly (c = x + y s), rounded once to bf16: ties to even,
// overflow to infinity, infinities and NaN through. The reference rounds in double with
// nearbyint, independently of the bf16 type's bit arithmetic the kernel uses.
namespace {
double bf16_rounded(double v) {
  if (std::isnan(v) || std::isinf(v) || v == 0) return v;
  const double ulp = std::ldexp(1.0, std::ilogb(v) - 7);  // 8 significant bits
  const double r = std::nearbyint(v / ulp) * ulp;          // the default mode: half to even
  return std::abs(r) > 3.3895313892515355e38 ? std::copysign(INFINITY, v) : r;
}
}  // namespace

TEST_CASE("matmul: bf16 outputs round each f32 sum to nearest even, with infinities and NaN") {
  const double tie = std::ldexp(1.0, -8);
  const double xs[] = {1.0, 1.0 + 2 * tie, -1.0 - 2 * tie, 3.0, 0.5, INFINITY, NAN, 3.3e38, -3.3e38, 1.5};
  const double ss[] = {1.0, 3.0, 0.0, -1.0, 5.0, 7.0, -3.0};
  const double ys[] = {tie, 3.0 * tie, std::ldexp(3.0, 120), 0.25 * tie};
  // Rows of A: (x, y); columns of B: (1, s). 37 columns: two full registers and a part, on
  // AVX2 and AVX-512 alike; 23 rows: full and short row panels.
  const int64_t m = 23, n = 37;
  Tensor a = Tensor::empty({m, 2}, DType::bf16);
  for (int64_t i = 0; i < m; ++i) {
    a.data<bf16>()[2 * i] = bf16(float(xs[i % 10]));
    a.data<bf16>()[2 * i + 1] = bf16(float(ys[i % 4]));
  }
  for (bool transposed : {false, true}) {  // B row-major, or the transpose of a row-major [n, 2]
    CAPTURE(transposed);
    Tensor storage = Tensor::empty({2 * n}, DType::bf16);
    const Tensor b = storage.as_strided({2, n}, transposed ? Strides{1, 2} : Strides{n, 1}, 0);
    for (int64_t j = 0; j < n; ++j) {
      storage.data<bf16>()[transposed ? 2 * j : j] = bf16(1.0f);
      storage.data<bf16>()[transposed ? 2 * j + 1 : n + j] = bf16(float(ss[j % 7]));
    }
    const Tensor out = cpu_backend().matmul(a, b);
    int64_t ties = 0, overflows = 0;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        const double x = double(float(a.data<bf16>()[2 * i])), y = double(float(a.data<bf16>()[2 * i + 1]));
        const double sum = double(float(x + y * ss[j % 7]));  // the f32 sum, one rounding; inf past f32
        const double got = double(float(out.data<bf16>()[i * n + j])), want = bf16_rounded(sum);
        CAPTURE(i);
        CAPTURE(j);
        CAPTURE(sum);
        if (std::isnan(want)) CHECK(std::isnan(got));
        else CHECK(got == want);
        if (std::isfinite(sum) && sum != 0) {  // exactly halfway between two bf16 values
          const double q = sum / std::ldexp(1.0, std::ilogb(sum) - 7);
          ties += q - std::floor(q) == 0.5;
        }
        overflows += std::isinf(got) && std::isfinite(x);  // finite operands, infinite sum
      }
    CHECK(ties > 0);  // the cases reach ties and overflow
    CHECK(overflows > 0);
  }
}

// bf16 operands of small integers (|x| <= 16) whose every partial sum f32 holds exactly, so
// that any order of summation gives the exact sum: each output must be that sum rounded once to
// bf16. Checks every element of every layout the packing reads (row- and column-major, general
// strides, a broadcast batch), row and column edges and several K chunks, bit for bit, whichever
// kernel multiplies bf16 (widened to f32, or pairs on AVX512_BF16).
TEST_CASE("matmul: bf16 products of small integers are their exact sums, rounded once") {
  std::uniform_int_distribution<int> value(-16, 16);
  auto integers = [&](int64_t capacity) {
    Tensor t = Tensor::empty({capacity}, DType::bf16);
    for (int64_t i = 0; i < capacity; ++i) t.data<bf16>()[i] = bf16(float(value(rng)));
    return t;
  };
  // [batch, rows, cols] views of fresh integers: row-major, column-major, every other element
  // along both dims, or one matrix broadcast across the batch.
  enum class Lay { rows, cols, strided, broadcast };
  auto operand = [&](Lay lay, int64_t batch, int64_t rows, int64_t cols) {
    const int64_t size = rows * cols;
    switch (lay) {
      case Lay::rows: return integers(batch * size).as_strided({batch, rows, cols}, {size, cols, 1}, 0);
      case Lay::cols: return integers(batch * size).as_strided({batch, rows, cols}, {size, 1, rows}, 0);
      case Lay::strided:
        return integers(batch * 4 * size + 1).as_strided({batch, rows, cols}, {4 * size, 2 * cols, 2}, 1);
      case Lay::broadcast: break;
    }
    return integers(size).as_strided({batch, rows, cols}, {0, cols, 1}, 0);
  };
  const int64_t kc = cpu::gemm_info().kc_f32;
  struct Case {
    int64_t batch, m, k, n;
  };
  const Case cases[] = {{1, 1, 1, 1},   {2, 13, 3, 31},  {1, 14, 257, 32}, {1, 29, 1025, 65},
                        {1, 130, 2 * kc + 37, 77}, {3, 33, 600, 100}, {1, 300, 301, 40}, {1, 7, 600, 900}};
  for (const Case& c : cases)
    for (Lay la : {Lay::rows, Lay::cols, Lay::strided})
      for (Lay lb : {Lay::rows, Lay::cols, Lay::strided, Lay::broadcast}) {
        CAPTURE(c.m);
        CAPTURE(c.k);
        CAPTURE(c.n);
        CAPTURE(int(la));
        CAPTURE(int(lb));
        const Tensor a = operand(la, c.batch, c.m, c.k), b = operand(lb, c.batch, c.k, c.n);
        const Tensor out = cpu_backend().matmul(a, b);
        REQUIRE(out.shape() == Shape{c.batch, c.m, c.n});
        const Strides& sa = a.strides();
        const Strides& sb = b.strides();
        int64_t wrong = 0;
        for (int64_t t = 0; t < c.batch; ++t)
          for (int64_t i = 0; i < c.m; ++i)
            for (int64_t j = 0; j < c.n; ++j) {
              int64_t sum = 0;
              for (int64_t p = 0; p < c.k; ++p)
                sum += int64_t(float(a.data<bf16>()[t * sa[0] + i * sa[1] + p * sa[2]])) *
                       int64_t(float(b.data<bf16>()[t * sb[0] + p * sb[1] + j * sb[2]]));
              const double got = double(float(out.data<bf16>()[(t * c.m + i) * c.n + j]));
              wrong += got != bf16_rounded(double(sum));
            }
        CHECK(wrong == 0);
      }
}

// With COTAN_GEMM_BF16=avx512_bf16 (the matmul_bf16_dot test) the bf16 GEMM sums pairs of K on
// vdpbf16ps (tensor/cpu/matmul.cpp): each output is that instruction's FMA chain, in the order
// 1, 0, 3, 2, ... of each K chunk (the chunk's sum then added to the previous chunks'), bf16
// subnormals read as zero and subnormal results flushed, rounded once to bf16. Computed here one
// scalar FMA at a time from the instruction's definition; elsewhere there is nothing to check.
TEST_CASE("matmul: with AVX512_BF16, bf16 sums take the dot-product instruction's order") {
  const cpu::GemmInfo info = cpu::gemm_info();
  if (info.bf16 != "avx512_bf16") {
    MESSAGE("bf16 is widened to f32 on this build (" << info.kernel << "): nothing to check");
    return;
  }
  // One pair at a time: 1 + 0 = 1, then -1 + 1 = 0 and 2^-24 + 0 = 2^-24. In K order the 2^-24
  // would round away against the 1 (a tie, to even) before the -1 cancels it: 0. (Each pair
  // summed first, then the pairs, also gives 2^-24: the random chains below tell that apart.)
  {
    const float tiny = std::ldexp(1.0f, -24);
    Tensor a = Tensor::empty({1, 4}, DType::bf16), b = Tensor::empty({4, 1}, DType::bf16);
    const float xs[] = {1.0f, 0.0f, tiny, -1.0f};
    for (int i = 0; i < 4; ++i) {
      a.data<bf16>()[i] = bf16(xs[i]);
      b.data<bf16>()[i] = bf16(1.0f);
    }
    CHECK(float(cpu_backend().matmul(a, b).data<bf16>()[0]) == tiny);
  }
  // Subnormals: a bf16 subnormal operand reads as zero (2^-127 x 2^100: 0, not 2^-27), and a
  // subnormal f32 sum is flushed (2^-100 x 2^-30: 0, not 2^-130, which bf16 holds).
  auto one_product = [](uint16_t x_bits, float y) {
    Tensor a = Tensor::empty({1, 1}, DType::bf16), b = Tensor::empty({1, 1}, DType::bf16);
    a.data<bf16>()[0].bits = x_bits;
    b.data<bf16>()[0] = bf16(y);
    return float(cpu_backend().matmul(a, b).data<bf16>()[0]);
  };
  CHECK(one_product(0x0040, std::ldexp(1.0f, 100)) == 0.0f);
  CHECK(one_product(bf16(std::ldexp(1.0f, -100)).bits, std::ldexp(1.0f, -30)) == 0.0f);
  CHECK(one_product(bf16(std::ldexp(1.0f, -100)).bits, std::ldexp(1.0f, 3)) == std::ldexp(1.0f, -97));
  auto flush = [](float x) { return std::fpclassify(x) == FP_SUBNORMAL ? std::copysign(0.0f, x) : x; };
  auto widen = [&](bf16 v) { return flush(float(v)); };
  const int64_t kc = info.kc_f32;
  for (auto [m, k, n] : {std::tuple<int64_t, int64_t, int64_t>{17, 37, 45}, {30, kc, 33}, {9, 2 * kc + 5, 70}})
    for (bool a_t : {false, true})
      for (bool b_t : {false, true}) {
        CAPTURE(m);
        CAPTURE(k);
        CAPTURE(n);
        CAPTURE(a_t);
        CAPTURE(b_t);
        const Tensor a = a_t ? column_major<bf16>({m, k}) : random_tensor<bf16>({m, k});
        const Tensor b = b_t ? column_major<bf16>({k, n}) : random_tensor<bf16>({k, n});
        const Tensor out = cpu_backend().matmul(a, b);
        auto x = [&](int64_t i, int64_t p) { return widen(a.data<bf16>()[i * a.strides()[0] + p * a.strides()[1]]); };
        auto y = [&](int64_t p, int64_t j) { return widen(b.data<bf16>()[p * b.strides()[0] + j * b.strides()[1]]); };
        int64_t wrong = 0;
        for (int64_t i = 0; i < m; ++i)
          for (int64_t j = 0; j < n; ++j) {
            float c = 0;
            for (int64_t c0 = 0; c0 < k; c0 += kc) {
              const int64_t c1 = std::min(k, c0 + kc);
              float acc = 0;
              for (int64_t p = c0; p < c1; p += 2) {  // the pair's high half first; past the chunk, zeros
                acc = flush(std::fma(p + 1 < c1 ? x(i, p + 1) : 0.0f, p + 1 < c1 ? y(p + 1, j) : 0.0f, acc));
                acc = flush(std::fma(x(i, p), y(p, j), acc));
              }
              c = c0 == 0 ? acc : c + acc;
            }
            wrong += double(float(out.data<bf16>()[i * n + j])) != bf16_rounded(double(c));
          }
        CHECK(wrong == 0);
      }
}

TEST_CASE("matmul: the same bits with 1 and 2 threads") {
  auto with_threads = [](size_t threads, const Tensor& a, const Tensor& b) {
    tbb::global_control limit(tbb::global_control::max_allowed_parallelism, threads);
    return bytes(cpu_backend().matmul(a, b));
  };
  std::vector<std::pair<Tensor, Tensor>> cases = {
      {random_tensor<float>({517, 1031}), random_tensor<float>({1031, 389})},
      {column_major<float>({3, 200, 700}), random_tensor<float>({3, 700, 150})},
      {random_tensor<float>({64, 33, 65}), random_tensor<float>({64, 65, 17})},
      {random_tensor<double>({300, 600}), column_major<double>({600, 250})},
      {random_tensor<bf16>({2, 260, 530}), random_tensor<bf16>({2, 530, 140})},
      // bf16 with K in one chunk and B transposed.
      {random_tensor<bf16>({2, 260, 300}), column_major<bf16>({2, 300, 140})},
      // One row panel: B read in place with AVX-512 although a K chunk of it exceeds half of L2.
      {random_tensor<float>({9, 2000}), random_tensor<float>({2000, 700})},
      // Several K chunks (KC <= 1024), ragged rows and columns, B packed (read in place on
      // AVX-512 with 4 MiB of L2 or more).
      {random_tensor<float>({517, 2100}), random_tensor<float>({2100, 389})},
      // Row-major B too large to read in place (rows 4 KiB apart): packed with AVX-512 too.
      {random_tensor<float>({300, 1100}), random_tensor<float>({1100, 1024})},
      {random_tensor<float>({517, 2100}), column_major<float>({2100, 389})},
      // Narrow: A's rows read in place, the last short panel packed; B read in place (AVX-512
      // with 2 MiB of L2 or more: a K chunk is 1,024,000 bytes), or packed (x W^T).
      {random_tensor<float>({517, 2100}), random_tensor<float>({2100, 250})},
      {random_tensor<float>({1027, 192}), column_major<float>({192, 320})},
      {random_tensor<float>({1027, 384}), column_major<float>({384, 320})},
      {column_major<double>({130, 2100}), random_tensor<double>({2100, 77})},
      // A weight gradient's X^T G: few rows, cut into finer row tiles on 2 threads than on 1.
      {column_major<float>({128, 1100}), random_tensor<float>({1100, 384})},
      // bf16 across K chunks with an odd K (a half pair at the end, with AVX512_BF16), as a
      // weight gradient and as x W^T.
      {column_major<bf16>({128, 2101}), random_tensor<bf16>({2101, 384})},
      {random_tensor<bf16>({517, 2101}), column_major<bf16>({2101, 389})},
      // A decoding step's x W^T and a row against B in place: one row, its columns split
      // across threads, B packed a few panels at a time (or read in place).
      {random_tensor<float>({1, 2100}), column_major<float>({2100, 389})},
      {random_tensor<bf16>({2, 2101}), column_major<bf16>({2101, 389})},
      {random_tensor<float>({1, 2100}), random_tensor<float>({2100, 389})},
  };
  for (const auto& [a, b] : cases) {
    CAPTURE(a.shape());
    CAPTURE(b.shape());
    CHECK(with_threads(1, a, b) == with_threads(2, a, b));
  }
}

namespace {

// Rows [r0, r0 + rows) of the [m, k] matrix in `storage`, row-major (strides {k, 1}) or
// column-major ({1, m}): a view whose rows are those of the whole matrix.
Tensor rows_of(const Tensor& storage, bool row_major, int64_t m, int64_t k, int64_t r0, int64_t rows) {
  return storage.as_strided({rows, k}, row_major ? Strides{k, 1} : Strides{1, m}, row_major ? r0 * k : r0);
}

}  // namespace

// Products of one or two rows (a decoding step's x W^T) run on their own paths: B read in place
// or packed a few panels at a time, on a kernel that sums several panels at once. Each element
// must still be the packed GEMM's FMA chain, so those rows alone give the bits of the same rows
// of a taller product, which runs on the ordinary micro-kernels.
TEST_CASE("matmul: one or two rows alone give the bits of the same rows in a taller product") {
  const cpu::GemmInfo info = cpu::gemm_info();
  if (info.kernel == "eigen") {
    MESSAGE("Eigen's blocking depends on the rows of a product: nothing to check in this build");
    return;
  }
  // K across three chunks (ragged), N across several groups of panels with a ragged end; rows
  // enough that the whole product packs B (more than 32), while parts of up to 32 rows stream it
  // (x W^T through the lines kernel, a row panel or half of one at a time).
  const int64_t m = 6 * info.mr + 2, k = 2 * info.kc_f32 + 37, n = 9 * info.nr_f32 + 5;
  auto check = [&]<class T>(T, bool a_row_major, bool b_row_major) {
    CAPTURE(dtype_v<T>);
    CAPTURE(a_row_major);
    CAPTURE(b_row_major);
    const Tensor a_storage = random_storage<T>(m * k);
    const Tensor a = rows_of(a_storage, a_row_major, m, k, 0, m);
    const Tensor b = b_row_major ? random_tensor<T>({k, n}) : column_major<T>({k, n});
    const Tensor c0 = random_tensor<T>({m, n});
    for (size_t threads : {1, 2}) {
      CAPTURE(threads);
      tbb::global_control limit(tbb::global_control::max_allowed_parallelism, threads);
      const std::vector<uint8_t> whole = bytes(cpu_backend().matmul(a, b));
      Tensor whole_acc = Tensor::empty({m, n}, dtype_v<T>);
      std::memcpy(whole_acc.data_ptr(), c0.data_ptr(), c0.nbytes());
      cpu_backend().matmul_accumulate(a, b, whole_acc);
      const size_t row_bytes = size_t(n) * sizeof(T);
      for (auto [r0, rows] : {std::pair<int64_t, int64_t>{0, 1}, {m - 1, 1}, {5, 2}, {m - 2, 2}, {3, 3}, {1, info.mr},
                              {m - info.mr, info.mr}, {2, info.mr + 1}, {7, 2 * info.mr + 3}, {m - 4 * info.mr, 4 * info.mr},
                              {1, 16}, {4, 19}, {3, 32}, {5, 33}}) {
        CAPTURE(r0);
        CAPTURE(rows);
        const Tensor a_rows = rows_of(a_storage, a_row_major, m, k, r0, rows);
        const std::vector<uint8_t> part = bytes(cpu_backend().matmul(a_rows, b));
        CHECK(std::equal(part.begin(), part.end(), whole.begin() + r0 * row_bytes));
        Tensor part_acc = Tensor::empty({rows, n}, dtype_v<T>);
        std::memcpy(part_acc.data_ptr(), static_cast<const uint8_t*>(c0.data_ptr()) + r0 * row_bytes, rows * row_bytes);
        cpu_backend().matmul_accumulate(a_rows, b, part_acc);
        CHECK(std::memcmp(part_acc.data_ptr(), static_cast<const uint8_t*>(whole_acc.data_ptr()) + r0 * row_bytes,
                          rows * row_bytes) == 0);
      }
    }
  };
  for (bool a_row_major : {true, false})
    for (bool b_row_major : {true, false}) {
      check(0.0f, a_row_major, b_row_major);
      check(0.0, a_row_major, b_row_major);
      check(bf16(), a_row_major, b_row_major);
    }
}

// A last panel of at most one register of columns runs on a kernel of that width; its columns
// must hold the bits they get on a whole panel, in a wider product. Rows enough for several row
// tiles (A read in place with AVX-512 from K = 256, packed otherwise), B row-major (read in
// place) and transposed (packed), 1 and 2 threads.
TEST_CASE("matmul: a last panel of one register's columns gives the bits of a whole panel") {
  const cpu::GemmInfo info = cpu::gemm_info();
  if (info.kernel == "eigen") {
    MESSAGE("no panels in this build (Eigen): nothing to check");
    return;
  }
  const int64_t nr = info.nr_f32, width = nr / 2;
  for (int64_t m : {int64_t(5), 9 * int64_t(info.mr) + 3, int64_t(257)})
    for (int64_t k : {128, 300})
      for (int64_t narrow : {int64_t(1), width - 1, width})
        for (bool b_row_major : {true, false}) {
          CAPTURE(m);
          CAPTURE(k);
          CAPTURE(narrow);
          CAPTURE(b_row_major);
          const int64_t n = 8 * nr + narrow, wide = 9 * nr;
          const Tensor a = random_tensor<float>({m, k});
          // B: the first n columns of a [k, wide] matrix, copied to be [k, n] on its own.
          const Tensor b_wide = b_row_major ? random_tensor<float>({k, wide}) : column_major<float>({k, wide});
          const Tensor b = b_row_major ? Tensor::empty({k, n}, dtype_v<float>) : column_major<float>({k, n});
          for (int64_t p = 0; p < k; ++p)
            for (int64_t j = 0; j < n; ++j)
              b.data<float>()[p * b.strides()[0] + j * b.strides()[1]] =
                  b_wide.data<float>()[p * b_wide.strides()[0] + j * b_wide.strides()[1]];
          for (size_t threads : {1, 2}) {
            CAPTURE(threads);
            tbb::global_control limit(tbb::global_control::max_allowed_parallelism, threads);
            const Tensor c = cpu_backend().matmul(a, b);
            check_product<float>(a, b, c, tolerance<float>);
            const Tensor c_wide = cpu_backend().matmul(a, b_wide);
            int64_t differ = 0;
            for (int64_t i = 0; i < m; ++i)
              differ += std::memcmp(c.data<float>() + i * n, c_wide.data<float>() + i * wide, size_t(n) * 4) != 0;
            CHECK(differ == 0);
          }
        }
}

// B read in place, its rows exactly a panel's width apart (NR) but fewer columns than a panel: a
// view of the last columns of a wider matrix whose memory ends right after its last element. The
// product must read none of the columns the view leaves out: here the next page is unreadable,
// so reading past the last row's columns ends the process.
TEST_CASE("matmul: B's rows a panel apart, fewer columns than a panel, ending at a page: nothing past it is read") {
  const cpu::GemmInfo info = cpu::gemm_info();
  const size_t page = size_t(sysconf(_SC_PAGESIZE));
  auto check = [&]<class T>(T) {
    CAPTURE(dtype_v<T>);
    const int64_t nr = std::is_same_v<T, float> ? info.nr_f32 : info.nr_f32 / 2;  // 0 on Eigen: any width
    const int64_t stride = nr > 0 ? nr : 16, n = stride - 5, k = 300;
    const size_t bytes = size_t((k - 1) * stride + n) * sizeof(T);
    const size_t mapped = (bytes + page - 1) / page * page;
    void* base = mmap(nullptr, mapped + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(base != MAP_FAILED);
    REQUIRE(mprotect(static_cast<char*>(base) + mapped, page, PROT_NONE) == 0);
    auto storage = std::make_shared<Storage>(base, mapped + page, Device::cpu(),
                                             [](void* p, size_t size) { munmap(p, size); });
    const int64_t offset = int64_t((mapped - bytes) / sizeof(T));  // the last element ends the page
    std::uniform_real_distribution<double> dist(-1.0, 1.0);
    T* data = static_cast<T*>(base);
    for (int64_t i = offset; i < int64_t(mapped / sizeof(T)); ++i) data[i] = convert<T>(dist(rng));
    const Tensor b(storage, {k, n}, {stride, 1}, offset, dtype_v<T>);
    for (int64_t m : {int64_t(1), int64_t(2), int64_t(3), std::max<int64_t>(info.mr, 1), int64_t(40), int64_t(300)}) {
      CAPTURE(m);
      const Tensor a = random_tensor<T>({m, k});
      for (size_t threads : {1, 2}) {
        CAPTURE(threads);
        tbb::global_control limit(tbb::global_control::max_allowed_parallelism, threads);
        check_product<T>(a, b, cpu_backend().matmul(a, b), tolerance<T>);
        Tensor c = random_tensor<T>({m, n});
        const Tensor before = cpu_backend().matmul(a, b);
        Tensor expected = Tensor::empty({m, n}, dtype_v<T>);
        for (int64_t i = 0; i < m * n; ++i)
          expected.data<T>()[i] = T(double(c.data<T>()[i]) + double(before.data<T>()[i]));
        cpu_backend().matmul_accumulate(a, b, c);
        for (int64_t i = 0; i < m * n; ++i)
          CHECK(std::abs(double(c.data<T>()[i]) - double(expected.data<T>()[i])) <= 1e-4 * (1 + std::abs(double(expected.data<T>()[i]))));
      }
    }
  };
  check(0.0f);
  check(0.0);
}

TEST_CASE("matmul: gemm_info's K chunk is where the f32 sums restart") {
  const cpu::GemmInfo info = cpu::gemm_info();
  CHECK((info.kernel == "avx512" || info.kernel == "avx2+fma" || info.kernel == "eigen"));
  if (info.kernel == "eigen") return;  // Eigen's blocking is its own: nothing of it is reported
  CHECK(info.mr > 0);
  CHECK(info.nr_f32 % 8 == 0);
  CHECK(info.mc_f32 % info.mr == 0);
  CHECK(info.mc_f32 >= info.mr);
  CHECK(info.l2_bytes >= (128 << 10));
  CHECK(info.l3_bytes >= (1 << 20));
  CHECK((info.l2_source == "sysfs" || info.l2_source == "sysconf" || info.l2_source == "typical"));
  CHECK((info.l3_source == "sysfs" || info.l3_source == "sysconf" || info.l3_source == "typical"));
  // Row i of A is 1, then 2^-24 everywhere; B is ones. Summed in one chain, every 2^-24 after
  // the 1 rounds away (1 + 2^-24 is a tie, to even: 1). A chunk that starts from zero sums its
  // 2^-24s exactly, so with chunks of kc the result is 1 + (K - kc) 2^-24 at K = 2 kc: the
  // reported kc is the one the kernel used, for any tile (rows 1 to 20, columns 1 to 40).
  const int64_t kc = info.kc_f32, k = 2 * kc;
  const float tiny = std::ldexp(1.0f, -24);
  for (auto [m, n] : {std::pair<int64_t, int64_t>{1, 1}, {3, 5}, {20, 40}}) {
    CAPTURE(m);
    CAPTURE(n);
    Tensor a = Tensor::empty({m, k}, DType::f32), b = Tensor::empty({k, n}, DType::f32);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < k; ++j) a.data<float>()[i * k + j] = j == 0 ? 1.0f : tiny;
    std::fill_n(b.data<float>(), k * n, 1.0f);
    const Tensor c = cpu_backend().matmul(a, b);
    for (int64_t i = 0; i < m * n; ++i) REQUIRE(c.data<float>()[i] == 1.0f + float(kc) * tiny);
  }
}

TEST_CASE("matmul: errors name the op, the shapes and dtypes") {
  auto message = [](const Tensor& a, const Tensor& b) -> std::string {
    try {
      cpu_backend().matmul(a, b);
    } catch (const Error& e) {
      return e.what();
    }
    return "no error";
  };
  Tensor i64 = Tensor::empty({2, 2}, DType::i64);
  CHECK(message(i64, i64) == "[matmul] expects a floating dtype, got i64");
  CHECK(message(random_tensor<float>({4, 8}), random_tensor<float>({9, 2})) ==
        "[matmul] shapes [4, 8] and [9, 2] do not match");
  CHECK(message(random_tensor<float>({2, 4, 8}), random_tensor<float>({3, 8, 2})) ==
        "[matmul] shapes [2, 4, 8] and [3, 8, 2] do not match");
  CHECK(message(random_tensor<float>({4, 8}), random_tensor<double>({8, 2})) == "[matmul] dtypes f32 and f64 differ");
  CHECK(message(random_tensor<float>({8}), random_tensor<float>({8, 2})) ==
        "[matmul] expects matrices with at least 2 dims, got shapes [8] and [8, 2]");
}

namespace {

// c0 + a b in long double against matmul_accumulate into a copy of c0: within `tol` times
// |c0| + sum_k |a_ik b_kj| (for bf16 that includes its roundings).
template <class T>
void check_accumulate(const Tensor& a, const Tensor& b, double tol) {
  const int64_t m = a.size(0), k = a.size(1), n = b.size(1);
  const Tensor c0 = random_tensor<T>({m, n});
  Tensor c = Tensor::empty({m, n}, dtype_v<T>);
  std::memcpy(c.data_ptr(), c0.data_ptr(), c.nbytes());
  cpu_backend().matmul_accumulate(a, b, c);
  const T* pa = a.data<T>();
  const T* pb = b.data<T>();
  const int64_t ar = a.strides()[0], ac = a.strides()[1], br = b.strides()[0], bc = b.strides()[1];
  double worst = 0;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      long double exact = convert<double>(c0.data<T>()[i * n + j]), magnitude = std::abs(exact);
      for (int64_t p = 0; p < k; ++p) {
        const long double x = (long double)convert<double>(pa[i * ar + p * ac]) * convert<double>(pb[p * br + j * bc]);
        exact += x;
        magnitude += std::abs(x);
      }
      double error = double(std::abs((long double)convert<double>(c.data<T>()[i * n + j]) - exact));
      worst = std::max(worst, error / std::max(double(magnitude), 1e-300));
    }
  CHECK(worst <= tol);
}

}  // namespace

TEST_CASE("matmul_accumulate: c += a b across tile edges, K chunks and transposed operands") {
  // 300 x 700 x 200: A's rows read in place (AVX-512 f32 too), added to C from the first K chunk.
  for (auto [m, k, n] : {std::tuple{1, 1, 1}, {17, 65, 33}, {130, 2100, 77}, {256, 300, 517}, {300, 700, 200}}) {
    CAPTURE(m);
    CAPTURE(k);
    CAPTURE(n);
    check_accumulate<float>(random_tensor<float>({m, k}), random_tensor<float>({k, n}), 1e-5);
    check_accumulate<float>(column_major<float>({m, k}), random_tensor<float>({k, n}), 1e-5);
    check_accumulate<float>(random_tensor<float>({m, k}), column_major<float>({k, n}), 1e-5);
    check_accumulate<double>(column_major<double>({m, k}), random_tensor<double>({k, n}), 1e-12);
    // bf16 (Backend's matmul_accumulate): the f32 sum s of the products rounded to bf16, q, then
    // c0 + q rounded to bf16. Each rounding is at most half an ulp of 8 significant bits, 2^-8 of
    // its value: |q - s| <= 2^-8 |s| and the second <= 2^-8 |c0 + q| <= 2^-8 (|c0| + |s| (1 + 2^-8));
    // with |s - ab| <= k 2^-24 M, M = sum |ab|, the whole error is under 2^-7 (1 + 2^-9) (|c0| + M)
    // plus k 2^-22 M for the f32 sum and its cross terms. (A 1x1x1 draw of -0.926 x 0.609 +
    // -0.520 is off by 0.0051 of |c0| + M.)
    check_accumulate<bf16>(random_tensor<bf16>({m, k}), random_tensor<bf16>({k, n}),
                           std::ldexp(1.0 + std::ldexp(1.0, -9), -7) + double(k) * std::ldexp(1.0, -22));
  }
}

TEST_CASE("matmul_accumulate: the same bits with 1 and 2 threads, and errors that name the shapes") {
  const Tensor a = column_major<float>({600, 2100}), b = random_tensor<float>({2100, 517});
  const Tensor c0 = random_tensor<float>({600, 517});
  auto with_threads = [&](size_t threads) {
    tbb::global_control limit(tbb::global_control::max_allowed_parallelism, threads);
    Tensor c = Tensor::empty({600, 517}, DType::f32);
    std::memcpy(c.data_ptr(), c0.data_ptr(), c.nbytes());
    cpu_backend().matmul_accumulate(a, b, c);
    return bytes(c);
  };
  CHECK(with_threads(1) == with_threads(2));
  auto message = [](const Tensor& x, const Tensor& y, const Tensor& c) -> std::string {
    try {
      cpu_backend().matmul_accumulate(x, y, c);
    } catch (const Error& e) {
      return e.what();
    }
    return "no error";
  };
  CHECK(message(random_tensor<float>({4, 8}), random_tensor<float>({8, 2}), random_tensor<float>({4, 3})) ==
        "[matmul_accumulate] shapes [4, 8] x [8, 2] into [4, 3] do not match");
  CHECK(message(random_tensor<float>({4, 8}), random_tensor<float>({8, 2}), random_tensor<double>({4, 2})) ==
        "[matmul_accumulate] dtypes f32, f32 and f64 differ");
  CHECK(message(random_tensor<float>({4, 8}), random_tensor<float>({8, 2}), column_major<float>({4, 2})) ==
        "[matmul_accumulate] the sum [4, 2] must be contiguous");
}
