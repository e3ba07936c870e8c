// CPU reduction, softmax-family and cumsum kernels against plain scalar loops in f64.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <random>

#include <tbb/global_control.h>

#include "tensor/op_table.hpp"

using namespace cotan;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
const double kNaN = std::numeric_limits<double>::quiet_NaN();

// Element at `offset` (elements from data_ptr) as f64.
double read(const Tensor& t, int64_t offset) {
  return dispatch_dtype(t.dtype(), [&](auto tag) -> double {
    using T = decltype(tag);
    const T* p = static_cast<const T*>(t.data_ptr());
    if constexpr (std::is_same_v<T, bf16>) return double(float(p[offset]));
    else return double(p[offset]);
  });
}

void write(const Tensor& t, int64_t offset, double v) {
  dispatch_dtype(t.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* p = static_cast<T*>(t.data_ptr());
    if constexpr (std::is_same_v<T, bf16>) p[offset] = bf16(float(v));
    else if constexpr (std::is_same_v<T, bool>) p[offset] = v != 0;
    else p[offset] = T(v);
  });
}

Tensor make(const Shape& shape, DType dtype, const std::vector<double>& values) {
  Tensor t = Tensor::empty(shape, dtype);
  REQUIRE(int64_t(values.size()) == t.numel());
  for (size_t i = 0; i < values.size(); ++i) write(t, int64_t(i), values[i]);
  return t;
}

// Uniform values in [lo, hi), integers for integer dtypes, 0/1 for bool.
Tensor random_tensor(const Shape& shape, DType dtype, std::mt19937& rng, double lo = -2, double hi = 2) {
  std::vector<double> v(size_t(numel(shape)));
  std::uniform_real_distribution<double> u(lo, hi);
  for (double& x : v) {
    x = u(rng);
    if (dtype == DType::boolean) x = x > (lo + hi) / 2;
    else if (!is_floating(dtype)) x = std::floor(x);
  }
  return make(shape, dtype, v);
}

// Calls f(index) for every multi-index of `shape` in row-major order.
void for_each_index(const Shape& shape, const std::function<void(const std::vector<int64_t>&)>& f) {
  if (numel(shape) == 0) return;
  std::vector<int64_t> idx(shape.size(), 0);
  while (true) {
    f(idx);
    size_t d = shape.size();
    while (d > 0) {
      if (++idx[d - 1] < shape[d - 1]) break;
      idx[--d] = 0;
    }
    if (d == 0) return;
  }
}

int64_t offset_of(const Tensor& t, const std::vector<int64_t>& idx) {
  int64_t off = 0;
  for (size_t d = 0; d < idx.size(); ++d) off += idx[d] * t.strides()[d];
  return off;
}

// The elements of t (any strides) in row-major order, as f64.
std::vector<double> values(const Tensor& t) {
  std::vector<double> out;
  for_each_index(t.shape(), [&](const auto& idx) { out.push_back(read(t, offset_of(t, idx))); });
  return out;
}

// x viewed with its last two axes swapped, over a transposed copy of the data.
Tensor transposed_view(const Tensor& x) {
  Shape s = x.shape();
  std::swap(s[s.size() - 1], s[s.size() - 2]);
  Tensor base = Tensor::empty(s, x.dtype());
  for_each_index(x.shape(), [&](const auto& idx) {
    auto t = idx;
    std::swap(t[t.size() - 1], t[t.size() - 2]);
    write(base, offset_of(base, t), read(x, offset_of(x, idx)));
  });
  Strides st = base.strides();
  std::swap(st[st.size() - 1], st[st.size() - 2]);
  return base.as_strided(x.shape(), st, 0);
}

