// The GEMM kernels (cuda/kernels/matmul.cuh) run by the SIMT emulator, against the CPU backend:
// f64 and f32 through the tiled SIMT kernel, bf16 through the tensor-core kernel (ldmatrix +
// mma.m16n8k16), at sizes that are not multiples of the tiles, batched with broadcast batch
// dims, with transposed and gapped operands, under two emulator schedules.
//
// Tolerance: the two backends sum K products in different orders, so an element may differ by
// a few roundings of the partial sums, which scale with sum_l |A(i, l)| |B(l, j)|, not with the
// result (which may cancel to near zero). Each element must lie within rtol times that sum of
// the CPU's: 1e-12 for f64, 1e-5 for f32, 1e-2 for bf16 (whose result is rounded to bf16 once,
// by both backends, from f32 sums of the same bf16 operands).
#include "tests/cuda/kernel_check.hpp"

#include "cuda/kernels/matmul.hpp"

using namespace cotan;
using namespace kernel_check;

namespace {

// The emulated kernel backend (cotan::emu, which `using namespace cotan` makes ambiguous with
// kernel_check::emu).
Backend& emulated() { return cotan::emu::backend(); }

constexpr DType kFloatTypes[] = {DType::f64, DType::f32, DType::bf16};

double rtol(DType t) { return t == DType::f64 ? 1e-12 : t == DType::f32 ? 1e-5 : 1e-2; }

// |x| in f64, with x's shape (strides dropped).
Tensor abs_f64(const Tensor& x) {
  Tensor wide = Tensor::empty(x.shape(), DType::f64);
  cpu().assign(wide, x);
  return cpu().unary(UnaryOp::abs, wide);
}

void check_matmul(const Tensor& a, const Tensor& b, const std::string& what) {
  INFO(what);
  const Tensor want = cpu().matmul(a, b);
  const Tensor got = emulated().matmul(a, b);
  REQUIRE(got.shape() == want.shape());
  REQUIRE(got.dtype() == want.dtype());
  const auto g = values(got), w = values(want), scale = values(cpu().matmul(abs_f64(a), abs_f64(b)));
  const double tol = rtol(a.dtype());
  int64_t bad = -1;
  for (size_t i = 0; i < g.size() && bad < 0; ++i)
    if (!(std::abs(g[i] - w[i]) <= tol * scale[i] + 1e-300)) bad = int64_t(i);
  const std::string mismatch =
      bad < 0 ? "" : cat("element ", bad, ": got ", g[size_t(bad)], ", want ", w[size_t(bad)], ", scale ",
                         scale[size_t(bad)]);
  INFO(mismatch);
  CHECK(bad == -1);
}

struct Size {
  int64_t m, k, n;
};
// Single elements, sizes off the 64 x 64 tile and the K steps (16, 32), exactly one tile with
// K = 5 steps, and two tiles each way.
constexpr Size kSizes[] = {{1, 1, 1}, {17, 33, 9}, {64, 80, 48}, {3, 1, 70}, {65, 40, 66}};

}  // namespace

TEST_CASE("matmul kernels match the CPU at sizes off the tiles, with transposed and gapped operands") {
  for_each_schedule([&] {
    for (DType t : kFloatTypes) {
      for (const Size& s : kSizes) {
        Tensor a = random_tensor({s.m, s.k}, t, -1, 1, 1 + uint64_t(s.m));
        Tensor b = random_tensor({s.k, s.n}, t, -1, 1, 2 + uint64_t(s.n));
        const std::string what = cat("matmul ", t, " ", s.m, "x", s.k, "x", s.n);
        check_matmul(a, b, what);
        // Each operand transposed (column-major) or gapped, against the other contiguous, and
        // both transposed.
        for (Layout l : {Layout::transposed, Layout::gapped}) {
          check_matmul(in_layout(a, l), b, what + " a " + layout_name(l));
          check_matmul(a, in_layout(b, l), what + " b " + layout_name(l));
        }
        check_matmul(in_layout(a, Layout::transposed), in_layout(b, Layout::transposed), what + " both transposed");
      }
    }
  });
}

TEST_CASE("batched matmul kernels: broadcast batch dims and strided batches") {
  for_each_schedule([&] {
    for (DType t : kFloatTypes) {
      const std::string what = cat("batched matmul ", t);
      Tensor a = random_tensor({2, 3, 17, 9}, t, -1, 1, 11);
      Tensor b = random_tensor({2, 3, 9, 13}, t, -1, 1, 12);
      check_matmul(a, b, what);
      // a broadcast along dim 0, b along dim 1: the batch does not merge into one stride.
      Tensor a0 = a.as_strided(a.shape(), {0, 17 * 9, 9, 1}, 0);
      Tensor b1 = b.as_strided(b.shape(), {3 * 9 * 13, 0, 13, 1}, 0);
      check_matmul(a0, b1, what + " broadcast a0 b1");
      // A linear layer over the whole batch: x W^T with W [13, 9] row-major, so B = W^T is
      // column-major and shared by every matrix of the batch (stride 0).
      Tensor w = random_tensor({13, 9}, t, -1, 1, 13);
      check_matmul(a, w.as_strided({2, 3, 9, 13}, {0, 0, 1, 9}, 0), what + " shared transposed weight");
      check_matmul(in_layout(a, Layout::gapped), in_layout(b, Layout::transposed), what + " gapped x transposed");
    }
  });
}

TEST_CASE("matmul kernels: empty products, K = 0, and the CPU's errors") {
  for (DType t : kFloatTypes) {
    Tensor a = random_tensor({4, 0}, t, -1, 1, 1), b = random_tensor({0, 5}, t, -1, 1, 2);
    Tensor zeros = emulated().matmul(a, b);
    CHECK(zeros.shape() == Shape{4, 5});
    for (double v : values(zeros)) CHECK(v == 0.0);
    CHECK(emulated().matmul(random_tensor({0, 3}, t, -1, 1, 3), random_tensor({3, 5}, t, -1, 1, 4)).shape() ==
          Shape{0, 5});
  }
  Tensor a = random_tensor({4, 8}, DType::f32, -1, 1, 5), b = random_tensor({9, 2}, DType::f32, -1, 1, 6);
  CHECK_THROWS_WITH_AS(emulated().matmul(a, b), "[matmul] shapes [4, 8] and [9, 2] do not match", Error);
  Tensor ints = random_tensor({2, 2}, DType::i32, 0, 3, 7);
  CHECK_THROWS_WITH_AS(emulated().matmul(ints, ints), "[matmul] expects a floating dtype, got i32", Error);
  Tensor wide = random_tensor({8, 2}, DType::f64, -1, 1, 8);
  CHECK_THROWS_WITH_AS(emulated().matmul(a, wide), "[matmul] dtypes f32 and f64 differ", Error);
  // The emulated backend's matmul is the kernel GEMM.
  Tensor x = random_tensor({5, 7}, DType::f32, -1, 1, 9), y = random_tensor({7, 3}, DType::f32, -1, 1, 10);
  expect_same(emu::launch::matmul_kernel(x, y), emulated().matmul(x, y), "matmul_kernel");
}
