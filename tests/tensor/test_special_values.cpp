// Special values through the CPU kernels at every vector width: each unary op on NaN, +-kInf,
// signed zeros, subnormals, overflow and underflow, in every floating dtype, at lengths that fill
// whole vectors (SSE, AVX2, AVX-512, unrolled) and leave tails; binary ops, reductions and softmax
// on the same values. The pure specials are checked against IEEE results written out by hand; the
// values at the edges of each function's range against long double <cmath>, rounded to the dtype.
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <numbers>
#include <string>
#include <vector>

#include "tensor/op_table.hpp"

using namespace cotan;

namespace {

using LD = long double;
const double kInf = std::numeric_limits<double>::infinity();
const double kNaN = std::numeric_limits<double>::quiet_NaN();

Backend& be() { return cpu_backend(); }

// Lengths of one element, a partial vector, whole vectors of each width, and whole vectors with
// tails (the packet loops of Eigen unroll up to 4 packets of 16 floats).
const std::vector<int64_t> kLengths = {1, 3, 8, 16, 17, 64, 67, 131};
const DType kFloatTypes[] = {DType::f64, DType::f32, DType::bf16};

Tensor filled(const std::vector<double>& pattern, int64_t n, DType dtype) {
  Tensor t = Tensor::empty({n}, dtype);
  dispatch_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    T* p = static_cast<T*>(t.data_ptr());
    for (int64_t i = 0; i < n; ++i) p[i] = convert<T>(pattern[size_t(i) % pattern.size()]);
  });
  return t;
}

std::vector<double> values(const Tensor& t) {
  std::vector<double> out(size_t(t.numel()));
  dispatch_dtype(t.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* p = static_cast<const T*>(t.data_ptr());
    for (size_t i = 0; i < out.size(); ++i) out[i] = convert<double>(p[i]);
  });
  return out;
}

// v rounded to dtype.
double round_to(double v, DType dtype) {
  if (dtype == DType::f32) return double(float(v));
  if (dtype == DType::bf16) return double(float(bf16(float(v))));
  return v;
}

double denorm_min(DType dtype) {
  return dtype == DType::f64 ? std::numeric_limits<double>::denorm_min()
                             : dtype == DType::f32 ? double(std::numeric_limits<float>::denorm_min())
                                                   : double(float(bf16(std::numeric_limits<float>::denorm_min())));
}

// Same class and sign as want: NaN for NaN, the same infinity, a zero of the same sign. Finite
// values agree to a relative tolerance that is loose for the dtype (the formulas cancel: gelu_tanh
// at -3.5 keeps 4 digits fewer than the long double reference, the packet pow is a few ulps off at
// 1e30) but far tighter than any special-value failure: an overflow to inf, a flush of a
// subnormal to 0 (the absolute floor is two subnormal steps) or a lost sign.
bool matches(double got, double want, DType dtype) {
  if (std::isnan(want)) return std::isnan(got);
  if (std::isinf(want) || want == 0) return got == want && std::signbit(got) == std::signbit(want);
  if (std::isnan(got) || std::isinf(got)) return false;
  const double rel = dtype == DType::f64 ? 1e-10 : dtype == DType::f32 ? 1e-4 : 1.6e-2;
  return std::abs(got - want) <= 2 * denorm_min(dtype) + rel * std::abs(want);
}

// Checks every element of `got` against want[i % want.size()].
void check_all(const Tensor& got, const std::vector<double>& want, DType dtype, const std::string& what) {
  const std::vector<double> v = values(got);
  int bad = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    const double w = want[i % want.size()];
    if (matches(v[i], w, dtype)) continue;
    if (++bad <= 4) MESSAGE(what, ": element ", i, " is ", v[i], ", want ", w);
  }
  CHECK_MESSAGE(bad == 0, what);
}

struct UnaryCase {
  UnaryOp op;
  double a = 0, b = 0;
  // The IEEE results on {NaN, +kInf, -kInf, +0, -0}, written out.
  std::vector<double> on_specials;
  // The function in long double, for the values at the edges of its range (intermediate results
  // that the formula holds in the compute type, like sigmoid's e^-x, rounded to it: they may
  // overflow there).
  std::function<LD(LD, DType)> exact;
};

const LD kSqrt2OverPi = std::sqrt(LD(2) / std::numbers::pi_v<LD>);

// v in the compute type of dtype (f32 for bf16): overflows to kInf where that type does.
LD in_compute(LD v, DType t) { return t == DType::f64 ? LD(double(v)) : LD(float(v)); }