// Reference reduction in f64 (argmax/argmin: first occurrence, NaN counts as the extremum).
std::vector<double> reference_reduce(ReduceOp op, const Tensor& x, std::vector<int64_t> axes) {
  if (axes.empty())
    for (int64_t d = 0; d < x.dim(); ++d) axes.push_back(d);
  Shape kept;
  for (int64_t d = 0; d < x.dim(); ++d)
    if (std::find(axes.begin(), axes.end(), d) == axes.end()) kept.push_back(x.size(d));
  int64_t n = numel(kept);
  double init = op == ReduceOp::sum ? 0 : op == ReduceOp::max ? -kInf : kInf;
  std::vector<double> acc(size_t(n), init), best(size_t(n), kNaN), arg(size_t(n), -1);
  int64_t axis_size = axes.size() == 1 ? x.size(axes[0]) : 0;
  for_each_index(x.shape(), [&](const auto& idx) {
    int64_t o = 0;
    for (int64_t d = 0; d < x.dim(); ++d)
      if (std::find(axes.begin(), axes.end(), d) == axes.end()) o = o * x.size(d) + idx[size_t(d)];
    double v = read(x, offset_of(x, idx));
    double& a = acc[size_t(o)];
    switch (op) {
      case ReduceOp::sum: a += v; break;
      case ReduceOp::max: a = (std::isnan(a) || std::isnan(v)) ? kNaN : std::max(a, v); break;
      case ReduceOp::min: a = (std::isnan(a) || std::isnan(v)) ? kNaN : std::min(a, v); break;
      case ReduceOp::argmax:
      case ReduceOp::argmin: {
        int64_t pos = idx[size_t(axes[0])];
        double& b = best[size_t(o)];
        bool better = op == ReduceOp::argmax ? v > b : v < b;
        if (arg[size_t(o)] < 0 || (!std::isnan(b) && (std::isnan(v) || better))) {
          b = v;
          arg[size_t(o)] = double(pos);
        }
        (void)axis_size;
        break;
      }
    }
  });
  return (op == ReduceOp::argmax || op == ReduceOp::argmin) ? arg : acc;
}

// |a - b| <= tol * max(1, |b|), NaN equal to NaN, infinities equal.
void check_close(const std::vector<double>& got, const std::vector<double>& want, double tol) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i])) {
      CHECK_MESSAGE(std::isnan(got[i]), "element ", i);
    } else if (std::isinf(want[i])) {
      CHECK_MESSAGE(got[i] == want[i], "element ", i, ": ", got[i], " vs ", want[i]);
    } else {
      CHECK_MESSAGE(std::abs(got[i] - want[i]) <= tol * std::max(1.0, std::abs(want[i])), "element ", i, ": ",
                    got[i], " vs ", want[i]);
    }
  }
}

double tolerance(DType t) {
  switch (t) {
    case DType::f64: return 1e-12;
    case DType::f32: return 1e-6;
    case DType::bf16: return 1.0 / 128;
    default: return 0;
  }
}

Shape reduced_shape(const Tensor& x, const std::vector<int64_t>& axes, bool keepdim) {
  Shape out;
  for (int64_t d = 0; d < x.dim(); ++d) {
    bool reduced = axes.empty() || std::find(axes.begin(), axes.end(), d) != axes.end();
    if (!reduced) out.push_back(x.size(d));
    else if (keepdim) out.push_back(1);
  }
  return out;
}

void check_reduce(ReduceOp op, const Tensor& x, const std::vector<int64_t>& axes, bool keepdim) {
  INFO("op ", op_name(op), " dtype ", x.dtype(), " shape ", to_string(x.shape()), " axes ", to_string(axes),
       " keepdim ", keepdim);
  Tensor y = cpu_backend().reduce(op, x, axes, keepdim);
  CHECK(y.shape() == reduced_shape(x, axes, keepdim));
  CHECK(y.is_contiguous());
  bool indexed = op == ReduceOp::argmax || op == ReduceOp::argmin;
  DType want = indexed || x.dtype() == DType::boolean ? DType::i64 : x.dtype();
  CHECK(y.dtype() == want);
  check_close(values(y), reference_reduce(op, x, axes), op == ReduceOp::sum ? tolerance(x.dtype()) : 0);
}

const std::vector<DType> kNumeric = {DType::f32, DType::f64, DType::bf16, DType::i32, DType::i64};

}  // namespace

