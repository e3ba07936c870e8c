// The reduction kernels (cuda/kernels/reduce.cuh) run by the SIMT emulator, against the CPU
// backend: sum, max, min, argmax and argmin over every axis set, with and without keepdim, on
// contiguous, transposed, gapped and broadcast inputs, for every dtype the CPU takes; long rows
// (a block per output, chunked two-pass folds), column layouts, special values, empty
// reductions and errors, under two emulator schedules. Sums fold in another order than the
// CPU's (both in f64 or i64), so floating sums match within the dtype's tolerance; max, min,
// argmax, argmin and integer sums match bit for bit.
#include "tests/cuda/kernel_check.hpp"

#include <limits>

using namespace cotan;
using namespace kernel_check;

namespace {

constexpr DType kFloatTypes[] = {DType::f64, DType::f32, DType::bf16};
constexpr DType kNumericTypes[] = {DType::f64, DType::f32, DType::bf16, DType::i32, DType::i64};
constexpr ReduceOp kOps[] = {ReduceOp::sum, ReduceOp::max, ReduceOp::min, ReduceOp::argmax, ReduceOp::argmin};
const Shape kShape = {3, 5, 7};

bool indexed(ReduceOp op) { return op == ReduceOp::argmax || op == ReduceOp::argmin; }

void check_reduce(ReduceOp op, const Tensor& x, const std::vector<int64_t>& axes, bool keepdim,
                  const std::string& what) {
  const std::string full = cat(what, " ", op_name(op), " ", x.dtype(), " axes ", to_string(axes), " keepdim ", keepdim);
  Tensor want = cpu().reduce(op, x, axes, keepdim);
  Tensor got = emulated_backend().reduce(op, x, axes, keepdim);
  if (op == ReduceOp::sum && is_floating(want.dtype())) expect_close(got, want, full);
  else expect_same(got, want, full);
}

// The axis sets an op takes on an ndim tensor: every subset ({} is all axes), or each single
// axis (also counted from the end) for argmax and argmin.
std::vector<std::vector<int64_t>> axis_sets(ReduceOp op, int64_t ndim) {
  std::vector<std::vector<int64_t>> sets;
  if (indexed(op)) {
    for (int64_t d = 0; d < ndim; ++d) sets.push_back({d});
    sets.push_back({-1});
    return sets;
  }
  for (int64_t mask = 0; mask < (int64_t(1) << ndim); ++mask) {
    std::vector<int64_t> set;
    for (int64_t d = 0; d < ndim; ++d)
      if (mask & (int64_t(1) << d)) set.push_back(d);
    sets.push_back(set);
  }
  return sets;
}

// Values in [lo, hi) rounded to integers, in dtype t: many ties for argmax and argmin.
Tensor integer_valued(const Shape& shape, DType t, double lo, double hi, uint64_t seed) {
  auto v = values(random_tensor(shape, DType::i64, lo, hi, seed));
  return make(v, shape, t);
}

}  // namespace

TEST_CASE("reductions match the CPU over every axis set, dtype and layout") {
  for_each_schedule([&] {
    for (DType t : kNumericTypes) {
      Tensor source = random_tensor(kShape, t, -9, 9, 3 + uint64_t(t));
      for (Layout l : kLayouts) {
        Tensor x = in_layout(source, l);
        for (ReduceOp op : kOps)
          for (const auto& axes : axis_sets(op, x.dim()))
            for (bool keepdim : {false, true}) check_reduce(op, x, axes, keepdim, layout_name(l));
      }
    }
    Tensor flags = random_tensor(kShape, DType::boolean, 0, 1, 5);
    for (Layout l : kLayouts)
      for (const auto& axes : axis_sets(ReduceOp::sum, 3)) check_reduce(ReduceOp::sum, in_layout(flags, l), axes, false, "bool");
  });
}

