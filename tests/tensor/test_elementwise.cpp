// The CPU elementwise and memory kernels (unary, binary, where, assign, fill, arange, allocate)
// against plain scalar loops, on contiguous, strided and broadcast (stride 0) operands.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <numbers>
#include <string>
#include <vector>

#include "tensor/cpu/memory_cache.hpp"
#include "tensor/op_table.hpp"
#include "tensor/random.hpp"

using namespace cotan;

namespace {

Backend& be() { return cpu_backend(); }

// Row-major values of any (strided) tensor, read by walking its strides: independent of the
// kernels under test.
std::vector<double> read(const Tensor& t) {
  std::vector<double> out;
  out.reserve(size_t(t.numel()));
  if (t.numel() == 0) return out;
  std::vector<int64_t> index(size_t(t.dim()), 0);
  dispatch_dtype(t.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* base = static_cast<const T*>(t.data_ptr());
    for (int64_t i = 0; i < t.numel(); ++i) {
      int64_t offset = 0;
      for (size_t d = 0; d < index.size(); ++d) offset += index[d] * t.strides()[d];
      out.push_back(convert<double>(base[offset]));
      for (size_t d = index.size(); d-- > 0;) {
        if (++index[d] < t.shape()[d]) break;
        index[d] = 0;
      }
    }
  });
  return out;
}

// A contiguous tensor of `dtype` holding `values` (converted).
Tensor make(const std::vector<double>& values, const Shape& shape, DType dtype) {
  REQUIRE(int64_t(values.size()) == numel(shape));
  Tensor t = Tensor::empty(shape, dtype);
  dispatch_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    T* p = static_cast<T*>(t.data_ptr());
    for (size_t i = 0; i < values.size(); ++i) p[i] = convert<T>(values[i]);
  });
  return t;
}

// Uniform values in [lo, hi) (integers for integer dtypes), stored in `dtype`.
Tensor random_tensor(const Shape& shape, DType dtype, double lo, double hi, uint64_t seed) {
  Generator gen(seed);
  if (is_integral(dtype)) return be().random(RandomOp::randint, shape, dtype, gen, std::floor(lo), std::floor(hi));
  Tensor wide = be().random(RandomOp::uniform, shape, DType::f64, gen, lo, hi);
  Tensor out = Tensor::empty(shape, dtype);
  be().assign(out, wide);
  return out;
}

// Tolerance of a result in `dtype` against a double reference computed from the same inputs.
bool close(double got, double want, DType dtype) {
  if (std::isnan(want)) return std::isnan(got);
  if (std::isinf(want)) return got == want;
  double rtol = dtype == DType::f64 ? 1e-12 : dtype == DType::f32 ? 2e-6 : 1e-2;
  double atol = dtype == DType::f64 ? 1e-14 : dtype == DType::f32 ? 1e-6 : 1e-2;
  if (is_integral(dtype) || dtype == DType::boolean) return got == want;
  return std::abs(got - want) <= atol + rtol * std::abs(want);
}

void check_values(const Tensor& got, const std::vector<double>& want, DType dtype) {
  auto values = read(got);
  REQUIRE(values.size() == want.size());
  int64_t bad = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    if (close(values[i], want[i], dtype)) continue;
    if (++bad <= 5) MESSAGE("element ", i, ": got ", values[i], ", want ", want[i]);
  }
  CHECK(bad == 0);
}

const double kSqrt2OverPi = std::sqrt(2.0 / std::numbers::pi);

struct UnaryCase {
  UnaryOp op;
  double a, b;  // the op's parameters
  double lo, hi;  // input range
  std::function<double(double)> ref;
};

