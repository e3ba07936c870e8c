// Philox known answers, the draw layout of tensor/random.hpp, distribution moments, and bitwise
// reproducibility (seed, offset, thread count).
#include <doctest/doctest.h>

#include <tbb/global_control.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <numbers>
#include <vector>

#include "tensor/op_table.hpp"
#include "tensor/ops.hpp"
#include "tensor/random.hpp"

using namespace cotan;

namespace {

template <class T>
std::vector<double> values(const Tensor& t) {
  REQUIRE(t.is_contiguous());
  const T* p = static_cast<const T*>(t.data_ptr());
  std::vector<double> out(size_t(t.numel()));
  for (size_t i = 0; i < out.size(); ++i) out[i] = convert<double>(p[i]);
  return out;
}

struct Moments {
  double mean = 0, var = 0, skew = 0, kurtosis = 0, min = INFINITY, max = -INFINITY;
};

Moments moments(const std::vector<double>& v) {
  Moments m;
  for (double x : v) {
    m.mean += x;
    m.min = std::min(m.min, x);
    m.max = std::max(m.max, x);
  }
  m.mean /= double(v.size());
  double m2 = 0, m3 = 0, m4 = 0;
  for (double x : v) {
    double d = x - m.mean;
    m2 += d * d;
    m3 += d * d * d;
    m4 += d * d * d * d;
  }
  m2 /= double(v.size()), m3 /= double(v.size()), m4 /= double(v.size());
  m.var = m2;
  m.skew = m3 / std::pow(m2, 1.5);
  m.kurtosis = m4 / (m2 * m2);
  return m;
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.nbytes() == b.nbytes() && std::memcmp(a.data_ptr(), b.data_ptr(), a.nbytes()) == 0;
}

}  // namespace

