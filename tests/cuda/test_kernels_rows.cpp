// The row kernels of the fused layers (cuda/kernels/rows.cuh) run by the SIMT emulator, against
// the CPU backend's row kernels (tensor/cpu/rows.cpp): rms_norm forward (y and the saved rstd) and backward
// (dx and the weight gradient, from the same rstd) with warp and block row groups, swiglu forward
// and backward over more elements than the grid covers at once, rope forward and backward on
// strided rows with broadcast tables; f64, f32 and bf16, under two emulator schedules (which must
// agree bit for bit).
#include "tests/cuda/kernel_check.hpp"

#include <functional>
#include <optional>
#include <vector>

#include "nn/layers.hpp"
#include "tensor/ops.hpp"

using namespace cotan;
using namespace kernel_check;

namespace {

constexpr DType kDtypes[] = {DType::f64, DType::f32, DType::bf16};

Tensor normal(const Shape& shape, uint64_t seed, DType dtype, double scale = 1.0) {
  Generator gen(seed);
  return cast(randn(shape, gen, DType::f64) * scale, dtype);
}

// run() -> results, under every schedule: each result close to the CPU's `want`, and bit for bit
// the results of the first schedule.
void check_kernel(const std::function<std::vector<Tensor>()>& run, const std::vector<Tensor>& want,
                  const std::string& what) {
  std::optional<std::vector<Tensor>> first;
  for_each_schedule([&] {
    const std::vector<Tensor> got = run();
    REQUIRE(got.size() == want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      expect_close(got[i], want[i], cat(what, " result ", i));
      if (first) expect_same(got[i], (*first)[i], cat(what, " result ", i, " under another schedule"));
    }
    if (!first) first = got;
  });
}

}  // namespace

TEST_CASE("rms_norm kernels match the CPU: forward, saved rstd, dx and the weight gradient") {
  uint64_t seed = 1;
  // D = 40 and 300: one warp per row; D = 1100: the whole block per row (past kShortRow).
  for (int64_t dim : {40, 300, 1100})
    for (DType dt : kDtypes) {
      const int64_t n_rows = dim > 1000 ? 5 : 37;  // more rows than the emulator's groups
      const std::string what = cat("rms_norm ", dt, " [", n_rows, ", ", dim, "]");
      const Tensor x = normal({n_rows, dim}, ++seed, dt, 2.0);
      const Tensor weight = cast(1.0 + normal({dim}, ++seed, DType::f64, 0.3), dt);
      const Tensor dy = normal({n_rows, dim}, ++seed, dt);
      const RmsNormForward cpu_forward = cpu().rms_norm_forward(x, weight, 1e-5);
      check_kernel(
          [&] {
            const RmsNormForward f = emulated_backend().rms_norm_forward(x, weight, 1e-5);
            return std::vector<Tensor>{f.y, f.rstd};
          },
          {cpu_forward.y, cpu_forward.rstd}, what + " forward");
      const RmsNormGrads cpu_grads = cpu().rms_norm_backward(dy, x, weight, cpu_forward.rstd);
      check_kernel(
          [&] {
            const RmsNormGrads g = emulated_backend().rms_norm_backward(dy, x, weight, cpu_forward.rstd);
            return std::vector<Tensor>{g.dx, g.dweight};
          },
          {cpu_grads.dx, cpu_grads.dweight}, what + " backward");
    }
}

TEST_CASE("rms_norm kernels: strided x is read through a copy, no rows gives a zero weight gradient") {
  const Tensor x = transpose(normal({24, 6}, 5, DType::f32));  // [6, 24], strides (1, 6)
  const Tensor weight = normal({24}, 6, DType::f32);
  const RmsNormForward want = cpu().rms_norm_forward(x, weight, 1e-6);
  const RmsNormForward got = emulated_backend().rms_norm_forward(x, weight, 1e-6);
  expect_close(got.y, want.y, "strided y");
  expect_close(got.rstd, want.rstd, "strided rstd");

  const Tensor empty = Tensor::empty({0, 24}, DType::f32);
  const RmsNormGrads none =
      emulated_backend().rms_norm_backward(empty, empty, weight, Tensor::empty({0}, DType::f32));
  CHECK(none.dx.shape() == Shape{0, 24});
  for (double v : values(none.dweight)) CHECK(v == 0);
  CHECK_THROWS_WITH_AS(emulated_backend().rms_norm_forward(x, normal({5}, 7, DType::f32), 1e-6),
                       doctest::Contains("[rms_norm]"), Error);
}

TEST_CASE("swiglu kernels match the CPU: forward and both gradients") {
  uint64_t seed = 100;
  for (DType dt : kDtypes) {
    // 1500 elements: three trips of the emulator's two-block grid-stride loop. |g| up to ~15.
    const Tensor g = normal({3, 500}, ++seed, dt, 5.0), u = normal({3, 500}, ++seed, dt);
    const Tensor dy = normal({3, 500}, ++seed, dt);
    const std::string what = cat("swiglu ", dt);
    check_kernel([&] { return std::vector<Tensor>{emulated_backend().swiglu_forward(g, u)}; },
                 {cpu().swiglu_forward(g, u)}, what + " forward");
    const SwigluGrads want = cpu().swiglu_backward(dy, g, u);
    check_kernel(
        [&] {
          const SwigluGrads got = emulated_backend().swiglu_backward(dy, g, u);
          return std::vector<Tensor>{got.dg, got.du};
        },
        {want.dg, want.du}, what + " backward");
    // A strided g goes through a copy.
    const Tensor g_t = transpose(contiguous(transpose(g)));
    expect_close(emulated_backend().swiglu_forward(g_t, u), cpu().swiglu_forward(g, u), what + " strided");
  }
}

TEST_CASE("rope kernels match the CPU: strided rows, broadcast tables, forward and backward") {
  uint64_t seed = 200;
  for (int64_t d : {2, 16, 66})
    for (DType dt : kDtypes) {
      const int64_t b = 2, h = 3, t = 5;
      const std::string what = cat("rope ", dt, " d=", d);
      auto [cos, sin] = nn::Rope{d, 10000.0, {}}.tables(t, dt, Device::cpu());
      const Shape shape{b, h, t, d};
      // q as the attention layer passes it: [B, T, H, d] viewed as [B, H, T, d].
      const Tensor x = permute(normal({b, t, h, d}, ++seed, dt), {0, 2, 1, 3});
      const Tensor dy = normal(shape, ++seed, dt);
      const Tensor c = broadcast_to(cos, shape), s = broadcast_to(sin, shape);
      check_kernel([&] { return std::vector<Tensor>{emulated_backend().rope_forward(x, c, s)}; },
                   {cpu().rope_forward(x, c, s)}, what + " forward");
      check_kernel([&] { return std::vector<Tensor>{emulated_backend().rope_backward(dy, c, s)}; },
                   {cpu().rope_backward(dy, c, s)}, what + " backward");
    }
  // A non-unit last stride is the caller's to fix (nn::rope copies such operands).
  const Tensor x = transpose(normal({8, 4}, 9, DType::f32));
  CHECK_THROWS_WITH_AS(emulated_backend().rope_forward(x, x, x), doctest::Contains("[rope]"), Error);
}
