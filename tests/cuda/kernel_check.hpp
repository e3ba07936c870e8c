// Helpers for the kernel tests (tests/cuda/test_kernels_*.cpp): inputs in several memory layouts,
// element readers independent of the kernels under test, and comparisons of the emulated kernel
// backend (emulated_backend(), that is cotan::emu::backend()) with the CPU backend.
#pragma once

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "cuda/emulated/backend.hpp"
#include "cuda/simt/simt.hpp"
#include "tensor/op_table.hpp"

namespace kernel_check {

using namespace cotan;

// The backend under test. (Not emu(): with `using namespace cotan` that would also name the
// namespace cotan::emu.)
inline Backend& emulated_backend() { return cotan::emu::backend(); }
inline Backend& cpu() { return cpu_backend(); }

// Emulator schedules every test runs under: different thread orders must not change a result.
inline constexpr uint64_t kEmulatorSeeds[] = {1, 0x9e3779b97f4a7c15ull};

// Calls body() once per emulator seed, with shuffled schedules and poisoned shared memory.
template <class Body>
void for_each_schedule(Body&& body) {
  for (uint64_t seed : kEmulatorSeeds) {
    simt::EmulatorOptions options;
    options.seed = seed;
    options.shuffle = true;
    options.poison_shared = true;
    simt::ScopedEmulatorOptions scoped(options);
    CAPTURE(seed);
    body();
  }
}

// Calls f(index, offset) for every element of t in row-major order (offset in elements).
template <class F>
void walk(const Tensor& t, F&& f) {
  std::vector<int64_t> index(size_t(t.dim()), 0);
  for (int64_t i = 0; i < t.numel(); ++i) {
    int64_t offset = 0;
    for (size_t d = 0; d < index.size(); ++d) offset += index[d] * t.strides()[d];
    f(i, offset);
    for (size_t d = index.size(); d-- > 0;) {
      if (++index[d] < t.shape()[d]) break;
      index[d] = 0;
    }
  }
}

// Row-major values of any (strided) tensor, as doubles.
inline std::vector<double> values(const Tensor& t) {
  std::vector<double> out(size_t(t.numel()));
  dispatch_dtype(t.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* base = static_cast<const T*>(t.data_ptr());
    walk(t, [&](int64_t i, int64_t offset) { out[size_t(i)] = convert<double>(base[offset]); });
  });
  return out;
}

// Row-major bit patterns of any (strided) tensor.
inline std::vector<uint64_t> bits(const Tensor& t) {
  std::vector<uint64_t> out(size_t(t.numel()), 0);
  const size_t size = dtype_size(t.dtype());
  const char* base = static_cast<const char*>(t.data_ptr());
  walk(t, [&](int64_t i, int64_t offset) { std::memcpy(&out[size_t(i)], base + offset * int64_t(size), size); });
  return out;
}

// A contiguous tensor holding `v` converted to dtype.
inline Tensor make(const std::vector<double>& v, const Shape& shape, DType dtype) {
  Tensor t = Tensor::empty(shape, dtype);
  dispatch_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    T* p = static_cast<T*>(t.data_ptr());
    for (size_t i = 0; i < v.size(); ++i) p[i] = convert<T>(v[i]);
  });
  return t;
}

// Random values in [lo, hi) (integers for integer dtypes, true with probability 1/2 for bool),
// drawn by the CPU backend.
inline Tensor random_tensor(const Shape& shape, DType dtype, double lo, double hi, uint64_t seed) {
  Generator gen(seed);
  if (dtype == DType::boolean) return cpu().random(RandomOp::bernoulli, shape, dtype, gen, 0.5, 0);
  if (is_integral(dtype)) return cpu().random(RandomOp::randint, shape, dtype, gen, std::floor(lo), std::floor(hi));
  Tensor wide = cpu().random(RandomOp::uniform, shape, DType::f64, gen, lo, hi);
  Tensor out = Tensor::empty(shape, dtype);
  cpu().assign(out, wide);
  return out;
}