std::vector<UnaryCase> unary_cases() {
  auto sigmoid = [](double x) { return 1 / (1 + std::exp(-x)); };
  return {
      {UnaryOp::neg, 0, 0, -4, 4, [](double x) { return -x; }},
      {UnaryOp::exp, 0, 0, -6, 6, [](double x) { return std::exp(x); }},
      {UnaryOp::log, 0, 0, 0.01, 8, [](double x) { return std::log(x); }},
      {UnaryOp::sqrt, 0, 0, 0, 8, [](double x) { return std::sqrt(x); }},
      {UnaryOp::rsqrt, 0, 0, 0.01, 8, [](double x) { return 1 / std::sqrt(x); }},
      {UnaryOp::tanh, 0, 0, -6, 6, [](double x) { return std::tanh(x); }},
      {UnaryOp::sigmoid, 0, 0, -12, 12, sigmoid},
      {UnaryOp::silu, 0, 0, -12, 12, [=](double x) { return x * sigmoid(x); }},
      {UnaryOp::relu, 0, 0, -4, 4, [](double x) { return x > 0 ? x : 0.0; }},
      {UnaryOp::gelu_tanh, 0, 0, -6, 6,
       [](double x) { return 0.5 * x * (1 + std::tanh(kSqrt2OverPi * (x + 0.044715 * x * x * x))); }},
      {UnaryOp::softplus, 0, 0, -30, 30, [](double x) { return std::log1p(std::exp(x)); }},
      {UnaryOp::abs, 0, 0, -4, 4, [](double x) { return std::abs(x); }},
      {UnaryOp::clamp, -1, 2, -4, 4, [](double x) { return std::min(std::max(x, -1.0), 2.0); }},
      {UnaryOp::pow, 2.5, 0, 0.01, 4, [](double x) { return std::pow(x, 2.5); }},
      {UnaryOp::pow, 3, 0, -4, 4, [](double x) { return x * x * x; }},
      {UnaryOp::pow, 2, 0, -4, 4, [](double x) { return x * x; }},
      {UnaryOp::pow, 0.5, 0, 0, 4, [](double x) { return std::sqrt(x); }},
      {UnaryOp::pow, -1, 0, 0.25, 4, [](double x) { return 1 / x; }},
      {UnaryOp::sign, 0, 0, -4, 4, [](double x) { return double((x > 0) - (x < 0)); }},
      {UnaryOp::square, 0, 0, -4, 4, [](double x) { return x * x; }},
      {UnaryOp::reciprocal, 0, 0, 0.25, 4, [](double x) { return 1 / x; }},
  };
}

// The layouts each kernel is checked on: x is [R, C] (or its transpose's view), made from a
// base tensor.
struct Layout {
  const char* name;
  Shape base_shape;
  std::function<Tensor(const Tensor&)> view;
};

std::vector<Layout> layouts() {
  return {
      {"contiguous", {37, 51}, [](const Tensor& t) { return t; }},
      {"large contiguous (parallel)", {257, 1031}, [](const Tensor& t) { return t; }},
      {"transposed", {51, 37}, [](const Tensor& t) { return t.as_strided({37, 51}, {1, 37}, 0); }},
      {"every other column", {37, 102}, [](const Tensor& t) { return t.as_strided({37, 51}, {102, 2}, 0); }},
      {"large strided (parallel)", {600, 401},
       [](const Tensor& t) { return t.as_strided({300, 400}, {802, 1}, 1); }},
      {"scalar", {}, [](const Tensor& t) { return t; }},
      {"empty", {0, 5}, [](const Tensor& t) { return t; }},
  };
}

}  // namespace

TEST_CASE("unary floating ops match scalar references") {
  for (DType dtype : {DType::f32, DType::f64, DType::bf16}) {
    for (const UnaryCase& c : unary_cases()) {
      for (const Layout& layout : layouts()) {
        CAPTURE(dtype);
        CAPTURE(op_name(c.op));
        CAPTURE(c.a);
        CAPTURE(std::string(layout.name));
        Tensor x = layout.view(random_tensor(layout.base_shape, dtype, c.lo, c.hi, 17));
        Tensor y = be().unary(c.op, x, c.a, c.b);
        CHECK(y.shape() == x.shape());
        CHECK(y.dtype() == dtype);
        CHECK(y.is_contiguous());
        std::vector<double> want;
        for (double v : read(x)) {
          double r = c.ref(v);
          // bf16 results are the reference rounded to bf16.
          want.push_back(dtype == DType::bf16 ? double(float(bf16(float(r)))) : r);
        }
        check_values(y, want, dtype);
      }
    }
  }
}

