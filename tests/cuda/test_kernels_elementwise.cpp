// The elementwise kernels (cuda/kernels/elementwise.cuh) run by the SIMT emulator, against the CPU
// backend: every UnaryOp, BinaryOp and where, for every dtype an op takes, on contiguous,
// transposed, gapped and broadcast operands, under two emulator schedules. IEEE-exact ops
// (arithmetic, comparisons, sqrt, selections) must match bit for bit; transcendental ones within
// the dtype's tolerance (the CPU's Eigen math and the C library differ in the last bits).
#include "tests/cuda/kernel_check.hpp"

#include <limits>

using namespace cotan;
using namespace kernel_check;

namespace {

constexpr DType kFloatTypes[] = {DType::f64, DType::f32, DType::bf16};
constexpr DType kIntTypes[] = {DType::i32, DType::i64};
const Shape kShape = {3, 5, 7};     // small: every layout, op and dtype
const Shape kLongShape = {13, 97};  // more elements than the emulated grid has threads

// kUnaryOps and kBinaryOps, every op of the op list, come from tensor/op_table.hpp.

// Ops whose result is exact or correctly rounded on both sides: the same bits. sqrt and rsqrt are
// not among them: the CPU's f32 sqrt (Eigen's fast path) may be one ulp off.
bool exact(UnaryOp op) {
  return op != UnaryOp::exp && op != UnaryOp::log && op != UnaryOp::tanh && op != UnaryOp::sigmoid &&
         op != UnaryOp::silu && op != UnaryOp::gelu_tanh && op != UnaryOp::pow && op != UnaryOp::sqrt &&
         op != UnaryOp::rsqrt;
}

// Inputs where the op is defined and interesting: positive for log, sqrt, rsqrt and pow.
std::pair<double, double> unary_range(UnaryOp op) {
  switch (op) {
    case UnaryOp::log: case UnaryOp::sqrt: case UnaryOp::rsqrt: case UnaryOp::pow: return {0.05, 6.0};
    case UnaryOp::exp: return {-20.0, 20.0};
    default: return {-5.0, 5.0};
  }
}

// The (a, b) arguments an op is tried with: clamp bounds (including lo > hi and bounds beyond
// every integer type), pow exponents (the special-cased ones and general ones).
std::vector<std::pair<double, double>> unary_args(UnaryOp op) {
  if (op == UnaryOp::clamp) return {{-0.75, 2.5}, {1.0, -1.0}, {-1e30, 1e30}};
  if (op == UnaryOp::pow) return {{2, 0}, {1, 0}, {0.5, 0}, {-1, 0}, {3, 0}, {-2.5, 0}, {0.3, 0}};
  return {{0, 0}};
}

void check_unary(UnaryOp op, const Tensor& x, double a, double b, const std::string& what) {
  Tensor want = cpu().unary(op, x, a, b);
  Tensor got = emulated_backend().unary(op, x, a, b);
  if (exact(op) || !is_floating(want.dtype())) expect_same(got, want, what);
  else expect_close(got, want, what);
}

void check_binary(BinaryOp op, const Tensor& a, const Tensor& b, const std::string& what) {
  Tensor want = cpu().binary(op, a, b);
  Tensor got = emulated_backend().binary(op, a, b);
  expect_same(got, want, what);  // + - * / max min and comparisons are exact in IEEE arithmetic
}

DType want_dtype(UnaryOp op, DType t) { return op == UnaryOp::logical_not ? DType::boolean : t; }

std::string describe(std::string_view op, DType t, Layout l, double a = 0, double b = 0) {
  return cat(op, " ", t, " ", layout_name(l), " a=", a, " b=", b);
}

}  // namespace

TEST_CASE("unary kernels match the CPU on every float dtype and layout") {
  for_each_schedule([&] {
    for (UnaryOp op : kUnaryOps) {
      auto [lo, hi] = unary_range(op);
      for (DType t : kFloatTypes) {
        Tensor source = random_tensor(kShape, t, lo, hi, 7 + uint64_t(op));
        for (Layout l : kLayouts)
          for (auto [a, b] : unary_args(op))
            check_unary(op, in_layout(source, l), a, b, describe(op_name(op), t, l, a, b));
      }
    }
  });
}