TEST_CASE("reduce: sum, max and min over any set of axes match scalar loops") {
  std::mt19937 rng(1);
  const std::vector<std::vector<int64_t>> axis_sets = {{0}, {1}, {2}, {0, 1}, {0, 2}, {1, 2}, {0, 1, 2}, {}};
  for (DType dtype : kNumeric) {
    Tensor x = random_tensor({7, 33, 5}, dtype, rng, -50, 50);
    for (ReduceOp op : {ReduceOp::sum, ReduceOp::max, ReduceOp::min})
      for (const auto& axes : axis_sets)
        for (bool keepdim : {false, true}) check_reduce(op, x, axes, keepdim);
  }
}

TEST_CASE("reduce: long rows, wide columns and many chunks") {
  std::mt19937 rng(2);
  for (DType dtype : {DType::f32, DType::bf16, DType::i64}) {
    Tensor rows = random_tensor({3, 70001}, dtype, rng);   // rows of several chunks
    Tensor cols = random_tensor({9001, 40}, dtype, rng);   // a leading axis, split into slices
    Tensor wide = random_tensor({300, 2000}, dtype, rng);  // a leading axis, many output blocks
    for (ReduceOp op : {ReduceOp::sum, ReduceOp::max, ReduceOp::argmin}) {
      check_reduce(op, rows, {1}, false);
      check_reduce(op, cols, {0}, false);
      check_reduce(op, wide, {0}, true);
      if (op != ReduceOp::argmin) check_reduce(op, rows, {}, false);
    }
  }
}

TEST_CASE("reduce: strided inputs") {
  std::mt19937 rng(3);
  for (DType dtype : {DType::f32, DType::f64, DType::i32}) {
    Tensor x = random_tensor({6, 40, 11}, dtype, rng);
    Tensor t = transposed_view(x);  // [6, 11, 40] with strides [440, 1, 11]
    // Every other row along axis 1 from offset 11, and a broadcast (stride 0) axis.
    Tensor sliced = x.as_strided({6, 20, 11}, {440, 22, 1}, 11);
    Tensor expanded = x.as_strided({6, 5, 11}, {440, 0, 1}, 0);
    for (ReduceOp op : {ReduceOp::sum, ReduceOp::max, ReduceOp::argmax})
      for (const auto& axes : std::vector<std::vector<int64_t>>{{0}, {1}, {2}, {0, 2}, {1, 2}, {}}) {
        if (op == ReduceOp::argmax && axes.size() != 1) continue;
        check_reduce(op, t, axes, false);
        check_reduce(op, sliced, axes, true);
        check_reduce(op, expanded, axes, false);
      }
  }
}

TEST_CASE("reduce: argmax and argmin take the first of ties; NaN propagates") {
  Tensor x = make({3, 4}, DType::f32, {1, 3, 3, 2, 5, 5, 5, 5, -1, -7, 4, -7});
  CHECK(values(cpu_backend().reduce(ReduceOp::argmax, x, {1}, false)) == std::vector<double>{1, 0, 2});
  CHECK(values(cpu_backend().reduce(ReduceOp::argmin, x, {1}, false)) == std::vector<double>{0, 0, 1});
  CHECK(values(cpu_backend().reduce(ReduceOp::argmax, x, {0}, true)) == std::vector<double>{1, 1, 1, 1});
  Tensor ints = make({5}, DType::i32, {2, 9, 1, 9, 1});
  CHECK(values(cpu_backend().reduce(ReduceOp::argmax, ints, {0}, false)) == std::vector<double>{1});
  CHECK(values(cpu_backend().reduce(ReduceOp::argmin, ints, {0}, false)) == std::vector<double>{2});

  Tensor n = make({2, 4}, DType::f64, {1, kNaN, 3, kNaN, -kInf, -kInf, -kInf, -kInf});
  CHECK(values(cpu_backend().reduce(ReduceOp::argmax, n, {1}, false)) == std::vector<double>{1, 0});
  CHECK(values(cpu_backend().reduce(ReduceOp::argmin, n, {1}, false)) == std::vector<double>{1, 0});
  auto mx = values(cpu_backend().reduce(ReduceOp::max, n, {1}, false));
  CHECK(std::isnan(mx[0]));
  CHECK(mx[1] == -kInf);
  CHECK(std::isnan(values(cpu_backend().reduce(ReduceOp::min, n, {}, false))[0]));
  // NaN in a long row, past the first chunk, and in a column.
  for (DType dtype : {DType::f32, DType::bf16}) {
    std::vector<double> v(50000, 1.0);
    v[40000] = kNaN;
    Tensor row = make({50000}, dtype, v);
    CHECK(std::isnan(values(cpu_backend().reduce(ReduceOp::max, row, {0}, false))[0]));
    CHECK(std::isnan(values(cpu_backend().reduce(ReduceOp::sum, row, {0}, false))[0]));
    CHECK(values(cpu_backend().reduce(ReduceOp::argmin, row, {0}, false))[0] == 40000);
    Tensor col = row.as_strided({5000, 10}, {10, 1}, 0);
    auto m = values(cpu_backend().reduce(ReduceOp::min, col, {0}, false));
    CHECK(std::isnan(m[0]));
    CHECK(m[1] == 1.0);
  }
}

