// CPU indexing: gather, scatter_add, index_select, index_add (torch semantics).
//
// Indices are checked before any work: the first out-of-range one in row-major order is named in
// the error, whatever the thread count. The adds are deterministic: scatter_add runs in parallel
// over the positions outside the axis (two positions never share a destination) and index_add
// over destination slices, each applying its sources in index order; both compute in the
// element's compute type (f32 for bf16) and round after every add, as torch does.
#include <algorithm>
#include <cstring>

#include "tensor/cpu/backend.hpp"
#include "tensor/cpu/parallel.hpp"
#include "tensor/cpu/reduce_policy.hpp"
#include "tensor/cpu/reduce_walk.hpp"

namespace cotan::cpu {

namespace {

// Copies elements bit for bit through an unsigned type of the element's size.
template <class F>
void dispatch_bits(size_t size, F&& f) {
  switch (size) {
    case 1: return f(uint8_t{});
    case 2: return f(uint16_t{});
    case 4: return f(uint32_t{});
    case 8: return f(uint64_t{});
  }
  fail("index", "unsupported element size ", size);
}

template <class F>
void dispatch_index(const char* op, const Tensor& index, F&& f) {
  if (index.dtype() == DType::i32) return f(int32_t{});
  if (index.dtype() == DType::i64) return f(int64_t{});
  fail(op, "index must be i32 or i64, got ", index.dtype());
}

template <class F>
void dispatch_numeric(const char* op, DType dtype, F&& f) {
  dispatch_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bool>) fail(op, "does not support dtype bool");
    else f(tag);
  });
}

Walk<1> walk_of(const Tensor& t) {
  Walk<1> w;
  for (int64_t d = 0; d < t.dim(); ++d) w.add(t.size(d), {t.strides()[size_t(d)]});
  w.coalesce();
  return w;
}

// Throws "[op] index 17 is out of range for axis 1 of size 10" for the first index (row-major)
// outside [0, size).
void check_range(const char* op, const Tensor& index, int64_t axis, int64_t size) {
  const Walk<1> w = walk_of(index);
  dispatch_index(op, index, [&](auto tag) {
    using I = decltype(tag);
    const I* p = static_cast<const I*>(index.data_ptr());
    int64_t bad = chunked_reduce<int64_t>(
        index.numel(), 1 << 16, int64_t(-1),
        [&](int64_t begin, int64_t end) {
          int64_t found = -1, pos = begin;
          w.runs(begin, end, [&](const auto& off, int64_t run, const auto& inner) {
            if (found >= 0) return;
            for (int64_t j = 0; j < run; ++j) {
              I v = p[off[0] + j * inner[0]];
              if (v < 0 || int64_t(v) >= size) {
                found = pos + j;
                return;
              }
            }
            pos += run;
          });
          return found;
        },
        [](int64_t a, int64_t b) { return a >= 0 ? a : b; });
    if (bad >= 0)
      fail(op, "index ", int64_t(p[w.offsets(bad)[0]]), " is out of range for axis ", axis, " of size ", size);
  });
}

// A contiguous copy of x (the starting value of scatter_add and index_add).
Tensor contiguous_copy(const Tensor& x) {
  Tensor out = Tensor::empty(x.shape(), x.dtype());
  if (x.numel() == 0) return out;
  const size_t esize = dtype_size(x.dtype());
  if (x.is_contiguous()) {
    const char* src = static_cast<const char*>(x.data_ptr());
    char* dst = static_cast<char*>(out.data_ptr());
    parallel_for(int64_t(out.nbytes()), int64_t(1) << 20,
                 [&](int64_t b, int64_t e) { std::memcpy(dst + b, src + b, size_t(e - b)); });
    return out;
  }
  Walk<2> w;
  Strides os = contiguous_strides(x.shape());
  for (int64_t d = 0; d < x.dim(); ++d) w.add(x.size(d), {x.strides()[size_t(d)], os[size_t(d)]});
  w.coalesce();
  dispatch_bits(esize, [&](auto tag) {
    using B = decltype(tag);
    const B* src = static_cast<const B*>(x.data_ptr());
    B* dst = static_cast<B*>(out.data_ptr());
    parallel_for(w.numel(), kSerialElements, [&](int64_t b, int64_t e) {
      w.runs(b, e, [&](const auto& off, int64_t run, const auto& inner) {
        for (int64_t j = 0; j < run; ++j) dst[off[1] + j * inner[1]] = src[off[0] + j * inner[0]];
      });
    });
  });
  return out;
}

template <class T>
inline void add_to(T& dst, T src) {
  dst = convert<T>(to_compute(dst) + to_compute(src));
}

}  // namespace