TEST_CASE("unary kernels on special values: NaN, infinities, signed zeros, extremes") {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::nan("");
  const std::vector<double> specials = {nan, inf, -inf, 0.0, -0.0, 1e-30, -1e-30, 1e30, -1e30, 88.7, -88.7,
                                        100.0, -100.0, 1.0, -1.0, 0.5};
  for (UnaryOp op : kUnaryOps) {
    for (DType t : kFloatTypes) {
      Tensor x = make(specials, {int64_t(specials.size())}, t);
      for (auto [a, b] : unary_args(op)) {
        const std::string what = describe(op_name(op), t, Layout::contiguous, a, b) + " specials";
        // The CPU computes the lanes its vector code cannot (special values) with the kernels'
        // own scalar definitions (tensor/unary_math.hpp), so nothing is excused here.
        expect_close(emulated_backend().unary(op, x, a, b), cpu().unary(op, x, a, b), what);
      }
    }
  }
}

TEST_CASE("unary kernels on integers, including wrap-around at the extremes") {
  for_each_schedule([&] {
    for (DType t : kIntTypes) {
      Tensor source = random_tensor(kShape, t, -1000, 1000, 11);
      // The smallest and largest values and -1, 0, 1 among them: neg, abs and square wrap.
      const double lowest = t == DType::i32 ? double(std::numeric_limits<int32_t>::min()) : -9.2e18;
      Tensor extremes = make({lowest, -lowest - 1, -1, 0, 1, 7}, {2, 3}, t);
      for (UnaryOp op : kUnaryOps) {
        if (!accepts_integers(op)) {
          CHECK_THROWS_WITH_AS(emulated_backend().unary(op, source, 0, 0),
                               doctest::Contains("expects a floating dtype"), Error);
          continue;
        }
        for (auto [a, b] : unary_args(op)) {
          for (Layout l : kLayouts) check_unary(op, in_layout(source, l), a, b, describe(op_name(op), t, l, a, b));
          check_unary(op, extremes, a, b, describe(op_name(op), t, Layout::contiguous, a, b) + " extremes");
        }
      }
    }
    Tensor flags = random_tensor(kShape, DType::boolean, 0, 1, 5);
    for (Layout l : kLayouts) check_unary(UnaryOp::logical_not, in_layout(flags, l), 0, 0, "logical_not bool");
    CHECK_THROWS_WITH_AS(emulated_backend().unary(UnaryOp::neg, flags, 0, 0), "[neg] expects a numeric dtype, got bool",
                         Error);
  });
}

TEST_CASE("unary kernels walk the grid-stride loop over long inputs") {
  for_each_schedule([&] {
    for (DType t : kFloatTypes) {
      Tensor x = random_tensor(kLongShape, t, -3, 3, 3);
      for (Layout l : kLayouts)
        for (UnaryOp op : {UnaryOp::gelu_tanh, UnaryOp::relu, UnaryOp::logical_not})
          check_unary(op, in_layout(x, l), 0, 0, describe(op_name(op), t, l) + " long");
    }
  });
}

TEST_CASE("binary kernels match the CPU on every dtype and layout pair") {
  for_each_schedule([&] {
    for (DType t : {DType::f64, DType::f32, DType::bf16, DType::i32, DType::i64, DType::boolean}) {
      Tensor a = random_tensor(kShape, t, -50, 50, 21);
      Tensor b = random_tensor(kShape, t, -50, 50, 22);
      if (is_integral(t)) {  // no zero divisors: those are an error, checked below
        auto v = values(b);
        for (double& x : v) x = x == 0 ? 7 : x;
        b = make(v, kShape, t);
      }
      // a's layout against each of b's: contiguous pairs take the fast kernel, the rest the strided one.
      for (Layout la : kLayouts) {
        for (Layout lb : kLayouts) {
          if (la != Layout::contiguous && lb != Layout::contiguous && la != lb) continue;
          Tensor va = in_layout(a, la), vb = in_layout(b, lb);
          for (BinaryOp op : kBinaryOps) {
            if (t == DType::boolean && op <= BinaryOp::div) continue;
            check_binary(op, va, vb, cat(op_name(op), " ", t, " ", layout_name(la), " x ", layout_name(lb)));
          }
        }
      }
    }
  });
}