LD sigmoid(LD x, DType t) { return 1 / (1 + in_compute(std::exp(-x), t)); }

std::vector<UnaryCase> cases() {
  return {
      {UnaryOp::neg, 0, 0, {kNaN, -kInf, kInf, -0.0, 0.0}, [](LD x, DType) { return -x; }},
      {UnaryOp::exp, 0, 0, {kNaN, kInf, 0.0, 1, 1}, [](LD x, DType) { return std::exp(x); }},
      {UnaryOp::log, 0, 0, {kNaN, kInf, kNaN, -kInf, -kInf}, [](LD x, DType) { return std::log(x); }},
      {UnaryOp::sqrt, 0, 0, {kNaN, kInf, kNaN, 0.0, -0.0}, [](LD x, DType) { return std::sqrt(x); }},
      {UnaryOp::rsqrt, 0, 0, {kNaN, 0.0, kNaN, kInf, -kInf}, [](LD x, DType) { return 1 / std::sqrt(x); }},
      {UnaryOp::tanh, 0, 0, {kNaN, 1, -1, 0.0, -0.0}, [](LD x, DType) { return std::tanh(x); }},
      {UnaryOp::sigmoid, 0, 0, {kNaN, 1, 0.0, 0.5, 0.5}, sigmoid},
      // x sigmoid(x): -kInf * 0 is NaN.
      {UnaryOp::silu, 0, 0, {kNaN, kInf, kNaN, 0.0, -0.0}, [](LD x, DType t) { return x * sigmoid(x, t); }},
      {UnaryOp::gelu_tanh, 0, 0, {kNaN, kInf, kNaN, 0.0, -0.0},
       [](LD x, DType t) {
         return LD(0.5) * x * (1 + std::tanh(kSqrt2OverPi * (x + LD(0.044715) * in_compute(x * x * x, t))));
       }},
      {UnaryOp::softplus, 0, 0, {kNaN, kInf, 0.0, std::numbers::ln2, std::numbers::ln2},
       [](LD x, DType) { return x > 0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x)); }},
      {UnaryOp::relu, 0, 0, {kNaN, kInf, 0.0, 0.0, -0.0}, [](LD x, DType) { return x < 0 ? LD(0) : x; }},
      {UnaryOp::abs, 0, 0, {kNaN, kInf, kInf, 0.0, 0.0}, [](LD x, DType) { return std::abs(x); }},
      {UnaryOp::clamp, -1, 2, {kNaN, 2, -1, 0.0, -0.0},
       [](LD x, DType) { return std::min(std::max(x, LD(-1)), LD(2)); }},
      {UnaryOp::sign, 0, 0, {kNaN, 1, -1, 0.0, -0.0}, [](LD x, DType) { return x > 0 ? LD(1) : x < 0 ? LD(-1) : x; }},
      {UnaryOp::square, 0, 0, {kNaN, kInf, kInf, 0.0, 0.0}, [](LD x, DType) { return x * x; }},
      {UnaryOp::reciprocal, 0, 0, {kNaN, 0.0, -0.0, kInf, -kInf}, [](LD x, DType) { return 1 / x; }},
      {UnaryOp::pow, 2, 0, {kNaN, kInf, kInf, 0.0, 0.0}, [](LD x, DType) { return x * x; }},
      {UnaryOp::pow, 1, 0, {kNaN, kInf, -kInf, 0.0, -0.0}, [](LD x, DType) { return x; }},
      {UnaryOp::pow, -1, 0, {kNaN, 0.0, -0.0, kInf, -kInf}, [](LD x, DType) { return 1 / x; }},
      // pow 0.5 is sqrt (sqrt(-kInf) is NaN and sqrt(-0) is -0, where pow says +kInf and +0).
      {UnaryOp::pow, 0.5, 0, {kNaN, kInf, kNaN, 0.0, -0.0}, [](LD x, DType) { return std::sqrt(x); }},
      {UnaryOp::pow, 3, 0, {kNaN, kInf, -kInf, 0.0, -0.0}, [](LD x, DType) { return std::pow(x, LD(3)); }},
      {UnaryOp::pow, -3, 0, {kNaN, 0.0, -0.0, kInf, -kInf}, [](LD x, DType) { return std::pow(x, LD(-3)); }},
      {UnaryOp::pow, 2.5, 0, {kNaN, kInf, kInf, 0.0, 0.0}, [](LD x, DType) { return std::pow(x, LD(2.5)); }},
      {UnaryOp::pow, -2.5, 0, {kNaN, 0.0, 0.0, kInf, kInf}, [](LD x, DType) { return std::pow(x, LD(-2.5)); }},
      {UnaryOp::pow, 0.3, 0, {kNaN, kInf, kInf, 0.0, 0.0}, [](LD x, DType) { return std::pow(x, LD(0.3)); }},
  };
}

