// The cached attention kernel (cuda/kernels/cached_attention.cuh) run by the SIMT emulator,
// against the scalar reference from the definition and the CPU kernel, for softmax, sink and
// affine, GQA, one and several new queries, ragged rows, more slots than a block has threads,
// f32 and bf16, under two emulator schedules (which must agree bit for bit).
#include "tests/cuda/kernel_check.hpp"

#include <vector>

#include "autograd/autograd.hpp"
#include "nn/kv_cache.hpp"
#include "tensor/ops.hpp"
#include "tests/cached_attention_cases.hpp"

using namespace cotan;
using namespace kernel_check;
using namespace cached_attention_cases;

TEST_CASE("cached attention kernel matches the definition and the CPU kernel, under every schedule") {
  uint64_t seed = 500;
  for (const Case& c : kCases) {
    INFO(c.str());
    for (DType dtype : {DType::f32, DType::bf16}) {
      CAPTURE(dtype);
      const CachedAttentionSpec spec = make_spec(c, dtype, ++seed);
      const std::vector<double> want = reference(c, spec);
      NoGrad no_grad;
      const Tensor cpu_out = cpu().cached_attention(spec);
      Tensor first;
      for_each_schedule([&] {
        const Tensor got = emulated_backend().cached_attention(spec);
        CHECK(got.dtype() == dtype);
        CHECK(got.shape() == spec.q.shape());
        CHECK(max_rel_error(got, want) <= (dtype == DType::f32 ? 1e-5 : 2e-2));
        if (dtype == DType::f32) CHECK(max_rel_error(got, kernel_check::values(cpu_out)) <= 1e-5);
        if (first.defined()) expect_same(got, first, "the same under every schedule");
        else first = got;
      });
    }
  }
}

TEST_CASE("cached attention kernel: the backend takes f32 and bf16 up to head dim 128, the op composes the rest") {
  Backend& kernels = emulated_backend();
  CHECK(kernels.has_cached_attention_kernel(DType::f32, 128));
  CHECK(kernels.has_cached_attention_kernel(DType::bf16, 64));
  CHECK_FALSE(kernels.has_cached_attention_kernel(DType::f64, 64));
  CHECK_FALSE(kernels.has_cached_attention_kernel(DType::f32, 256));
  const Case c{CoreKind::softmax, 1, 2, 1, 1, 4, 130};
  const CachedAttentionSpec spec = make_spec(c, DType::f32, 7);
  NoGrad no_grad;
  CHECK_THROWS_WITH_AS(kernels.cached_attention(spec), doctest::Contains("head dim 130"), std::exception);
}