TEST_CASE("binary kernels: NaN, infinities, integer wrap-around, long and row-broadcast operands") {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::nan("");
  const std::vector<double> x = {nan, 1.0, nan, inf, -inf, 0.0, -0.0, 2.0};
  const std::vector<double> y = {1.0, nan, nan, inf, inf, -0.0, 0.0, -inf};
  for (DType t : kFloatTypes)
    for (BinaryOp op : kBinaryOps)
      check_binary(op, make(x, {8}, t), make(y, {8}, t), cat(op_name(op), " ", t, " specials"));
  const std::vector<double> ix = {-2147483648.0, 2147483647.0, -2147483648.0, -7, 7, 0};
  const std::vector<double> iy = {-1, 1, 2, 2, -2, 3};
  for (BinaryOp op : kBinaryOps)
    check_binary(op, make(ix, {6}, DType::i32), make(iy, {6}, DType::i32), cat(op_name(op), " i32 extremes"));

  for_each_schedule([&] {
    for (DType t : kFloatTypes) {
      Tensor a = random_tensor(kLongShape, t, -2, 2, 31);
      // b: one row [1, 97] read as [13, 97] (stride 0), the shape of a bias add.
      Tensor row = random_tensor({1, kLongShape[1]}, t, -2, 2, 32);
      Tensor b = row.as_strided(kLongShape, {0, 1}, 0);
      for (BinaryOp op : {BinaryOp::add, BinaryOp::mul, BinaryOp::lt})
        check_binary(op, a, b, cat(op_name(op), " ", t, " long row broadcast"));
      check_binary(BinaryOp::sub, in_layout(a, Layout::transposed), b, cat("sub ", t, " long transposed"));
    }
  });
}

TEST_CASE("binary kernels reject what the CPU rejects") {
  Tensor a = random_tensor({4}, DType::i32, 1, 5, 1);
  Tensor zero = make({1, 2, 0, 4}, {4}, DType::i32);
  CHECK_THROWS_WITH_AS(emulated_backend().binary(BinaryOp::div, a, zero), "[div] integer division by zero", Error);
  Tensor strided_zero = make({3, 0, 0, 1, 2, 5, 6, 7}, {8}, DType::i32).as_strided({4}, {2}, 1);  // 0, 1, 5, 7
  CHECK_THROWS_WITH_AS(emulated_backend().binary(BinaryOp::div, a, strided_zero), "[div] integer division by zero",
                       Error);
  CHECK_THROWS_WITH_AS(emulated_backend().binary(BinaryOp::add, a, random_tensor({4}, DType::f32, 0, 1, 2)),
                       "[add] dtypes i32 and f32 differ", Error);
  CHECK_THROWS_WITH_AS(emulated_backend().binary(BinaryOp::add, a, random_tensor({5}, DType::i32, 0, 1, 2)),
                       doctest::Contains("are not broadcast to one shape"), Error);
  Tensor flags = random_tensor({4}, DType::boolean, 0, 1, 3);
  CHECK_THROWS_WITH_AS(emulated_backend().binary(BinaryOp::mul, flags, flags),
                       "[mul] expects a numeric dtype, got bool", Error);
}

TEST_CASE("where selects bit patterns for every dtype and layout") {
  for_each_schedule([&] {
    for (DType t : {DType::f64, DType::f32, DType::bf16, DType::i32, DType::i64, DType::boolean}) {
      Tensor cond = random_tensor(kShape, DType::boolean, 0, 1, 41);
      Tensor a = random_tensor(kShape, t, -9, 9, 42);
      Tensor b = random_tensor(kShape, t, -9, 9, 43);
      for (Layout l : kLayouts) {
        const std::string what = cat("where ", t, " ", layout_name(l));
        expect_same(emulated_backend().where(in_layout(cond, l), a, b), cpu().where(in_layout(cond, l), a, b),
                    what + " cond");
        expect_same(emulated_backend().where(cond, in_layout(a, l), in_layout(b, l)),
                    cpu().where(cond, in_layout(a, l), in_layout(b, l)), what + " values");
        expect_same(emulated_backend().where(cond, a, b), cpu().where(cond, a, b), what + " contiguous");
      }
    }
  });
  Tensor x = random_tensor({3}, DType::f32, 0, 1, 1);
  CHECK_THROWS_WITH_AS(emulated_backend().where(x, x, x), "[where] condition must be bool, got f32", Error);
}
