// The fused AdamW kernel (cuda/kernels/optim.cuh) through the emulator against the CPU's fused
// update (train::adamw_update): the same element function, so equal bits in f64 and f32.
#include "tests/cuda/kernel_check.hpp"

#include <cmath>

#include "tensor/ops.hpp"
#include "train/optim.hpp"

using namespace cotan;
using namespace cotan::train;
using namespace kernel_check;

TEST_CASE("adamw kernel: emulated CUDA equals the CPU update") {
  const AdamWScalars<double> k{1.0 - 1e-3 * 0.1, 0.9, 0.1, 0.95, 0.05, std::sqrt(1 - std::pow(0.95, 2.0)), 1e-8,
                               1e-3 / (1 - std::pow(0.9, 2.0))};
  Generator gen(5);
  for (DType dtype : {DType::f64, DType::f32}) {
    for (int64_t n : {int64_t(1), int64_t(37), int64_t(5000)}) {  // one partial warp, several blocks
      CAPTURE(dtype);
      CAPTURE(n);
      Tensor p = randn({n}, gen, dtype), g = randn({n}, gen, dtype), m = randn({n}, gen, dtype) * 0.1;
      Tensor v = square(randn({n}, gen, dtype)) * 0.01;
      const AdamWTensors want = adamw_update(p, g, m, v, k);
      for_each_schedule([&] {
        const AdamWTensors got = emulated_backend().adamw_update(p, g, m, v, k);
        CHECK(bits(got.p) == bits(want.p));
        CHECK(bits(got.m) == bits(want.m));
        CHECK(bits(got.v) == bits(want.v));
      });
    }
  }
  Tensor a = zeros({4}), b = zeros({4}, DType::f64);
  CHECK_THROWS_WITH(emulated_backend().adamw_update(a, b, a, a, k),
                    doctest::Contains("expects contiguous tensors of one shape and dtype"));
}