Tensor CpuBackend::gather_kernel(const Tensor& x, int64_t axis, const Tensor& index) {
  check_range("gather", index, axis, x.size(axis));
  Tensor out = Tensor::empty(index.shape(), x.dtype());
  if (out.numel() == 0) return out;
  // out[p] = x[p with its axis coordinate replaced by index[p]]
  Walk<3> w;  // strides: x (0 along the axis), index, out
  Strides os = contiguous_strides(index.shape());
  for (int64_t d = 0; d < x.dim(); ++d)
    w.add(index.size(d), {d == axis ? 0 : x.strides()[size_t(d)], index.strides()[size_t(d)], os[size_t(d)]});
  w.coalesce();
  const int64_t step = x.strides()[size_t(axis)];
  dispatch_index("gather", index, [&](auto itag) {
    using I = decltype(itag);
    dispatch_bits(dtype_size(x.dtype()), [&](auto btag) {
      using B = decltype(btag);
      const B* src = static_cast<const B*>(x.data_ptr());
      const I* idx = static_cast<const I*>(index.data_ptr());
      B* dst = static_cast<B*>(out.data_ptr());
      parallel_for(w.numel(), kSerialElements, [&](int64_t b, int64_t e) {
        w.runs(b, e, [&](const auto& off, int64_t run, const auto& inner) {
          for (int64_t j = 0; j < run; ++j)
            dst[off[2] + j * inner[2]] = src[off[0] + j * inner[0] + int64_t(idx[off[1] + j * inner[1]]) * step];
        });
      });
    });
  });
  return out;
}

Tensor CpuBackend::scatter_add_kernel(const Tensor& base, int64_t axis, const Tensor& index, const Tensor& src) {
  check_range("scatter_add", index, axis, base.size(axis));
  Tensor out = contiguous_copy(base);
  if (index.numel() == 0) return out;
  // out[p with axis coordinate index[p]] += src[p], p over index's positions. Positions that
  // differ outside the axis never share a destination; along the axis they add in order.
  Strides os = contiguous_strides(base.shape());
  Walk<3> w;  // dims other than the axis; strides: index, src, out
  for (int64_t d = 0; d < base.dim(); ++d)
    if (d != axis)
      w.add(index.size(d), {index.strides()[size_t(d)], src.strides()[size_t(d)], os[size_t(d)]});
  w.coalesce();
  const int64_t length = index.size(axis);
  const int64_t istep = index.strides()[size_t(axis)], sstep = src.strides()[size_t(axis)];
  const int64_t ostep = os[size_t(axis)];
  dispatch_index("scatter_add", index, [&](auto itag) {
    using I = decltype(itag);
    dispatch_numeric("scatter_add", base.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const I* idx = static_cast<const I*>(index.data_ptr());
      const T* s = static_cast<const T*>(src.data_ptr());
      T* dst = static_cast<T*>(out.data_ptr());
      parallel_for(w.numel(), std::max<int64_t>(1, kSerialElements / length), [&](int64_t b, int64_t e) {
        w.runs(b, e, [&](const auto& off, int64_t run, const auto& inner) {
          auto add = [&](int64_t j, int64_t i) {
            int64_t v = int64_t(idx[off[0] + j * inner[0] + i * istep]);
            add_to(dst[off[2] + j * inner[2] + v * ostep], s[off[1] + j * inner[1] + i * sstep]);
          };
          // Either loop order adds each destination's sources in increasing i.
          if (istep == 1) {
            for (int64_t j = 0; j < run; ++j)
              for (int64_t i = 0; i < length; ++i) add(j, i);
          } else {
            for (int64_t i = 0; i < length; ++i)
              for (int64_t j = 0; j < run; ++j) add(j, i);
          }
        });
      });
    });
  });
  return out;
}

namespace {

// x viewed as [outer, axis, inner]: the dims before and after the axis, with x's strides.
struct AxisSplit {
  Walk<1> outer, inner;
  bool inner_contiguous = false;  // the inner dims are one stride-1 run
};

AxisSplit split_at(const Tensor& x, int64_t axis) {
  AxisSplit s;
  for (int64_t d = 0; d < x.dim(); ++d) {
    if (d < axis) s.outer.add(x.size(d), {x.strides()[size_t(d)]});
    if (d > axis) s.inner.add(x.size(d), {x.strides()[size_t(d)]});
  }
  s.outer.coalesce();
  s.inner.coalesce();
  s.inner_contiguous = s.inner.rank() == 0 || (s.inner.rank() == 1 && s.inner.stride(0, 0) == 1);
  return s;
}

// Elements of one [inner] slice: f(dst[q], src[offset of q]) for q < inner.numel(); dst contiguous.
template <class T, class F>
inline void for_inner(const AxisSplit& split, T* dst, const T* src, int64_t width, F&& f) {
  if (split.inner_contiguous) {
    for (int64_t q = 0; q < width; ++q) f(dst[q], src[q]);
    return;
  }
  int64_t q = 0;
  split.inner.runs(0, width, [&](const auto& off, int64_t run, const auto& step) {
    for (int64_t j = 0; j < run; ++j, ++q) f(dst[q], src[off[0] + j * step[0]]);
  });
}

}  // namespace