TEST_CASE("reduce: bool sums to i64; sizes 1 and 0") {
  Tensor b = make({2, 3}, DType::boolean, {1, 0, 1, 1, 1, 1});
  Tensor s = cpu_backend().reduce(ReduceOp::sum, b, {1}, false);
  CHECK(s.dtype() == DType::i64);
  CHECK(values(s) == std::vector<double>{2, 3});
  CHECK(values(cpu_backend().reduce(ReduceOp::sum, b, {}, false)) == std::vector<double>{5});

  std::mt19937 rng(4);
  Tensor x = random_tensor({4, 1, 3}, DType::f32, rng);
  for (ReduceOp op : {ReduceOp::sum, ReduceOp::max, ReduceOp::argmax}) check_reduce(op, x, {1}, true);
  CHECK(values(cpu_backend().reduce(ReduceOp::sum, x, {1}, false)) == values(x));

  Tensor e = Tensor::empty({3, 0}, DType::f32);
  Tensor z = cpu_backend().reduce(ReduceOp::sum, e, {1}, false);
  CHECK(z.shape() == Shape{3});
  CHECK(values(z) == std::vector<double>{0, 0, 0});
  CHECK(cpu_backend().reduce(ReduceOp::sum, e, {0}, true).shape() == Shape{1, 0});
  CHECK_THROWS_WITH_AS(cpu_backend().reduce(ReduceOp::max, e, {1}, false),
                       "[max] cannot reduce over zero elements of shape [3, 0]", Error);

  Tensor scalar = make({}, DType::f64, {2.5});
  CHECK(values(cpu_backend().reduce(ReduceOp::sum, scalar, {}, false)) == std::vector<double>{2.5});
}

TEST_CASE("reduce: errors") {
  Tensor x = Tensor::empty({2, 3}, DType::f32);
  CHECK_THROWS_WITH_AS(cpu_backend().reduce(ReduceOp::argmax, x, {0, 1}, false),
                       "[argmax] expects exactly one axis, got 2", Error);
  CHECK_THROWS_WITH_AS(cpu_backend().reduce(ReduceOp::sum, x, {3}, false),
                       "[sum] axis 3 is out of range for 2 dims", Error);
  CHECK_THROWS_WITH_AS(cpu_backend().reduce(ReduceOp::max, Tensor::empty({2}, DType::boolean), {0}, false),
                       "[max] does not support dtype bool", Error);
  CHECK_THROWS_WITH_AS(cpu_backend().softmax(Tensor::empty({2}, DType::i32), 0),
                       "[softmax] expects a floating dtype, got i32", Error);
  CHECK_THROWS_WITH_AS(cpu_backend().logsumexp(x, 2), "[logsumexp] axis 2 is out of range for 2 dims", Error);
}

