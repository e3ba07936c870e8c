// The index kernels (cuda/kernels/index.cuh) run by the SIMT emulator, against the CPU backend:
// gather, scatter_add, index_select and index_add for every dtype they take, i32 and i64 indices,
// every axis, strided inputs and indices, duplicate indices for the adds, under two emulator
// schedules. Every result must match bit for bit: the adds run in an order the CPU's does not
// share (atomics), so their inputs are chosen to make every sum exact (add_values).
#include "tests/cuda/kernel_check.hpp"

#include <functional>

using namespace cotan;
using namespace kernel_check;

namespace {

// The emulated kernel backend (cotan::emu, which `using namespace cotan` makes ambiguous with
// kernel_check::emu).
Backend& emulated() { return cotan::emu::backend(); }

constexpr DType kAllTypes[] = {DType::f64, DType::f32, DType::bf16, DType::i32, DType::i64, DType::boolean};
constexpr DType kAddTypes[] = {DType::f64, DType::f32, DType::bf16, DType::i32, DType::i64};
constexpr DType kIndexTypes[] = {DType::i32, DType::i64};
const Shape kShape = {4, 5, 6};

// Values for the adds: integers in [-16, 16) for integer dtypes, multiples of 1/8 in [-2, 2) for
// floating ones. Every sum the tests form is then exact in every dtype, so the result is the same
// whatever order the atomic adds run in, and must match the CPU bit for bit.
Tensor add_values(const Shape& shape, DType dtype, uint64_t seed) {
  std::vector<double> v = values(random_tensor(shape, DType::i32, -16, 16, seed));
  if (is_floating(dtype))
    for (double& x : v) x /= 8;
  return make(v, shape, dtype);
}

// A 1-D index of n values in [0, size), every other element of a larger tensor (stride 2).
Tensor strided_index(int64_t n, int64_t size, DType itype, uint64_t seed) {
  return random_tensor({2 * n + 1}, itype, 0, double(size), seed).as_strided({n}, {2}, 1);
}

// The message of the error f throws ("" when it throws none).
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("gather matches the CPU for every dtype, index type, axis and layout") {
  for_each_schedule([&] {
    for (DType t : kAllTypes) {
      Tensor source = random_tensor(kShape, t, -50, 50, 3 + uint64_t(t));
      for (DType it : kIndexTypes) {
        for (int64_t axis = 0; axis < 3; ++axis) {
          // Smaller than x outside the axis, longer along it (repeated picks).
          Shape ishape = {3, 4, 5};
          ishape[size_t(axis)] = 7;
          Tensor index = random_tensor(ishape, it, 0, double(kShape[size_t(axis)]), 10 + uint64_t(axis));
          for (Layout l : kLayouts) {
            const std::string what = cat("gather ", t, " index ", it, " axis ", axis, " x ", layout_name(l));
            Tensor x = in_layout(source, l);
            expect_same(emulated().gather(x, axis, index), cpu().gather(x, axis, index), what);
            Tensor strided = in_layout(index, l);
            expect_same(emulated().gather(source, axis, strided), cpu().gather(source, axis, strided),
                        what + " (index)");
          }
        }
      }
    }
  });
}

TEST_CASE("scatter_add matches the CPU with duplicate indices on every axis and layout") {
  for_each_schedule([&] {
    for (DType t : kAddTypes) {
      Tensor base = add_values(kShape, t, 20 + uint64_t(t));
      for (DType it : kIndexTypes) {
        for (int64_t axis = 0; axis < 3; ++axis) {
          // Along the axis 2 size + 1 positions: every destination slot is hit more than once.
          Shape ishape = {3, 4, 5};
          ishape[size_t(axis)] = 2 * kShape[size_t(axis)] + 1;
          Shape sshape = ishape;
          for (auto& d : sshape) ++d;  // the source may be larger than the index anywhere
          Tensor index = random_tensor(ishape, it, 0, double(kShape[size_t(axis)]), 30 + uint64_t(axis));
          Tensor src = add_values(sshape, t, 40 + uint64_t(axis));
          for (Layout l : kLayouts) {
            const std::string what = cat("scatter_add ", t, " index ", it, " axis ", axis, " ", layout_name(l));
            Tensor b = in_layout(base, l), s = in_layout(src, l), i = in_layout(index, l);
            expect_same(emulated().scatter_add(b, axis, index, s), cpu().scatter_add(b, axis, index, s), what);
            expect_same(emulated().scatter_add(base, axis, i, src), cpu().scatter_add(base, axis, i, src),
                         what + " (index)");
          }
        }
      }
    }
  });
}

TEST_CASE("index_select matches the CPU for every dtype, axis and layout, with a strided index") {
  for_each_schedule([&] {
    for (DType t : kAllTypes) {
      Tensor source = random_tensor(kShape, t, -50, 50, 50 + uint64_t(t));
      for (DType it : kIndexTypes) {
        for (int64_t axis = 0; axis < 3; ++axis) {
          Tensor index = strided_index(9, kShape[size_t(axis)], it, 60 + uint64_t(axis));
          for (Layout l : kLayouts) {
            const std::string what = cat("index_select ", t, " index ", it, " axis ", axis, " ", layout_name(l));
            Tensor x = in_layout(source, l);
            expect_same(emulated().index_select(x, axis, index), cpu().index_select(x, axis, index), what);
          }
        }
      }
    }
  });
}

TEST_CASE("index_add matches the CPU with duplicate indices on every axis and layout") {
  for_each_schedule([&] {
    for (DType t : kAddTypes) {
      Tensor base = add_values(kShape, t, 70 + uint64_t(t));
      for (DType it : kIndexTypes) {
        for (int64_t axis = 0; axis < 3; ++axis) {
          const int64_t n = 2 * kShape[size_t(axis)] + 1;
          Tensor index = strided_index(n, kShape[size_t(axis)], it, 80 + uint64_t(axis));
          Shape sshape = kShape;
          sshape[size_t(axis)] = n;
          Tensor src = add_values(sshape, t, 90 + uint64_t(axis));
          for (Layout l : kLayouts) {
            const std::string what = cat("index_add ", t, " index ", it, " axis ", axis, " ", layout_name(l));
            Tensor b = in_layout(base, l), s = in_layout(src, l);
            expect_same(emulated().index_add(b, axis, index, s), cpu().index_add(b, axis, index, s), what);
          }
        }
      }
    }
  });
}

TEST_CASE("embedding lookup and its backward walk the grid-stride loop") {
  // More elements than the emulated grid has threads; 40 tokens over a 50-row table.
  for_each_schedule([&] {
    for (DType t : {DType::f32, DType::bf16}) {
      Tensor table = add_values({50, 16}, t, 100);
      Tensor tokens = random_tensor({40}, DType::i64, 0, 50, 101);
      const std::string what = cat("embedding ", t);
      expect_same(emulated().index_select(table, 0, tokens), cpu().index_select(table, 0, tokens), what);
      Tensor grad = add_values({40, 16}, t, 102);
      Tensor zeros = Tensor::empty({50, 16}, t);
      cpu().fill(zeros, 0);
      expect_same(emulated().index_add(zeros, 0, tokens, grad), cpu().index_add(zeros, 0, tokens, grad),
                   what + " backward");
      // The same through gather / scatter_add: a [40, 16] index of row numbers.
      Tensor rows = random_tensor({40, 16}, DType::i64, 0, 50, 103);
      expect_same(emulated().gather(table, 0, rows), cpu().gather(table, 0, rows), what + " gather");
      expect_same(emulated().scatter_add(zeros, 0, rows, grad), cpu().scatter_add(zeros, 0, rows, grad),
                   what + " scatter_add");
    }
  });
}

TEST_CASE("out-of-range indices give the CPU's error, naming the first bad index") {
  Tensor x = random_tensor({3, 4}, DType::f32, -1, 1, 1);
  for (DType it : kIndexTypes) {
    INFO("index ", it);
    // Row-major first bad index: 9 (then -1 and 4 later).
    Tensor index = make({0, 2, 9, 1, -1, 4}, {2, 3}, it);
    Tensor column = make({1, 3, 0, 2, 2, 1}, {2, 3}, it);
    Tensor column_bad = make({1, 3, 0, 7, 2, 1}, {2, 3}, it);  // read with strides (1, 2): 7 at (1, 1)
    Tensor src = random_tensor({2, 3}, DType::f32, -1, 1, 2);
    Tensor list = make({1, -1, 5, 0}, {4}, it);
    Tensor rows = random_tensor({4, 4}, DType::f32, -1, 1, 3);
    const std::vector<std::function<Tensor(Backend&)>> calls = {
        [&](Backend& be) { return be.gather(x, 0, index); },
        [&](Backend& be) { return be.gather(x, 1, column_bad.as_strided({2, 3}, {1, 2}, 0)); },
        [&](Backend& be) { return be.scatter_add(x, 0, index, src); },
        [&](Backend& be) { return be.index_select(x, 0, list); },
        [&](Backend& be) { return be.index_add(x, 0, list, rows); },
        // Nothing to move (empty slices), but the indices are still checked.
        [&](Backend& be) { return be.index_select(Tensor::empty({3, 0}, DType::f32), 0, list); },
        [&](Backend& be) { return be.index_add(Tensor::empty({3, 0}, DType::f32), 0, list,
                                               Tensor::empty({4, 0}, DType::f32)); },
    };
    for (size_t c = 0; c < calls.size(); ++c) {
      CAPTURE(c);
      const std::string want = error_of([&] { calls[c](cpu()); });
      CHECK(want.find("is out of range") != std::string::npos);
      CHECK(error_of([&] { calls[c](emulated()); }) == want);
    }
    CHECK(error_of([&] { emulated().gather(x, 1, column); }).empty());  // in range along axis 1
  }
  Tensor findex = random_tensor({2, 3}, DType::f32, 0, 2, 4);
  CHECK_THROWS_WITH_AS(emulated().gather(x, 0, findex), "[gather] index must be i32 or i64, got f32", Error);
  Tensor flags = random_tensor({3, 4}, DType::boolean, 0, 1, 5);
  Tensor ok = make({0, 1, 2}, {3}, DType::i64);
  CHECK_THROWS_WITH_AS(emulated().index_add(flags, 0, ok, flags), "[index_add] does not support dtype bool", Error);
  Tensor wide = random_tensor({3, 4}, DType::f64, -1, 1, 6);
  Tensor first = make({0}, {1, 1}, DType::i32);
  CHECK_THROWS_WITH_AS(emulated().scatter_add(x, 0, first, wide),
                       "[scatter_add] base has dtype f32 but the source has f64", Error);
}
