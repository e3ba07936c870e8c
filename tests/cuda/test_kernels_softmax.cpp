// The softmax kernels (cuda/kernels/softmax.cuh) run by the SIMT emulator, against the CPU
// backend: softmax, log_softmax and logsumexp along every axis, on contiguous, transposed,
// gapped and broadcast inputs, for f64, f32 and bf16; lines longer than a warp's share (a block
// per line), column layouts (one thread per line), special values, empty axes and errors, under
// two emulator schedules. Results match within the dtype's tolerance (exp and log differ from
// the CPU's in the last bits).
#include "tests/cuda/kernel_check.hpp"

#include <limits>

using namespace cotan;
using namespace kernel_check;

namespace {

constexpr DType kFloatTypes[] = {DType::f64, DType::f32, DType::bf16};
enum class Kind { softmax, log_softmax, logsumexp };
constexpr Kind kKinds[] = {Kind::softmax, Kind::log_softmax, Kind::logsumexp};

const char* kind_name(Kind k) {
  return k == Kind::softmax ? "softmax" : k == Kind::log_softmax ? "log_softmax" : "logsumexp";
}

Tensor run(Backend& be, Kind k, const Tensor& x, int64_t axis) {
  switch (k) {
    case Kind::softmax: return be.softmax(x, axis);
    case Kind::log_softmax: return be.log_softmax(x, axis);
    case Kind::logsumexp: return be.logsumexp(x, axis);
  }
  return {};
}

void check_softmax(Kind k, const Tensor& x, int64_t axis, const std::string& what) {
  expect_close(run(emulated_backend(), k, x, axis), run(cpu(), k, x, axis),
               cat(what, " ", kind_name(k), " ", x.dtype(), " ", to_string(x.shape()), " axis ", axis));
}

}  // namespace

TEST_CASE("softmax kernels match the CPU along every axis, dtype and layout") {
  for_each_schedule([&] {
    for (DType t : kFloatTypes) {
      Tensor source = random_tensor({3, 5, 7}, t, -6, 6, 11);
      for (Layout l : kLayouts)
        for (Kind k : kKinds)
          for (int64_t axis : {0, 1, 2, -1}) check_softmax(k, in_layout(source, l), axis, layout_name(l));
    }
  });
}

TEST_CASE("softmax kernels on long lines (a block per line) and columns (a thread per line)") {
  for_each_schedule([&] {
    for (DType t : kFloatTypes) {
      Tensor rows = random_tensor({3, 2000}, t, -20, 20, 21);
      Tensor tall = random_tensor({1500, 3}, t, -20, 20, 22);  // long strided lines, too few for columns
      Tensor wide = random_tensor({64, 48}, t, -20, 20, 23);
      Tensor cube = random_tensor({4, 40, 33}, t, -20, 20, 24);
      for (Kind k : kKinds) {
        check_softmax(k, rows, 1, "block rows");
        check_softmax(k, in_layout(rows, Layout::gapped), 1, "block rows gapped");
        check_softmax(k, tall, 0, "block strided rows");
        check_softmax(k, wide, 0, "columns");
        check_softmax(k, in_layout(wide, Layout::transposed), 1, "transposed");
        check_softmax(k, cube, 1, "cube columns");
        check_softmax(k, in_layout(cube, Layout::broadcast), 0, "broadcast columns");
      }
    }
  });
}

TEST_CASE("softmax kernels on NaN, infinities and large values") {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::nan("");
  // Lines: large values (stability), one -inf, one +inf, a NaN, two +inf.
  const std::vector<double> v = {1000, 999, -1000, 998, 1, 2, -inf, 3, 1, inf, 2, 3, 1, 2, nan, 3, inf, 0, inf, -5};
  for (DType t : kFloatTypes) {
    Tensor x = make(v, {5, 4}, t);
    for (Kind k : kKinds) {
      check_softmax(k, x, 1, "specials");
      check_softmax(k, in_layout(x, Layout::transposed), 1, "specials transposed");
    }
  }
  // A line of -inf only: exp(-inf - 0) = 0, so softmax is 0 * (1 / 0) = NaN, log_softmax
  // -inf - log 0 = NaN and logsumexp -inf. The CPU's f64 path gives 1/n and a finite logsumexp
  // instead (its vectorized exp returns a tiny positive number rather than 0 for -inf), so the
  // expected values are written out.
  const std::vector<double> none = {-inf, -inf, -inf};
  for (DType t : kFloatTypes) {
    Tensor x = make(none, {1, 3}, t);
    for (double p : values(emulated_backend().softmax(x, 1))) CHECK(std::isnan(p));
    for (double p : values(emulated_backend().log_softmax(x, 1))) CHECK(std::isnan(p));
    CHECK(values(emulated_backend().logsumexp(x, 1)) == std::vector<double>{-inf});
    if (t != DType::f64)
      for (Kind k : kKinds) check_softmax(k, x, 1, "all -inf");
  }
}

TEST_CASE("softmax kernels on empty axes, and what the CPU rejects") {
  for (Kind k : kKinds) {
    check_softmax(k, Tensor::empty({3, 0}, DType::f32), 1, "empty axis");
    check_softmax(k, Tensor::empty({0, 4}, DType::f32), 1, "no lines");
  }
  Tensor ints = random_tensor({2, 3}, DType::i32, 0, 9, 1);
  CHECK_THROWS_WITH_AS(emulated_backend().softmax(ints, 1), "[softmax] expects a floating dtype, got i32", Error);
  CHECK_THROWS_WITH_AS(emulated_backend().logsumexp(ints, 0), "[logsumexp] expects a floating dtype, got i32", Error);
  CHECK_THROWS_WITH_AS(emulated_backend().log_softmax(random_tensor({2, 3}, DType::f32, 0, 1, 2), 2),
                       doctest::Contains("out of range"), Error);
}
