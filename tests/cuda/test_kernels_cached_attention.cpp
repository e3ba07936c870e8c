// The cached attention kernel (cuda/kernels/cached_attention.cuh) run by the SIMT emulator,
// against the scalar reference from the definition and the CPU kernel, for softmax, sink and
// affine, GQA, one and several new queries, ragged rows, more slots than a block has threads,
// f32 and bf16, under two emulator schedules (which must agree bit for bit); and k and v read
// through their strides (views of longer buffers, rows sharing one batch entry) or, with a head
// dim that is not contiguous, copied.
#include "tests/cuda/kernel_check.hpp"

#include <cmath>
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

// The KV cache hands the kernel views: the first S slots of longer buffers (the slots past S hold
// NaN here, which must never be read), and for a repeated cache rows that share one batch entry
// (stride 0). The kernel reads them through their strides and must give the bits it gives on
// contiguous copies; k and v whose head dim is not contiguous are copied, with the same bits.
TEST_CASE("cached attention kernel reads k and v through their strides") {
  uint64_t seed = 900;
  for (const Case& c : {kCases[3], kCases[4], kCases[5], kCases[8]}) {
    INFO(c.str());
    for (DType dtype : {DType::f32, DType::bf16}) {
      CAPTURE(dtype);
      NoGrad no_grad;
      const CachedAttentionSpec dense = make_spec(c, dtype, ++seed);
      // x's values in slots 3 ... S + 2 of a longer buffer: a view with a storage offset
      auto in_buffer = [&](const Tensor& x) {
        Tensor buffer = full({c.b, c.hkv, c.s + 8, c.d}, std::nan(""), dtype);
        cpu().assign(slice(buffer, 2, 3, c.s + 3), x);
        return slice(buffer, 2, 3, c.s + 3);
      };
      CachedAttentionSpec viewed = dense;
      viewed.k = in_buffer(dense.k);
      viewed.v = in_buffer(dense.v);
      REQUIRE_FALSE(viewed.k.is_contiguous());
      REQUIRE(viewed.k.offset() > 0);
      expect_same(emulated_backend().cached_attention(viewed), emulated_backend().cached_attention(dense),
                  "k and v in longer buffers");
      // Head dim not contiguous (slot-major buffers [B, Hkv, d, S], transposed): copied first.
      CachedAttentionSpec transposed = dense;
      transposed.k = transpose(contiguous(transpose(dense.k, 2, 3)), 2, 3);
      transposed.v = transpose(contiguous(transpose(dense.v, 2, 3)), 2, 3);
      REQUIRE(transposed.k.strides()[3] == c.s);
      expect_same(emulated_backend().cached_attention(transposed), emulated_backend().cached_attention(dense),
                  "k and v whose head dim is not contiguous");
      // Every row reads batch entry 0 (stride 0), against copies of it.
      CachedAttentionSpec shared = dense;
      shared.k = broadcast_to(slice(viewed.k, 0, 0, 1), dense.k.shape());
      shared.v = broadcast_to(slice(viewed.v, 0, 0, 1), dense.v.shape());
      CachedAttentionSpec copied = dense;
      copied.k = contiguous(shared.k);
      copied.v = contiguous(shared.v);
      if (c.kind == CoreKind::affine) continue;  // u would have to follow the shared v
      expect_same(emulated_backend().cached_attention(shared), emulated_backend().cached_attention(copied),
                  "rows sharing one batch entry of k and v");
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
