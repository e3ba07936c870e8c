// The cumsum kernels (cuda/kernels/cumsum.cuh) run by the SIMT emulator, against the CPU
// backend: forward and reverse along every axis, on contiguous, transposed, gapped and broadcast
// inputs, for every dtype; lines scanned in several chunks by a warp or a block, column layouts
// (one thread per line) and empty tensors, under two emulator schedules. Both backends
// accumulate in f64 (floats) or i64 (integers, bool): integers match bit for bit, floats within
// the dtype's tolerance.
#include "tests/cuda/kernel_check.hpp"

using namespace cotan;
using namespace kernel_check;

namespace {

constexpr DType kAllTypes[] = {DType::f64, DType::f32, DType::bf16, DType::i32, DType::i64, DType::boolean};

void check_cumsum(const Tensor& x, int64_t axis, bool reverse, const std::string& what) {
  const std::string full = cat(what, " ", x.dtype(), " ", to_string(x.shape()), " axis ", axis, " reverse ", reverse);
  Tensor want = cpu().cumsum(x, axis, reverse);
  Tensor got = emulated_backend().cumsum(x, axis, reverse);
  if (is_floating(want.dtype())) expect_close(got, want, full);
  else expect_same(got, want, full);
}

}  // namespace

TEST_CASE("cumsum matches the CPU along every axis, both directions, every dtype and layout") {
  for_each_schedule([&] {
    for (DType t : kAllTypes) {
      Tensor source = random_tensor({3, 5, 7}, t, -9, 9, 5 + uint64_t(t));
      for (Layout l : kLayouts)
        for (int64_t axis : {0, 1, 2, -1})
          for (bool reverse : {false, true}) check_cumsum(in_layout(source, l), axis, reverse, layout_name(l));
    }
  });
}

TEST_CASE("cumsum over lines of several chunks, and columns") {
  for_each_schedule([&] {
    for (DType t : {DType::f64, DType::f32, DType::bf16, DType::i32}) {
      // i32 values near the limits: the running sums wrap as on the CPU. Floats drift upwards:
      // running sums near zero after long cancellation would differ in more than f64's 1e-12.
      const double lo = t == DType::i32 ? -2e9 : -1, hi = t == DType::i32 ? 2e9 : 3;
      Tensor block_lines = random_tensor({3, 1000}, t, lo, hi, 21);
      Tensor warp_lines = random_tensor({5, 200}, t, lo, hi, 22);
      Tensor columns = random_tensor({300, 40}, t, lo, hi, 23);
      for (bool reverse : {false, true}) {
        check_cumsum(block_lines, 1, reverse, "block lines");
        check_cumsum(in_layout(block_lines, Layout::gapped), 1, reverse, "block lines gapped");
        check_cumsum(warp_lines, 1, reverse, "warp lines");
        check_cumsum(in_layout(warp_lines, Layout::transposed), 0, reverse, "warp lines transposed");
        check_cumsum(columns, 0, reverse, "columns");
        check_cumsum(in_layout(columns, Layout::broadcast), 0, reverse, "broadcast columns");
      }
    }
    check_cumsum(random_tensor({2, 700}, DType::boolean, 0, 1, 24), 1, true, "bool block lines");
  });
}

TEST_CASE("cumsum of empty tensors, and bad axes") {
  for (bool reverse : {false, true}) {
    check_cumsum(Tensor::empty({3, 0}, DType::f32), 1, reverse, "empty axis");
    check_cumsum(Tensor::empty({0, 4}, DType::i64), 1, reverse, "no lines");
  }
  CHECK_THROWS_WITH_AS(emulated_backend().cumsum(random_tensor({2, 3}, DType::f32, 0, 1, 1), 2, false),
                       doctest::Contains("out of range"), Error);
}