// Inputs at the edges of the functions' ranges: where exp overflows or underflows in each
// dtype, subnormals, the largest finite values, where tanh saturates; and ordinary values, so
// that one vector mixes lanes that the packet code computes with lanes it cannot.
std::vector<double> edges(DType dtype) {
  const double big =
      dtype == DType::f64 ? std::numeric_limits<double>::max() : double(std::numeric_limits<float>::max());
  return {88.0,  88.7,  89.0,  -87.0, -87.5, -88.7, -100, -103.5, -104,  709.0, 709.5, 710,  -708,
          -708.5, -745, -746, -800,   800,   1e30,  -1e30, 1e-30,  -1e-30, denorm_min(dtype), -denorm_min(dtype),
          big,   -big,  1,     -1,    0.5,   -0.5,  3.5,   -3.5,   7.8,   -7.8, 8.5,   -8.5, 20,   -20,
          1e-40, -1e-40, 1e-310, -1e-310};
}

std::string describe(const UnaryCase& c, DType t, int64_t n, const char* what) {
  return std::string(op_name(c.op)) + "(a=" + std::to_string(c.a) + ") " + std::string(dtype_name(t)) + " n=" +
         std::to_string(n) + " " + what;
}

}  // namespace

TEST_CASE("unary ops on NaN, infinities and signed zeros: IEEE results at every vector width") {
  const std::vector<double> specials = {kNaN, kInf, -kInf, 0.0, -0.0};
  for (const UnaryCase& c : cases())
    for (DType t : kFloatTypes)
      for (int64_t n : kLengths)
        for (size_t s = 0; s < specials.size(); ++s) {
          // The whole vector holds one special, so the packet code sees it in every lane.
          Tensor x = filled({specials[s]}, n, t);
          check_all(be().unary(c.op, x, c.a, c.b), {c.on_specials[s]}, t, describe(c, t, n, "special"));
        }
}

TEST_CASE("unary ops at the edges of their range, alone and mixed with ordinary lanes") {
  for (const UnaryCase& c : cases())
    for (DType t : kFloatTypes) {
      std::vector<double> inputs = edges(t);
      for (double& v : inputs) v = round_to(v, t);  // what the tensor holds
      std::vector<double> want;
      for (double v : inputs) want.push_back(round_to(double(c.exact(LD(v), t)), t));
      for (int64_t n : kLengths) {
        // Mixed: the edge values in consecutive lanes.
        check_all(be().unary(c.op, filled(inputs, n, t), c.a, c.b), want, t, describe(c, t, n, "edges"));
      }
      // Alone: each edge value across a whole vector and a tail.
      for (size_t i = 0; i < inputs.size(); ++i)
        check_all(be().unary(c.op, filled({inputs[i]}, 37, t), c.a, c.b), {want[i]}, t,
                  describe(c, t, 37, "edge ") + std::to_string(inputs[i]));
    }
}