TEST_CASE("unary ops at the edges of their range") {
  for (DType dtype : {DType::f32, DType::f64}) {
    CAPTURE(dtype);
    const double inf = std::numeric_limits<double>::infinity(), nan = std::nan("");
    Tensor x = make({-1000, -100, -30, 0, 30, 100, 1000}, {7}, dtype);
    check_values(be().unary(UnaryOp::sigmoid, x, 0, 0),
                 {0, 1 / (1 + std::exp(100.0)), 1 / (1 + std::exp(30.0)), 0.5, 1 / (1 + std::exp(-30.0)), 1, 1},
                 dtype);
    for (double v : read(be().unary(UnaryOp::silu, x, 0, 0))) CHECK(std::isfinite(v));
    check_values(be().unary(UnaryOp::tanh, x, 0, 0), {-1, -1, -1, 0, 1, 1, 1}, dtype);
    check_values(be().unary(UnaryOp::gelu_tanh, x, 0, 0), {0, 0, 0, 0, 30, 100, 1000}, dtype);
    Tensor special = make({-inf, 0, inf, nan}, {4}, dtype);
    check_values(be().unary(UnaryOp::exp, special, 0, 0), {0, 1, inf, nan}, dtype);
    check_values(be().unary(UnaryOp::log, special, 0, 0), {nan, -inf, inf, nan}, dtype);
    check_values(be().unary(UnaryOp::relu, special, 0, 0), {0, 0, inf, nan}, dtype);
    check_values(be().unary(UnaryOp::clamp, special, -1, 1), {-1, 0, 1, nan}, dtype);
    check_values(be().unary(UnaryOp::clamp, special, 1, -1), {-1, -1, -1, nan}, dtype);
    check_values(be().unary(UnaryOp::sign, special, 0, 0), {-1, 0, 1, nan}, dtype);
    check_values(be().unary(UnaryOp::sigmoid, special, 0, 0), {0, 0.5, 1, nan}, dtype);
  }
}

TEST_CASE("unary ops on integers") {
  for (DType dtype : {DType::i32, DType::i64}) {
    CAPTURE(dtype);
    Tensor x = make({-7, -1, 0, 1, 5, 100}, {2, 3}, dtype);
    check_values(be().unary(UnaryOp::neg, x, 0, 0), {7, 1, 0, -1, -5, -100}, dtype);
    check_values(be().unary(UnaryOp::abs, x, 0, 0), {7, 1, 0, 1, 5, 100}, dtype);
    check_values(be().unary(UnaryOp::sign, x, 0, 0), {-1, -1, 0, 1, 1, 1}, dtype);
    check_values(be().unary(UnaryOp::square, x, 0, 0), {49, 1, 0, 1, 25, 10000}, dtype);
    check_values(be().unary(UnaryOp::relu, x, 0, 0), {0, 0, 0, 1, 5, 100}, dtype);
    check_values(be().unary(UnaryOp::clamp, x, -1.5, 4.5), {-1, -1, 0, 1, 4, 4}, dtype);
    check_values(be().unary(UnaryOp::clamp, x, 3, 2), {2, 2, 2, 2, 2, 2}, dtype);  // hi wins over lo
    // Strided input.
    check_values(be().unary(UnaryOp::neg, x.as_strided({3, 2}, {1, 3}, 0), 0, 0), {7, -1, 1, -5, 0, -100}, dtype);
    Tensor logical = be().unary(UnaryOp::logical_not, x, 0, 0);
    CHECK(logical.dtype() == DType::boolean);
    check_values(logical, {0, 0, 1, 0, 0, 0}, DType::boolean);
  }
}

