// CPU gather, scatter_add, index_select and index_add kernels against plain scalar loops.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <random>

#include <tbb/global_control.h>

#include "tensor/op_table.hpp"

using namespace cotan;

namespace {

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

// Values uniform in [lo, hi): integral for integer dtypes and for index tensors.
Tensor random_tensor(const Shape& shape, DType dtype, std::mt19937& rng, double lo, double hi) {
  std::vector<double> v(size_t(numel(shape)));
  std::uniform_real_distribution<double> u(lo, hi);
  for (double& x : v) {
    x = u(rng);
    if (dtype == DType::boolean) x = x > (lo + hi) / 2;
    else if (!is_floating(dtype)) x = std::floor(x);
  }
  return make(shape, dtype, v);
}

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

double at(const Tensor& t, const std::vector<int64_t>& idx) { return read(t, offset_of(t, idx)); }

std::vector<double> values(const Tensor& t) {
  std::vector<double> out;
  for_each_index(t.shape(), [&](const auto& idx) { out.push_back(at(t, idx)); });
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
    write(base, offset_of(base, t), at(x, idx));
  });
  Strides st = base.strides();
  std::swap(st[st.size() - 1], st[st.size() - 2]);
  return base.as_strided(x.shape(), st, 0);
}

// Row-major position of idx in a contiguous tensor of `shape`.
int64_t flat(const Shape& shape, const std::vector<int64_t>& idx) {
  int64_t o = 0;
  for (size_t d = 0; d < idx.size(); ++d) o = o * shape[d] + idx[d];
  return o;
}

// |got - want| <= tol * max(1, scale), scale defaulting to |want|.
void check_equal(const Tensor& got, const std::vector<double>& want, double tol = 0,
                 const std::vector<double>& scale = {}) {
  CHECK(got.is_contiguous());
  auto v = values(got);
  REQUIRE(v.size() == want.size());
  for (size_t i = 0; i < v.size(); ++i) {
    double s = scale.empty() ? std::abs(want[i]) : scale[i];
    CHECK_MESSAGE(std::abs(v[i] - want[i]) <= tol * std::max(1.0, s), "element ", i, ": ", v[i], " vs ", want[i]);
  }
}

std::vector<double> reference_gather(const Tensor& x, int64_t axis, const Tensor& index) {
  std::vector<double> out;
  for_each_index(index.shape(), [&](const auto& idx) {
    auto src = idx;
    src[size_t(axis)] = int64_t(at(index, idx));
    out.push_back(at(x, src));
  });
  return out;
}

// Sums (first) and the sums of the magnitudes of their terms (second), which bound the
// rounding error of adds done in a narrow dtype.
using Sums = std::pair<std::vector<double>, std::vector<double>>;

Sums reference_scatter_add(const Tensor& base, int64_t axis, const Tensor& index, const Tensor& src) {
  Sums out{values(base), values(base)};
  for (double& m : out.second) m = std::abs(m);
  for_each_index(index.shape(), [&](const auto& idx) {
    auto dst = idx;
    dst[size_t(axis)] = int64_t(at(index, idx));
    size_t o = size_t(flat(base.shape(), dst));
    out.first[o] += at(src, idx);
    out.second[o] += std::abs(at(src, idx));
  });
  return out;
}

std::vector<double> reference_index_select(const Tensor& x, int64_t axis, const Tensor& index) {
  Shape shape = x.shape();
  shape[size_t(axis)] = index.numel();
  std::vector<double> out;
  for_each_index(shape, [&](const auto& idx) {
    auto src = idx;
    src[size_t(axis)] = int64_t(read(index, idx[size_t(axis)] * index.strides()[0]));
    out.push_back(at(x, src));
  });
  return out;
}

Sums reference_index_add(const Tensor& base, int64_t axis, const Tensor& index, const Tensor& src) {
  Sums out{values(base), values(base)};
  for (double& m : out.second) m = std::abs(m);
  for_each_index(src.shape(), [&](const auto& idx) {
    auto dst = idx;
    dst[size_t(axis)] = int64_t(read(index, idx[size_t(axis)] * index.strides()[0]));
    size_t o = size_t(flat(base.shape(), dst));
    out.first[o] += at(src, idx);
    out.second[o] += std::abs(at(src, idx));
  });
  return out;
}

// Each add rounds to the dtype (bf16 keeps 8 bits); the tests add at most ~10 terms per element.
double add_tolerance(DType t) { return t == DType::bf16 ? 0.02 : t == DType::f32 ? 1e-6 : 0; }

void check_sums(const Tensor& got, const Sums& want, DType dtype) {
  check_equal(got, want.first, add_tolerance(dtype), want.second);
}

}  // namespace