// How an input is laid out in memory; every kind holds the same values as its source.
enum class Layout {
  contiguous,
  transposed,  // the last two dimensions swapped in memory
  gapped,      // every other element of a larger storage, at an offset
  broadcast,   // dimension 0 read with stride 0 (the values of its first slice repeated)
};
inline constexpr Layout kLayouts[] = {Layout::contiguous, Layout::transposed, Layout::gapped, Layout::broadcast};

inline const char* layout_name(Layout l) {
  switch (l) {
    case Layout::contiguous: return "contiguous";
    case Layout::transposed: return "transposed";
    case Layout::gapped: return "gapped";
    case Layout::broadcast: return "broadcast";
  }
  return "?";
}

// `source` (contiguous, at least 2 dims) in layout l. A broadcast view shows source's first
// slice along dimension 0, so its values differ from source: read them back with values().
inline Tensor in_layout(const Tensor& source, Layout l) {
  const Shape& shape = source.shape();
  const size_t nd = shape.size();
  REQUIRE(nd >= 2);
  switch (l) {
    case Layout::contiguous: return source;
    case Layout::transposed: {
      Shape swapped = shape;
      std::swap(swapped[nd - 1], swapped[nd - 2]);
      Tensor storage = Tensor::empty(swapped, source.dtype());
      Strides strides = storage.strides();
      std::swap(strides[nd - 1], strides[nd - 2]);
      Tensor view = storage.as_strided(shape, strides, 0);
      cpu().assign(view, source);
      return view;
    }
    case Layout::gapped: {
      Tensor storage = Tensor::empty({2 * source.numel() + 1}, source.dtype());
      cpu().fill(storage, 0);
      Strides strides = source.strides();
      for (auto& s : strides) s *= 2;
      Tensor view = storage.as_strided(shape, strides, 1);
      cpu().assign(view, source);
      return view;
    }
    case Layout::broadcast: {
      Strides strides = source.strides();
      strides[0] = 0;
      return source.as_strided(shape, strides, 0);
    }
  }
  return source;
}

// got and want agree within the tolerance of dtype: f64 1e-12, f32 1e-5, bf16 1e-2 (relative,
// with a small absolute floor); exact for integers and bool. NaN matches NaN, inf the same inf.
inline bool close(double got, double want, DType dtype) {
  if (std::isnan(want)) return std::isnan(got);
  if (std::isinf(want) || !is_floating(dtype)) return got == want;
  const double rtol = dtype == DType::f64 ? 1e-12 : dtype == DType::f32 ? 1e-5 : 1e-2;
  const double atol = dtype == DType::f64 ? 1e-14 : dtype == DType::f32 ? 1e-6 : 1e-3;
  return std::abs(got - want) <= atol + rtol * std::abs(want);
}

// The emulated result `got` matches the CPU result `want` (shape, dtype, values).
inline void expect_close(const Tensor& got, const Tensor& want, const std::string& what) {
  INFO(what);
  REQUIRE(got.shape() == want.shape());
  REQUIRE(got.dtype() == want.dtype());
  CHECK(got.device() == Device::cpu());
  const auto g = values(got), w = values(want);
  int64_t bad = -1;
  for (size_t i = 0; i < g.size() && bad < 0; ++i)
    if (!close(g[i], w[i], want.dtype())) bad = int64_t(i);
  const std::string mismatch = bad < 0 ? "" : cat("element ", bad, ": got ", g[size_t(bad)], ", want ", w[size_t(bad)]);
  INFO(mismatch);
  CHECK(bad == -1);
}

// Bit for bit the same elements.
inline void expect_same(const Tensor& got, const Tensor& want, const std::string& what) {
  INFO(what);
  REQUIRE(got.shape() == want.shape());
  REQUIRE(got.dtype() == want.dtype());
  const auto g = bits(got), w = bits(want);
  int64_t bad = -1;
  for (size_t i = 0; i < g.size() && bad < 0; ++i)
    if (g[i] != w[i]) bad = int64_t(i);
  const std::string mismatch =
      bad < 0 ? "" : cat("element ", bad, ": got bits ", g[size_t(bad)], ", want ", w[size_t(bad)]);
  INFO(mismatch);
  CHECK(bad == -1);
}

}  // namespace kernel_check