TEST_CASE("float-only unary ops reject integers with a clear message") {
  Tensor i64 = make({1, 2}, {2}, DType::i64);
  Tensor i32 = make({1, 2}, {2}, DType::i32);
  Tensor mask = make({1, 0}, {2}, DType::boolean);
  CHECK_THROWS_WITH_AS(be().unary(UnaryOp::exp, i64, 0, 0), "[exp] expects a floating dtype, got i64", Error);
  CHECK_THROWS_WITH_AS(be().unary(UnaryOp::log, i32, 0, 0), "[log] expects a floating dtype, got i32", Error);
  CHECK_THROWS_WITH_AS(be().unary(UnaryOp::sigmoid, i64, 0, 0), "[sigmoid] expects a floating dtype, got i64",
                       Error);
  CHECK_THROWS_WITH_AS(be().unary(UnaryOp::pow, i64, 2, 0), "[pow] expects a floating dtype, got i64", Error);
  CHECK_THROWS_WITH_AS(be().unary(UnaryOp::reciprocal, i32, 0, 0),
                       "[reciprocal] expects a floating dtype, got i32", Error);
  CHECK_THROWS_WITH_AS(be().unary(UnaryOp::neg, mask, 0, 0), "[neg] expects a numeric dtype, got bool", Error);
  Tensor flipped = be().unary(UnaryOp::logical_not, mask, 0, 0);
  check_values(flipped, {0, 1}, DType::boolean);
  check_values(be().unary(UnaryOp::logical_not, make({0, -0.0, 2, std::nan("")}, {4}, DType::f32), 0, 0),
               {1, 1, 0, 0}, DType::boolean);
}

namespace {

struct BinaryCase {
  BinaryOp op;
  std::function<double(double, double)> ref;
};

std::vector<BinaryCase> binary_cases() {
  return {
      {BinaryOp::add, [](double x, double y) { return x + y; }},
      {BinaryOp::sub, [](double x, double y) { return x - y; }},
      {BinaryOp::mul, [](double x, double y) { return x * y; }},
      {BinaryOp::div, [](double x, double y) { return x / y; }},
      {BinaryOp::maximum, [](double x, double y) { return std::max(x, y); }},
      {BinaryOp::minimum, [](double x, double y) { return std::min(x, y); }},
      {BinaryOp::eq, [](double x, double y) { return double(x == y); }},
      {BinaryOp::ne, [](double x, double y) { return double(x != y); }},
      {BinaryOp::lt, [](double x, double y) { return double(x < y); }},
      {BinaryOp::le, [](double x, double y) { return double(x <= y); }},
      {BinaryOp::gt, [](double x, double y) { return double(x > y); }},
      {BinaryOp::ge, [](double x, double y) { return double(x >= y); }},
      {BinaryOp::logical_and, [](double x, double y) { return double(x != 0 && y != 0); }},
      {BinaryOp::logical_or, [](double x, double y) { return double(x != 0 || y != 0); }},
  };
}

// Pairs of operands of one shape: b is contiguous, broadcast along rows, columns or entirely, or
// strided.
struct BinaryLayout {
  const char* name;
  Shape shape;
  Shape b_base;
  std::function<Tensor(const Tensor&)> b_view;
};

std::vector<BinaryLayout> binary_layouts() {
  return {
      {"same shape", {23, 45}, {23, 45}, [](const Tensor& t) { return t; }},
      {"row broadcast", {23, 45}, {45}, [](const Tensor& t) { return t.as_strided({23, 45}, {0, 1}, 0); }},
      {"column broadcast", {23, 45}, {23}, [](const Tensor& t) { return t.as_strided({23, 45}, {1, 0}, 0); }},
      {"scalar broadcast", {23, 45}, {}, [](const Tensor& t) { return t.as_strided({23, 45}, {0, 0}, 0); }},
      {"transposed", {23, 45}, {45, 23}, [](const Tensor& t) { return t.as_strided({23, 45}, {1, 23}, 0); }},
      {"large row broadcast (parallel)", {300, 1024}, {1024},
       [](const Tensor& t) { return t.as_strided({300, 1024}, {0, 1}, 0); }},
      {"large contiguous (parallel)", {300, 1024}, {300, 1024}, [](const Tensor& t) { return t; }},
      {"3-d middle broadcast", {5, 7, 9}, {5, 1, 9},
       [](const Tensor& t) { return t.as_strided({5, 7, 9}, {9, 0, 1}, 0); }},
  };
}

}  // namespace