namespace {

enum class Kind { softmax, log_softmax, logsumexp };

// Reference softmax family along `axis` in f64.
std::vector<double> reference_softmax(Kind kind, const Tensor& x, int64_t axis) {
  Shape outer = x.shape();
  outer[size_t(axis)] = 1;
  std::vector<double> out(size_t(kind == Kind::logsumexp ? numel(outer) : x.numel()));
  Strides cs = contiguous_strides(x.shape());
  int64_t row = 0;
  for_each_index(outer, [&](const auto& start) {
    auto idx = start;
    double m = -kInf;
    std::vector<double> v;
    for (int64_t i = 0; i < x.size(axis); ++i) {
      idx[size_t(axis)] = i;
      v.push_back(read(x, offset_of(x, idx)));
      m = std::max(m, v.back());
    }
    if (!std::isfinite(m)) m = 0;
    double s = 0;
    for (double a : v) s += std::exp(a - m);
    if (kind == Kind::logsumexp) {
      out[size_t(row++)] = m + std::log(s);
      return;
    }
    for (int64_t i = 0; i < x.size(axis); ++i) {
      idx[size_t(axis)] = i;
      int64_t o = 0;
      for (size_t d = 0; d < idx.size(); ++d) o += idx[d] * cs[d];
      out[size_t(o)] = kind == Kind::softmax ? std::exp(v[size_t(i)] - m) / s : v[size_t(i)] - m - std::log(s);
    }
  });
  return out;
}

Tensor run_softmax(Kind kind, const Tensor& x, int64_t axis) {
  switch (kind) {
    case Kind::softmax: return cpu_backend().softmax(x, axis);
    case Kind::log_softmax: return cpu_backend().log_softmax(x, axis);
    case Kind::logsumexp: return cpu_backend().logsumexp(x, axis);
  }
  return {};
}

}  // namespace

TEST_CASE("softmax, log_softmax and logsumexp match scalar loops") {
  std::mt19937 rng(5);
  for (DType dtype : {DType::f32, DType::f64, DType::bf16}) {
    Tensor x = random_tensor({5, 37, 4}, dtype, rng, -20, 20);
    Tensor t = transposed_view(x);
    for (Kind kind : {Kind::softmax, Kind::log_softmax, Kind::logsumexp})
      for (int64_t axis : {0, 1, 2})
        for (const Tensor& in : {x, t}) {
          INFO("kind ", int(kind), " dtype ", dtype, " axis ", axis, " strides ", to_string(in.strides()));
          Tensor y = run_softmax(kind, in, axis);
          Shape want = in.shape();
          if (kind == Kind::logsumexp) want.erase(want.begin() + axis);
          CHECK(y.shape() == want);
          CHECK(y.dtype() == dtype);
          double tol = dtype == DType::bf16 ? 1.0 / 64 : dtype == DType::f32 ? 2e-6 : 1e-12;
          check_close(values(y), reference_softmax(kind, in, axis), tol);
        }
  }
}

TEST_CASE("softmax family: large values, -inf entries and rows of -inf") {
  Tensor x = make({3, 3}, DType::f32, {1000, 1000, -kInf, -kInf, -kInf, -kInf, 0, -kInf, 0});
  check_close(values(cpu_backend().softmax(x, 1)), {0.5, 0.5, 0, kNaN, kNaN, kNaN, 0.5, 0, 0.5}, 1e-7);
  auto lse = values(cpu_backend().logsumexp(x, 1));
  check_close(lse, {1000 + std::log(2.0), -kInf, std::log(2.0)}, 1e-7);
  auto ls = values(cpu_backend().log_softmax(x, 1));
  CHECK(ls[2] == -kInf);
  CHECK(std::abs(ls[0] + std::log(2.0)) < 1e-6);
  Tensor wide = make({1, 2}, DType::f64, {kInf, 1});
  CHECK(values(cpu_backend().logsumexp(wide, 1))[0] == kInf);
  // A softmax along an axis of size 1 is 1; its logsumexp is the value itself.
  Tensor one = make({3, 1}, DType::f64, {-3, 0, 7});
  CHECK(values(cpu_backend().softmax(one, 1)) == std::vector<double>{1, 1, 1});
  CHECK(values(cpu_backend().logsumexp(one, 1)) == std::vector<double>{-3, 0, 7});
}