TEST_CASE("gather matches a scalar loop for every dtype, index type and axis") {
  std::mt19937 rng(11);
  for (DType dtype : {DType::f32, DType::f64, DType::bf16, DType::i32, DType::i64, DType::boolean})
    for (DType itype : {DType::i32, DType::i64})
      for (int64_t axis : {0, 1, 2}) {
        INFO("dtype ", dtype, " index ", itype, " axis ", axis);
        Tensor x = random_tensor({5, 7, 6}, dtype, rng, -9, 9);
        Shape ishape = {4, 5, 3};  // smaller than x outside the axis is allowed
        ishape[size_t(axis)] = 9;
        Tensor index = random_tensor(ishape, itype, rng, 0, double(x.size(axis)));
        for (const Tensor& in : {x, transposed_view(x)}) {
          Tensor y = cpu_backend().gather(in, axis, index);
          CHECK(y.shape() == index.shape());
          CHECK(y.dtype() == dtype);
          check_equal(y, reference_gather(in, axis, index));
        }
        Tensor index_t = transposed_view(random_tensor({4, 3, 5}, itype, rng, 0, double(x.size(axis))));
        check_equal(cpu_backend().gather(x, axis, index_t), reference_gather(x, axis, index_t));
      }
}

TEST_CASE("scatter_add adds duplicates in order and leaves other elements alone") {
  std::mt19937 rng(12);
  for (DType dtype : {DType::f32, DType::f64, DType::bf16, DType::i32, DType::i64})
    for (DType itype : {DType::i32, DType::i64})
      for (int64_t axis : {0, 1, 2}) {
        INFO("dtype ", dtype, " index ", itype, " axis ", axis);
        Tensor base = random_tensor({5, 7, 6}, dtype, rng, -9, 9);
        Shape ishape = {4, 5, 3};
        ishape[size_t(axis)] = 12;  // more positions than slots: duplicates
        Tensor index = random_tensor(ishape, itype, rng, 0, double(base.size(axis)));
        Shape sshape = {5, 6, 4};  // at least the index's shape
        sshape[size_t(axis)] = 12;
        Tensor src = random_tensor(sshape, dtype, rng, -9, 9);
        for (const Tensor& b : {base, transposed_view(base)})
          for (const Tensor& s : {src, transposed_view(src)}) {
            Tensor y = cpu_backend().scatter_add(b, axis, index, s);
            CHECK(y.shape() == b.shape());
            check_sums(y, reference_scatter_add(b, axis, index, s), dtype);
          }
      }
  // Exact case: every source lands on column 1 or 3 of row 0.
  Tensor base = make({2, 4}, DType::f32, {0, 0, 0, 0, 1, 1, 1, 1});
  Tensor index = make({1, 3}, DType::i64, {1, 3, 1});
  Tensor src = make({1, 3}, DType::f32, {10, 20, 30});
  check_equal(cpu_backend().scatter_add(base, 1, index, src), {0, 40, 0, 20, 1, 1, 1, 1});
}

TEST_CASE("index_select: embedding rows, inner axes, strided inputs") {
  std::mt19937 rng(13);
  for (DType dtype : {DType::f32, DType::bf16, DType::i64, DType::boolean})
    for (DType itype : {DType::i32, DType::i64}) {
      INFO("dtype ", dtype, " index ", itype);
      Tensor weight = random_tensor({50, 16}, dtype, rng, -9, 9);
      Tensor ids = random_tensor({23}, itype, rng, 0, 50);
      Tensor rows = cpu_backend().index_select(weight, 0, ids);
      CHECK(rows.shape() == Shape{23, 16});
      check_equal(rows, reference_index_select(weight, 0, ids));
      Tensor x = random_tensor({4, 6, 5}, dtype, rng, -9, 9);
      for (int64_t axis : {0, 1, 2}) {
        Tensor index = random_tensor({9}, itype, rng, 0, double(x.size(axis)));
        check_equal(cpu_backend().index_select(x, axis, index), reference_index_select(x, axis, index));
        Tensor t = transposed_view(x);
        Tensor index_t = random_tensor({7}, itype, rng, 0, double(t.size(axis)));
        check_equal(cpu_backend().index_select(t, axis, index_t), reference_index_select(t, axis, index_t));
      }
    }
  // A strided index (every other element) and an empty one.
  Tensor weight = make({3, 2}, DType::f64, {0, 1, 10, 11, 20, 21});
  Tensor ids = make({4}, DType::i64, {2, 9, 0, 9}).as_strided({2}, {2}, 0);
  check_equal(cpu_backend().index_select(weight, 0, ids), {20, 21, 0, 1});
  CHECK(cpu_backend().index_select(weight, 0, Tensor::empty({0}, DType::i64)).shape() == Shape{0, 2});
}

