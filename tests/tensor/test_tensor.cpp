// Tensors and views: shapes, strides, sharing, copies, dtype conversion and printing.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <numeric>

#include "tensor/ops.hpp"

using namespace cotan;

namespace {

std::vector<double> iota_values(int64_t n) {
  std::vector<double> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), 0.0);
  return v;
}

// Element (i0, i1, i2) of a row-major [d0, d1, d2] buffer.
double at3(const std::vector<double>& v, const Shape& s, int64_t i, int64_t j, int64_t k) {
  return v[size_t((i * s[1] + j) * s[2] + k)];
}

}  // namespace

TEST_CASE("creation fills and reports metadata") {
  Tensor z = zeros({2, 3}, DType::f64);
  CHECK(z.shape() == Shape{2, 3});
  CHECK(z.strides() == Strides{3, 1});
  CHECK(z.numel() == 6);
  CHECK(z.dtype() == DType::f64);
  CHECK(z.is_contiguous());
  for (double v : z.to_vector<double>()) CHECK(v == 0.0);
  for (float v : full({4}, 2.5f).to_vector<float>()) CHECK(v == 2.5f);
  CHECK(scalar(3.0, DType::i32).item<int32_t>() == 3);
  CHECK(arange(2, 11, 3).to_vector<int64_t>() == std::vector<int64_t>{2, 5, 8});
  CHECK(arange(5, 0, -2).to_vector<int64_t>() == std::vector<int64_t>{5, 3, 1});
  CHECK(arange(0, 0).numel() == 0);
}

TEST_CASE("reshape is a view when the layout allows, a copy otherwise") {
  Tensor x = from_vector(iota_values(24), {2, 3, 4});
  Tensor r = reshape(x, {6, -1});
  CHECK(r.shape() == Shape{6, 4});
  CHECK(r.same_storage(x));
  // A transposed tensor cannot be flattened without a copy.
  Tensor t = transpose(x, 0, 2);  // [4, 3, 2]
  CHECK_FALSE(t.is_contiguous());
  Tensor f = reshape(t, {24});
  CHECK_FALSE(f.same_storage(x));
  auto v = iota_values(24);
  auto fv = f.to_vector<double>();
  for (int64_t k = 0, n = 0; k < 4; ++k)
    for (int64_t j = 0; j < 3; ++j)
      for (int64_t i = 0; i < 2; ++i, ++n) CHECK(fv[size_t(n)] == at3(v, {2, 3, 4}, i, j, k));
  // Splitting a dim of a permuted view stays a view.
  Tensor p = permute(x, {1, 0, 2});                // [3, 2, 4], strides [4, 12, 1]
  Tensor s = reshape(p, {3, 2, 2, 2});
  CHECK(s.same_storage(x));
  CHECK(s.strides() == Strides{4, 12, 2, 1});
}

TEST_CASE("slice with step, negative bounds and clamping") {
  Tensor x = from_vector(iota_values(20), {4, 5});
  Tensor s = slice(x, 1, 1, -1, 2);  // columns 1 and 3
  CHECK(s.shape() == Shape{4, 2});
  CHECK(s.same_storage(x));
  CHECK(s.to_vector<double>() == std::vector<double>{1, 3, 6, 8, 11, 13, 16, 18});
  CHECK(slice(x, 0, 2, 100).shape() == Shape{2, 5});
  CHECK(slice(x, 0, 3, 1).numel() == 0);
  Tensor rows = slice(x, 0, 1, 4, 2);
  CHECK(rows.to_vector<double>() == std::vector<double>{5, 6, 7, 8, 9, 15, 16, 17, 18, 19});
}