TEST_CASE("reductions over non-adjacent axes, size-1 dims and ties") {
  const Shape shape = {4, 1, 6, 5};
  for_each_schedule([&] {
    for (DType t : kFloatTypes) {
      Tensor source = integer_valued(shape, t, -3, 3, 13);  // ties everywhere
      for (Layout l : kLayouts) {
        Tensor x = in_layout(source, l);
        for (ReduceOp op : {ReduceOp::sum, ReduceOp::max, ReduceOp::min})
          for (std::vector<int64_t> axes : {std::vector<int64_t>{0, 2}, {1, 3}, {0, 3}, {1}, {0, 1, 3}})
            check_reduce(op, x, axes, true, layout_name(l));
        for (ReduceOp op : {ReduceOp::argmax, ReduceOp::argmin})
          for (int64_t axis : {0, 1, 2, 3}) check_reduce(op, x, {axis}, false, layout_name(l));
      }
    }
  });
}

TEST_CASE("long rows: a block per output, and chunked two-pass folds with few outputs") {
  for_each_schedule([&] {
    for (DType t : kFloatTypes) {
      // Rows longer than a warp's share: the block folds each output.
      Tensor rows = random_tensor({3, 3000}, t, -1, 3, 21);
      for (ReduceOp op : kOps) check_reduce(op, rows, {1}, false, "block rows");
      check_reduce(ReduceOp::sum, in_layout(rows, Layout::gapped), {1}, true, "block rows gapped");
      // Two outputs of 20000 positions: chunked, with ties across chunks for argmax / argmin.
      Tensor ties = integer_valued({2, 20000}, t, -40, 40, 22);
      for (ReduceOp op : kOps) check_reduce(op, ties, {1}, false, "chunked rows");
      // The whole tensor, one output, also gapped (positions 2 apart).
      Tensor all = random_tensor({256, 256}, t, -1, 3, 23);
      for (ReduceOp op : {ReduceOp::sum, ReduceOp::max, ReduceOp::min}) check_reduce(op, all, {}, false, "whole");
      check_reduce(ReduceOp::sum, in_layout(all, Layout::gapped), {}, false, "whole gapped");
    }
    Tensor ints = random_tensor({2, 20000}, DType::i32, -2000000000, 2000000000, 24);  // the i32 sum wraps
    for (ReduceOp op : kOps) check_reduce(op, ints, {1}, false, "chunked i32 rows");
  });
}

TEST_CASE("column reductions: leading axes, chunked long columns, transposed inputs") {
  for_each_schedule([&] {
    for (DType t : kFloatTypes) {
      Tensor wide = random_tensor({512, 40}, t, -1, 3, 31);  // two column tiles, the second partial
      for (ReduceOp op : kOps) check_reduce(op, wide, {0}, false, "columns");
      Tensor tall = integer_valued({4096, 12}, t, -40, 40, 32);  // few outputs, chunked, ties
      for (ReduceOp op : kOps) check_reduce(op, tall, {0}, true, "chunked columns");
      Tensor cube = random_tensor({8, 300, 20}, t, -1, 3, 33);  // two reduced dims merged
      for (ReduceOp op : {ReduceOp::sum, ReduceOp::max}) check_reduce(op, cube, {0, 1}, false, "chunked cube");
      check_reduce(ReduceOp::sum, cube, {0, 2}, false, "cube rows");
      Tensor transposed = in_layout(random_tensor({40, 300}, t, -1, 3, 34), Layout::transposed);
      for (ReduceOp op : kOps)
        for (int64_t axis : {0, 1}) check_reduce(op, transposed, {axis}, false, "transposed");
    }
    Tensor ints = random_tensor({300, 36}, DType::i64, -1000, 1000, 35);
    for (ReduceOp op : kOps) check_reduce(op, in_layout(ints, Layout::gapped), {0}, false, "gapped i64 leading axis");
    Tensor flags = random_tensor({3000, 9}, DType::boolean, 0, 1, 36);
    check_reduce(ReduceOp::sum, flags, {0}, false, "chunked bool columns");
  });
}