TEST_CASE("index_add adds duplicates in order") {
  std::mt19937 rng(14);
  for (DType dtype : {DType::f32, DType::f64, DType::bf16, DType::i32})
    for (DType itype : {DType::i32, DType::i64})
      for (int64_t axis : {0, 1, 2}) {
        INFO("dtype ", dtype, " index ", itype, " axis ", axis);
        Tensor base = random_tensor({4, 6, 5}, dtype, rng, -9, 9);
        Tensor index = random_tensor({11}, itype, rng, 0, double(base.size(axis)));
        Shape sshape = base.shape();
        sshape[size_t(axis)] = 11;
        Tensor src = random_tensor(sshape, dtype, rng, -9, 9);
        for (const Tensor& b : {base, transposed_view(base)}) {
          Shape ss = b.shape();
          ss[size_t(axis)] = 11;
          Tensor s = transposed_view(random_tensor(ss, dtype, rng, -9, 9));
          Tensor y = cpu_backend().index_add(b, axis, index, s);
          CHECK(y.shape() == b.shape());
          check_sums(y, reference_index_add(b, axis, index, s), dtype);
        }
        check_sums(cpu_backend().index_add(base, axis, index, src), reference_index_add(base, axis, index, src), dtype);
      }
  // Embedding gradient: rows 1 and 3 get two and one contributions.
  Tensor grad = make({4, 2}, DType::f32, {0, 0, 0, 0, 0, 0, 0, 0});
  Tensor ids = make({3}, DType::i32, {1, 3, 1});
  Tensor g = make({3, 2}, DType::f32, {1, 2, 3, 4, 5, 6});
  check_equal(cpu_backend().index_add(grad, 0, ids, g), {0, 0, 6, 8, 0, 0, 3, 4});
}

TEST_CASE("index errors name the op, the index, the axis and its size") {
  Tensor x = Tensor::empty({3, 10}, DType::f32);
  Tensor bad = make({3, 2}, DType::i64, {0, 1, 2, 17, 3, 40});
  CHECK_THROWS_WITH_AS(cpu_backend().gather(x, 1, bad), "[gather] index 17 is out of range for axis 1 of size 10",
                       Error);
  Tensor negative = make({1, 2}, DType::i32, {0, -1});
  CHECK_THROWS_WITH_AS(cpu_backend().gather(x, 1, negative),
                       "[gather] index -1 is out of range for axis 1 of size 10", Error);
  CHECK_THROWS_WITH_AS(cpu_backend().scatter_add(x, 1, bad, Tensor::empty({3, 2}, DType::f32)),
                       "[scatter_add] index 17 is out of range for axis 1 of size 10", Error);
  Tensor ids = make({3}, DType::i64, {0, 3, 5});
  CHECK_THROWS_WITH_AS(cpu_backend().index_select(x, 0, ids),
                       "[index_select] index 3 is out of range for axis 0 of size 3", Error);
  CHECK_THROWS_WITH_AS(cpu_backend().index_add(x, 0, ids, Tensor::empty({3, 10}, DType::f32)),
                       "[index_add] index 3 is out of range for axis 0 of size 3", Error);
  CHECK_THROWS_WITH_AS(cpu_backend().gather(x, 1, Tensor::empty({3, 2}, DType::f32)),
                       "[gather] index must be i32 or i64, got f32", Error);
  CHECK_THROWS_WITH_AS(cpu_backend().gather(x, 1, Tensor::empty({4, 2}, DType::i64)),
                       "[gather] index of shape [4, 2] does not fit the input of shape [3, 10] at axis 0", Error);
  CHECK_THROWS_WITH_AS(cpu_backend().index_select(x, 0, Tensor::empty({1, 1}, DType::i64)),
                       "[index_select] index must be 1-D, got shape [1, 1]", Error);
  CHECK_THROWS_WITH_AS(cpu_backend().scatter_add(Tensor::empty({2}, DType::boolean), 0, make({1}, DType::i64, {0}),
                                                 Tensor::empty({1}, DType::boolean)),
                       "[scatter_add] does not support dtype bool", Error);
}

namespace {

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() && std::memcmp(a.data_ptr(), b.data_ptr(), a.nbytes()) == 0;
}

Tensor with_threads(int n, const std::function<Tensor()>& f) {
  tbb::global_control limit(tbb::global_control::max_allowed_parallelism, size_t(n));
  return f();
}

}  // namespace

TEST_CASE("scatter_add and index_add give the same bits with 1 and 2 threads") {
  std::mt19937 rng(15);
  Tensor base = random_tensor({1000, 3000}, DType::f32, rng, -1, 1);
  Tensor src = random_tensor({1000, 3000}, DType::f32, rng, -1, 1);
  Tensor index0 = random_tensor({1000, 3000}, DType::i64, rng, 0, 1000);  // collisions down columns
  Tensor index1 = random_tensor({1000, 3000}, DType::i32, rng, 0, 50);    // many collisions per row
  Tensor ids = random_tensor({1000}, DType::i64, rng, 0, 37);
  Tensor table = random_tensor({37, 3000}, DType::f32, rng, -1, 1);
  Tensor src_t = transposed_view(random_tensor({1000, 3000}, DType::f32, rng, -1, 1));
  std::vector<std::function<Tensor()>> runs = {
      [&] { return cpu_backend().scatter_add(base, 0, index0, src); },
      [&] { return cpu_backend().scatter_add(base, 1, index1, src_t); },
      [&] { return cpu_backend().index_add(table, 0, ids, src); },
      [&] { return cpu_backend().index_select(src, 0, ids); },
      [&] { return cpu_backend().gather(src_t, 1, index1); },
  };
  for (size_t i = 0; i < runs.size(); ++i) {
    INFO("run ", i);
    Tensor one = with_threads(1, runs[i]);
    Tensor two = with_threads(2, runs[i]);
    CHECK(same_bits(one, two));
  }
}