TEST_CASE("binary ops match scalar references") {
  for (DType dtype : {DType::f32, DType::f64, DType::bf16, DType::i32, DType::i64}) {
    for (const BinaryLayout& layout : binary_layouts()) {
      const bool integer = is_integral(dtype);
      Tensor a = random_tensor(layout.shape, dtype, -20, 20, 1);
      Tensor b_base = random_tensor(layout.b_base, dtype, -20, 20, 2);
      if (integer) {  // no zero divisors: integer division by zero is an error (tested below)
        std::vector<double> values = read(b_base);
        for (double& v : values) v = v == 0 ? 1 : v;
        b_base = make(values, layout.b_base, dtype);
      }
      Tensor b = layout.b_view(b_base);
      // A few exact ties, so eq / le / ge see equal operands.
      std::vector<double> av = read(a), bv = read(b);
      for (size_t i = 0; i < av.size(); i += 7) av[i] = bv[i];
      a = make(av, layout.shape, dtype);
      for (const BinaryCase& c : binary_cases()) {
        CAPTURE(dtype);
        CAPTURE(op_name(c.op));
        CAPTURE(std::string(layout.name));
        Tensor y = be().binary(c.op, a, b);
        CHECK(y.shape() == layout.shape);
        CHECK(y.is_contiguous());
        CHECK(y.dtype() == (is_comparison(c.op) ? DType::boolean : dtype));
        std::vector<double> want;
        for (size_t i = 0; i < av.size(); ++i) {
          double r = c.ref(av[i], bv[i]);
          if (integer && c.op == BinaryOp::div) r = double(int64_t(av[i]) / int64_t(bv[i]));
          if (dtype == DType::bf16 && !is_comparison(c.op)) r = double(float(bf16(float(r))));
          want.push_back(r);
        }
        check_values(y, want, is_comparison(c.op) ? DType::boolean : dtype);
      }
    }
  }
}

TEST_CASE("binary ops: NaN, integer wrap-around and division") {
  const double nan = std::nan("");
  Tensor a = make({1, nan, 3, nan}, {4}, DType::f32);
  Tensor b = make({nan, 2, 1, nan}, {4}, DType::f32);
  check_values(be().binary(BinaryOp::maximum, a, b), {nan, nan, 3, nan}, DType::f32);
  check_values(be().binary(BinaryOp::minimum, a, b), {nan, nan, 1, nan}, DType::f32);
  check_values(be().binary(BinaryOp::eq, a, b), {0, 0, 0, 0}, DType::boolean);
  check_values(be().binary(BinaryOp::ne, a, b), {1, 1, 1, 1}, DType::boolean);

  Tensor big = make({double(std::numeric_limits<int32_t>::max()), -7, 7, -7}, {4}, DType::i32);
  Tensor one = make({1, 2, -2, -2}, {4}, DType::i32);
  check_values(be().binary(BinaryOp::add, big, one), {double(std::numeric_limits<int32_t>::min()), -5, 5, -9},
               DType::i32);
  check_values(be().binary(BinaryOp::div, big, one), {double(std::numeric_limits<int32_t>::max()), -3, -3, 3},
               DType::i32);
  Tensor zero = make({1, 0, 1, 1}, {4}, DType::i32);
  CHECK_THROWS_WITH_AS(be().binary(BinaryOp::div, big, zero), "[div] integer division by zero", Error);
  Tensor lowest = make({double(std::numeric_limits<int64_t>::min())}, {1}, DType::i64);
  Tensor minus_one = make({-1}, {1}, DType::i64);
  CHECK(be().binary(BinaryOp::div, lowest, minus_one).data<int64_t>()[0] == std::numeric_limits<int64_t>::min());
}