namespace {

std::vector<double> reference_cumsum(const Tensor& x, int64_t axis, bool reverse) {
  std::vector<double> out(size_t(x.numel()));
  Strides cs = contiguous_strides(x.shape());
  Shape outer = x.shape();
  outer[size_t(axis)] = 1;
  for_each_index(outer, [&](const auto& start) {
    auto idx = start;
    double acc = 0;
    for (int64_t n = 0; n < x.size(axis); ++n) {
      idx[size_t(axis)] = reverse ? x.size(axis) - 1 - n : n;
      acc += read(x, offset_of(x, idx));
      int64_t o = 0;
      for (size_t d = 0; d < idx.size(); ++d) o += idx[d] * cs[d];
      out[size_t(o)] = acc;
    }
  });
  return out;
}

}  // namespace

TEST_CASE("cumsum forward and reverse") {
  std::mt19937 rng(6);
  for (DType dtype : {DType::f32, DType::f64, DType::bf16, DType::i32, DType::i64, DType::boolean}) {
    Tensor x = random_tensor({4, 9, 6}, dtype, rng, -10, 10);
    for (const Tensor& in : {x, transposed_view(x)})
      for (int64_t axis : {0, 1, 2})
        for (bool reverse : {false, true}) {
          INFO("dtype ", dtype, " axis ", axis, " reverse ", reverse, " strides ", to_string(in.strides()));
          Tensor y = cpu_backend().cumsum(in, axis, reverse);
          CHECK(y.shape() == in.shape());
          CHECK(y.dtype() == (dtype == DType::boolean ? DType::i64 : dtype));
          // bf16 rounds each running sum once; 1e-2 covers one bf16 step of sums up to ~100.
          double tol = dtype == DType::bf16 ? 1e-2 : dtype == DType::f32 ? 1e-6 : 1e-12;
          check_close(values(y), reference_cumsum(in, axis, reverse), tol);
        }
  }
  Tensor small = make({4}, DType::i32, {1, 2, 3, 4});
  CHECK(values(cpu_backend().cumsum(small, 0, false)) == std::vector<double>{1, 3, 6, 10});
  CHECK(values(cpu_backend().cumsum(small, 0, true)) == std::vector<double>{10, 9, 7, 4});
}

namespace {

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() && std::memcmp(a.data_ptr(), b.data_ptr(), a.nbytes()) == 0;
}

// Runs f with at most n worker threads.
Tensor with_threads(int n, const std::function<Tensor()>& f) {
  tbb::global_control limit(tbb::global_control::max_allowed_parallelism, size_t(n));
  return f();
}

}  // namespace

TEST_CASE("reductions and softmax give the same bits with 1 and 2 threads") {
  std::mt19937 rng(7);
  Tensor x = random_tensor({3000, 1000}, DType::f32, rng, -1, 1);
  Tensor flat = x.as_strided({3000000}, {1}, 0);
  Tensor few = x.as_strided({2, 1500000}, {1500000, 1}, 0);
  Tensor t = transposed_view(random_tensor({1000, 3000}, DType::f32, rng, -1, 1));
  std::vector<std::function<Tensor()>> runs = {
      [&] { return cpu_backend().reduce(ReduceOp::sum, flat, {}, false); },
      [&] { return cpu_backend().reduce(ReduceOp::sum, few, {1}, false); },
      [&] { return cpu_backend().reduce(ReduceOp::sum, x, {0}, false); },
      [&] { return cpu_backend().reduce(ReduceOp::sum, x, {1}, false); },
      [&] { return cpu_backend().reduce(ReduceOp::sum, t, {}, false); },
      [&] { return cpu_backend().reduce(ReduceOp::sum, t, {1}, false); },
      [&] { return cpu_backend().reduce(ReduceOp::max, x, {0}, false); },
      [&] { return cpu_backend().reduce(ReduceOp::argmax, flat, {0}, false); },
      [&] { return cpu_backend().softmax(x, 1); },
      [&] { return cpu_backend().softmax(x, 0); },
      [&] { return cpu_backend().log_softmax(t, 0); },
      [&] { return cpu_backend().logsumexp(x, 1); },
      [&] { return cpu_backend().cumsum(x, 0, true); },
  };
  for (size_t i = 0; i < runs.size(); ++i) {
    INFO("run ", i);
    Tensor one = with_threads(1, runs[i]);
    Tensor two = with_threads(2, runs[i]);
    CHECK(same_bits(one, two));
  }
}