TEST_CASE("philox4x32-10 known answers (Random123 kat_vectors)") {
  // counter words (c0, c1, c2, c3) = (counter lo, counter hi, stream lo, stream hi); key (k0, k1).
  struct Kat {
    std::array<uint32_t, 4> counter;
    std::array<uint32_t, 2> key;
    std::array<uint32_t, 4> expected;
  };
  const Kat kats[] = {
      {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
      {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
       {0xffffffff, 0xffffffff},
       {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
      {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
       {0xa4093822, 0x299f31d0},
       {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
  };
  for (const Kat& k : kats) {
    uint64_t counter = uint64_t(k.counter[0]) | uint64_t(k.counter[1]) << 32;
    uint64_t stream = uint64_t(k.counter[2]) | uint64_t(k.counter[3]) << 32;
    uint64_t key = uint64_t(k.key[0]) | uint64_t(k.key[1]) << 32;
    CHECK(Philox::block(counter, key, stream) == k.expected);
  }
}

TEST_CASE("uniform maps cover [0, 1)") {
  CHECK(Philox::uniform24(0) == 0.0f);
  CHECK(Philox::uniform24(0xffffffffu) < 1.0f);
  CHECK(Philox::uniform24(0xffffffffu) == 1.0f - 1.0f / 16777216.0f);
  CHECK(Philox::uniform53(0, 0) == 0.0);
  CHECK(Philox::uniform53(0xffffffffu, 0xffffffffu) < 1.0);
  CHECK(Philox::uniform53(0xffffffffu, 0xffffffffu) == 1.0 - std::ldexp(1.0, -53));
}

TEST_CASE("draws follow the documented layout") {
  const uint64_t seed = 1234;
  SUBCASE("uniform f32: word i % 4 of block start + i / 4") {
    Generator gen(seed, 7);
    Tensor t = rand({11}, gen);
    CHECK(gen.offset() == 7 + 3);
    const float* p = t.data<float>();
    for (int64_t i = 0; i < 11; ++i) {
      auto w = Philox::block(7 + uint64_t(i / 4), seed);
      CHECK(p[i] == Philox::uniform24(w[size_t(i % 4)]));
    }
  }
  SUBCASE("uniform f64: words 2 (i % 2), 2 (i % 2) + 1 of block start + i / 2") {
    Generator gen(seed, 0);
    Tensor t = rand({5}, gen, DType::f64);
    CHECK(gen.offset() == 3);
    const double* p = t.data<double>();
    for (int64_t i = 0; i < 5; ++i) {
      auto w = Philox::block(uint64_t(i / 2), seed);
      size_t j = size_t(2 * (i % 2));
      CHECK(p[i] == Philox::uniform53(w[j], w[j + 1]));
    }
  }
  SUBCASE("normal f32: Box-Muller on words 0 and 1") {
    Generator gen(seed, 3);
    Tensor t = randn({6}, gen);
    CHECK(gen.offset() == 3 + 3);
    const float* p = t.data<float>();
    for (int64_t i = 0; i < 6; ++i) {
      auto w = Philox::block(3 + uint64_t(i / 2), seed);
      double u1 = Philox::uniform24(w[0]), u2 = Philox::uniform24(w[1]);
      double r = std::sqrt(-2 * std::log(1 - u1)), angle = 2 * std::numbers::pi * u2;
      double expected = i % 2 == 0 ? r * std::cos(angle) : r * std::sin(angle);
      CHECK(p[i] == doctest::Approx(expected).epsilon(1e-5));
    }
  }
  SUBCASE("normal f64: Box-Muller on words (0, 1) and (2, 3)") {
    Generator gen(seed, 0);
    Tensor t = randn({4}, gen, DType::f64);
    const double* p = t.data<double>();
    for (int64_t i = 0; i < 4; ++i) {
      auto w = Philox::block(uint64_t(i / 2), seed);
      double u1 = Philox::uniform53(w[0], w[1]), u2 = Philox::uniform53(w[2], w[3]);
      double r = std::sqrt(-2 * std::log(1 - u1)), angle = 2 * std::numbers::pi * u2;
      CHECK(p[i] == doctest::Approx(i % 2 == 0 ? r * std::cos(angle) : r * std::sin(angle)).epsilon(1e-13));
    }
  }
  SUBCASE("randint: low + floor(u (high - low)) with 53-bit u") {
    Generator gen(seed, 0);
    Tensor t = randint({5}, -10, 90, gen);
    CHECK(gen.offset() == 3);
    const int64_t* p = t.data<int64_t>();
    for (int64_t i = 0; i < 5; ++i) {
      auto w = Philox::block(uint64_t(i / 2), seed);
      size_t j = size_t(2 * (i % 2));
      CHECK(p[i] == -10 + int64_t(std::floor(Philox::uniform53(w[j], w[j + 1]) * 100)));
    }
  }
  SUBCASE("bernoulli: uniform24 < p") {
    Generator gen(seed, 0);
    Tensor t = bernoulli({9}, 0.4, gen);
    CHECK(t.dtype() == DType::boolean);
    CHECK(gen.offset() == 3);
    const bool* p = t.data<bool>();
    for (int64_t i = 0; i < 9; ++i) {
      auto w = Philox::block(uint64_t(i / 4), seed);
      CHECK(p[i] == (Philox::uniform24(w[size_t(i % 4)]) < 0.4));
    }
  }
  SUBCASE("consecutive block-aligned draws continue one stream") {
    Generator one(seed), two(seed);
    Tensor whole = rand({16}, one);
    Tensor first = rand({8}, two), second = rand({8}, two);
    CHECK(one == two);
    CHECK(std::memcmp(whole.data_ptr(), first.data_ptr(), 32) == 0);
    CHECK(std::memcmp(static_cast<char*>(whole.data_ptr()) + 32, second.data_ptr(), 32) == 0);
  }
}

TEST_CASE("uniform draws stay in range with the right moments") {
  const int64_t n = 1 << 20;
  for (DType dtype : {DType::f32, DType::f64, DType::bf16}) {
    CAPTURE(dtype);
    Generator gen(42);
    Tensor t = rand({n}, gen, dtype);
    auto v = dtype == DType::f64 ? values<double>(t) : dtype == DType::f32 ? values<float>(t) : values<bf16>(t);
    Moments m = moments(v);
    CHECK(m.min >= 0.0);
    CHECK(m.max < 1.0);
    CHECK(m.mean == doctest::Approx(0.5).epsilon(0.005));
    CHECK(m.var == doctest::Approx(1.0 / 12).epsilon(0.01));
  }
  SUBCASE("U[a, b)") {
    Generator gen(5);
    Tensor t = cpu_backend().random(RandomOp::uniform, {n}, DType::f32, gen, -2.0, 3.0);
    Moments m = moments(values<float>(t));
    CHECK(m.min >= -2.0);
    CHECK(m.max < 3.0);
    CHECK(m.mean == doctest::Approx(0.5).epsilon(0.01));
    CHECK(m.var == doctest::Approx(25.0 / 12).epsilon(0.01));
  }
  SUBCASE("bf16 never rounds up to the excluded bound") {
    Generator gen(9);
    Tensor t = cpu_backend().random(RandomOp::uniform, {n}, DType::bf16, gen, 0.0, 1.0);
    auto v = values<bf16>(t);
    CHECK(*std::max_element(v.begin(), v.end()) == double(1.0f - 1.0f / 256));
  }
}

TEST_CASE("normal draws have normal moments") {
  const int64_t n = 1 << 20;
  for (DType dtype : {DType::f32, DType::f64, DType::bf16}) {
    CAPTURE(dtype);
    Generator gen(7);
    Tensor t = randn({n}, gen, dtype);
    auto v = dtype == DType::f64 ? values<double>(t) : dtype == DType::f32 ? values<float>(t) : values<bf16>(t);
    CHECK(std::all_of(v.begin(), v.end(), [](double x) { return std::isfinite(x); }));
    Moments m = moments(v);
    CHECK(std::abs(m.mean) < 0.005);
    CHECK(m.var == doctest::Approx(1.0).epsilon(0.01));
    CHECK(std::abs(m.skew) < 0.02);
    CHECK(m.kurtosis == doctest::Approx(3.0).epsilon(0.02));
  }
  SUBCASE("N(a, b^2)") {
    Generator gen(8);
    Tensor t = cpu_backend().random(RandomOp::normal, {n}, DType::f32, gen, 2.0, 3.0);
    Moments m = moments(values<float>(t));
    CHECK(m.mean == doctest::Approx(2.0).epsilon(0.01));
    CHECK(m.var == doctest::Approx(9.0).epsilon(0.01));
  }
}

TEST_CASE("randint stays in [low, high) and hits every value") {
  for (DType dtype : {DType::i64, DType::i32}) {
    CAPTURE(dtype);
    Generator gen(11);
    const int64_t n = 100000;
    Tensor t = randint({n}, -3, 7, gen, dtype);
    CHECK(t.dtype() == dtype);
    auto v = dtype == DType::i64 ? values<int64_t>(t) : values<int32_t>(t);
    std::array<int64_t, 10> counts{};
    int64_t outside = 0;
    for (double x : v) {
      if (x >= -3 && x < 7 && x == std::floor(x)) counts[size_t(x + 3)] += 1;
      else outside += 1;
    }
    CHECK(outside == 0);
    for (int64_t c : counts) CHECK(std::abs(double(c) - n / 10.0) < 5 * std::sqrt(n * 0.09));
  }
  SUBCASE("a one-value range") {
    Generator gen(1);
    auto v = values<int64_t>(randint({100}, 5, 6, gen));
    CHECK(std::count(v.begin(), v.end(), 5.0) == 100);
  }
}

TEST_CASE("bernoulli matches its rate") {
  const int64_t n = 1 << 20;
  for (double p : {0.0, 0.1, 0.5, 0.9, 1.0}) {
    CAPTURE(p);
    Generator gen(3);
    auto v = values<bool>(bernoulli({n}, p, gen));
    double rate = 0;
    for (double x : v) rate += x;
    rate /= double(n);
    CHECK(std::abs(rate - p) <= 5 * std::sqrt(p * (1 - p) / double(n)) + 1e-12);
  }
}

TEST_CASE("seeds and offsets") {
  const Shape shape{1000};
  Generator a(123), b(123), c(124);
  Tensor ta = randn(shape, a), tb = randn(shape, b), tc = randn(shape, c);
  CHECK(same_bytes(ta, tb));
  CHECK_FALSE(same_bytes(ta, tc));
  CHECK(a.offset() == 500);
  // The next draw from the same generator starts at a new offset: different numbers.
  Tensor next = randn(shape, a);
  CHECK_FALSE(same_bytes(ta, next));
  // A generator rebuilt at that offset replays it.
  Generator replay(123, 500);
  CHECK(same_bytes(next, randn(shape, replay)));
  // Different dtypes advance by the blocks they touched.
  Generator g(1);
  rand({10}, g, DType::f32);
  CHECK(g.offset() == 3);
  rand({10}, g, DType::f64);
  CHECK(g.offset() == 8);
  randint({3}, 0, 5, g);
  CHECK(g.offset() == 10);
  bernoulli({4}, 0.5, g);
  CHECK(g.offset() == 11);
  rand({0}, g);
  CHECK(g.offset() == 11);
}

TEST_CASE("random bits do not depend on the thread count") {
  const Shape shape{3, 700001};  // many parallel chunks, not a multiple of 4
  auto draw_all = [&] {
    Generator gen(77, 5);
    return std::vector<Tensor>{rand(shape, gen), rand(shape, gen, DType::f64), rand(shape, gen, DType::bf16),
                               randn(shape, gen), randn(shape, gen, DType::f64), randint(shape, -5, 1000, gen),
                               bernoulli(shape, 0.25, gen)};
  };
  std::vector<Tensor> serial, parallel;
  {
    tbb::global_control limit(tbb::global_control::max_allowed_parallelism, 1);
    serial = draw_all();
  }
  {
    tbb::global_control limit(tbb::global_control::max_allowed_parallelism, 2);
    parallel = draw_all();
  }
  REQUIRE(serial.size() == parallel.size());
  for (size_t i = 0; i < serial.size(); ++i) {
    CAPTURE(i);
    CHECK(same_bytes(serial[i], parallel[i]));
  }
}

TEST_CASE("random rejects dtypes it cannot draw") {
  Generator gen(0);
  CHECK_THROWS_WITH_AS(cpu_backend().random(RandomOp::uniform, {4}, DType::i64, gen, 0, 1),
                       "[rand] expects a floating dtype, got i64", Error);
  CHECK_THROWS_WITH_AS(cpu_backend().random(RandomOp::normal, {4}, DType::i32, gen, 0, 1),
                       "[randn] expects a floating dtype, got i32", Error);
  CHECK_THROWS_WITH_AS(cpu_backend().random(RandomOp::randint, {4}, DType::boolean, gen, 0, 2),
                       "[randint] expects an integer dtype, got bool", Error);
  CHECK(gen.offset() == 0);
}