TEST_CASE("binary ops on bool and argument errors") {
  Tensor p = make({0, 0, 1, 1}, {4}, DType::boolean);
  Tensor q = make({0, 1, 0, 1}, {4}, DType::boolean);
  check_values(be().binary(BinaryOp::logical_and, p, q), {0, 0, 0, 1}, DType::boolean);
  check_values(be().binary(BinaryOp::logical_or, p, q), {0, 1, 1, 1}, DType::boolean);
  check_values(be().binary(BinaryOp::eq, p, q), {1, 0, 0, 1}, DType::boolean);
  check_values(be().binary(BinaryOp::maximum, p, q), {0, 1, 1, 1}, DType::boolean);
  CHECK_THROWS_WITH_AS(be().binary(BinaryOp::add, p, q), "[add] expects a numeric dtype, got bool", Error);
  Tensor f = make({1, 2}, {2}, DType::f32);
  Tensor d = make({1, 2}, {2}, DType::f64);
  Tensor g = make({1, 2, 3}, {3}, DType::f32);
  CHECK_THROWS_WITH_AS(be().binary(BinaryOp::mul, f, d), "[mul] dtypes f32 and f64 differ", Error);
  CHECK_THROWS_WITH_AS(be().binary(BinaryOp::sub, f, g),
                       "[sub] operands of shapes [2] and [3] are not broadcast to one shape", Error);
}

TEST_CASE("where picks from a and b") {
  for (DType dtype : {DType::f32, DType::f64, DType::bf16, DType::i32, DType::i64, DType::boolean}) {
    for (const BinaryLayout& layout : binary_layouts()) {
      CAPTURE(dtype);
      CAPTURE(std::string(layout.name));
      Generator gen(4);
      Tensor cond = be().random(RandomOp::bernoulli, layout.shape, DType::boolean, gen, 0.5, 0);
      Tensor a = random_tensor(layout.shape, dtype == DType::boolean ? DType::i32 : dtype, 0, 2, 5);
      Tensor b = random_tensor(layout.b_base, dtype == DType::boolean ? DType::i32 : dtype, 0, 2, 6);
      if (dtype == DType::boolean) {
        Tensor a_bool = Tensor::empty(a.shape(), dtype), b_bool = Tensor::empty(b.shape(), dtype);
        be().assign(a_bool, a);
        be().assign(b_bool, b);
        a = a_bool, b = b_bool;
      }
      b = layout.b_view(b);
      Tensor y = be().where(cond, a, b);
      Tensor y_from_b_first = be().where(cond, b, a);
      auto cv = read(cond), av = read(a), bv = read(b);
      std::vector<double> want, want_swapped;
      for (size_t i = 0; i < cv.size(); ++i) {
        want.push_back(cv[i] ? av[i] : bv[i]);
        want_swapped.push_back(cv[i] ? bv[i] : av[i]);
      }
      check_values(y, want, dtype);
      check_values(y_from_b_first, want_swapped, dtype);
    }
  }
  SUBCASE("broadcast condition") {
    Tensor cond = make({1, 0, 1}, {3}, DType::boolean).as_strided({2, 3}, {0, 1}, 0);
    Tensor a = make({1, 2, 3, 4, 5, 6}, {2, 3}, DType::f32);
    Tensor b = make({-1}, {}, DType::f32).as_strided({2, 3}, {0, 0}, 0);
    check_values(be().where(cond, a, b), {1, -1, 3, 4, -1, 6}, DType::f32);
  }
  SUBCASE("errors") {
    Tensor a = make({1, 2}, {2}, DType::f32);
    CHECK_THROWS_WITH_AS(be().where(a, a, a), "[where] condition must be bool, got f32", Error);
  }
}