TEST_CASE("reductions of NaN, infinities and signed extremes") {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::nan("");
  // Rows: a NaN late, a NaN early, two NaNs, infinities only, ties, plain numbers.
  const std::vector<double> v = {1, 2, 3, nan, 5, -1, 7, 0,  nan, 1, 9, 9, 0,   -9, -9, 4,
                                 nan, 1, nan, 2, 3, 4, 5, 6, inf, -inf, inf, -inf, inf, -inf, inf, -inf,
                                 3, 3, 3, 3, 3, 3, 3, 3, -2, 8, 8, -2, 7, 1, -2, 8};
  for (DType t : kFloatTypes) {
    Tensor x = make(v, {6, 8}, t);
    for (ReduceOp op : kOps) {
      check_reduce(op, x, {1}, false, "specials");
      check_reduce(op, in_layout(x, Layout::transposed), {1}, false, "specials transposed");
    }
  }
  for (DType t : {DType::i32, DType::i64}) {
    const double lowest = t == DType::i32 ? -2147483648.0 : -9.2e18;
    Tensor x = make({lowest, -lowest - 1, 0, lowest, -lowest - 1, 5}, {2, 3}, t);
    for (ReduceOp op : kOps) check_reduce(op, x, {1}, false, "extremes");
  }
}

TEST_CASE("empty reductions, scalars, and what the CPU rejects") {
  Tensor empty_axis = Tensor::empty({4, 0, 3}, DType::f32);
  check_reduce(ReduceOp::sum, empty_axis, {1}, false, "empty axis");
  check_reduce(ReduceOp::sum, empty_axis, {1}, true, "empty axis");
  check_reduce(ReduceOp::sum, empty_axis, {0, 2}, false, "no outputs");
  check_reduce(ReduceOp::max, empty_axis, {0}, true, "no outputs");
  check_reduce(ReduceOp::sum, Tensor::empty({0}, DType::boolean), {}, false, "empty bool");
  CHECK_THROWS_WITH_AS(emulated_backend().reduce(ReduceOp::max, empty_axis, {1}, false),
                       "[max] cannot reduce over zero elements of shape [4, 0, 3]", Error);
  Tensor scalar = make({2.5}, {}, DType::f64);
  for (ReduceOp op : {ReduceOp::sum, ReduceOp::max, ReduceOp::min}) check_reduce(op, scalar, {}, false, "scalar");

  Tensor x = random_tensor({3, 4}, DType::f32, 0, 1, 41);
  CHECK_THROWS_WITH_AS(emulated_backend().reduce(ReduceOp::argmax, x, {0, 1}, false), "[argmax] expects exactly one axis, got 2",
                       Error);
  CHECK_THROWS_WITH_AS(emulated_backend().reduce(ReduceOp::argmin, x, {}, false), "[argmin] expects exactly one axis, got 0", Error);
  CHECK_THROWS_WITH_AS(emulated_backend().reduce(ReduceOp::sum, x, {2}, false), doctest::Contains("out of range"), Error);
  Tensor flags = random_tensor({3, 4}, DType::boolean, 0, 1, 42);
  CHECK_THROWS_WITH_AS(emulated_backend().reduce(ReduceOp::max, flags, {0}, false), "[max] does not support dtype bool", Error);
}

TEST_CASE("reductions give the same bits under every emulator schedule") {
  Tensor rows = random_tensor({2, 20000}, DType::f32, -1, 1, 51);
  Tensor cols = random_tensor({4096, 12}, DType::bf16, -1, 1, 52);
  std::vector<Tensor> first;
  for_each_schedule([&] {
    std::vector<Tensor> got = {emulated_backend().reduce(ReduceOp::sum, rows, {1}, false), emulated_backend().reduce(ReduceOp::sum, rows, {}, false),
                               emulated_backend().reduce(ReduceOp::sum, cols, {0}, false),
                               emulated_backend().reduce(ReduceOp::argmax, cols, {0}, false)};
    if (first.empty()) first = got;
    for (size_t i = 0; i < got.size(); ++i) expect_same(got[i], first[i], cat("result ", i));
  });
}