TEST_CASE("broadcast_to, squeeze and unsqueeze") {
  Tensor x = from_vector(std::vector<double>{1, 2, 3}, {3, 1});
  Tensor b = broadcast_to(x, {2, 3, 4});
  CHECK(b.strides() == Strides{0, 1, 0});
  auto bv = b.to_vector<double>();
  CHECK(bv.size() == 24);
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 3; ++j)
      for (int64_t k = 0; k < 4; ++k) CHECK(bv[size_t((i * 3 + j) * 4 + k)] == double(j + 1));
  CHECK(squeeze(x, 1).shape() == Shape{3});
  CHECK(unsqueeze(x, 0).shape() == Shape{1, 3, 1});
  CHECK(unsqueeze(x, -1).shape() == Shape{3, 1, 1});
  CHECK(squeeze(ones({1, 2, 1})).shape() == Shape{2});
}

TEST_CASE("concat, stack, split and chunk") {
  Tensor a = from_vector(std::vector<double>{1, 2, 3, 4}, {2, 2});
  Tensor b = from_vector(std::vector<double>{5, 6}, {2, 1});
  Tensor c = concat({a, b}, 1);
  CHECK(c.shape() == Shape{2, 3});
  CHECK(c.to_vector<double>() == std::vector<double>{1, 2, 5, 3, 4, 6});
  Tensor s = stack({a, a * 2.0}, 0);
  CHECK(s.shape() == Shape{2, 2, 2});
  CHECK(s.to_vector<double>() == std::vector<double>{1, 2, 3, 4, 2, 4, 6, 8});
  auto parts = split(c, {1, 2}, 1);
  CHECK(parts[0].to_vector<double>() == std::vector<double>{1, 3});
  CHECK(parts[1].to_vector<double>() == std::vector<double>{2, 5, 4, 6});
  auto chunks = chunk(arange(0, 7), 3);
  REQUIRE(chunks.size() == 3);
  CHECK(chunks[2].to_vector<int64_t>() == std::vector<int64_t>{6});
}

TEST_CASE("contiguous copies only non-contiguous tensors; clone always copies") {
  Tensor x = from_vector(iota_values(6), {2, 3});
  CHECK(contiguous(x).same_storage(x));
  Tensor t = contiguous(transpose(x));
  CHECK_FALSE(t.same_storage(x));
  CHECK(t.to_vector<double>() == std::vector<double>{0, 3, 1, 4, 2, 5});
  CHECK_FALSE(clone(x).same_storage(x));
}

TEST_CASE("casts round bf16 to nearest even and keep integers exact") {
  // 1 + 2^-8 is halfway between two bf16 values (1 and 1 + 2^-7): ties go to the even one (1).
  // 1 + 3 * 2^-8 is halfway between 1 + 2^-7 and 1 + 2^-6: ties go to 1 + 2^-6.
  Tensor x = from_vector(std::vector<float>{1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, -2.75f, 1e-3f}, {4});
  auto back = cast(cast(x, DType::bf16), DType::f32).to_vector<float>();
  CHECK(back[0] == 1.0f);
  CHECK(back[1] == 1.0f + 0x1p-6f);
  CHECK(back[2] == -2.75f);
  CHECK(std::fabs(back[3] - 1e-3f) < 1e-5f);
  Tensor big = from_vector(std::vector<int64_t>{int64_t(1) << 40, -7}, {2});
  CHECK(cast(big, DType::f64).to_vector<double>() == std::vector<double>{std::ldexp(1.0, 40), -7.0});
  CHECK(cast(from_vector(std::vector<double>{0.0, 2.5, -1.0}, {3}), DType::boolean).to_vector<bool>() ==
        std::vector<bool>{false, true, true});
}

TEST_CASE("as_strided refuses views outside the storage") {
  Tensor x = zeros({4});
  CHECK_THROWS_WITH_AS(x.as_strided({3}, {2}, 0),
                       "[as_strided] view [3] with strides [2] at offset 0 reaches outside a storage of 4 elements",
                       Error);
}

TEST_CASE("printing shows values, shape and dtype") {
  Tensor x = from_vector(std::vector<int32_t>{1, 2, 3, 4}, {2, 2});
  CHECK(x.str() == "tensor([[1, 2]\n  [3, 4]], shape=[2, 2], dtype=i32)");
  CHECK(scalar(0.5, DType::f64).str() == "tensor(0.5, shape=[], dtype=f64)");
}