TEST_CASE("assign converts between every pair of dtypes") {
  const std::vector<double> source = {0, 1, -2, 3, 0.5, -0.25, 7, 100};
  const DType dtypes[] = {DType::f64, DType::f32, DType::bf16, DType::i32, DType::i64, DType::boolean};
  for (DType from : dtypes) {
    for (DType to : dtypes) {
      CAPTURE(from);
      CAPTURE(to);
      Tensor src = make(source, {2, 4}, from);
      Tensor dst = Tensor::empty({2, 4}, to);
      be().assign(dst, src);
      std::vector<double> want;
      for (double v : read(src)) {
        double r = v;
        if (to == DType::boolean) r = v != 0;
        else if (is_integral(to)) r = std::trunc(v);
        want.push_back(r);
      }
      check_values(dst, want, to);
      // Strided destination and source: a transposed copy.
      Tensor dst_t = Tensor::empty({4, 2}, to).as_strided({2, 4}, {1, 2}, 0);
      be().assign(dst_t, src.as_strided({2, 4}, {4, 1}, 0));
      CHECK(read(dst_t) == read(dst));
    }
  }
}

TEST_CASE("assign to bf16 rounds to nearest even") {
  const float tie_down = 1.0f + std::ldexp(1.0f, -8);                            // halfway 1 and next
  const float tie_up = 1.0f + std::ldexp(1.0f, -7) + std::ldexp(1.0f, -8);      // halfway odd and even
  const float above_tie = 1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20);  // just above halfway
  const float below_tie = 1.0f + std::ldexp(1.0f, -8) - std::ldexp(1.0f, -20);
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> in = {tie_down, tie_up, above_tie, below_tie, -tie_down, std::nanf(""), inf, -0.0f,
                           std::numeric_limits<float>::max(), 1e-40f};
  Tensor src = Tensor::empty({int64_t(in.size())}, DType::f32);
  std::memcpy(src.data_ptr(), in.data(), in.size() * sizeof(float));
  Tensor dst = Tensor::empty(src.shape(), DType::bf16);
  be().assign(dst, src);
  const bf16* out = dst.data<bf16>();
  CHECK(out[0].bits == 0x3f80);
  CHECK(out[1].bits == 0x3f82);
  CHECK(out[2].bits == 0x3f81);
  CHECK(out[3].bits == 0x3f80);
  CHECK(out[4].bits == 0xbf80);
  CHECK(std::isnan(float(out[5])));
  CHECK(out[6].bits == 0x7f80);
  CHECK(out[7].bits == 0x8000);
  CHECK(out[8].bits == 0x7f80);  // rounds up past the largest bf16
  CHECK(out[9].bits == bf16::round_from(1e-40f));
  // And back: bf16 -> f32 is exact.
  Tensor back = Tensor::empty(src.shape(), DType::f32);
  be().assign(back, dst);
  CHECK(back.data<float>()[1] == 1.0f + std::ldexp(1.0f, -6));
  CHECK(std::isnan(back.data<float>()[5]));
}