TEST_CASE("binary ops on special values at every vector width") {
  // Pairs (x, y) in consecutive lanes; the IEEE results written out per op.
  const std::vector<double> x = {kInf, kInf, -kInf, 0.0, -0.0, kNaN, 1, 0.0, -0.0, kInf, 1e308, -1e308};
  const std::vector<double> y = {-kInf, kInf, 2, -0.0, 0.0, 1, kNaN, 5, -3, 0.0, 1e308, 10};
  struct Want {
    BinaryOp op;
    std::vector<double> f64;
  };
  const std::vector<Want> wants = {
      {BinaryOp::add, {kNaN, kInf, -kInf, 0.0, 0.0, kNaN, kNaN, 5, -3, kInf, kInf, -1e308}},
      {BinaryOp::sub, {kInf, kNaN, -kInf, 0.0, -0.0, kNaN, kNaN, -5, 3, kInf, 0.0, -1e308}},
      {BinaryOp::mul, {-kInf, kInf, -kInf, -0.0, -0.0, kNaN, kNaN, 0.0, 0.0, kNaN, kInf, -kInf}},
      {BinaryOp::div, {kNaN, kNaN, -kInf, kNaN, kNaN, kNaN, kNaN, 0.0, 0.0, kInf, 1, -1e307}},
      {BinaryOp::maximum, {kInf, kInf, 2, -0.0, 0.0, kNaN, kNaN, 5, -0.0, kInf, 1e308, 10}},
      {BinaryOp::minimum, {-kInf, kInf, -kInf, -0.0, 0.0, kNaN, kNaN, 0.0, -3, 0.0, 1e308, -1e308}},
  };
  for (const Want& w : wants)
    for (int64_t n : kLengths) {
      // f64 only for the pairs that overflow differently in narrower dtypes (1e308).
      Tensor a = filled(x, n, DType::f64), b = filled(y, n, DType::f64);
      check_all(be().binary(w.op, a, b), w.f64, DType::f64,
                std::string(op_name(w.op)) + " f64 n=" + std::to_string(n));
      const std::vector<double> x32(x.begin(), x.end() - 2), y32(y.begin(), y.end() - 2);
      const std::vector<double> w32(w.f64.begin(), w.f64.end() - 2);
      for (DType t : {DType::f32, DType::bf16}) {
        // n lanes cycling through the first 10 pairs.
        check_all(be().binary(w.op, filled(x32, n, t), filled(y32, n, t)), w32, t,
                  std::string(op_name(w.op)) + " " + std::string(dtype_name(t)) + " n=" + std::to_string(n));
      }
    }
}

TEST_CASE("reductions and softmax on special values at every vector width") {
  for (DType t : kFloatTypes)
    for (int64_t n : kLengths) {
      const std::string what = std::string(dtype_name(t)) + " n=" + std::to_string(n);
      auto reduce = [&](ReduceOp op, const Tensor& x) { return values(be().reduce(op, x, {0}, false))[0]; };
      // One special among ordinary values, in the last lane (a tail lane where there is a tail).
      auto with_last = [&](double v) {
        std::vector<double> p(size_t(n), 0.25);
        p.back() = v;
        return filled(p, n, t);
      };
      CHECK_MESSAGE(std::isnan(reduce(ReduceOp::sum, with_last(kNaN))), what);
      CHECK_MESSAGE(reduce(ReduceOp::sum, with_last(kInf)) == kInf, what);
      CHECK_MESSAGE(std::isnan(reduce(ReduceOp::max, with_last(kNaN))), what);
      CHECK_MESSAGE(std::isnan(reduce(ReduceOp::min, with_last(kNaN))), what);
      CHECK_MESSAGE(reduce(ReduceOp::max, with_last(kInf)) == kInf, what);
      CHECK_MESSAGE(reduce(ReduceOp::min, with_last(-kInf)) == -kInf, what);
      if (n > 1) {
        std::vector<double> both(size_t(n), 1.0);
        both[0] = kInf;
        both.back() = -kInf;
        CHECK_MESSAGE(std::isnan(reduce(ReduceOp::sum, filled(both, n, t))), what);
      }
      // softmax over a row masked with -kInf everywhere but the first lane: exactly 1 and 0, no
      // subnormal leak into the masked lanes (the packet exp of -kInf is not 0 on every CPU).
      std::vector<double> masked(size_t(n), -kInf);
      masked[0] = 0.5;
      std::vector<double> want(size_t(n), 0.0);
      want[0] = 1;
      Tensor row = filled(masked, n, t).as_strided({1, n}, {n, 1}, 0);
      check_all(be().softmax(row, 1), want, t, "softmax masked " + what);
      // ... and along the outer axis (the blocked code path): [n, 3] with the mask down each column.
      Tensor col = Tensor::empty({n, 3}, t);
      be().assign(col, filled(masked, n, t).as_strided({n, 3}, {1, 0}, 0));
      std::vector<double> want_col;
      for (int64_t i = 0; i < n; ++i) want_col.insert(want_col.end(), 3, want[size_t(i)]);
      check_all(be().softmax(col, 0), want_col, t, "softmax masked columns " + what);
      // Differences that underflow in the dtype: exp(-800) is exactly 0 in f64 and f32.
      std::vector<double> far(size_t(n), -800);
      far[0] = 0;
      check_all(be().softmax(filled(far, n, t).as_strided({1, n}, {n, 1}, 0), 1), want, t, "softmax far " + what);
    }
}