Tensor CpuBackend::index_select_kernel(const Tensor& x, int64_t axis, const Tensor& index) {
  check_range("index_select", index, axis, x.size(axis));
  Shape shape = x.shape();
  const int64_t n = index.size(0);
  shape[size_t(axis)] = n;
  Tensor out = Tensor::empty(shape, x.dtype());
  if (out.numel() == 0) return out;
  const AxisSplit split = split_at(x, axis);
  const int64_t width = split.inner.numel();
  const int64_t step = x.strides()[size_t(axis)], istep = index.strides()[0];
  const size_t esize = dtype_size(x.dtype());
  dispatch_index("index_select", index, [&](auto itag) {
    using I = decltype(itag);
    dispatch_bits(esize, [&](auto btag) {
      using B = decltype(btag);
      const B* src = static_cast<const B*>(x.data_ptr());
      const I* idx = static_cast<const I*>(index.data_ptr());
      B* dst = static_cast<B*>(out.data_ptr());
      // One task per output slice out[o, j, :] = x[o, index[j], :]; a contiguous slice is a memcpy
      // (embedding lookup: x [V, D], axis 0).
      const int64_t grain = std::max<int64_t>(1, kSerialElements / width);
      parallel_for(split.outer.numel() * n, grain, [&](int64_t t0, int64_t t1) {
        int64_t o = t0 / n, j = t0 % n;
        int64_t base = split.outer.offsets(o)[0];
        for (int64_t t = t0; t < t1; ++t) {
          const B* from = src + base + int64_t(idx[j * istep]) * step;
          B* to = dst + t * width;
          if (split.inner_contiguous) std::memcpy(to, from, size_t(width) * esize);
          else for_inner(split, to, from, width, [](B& d, B v) { d = v; });
          if (++j == n && t + 1 < t1) {
            j = 0;
            base = split.outer.offsets(++o)[0];
          }
        }
      });
    });
  });
  return out;
}

Tensor CpuBackend::index_add_kernel(const Tensor& base, int64_t axis, const Tensor& index, const Tensor& src) {
  const int64_t n = index.size(0);
  check_range("index_add", index, axis, base.size(axis));
  Tensor out = contiguous_copy(base);
  if (src.numel() == 0) return out;
  const int64_t slots = base.size(axis);
  // Sources grouped by destination, each group in index order (a stable counting sort).
  std::vector<int64_t> first(size_t(slots) + 1, 0);
  std::vector<int64_t> order(static_cast<size_t>(n));
  dispatch_index("index_add", index, [&](auto itag) {
    using I = decltype(itag);
    const I* idx = static_cast<const I*>(index.data_ptr());
    const int64_t istep = index.strides()[0];
    for (int64_t j = 0; j < n; ++j) ++first[size_t(idx[j * istep]) + 1];
    for (int64_t v = 0; v < slots; ++v) first[size_t(v) + 1] += first[size_t(v)];
    std::vector<int64_t> fill(first.begin(), first.end() - 1);
    for (int64_t j = 0; j < n; ++j) order[size_t(fill[size_t(idx[j * istep])]++)] = j;
  });
  const AxisSplit split = split_at(src, axis);
  const int64_t width = split.inner.numel();
  const int64_t sstep = src.strides()[size_t(axis)];
  const int64_t per_slot = std::max<int64_t>(1, n * width / slots);
  dispatch_numeric("index_add", base.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* s = static_cast<const T*>(src.data_ptr());
    T* dst = static_cast<T*>(out.data_ptr());
    // Task t = (o, v) owns out[o, v, :].
    const int64_t grain = std::max<int64_t>(1, kSerialElements / per_slot);
    parallel_for(split.outer.numel() * slots, grain, [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) {
        const int64_t o = t / slots, v = t % slots;
        if (first[size_t(v)] == first[size_t(v) + 1]) continue;
        const int64_t base_off = split.outer.offsets(o)[0];
        T* to = dst + t * width;
        for (int64_t k = first[size_t(v)]; k < first[size_t(v) + 1]; ++k)
          for_inner(split, to, s + base_off + order[size_t(k)] * sstep, width, [](T& d, T x) { add_to(d, x); });
      }
    });
  });
  return out;
}

}  // namespace cotan::cpu