TEST_CASE("assign: special values and large strided copies") {
  Tensor src = make({std::nan(""), 0.5, -0.0, 3.9, -3.9}, {5}, DType::f32);
  Tensor as_bool = Tensor::empty({5}, DType::boolean);
  be().assign(as_bool, src);
  check_values(as_bool, {1, 1, 0, 1, 1}, DType::boolean);
  Tensor as_int = Tensor::empty({4}, DType::i32);
  be().assign(as_int, src.as_strided({4}, {1}, 1));
  check_values(as_int, {0, 0, 3, -3}, DType::i32);

  // 600 x 500 transposed into a contiguous 500 x 600, same dtype and converting.
  Tensor big = random_tensor({600, 500}, DType::f32, -1, 1, 3);
  for (DType to : {DType::f32, DType::f64, DType::bf16}) {
    CAPTURE(to);
    Tensor dst = Tensor::empty({500, 600}, to);
    Tensor view = big.as_strided({500, 600}, {1, 500}, 0);
    be().assign(dst, view);
    std::vector<double> want = read(view);
    if (to == DType::bf16)
      for (double& w : want) w = double(float(bf16(float(w))));
    CHECK(read(dst) == want);
  }
  // Broadcast source (stride 0) into a strided destination.
  Tensor row = make({1, 2, 3}, {3}, DType::i64);
  Tensor out = Tensor::empty({3, 4}, DType::f32);
  be().fill(out, -1);
  be().assign(out.as_strided({2, 3}, {4, 1}, 1), row.as_strided({2, 3}, {0, 1}, 0));
  check_values(out, {-1, 1, 2, 3, -1, 1, 2, 3, -1, -1, -1, -1}, DType::f32);
  CHECK_THROWS_WITH_AS(be().assign(out, row), "[assign] destination shape [3, 4] and source shape [3] differ", Error);
}

TEST_CASE("fill and arange") {
  Tensor t = Tensor::empty({3, 5}, DType::bf16);
  be().fill(t, 1.5);
  for (double v : read(t)) CHECK(v == 1.5);
  be().fill(t.as_strided({3}, {5}, 0), -2);
  check_values(t.as_strided({3, 2}, {5, 1}, 0), {-2, 1.5, -2, 1.5, -2, 1.5}, DType::bf16);
  Tensor flags = Tensor::empty({4}, DType::boolean);
  be().fill(flags, 2);
  check_values(flags, {1, 1, 1, 1}, DType::boolean);
  Tensor big = Tensor::empty({1 << 20}, DType::i32);
  be().fill(big, 7);
  int64_t wrong = 0;
  for (double v : read(big)) wrong += v != 7;
  CHECK(wrong == 0);

  check_values(be().arange(3, 2, 5, DType::i64), {3, 5, 7, 9, 11}, DType::i64);
  check_values(be().arange(1, -0.5, 4, DType::f32), {1, 0.5, 0, -0.5}, DType::f32);
  check_values(be().arange(0, 0.25, 3, DType::bf16), {0, 0.25, 0.5}, DType::bf16);
  CHECK(be().arange(0, 1, 0, DType::f32).numel() == 0);
}

TEST_CASE("allocate: aligned blocks, large ones reused by size") {
  for (size_t bytes : {size_t(0), size_t(1), size_t(100), size_t(4096), size_t(3) << 20}) {
    auto storage = be().allocate(bytes);
    CHECK(storage->nbytes == bytes);
    CHECK(reinterpret_cast<uintptr_t>(storage->data) % 64 == 0);
  }
  cpu::release_cached_memory();
  CHECK(cpu::cached_memory_bytes() == 0);
  const size_t big = size_t(5) << 20;
  void* first = nullptr;
  {
    auto storage = be().allocate(big);
    first = storage->data;
    std::memset(storage->data, 1, big);
  }
  CHECK(cpu::cached_memory_bytes() >= big);
  {
    auto again = be().allocate(big);
    CHECK(again->data == first);
    CHECK(cpu::cached_memory_bytes() == 0);
  }
  cpu::release_cached_memory();
  CHECK(cpu::cached_memory_bytes() == 0);

  // Mid-sized activations (64 KiB to 1 MiB) are cached too, in 16 KiB size classes: a request a
  // little smaller than a freed block of the same class gets that block back.
  const size_t mid = size_t(200) << 10;
  {
    auto storage = be().allocate(mid);
    first = storage->data;
  }
  CHECK(cpu::cached_memory_bytes() == size_t(208) << 10);
  {
    auto again = be().allocate(mid - 5000);
    CHECK(again->data == first);
  }
  // Below 64 KiB blocks go straight back to malloc.
  cpu::release_cached_memory();
  { auto small = be().allocate(size_t(60) << 10); }
  CHECK(cpu::cached_memory_bytes() == 0);
}
