// The cached attention of incremental decoding (nn::cached_attention, the CPU kernel in
// tensor/cpu/cached_attention.cpp) and its composed form (nn::cached_attention_composed), both
// against a scalar reference from the definition, for softmax, sink and affine, GQA, one and
// several new queries, ragged rows, caches read through views; and the op's errors.
#include <doctest/doctest.h>

#include <tbb/global_control.h>

#include "autograd/autograd.hpp"
#include "nn/kv_cache.hpp"
#include "tensor/op_table.hpp"
#include "tensor/ops.hpp"
#include "tests/cached_attention_cases.hpp"

using namespace cotan;
using namespace cotan::nn;
using namespace cached_attention_cases;

TEST_CASE("cached attention: the CPU kernel and the composed op equal the definition (f64 1e-12, f32 1e-5, bf16 2e-2)") {
  uint64_t seed = 40;
  for (const Case& c : kCases) {
    INFO(c.str());
    for (DType dtype : {DType::f64, DType::f32, DType::bf16}) {
      CAPTURE(dtype);
      const double tolerance = dtype == DType::f64 ? 1e-12 : dtype == DType::f32 ? 1e-5 : 2e-2;
      const CachedAttentionSpec spec = make_spec(c, dtype, ++seed);
      const std::vector<double> want = reference(c, spec);
      NoGrad no_grad;
      const Tensor fused = cached_attention(spec), composed = cached_attention_composed(spec);
      CHECK(fused.dtype() == dtype);
      CHECK(fused.shape() == spec.q.shape());
      CHECK(max_rel_error(fused, want) <= tolerance);
      if (dtype != DType::bf16) CHECK(max_rel_error(composed, want) <= tolerance);  // bf16 rounds each composed op
    }
  }
}

TEST_CASE("cached attention reads the cache through views: a slice of a longer buffer, rows broadcast") {
  const Case c{CoreKind::affine, 2, 4, 2, 2, 10, 8, true};
  const CachedAttentionSpec spec = make_spec(c, DType::f64, 91);
  const std::vector<double> want = reference(c, spec);
  NoGrad no_grad;
  // k and v as the first S slots of a buffer twice as long.
  Generator gen(92);
  CachedAttentionSpec viewed = spec;
  for (Tensor* t : {&viewed.k, &viewed.v}) {
    Tensor longer = concat({*t, randn(t->shape(), gen, DType::f64)}, 2);
    *t = slice(longer, 2, 0, c.s);
    REQUIRE(!t->is_contiguous());
  }
  CHECK(max_rel_error(cached_attention(viewed), want) <= 1e-12);

  // One row's cache broadcast to three rows (stride 0): every row gives row 0's output.
  const Case one{CoreKind::sink, 1, 2, 1, 1, 6, 8};
  const CachedAttentionSpec single = make_spec(one, DType::f64, 93);
  CachedAttentionSpec wide = single;
  wide.q = broadcast_to(single.q, {3, 2, 1, 8});
  wide.k = broadcast_to(single.k, {3, 1, 6, 8});
  wide.v = broadcast_to(single.v, {3, 1, 6, 8});
  wide.visible = broadcast_to(single.visible, {3, 6});
  const Tensor out = cached_attention(wide);
  const Tensor row0 = cached_attention(single);
  for (int64_t r = 0; r < 3; ++r) CHECK(max(abs(slice(out, 0, r, r + 1) - row0)).item<double>() == 0);
}

TEST_CASE("cached attention gives the same bits on 1 and 2 threads") {
  const Case c{CoreKind::affine, 2, 4, 2, 3, 64, 32, true};
  const CachedAttentionSpec spec = make_spec(c, DType::f32, 95);
  NoGrad no_grad;
  Tensor one, two;
  {
    tbb::global_control limit(tbb::global_control::max_allowed_parallelism, 1);
    one = cached_attention(spec);
  }
  {
    tbb::global_control limit(tbb::global_control::max_allowed_parallelism, 2);
    two = cached_attention(spec);
  }
  CHECK(max(abs(one - two)).item<double>() == 0);
}

TEST_CASE("cached attention's errors name the tensor and the shapes") {
  const Case c{CoreKind::affine, 1, 2, 1, 1, 4, 8};
  const CachedAttentionSpec good = make_spec(c, DType::f32, 97);
  NoGrad no_grad;
  auto refuses = [](CachedAttentionSpec spec, const char* text) {
    CAPTURE(text);
    CHECK_THROWS_WITH_AS(cached_attention(spec), doctest::Contains(text), std::exception);
  };
  CachedAttentionSpec s = good;
  s.k = zeros({1, 3, 4, 8});
  refuses(s, "[cached_attention] k must be [1, Hkv, S, 8] with 2 % Hkv == 0, got [1, 3, 4, 8]");
  Generator gen(1);
  s = good;
  s.q = randn({1, 2, 5, 8}, gen);
  refuses(s, "must include the 5 new ones");
  s = good;
  s.visible = zeros({1, 4});
  refuses(s, "visible must be bool [1, 4]");
  s = good;
  s.count = Tensor();
  refuses(s, "the affine kind needs alpha, alpha_ma, u and count");
  s = good;
  s.u = zeros({1, 1, 1, 7});
  refuses(s, "u must be [1, 1, 1, 8], got [1, 1, 1, 7]");
  s = good;
  s.alpha = cast(s.alpha, DType::f64);
  refuses(s, "alpha is f64, q is f32");
  s = good;
  s.kind = CoreKind::softmax;
  refuses(s, "are for the affine kind only");
}

TEST_CASE("cached attention is inference only: tracked inputs are refused while grad mode is on") {
  const Case c{CoreKind::softmax, 1, 2, 1, 1, 4, 8};
  CachedAttentionSpec spec = make_spec(c, DType::f64, 99);
  spec.q = track(spec.q);
  CHECK_THROWS_WITH_AS(cached_attention(spec), doctest::Contains("inference only"), std::exception);
  NoGrad no_grad;
  CHECK_NOTHROW(cached_attention(spec));
}
