// CPU reductions, the softmax family and cumsum.
//
// A reduction splits x's dims into kept dims (the output, row-major) and reduced dims (sorted by
// stride, outermost first, then merged where memory allows). Two layouts are read in place:
//   rows:    the reduced dims form one stride-1 run (reducing the last axis, or everything, of a
//            contiguous tensor); each output folds its row in chunks of kChunk elements;
//   columns: a kept dim has stride 1 (reducing a leading axis); each step folds a block of
//            adjacent outputs at once, which vectorizes across them.
// Anything else is read as rows, each chunk first gathered into a contiguous buffer.
// Chunk boundaries depend only on sizes and partials are combined in chunk order, so the result
// has the same bits for any thread count. Floating sums accumulate in f64.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>

// Eigen 3.4's AVX bf16 packet code has an unused variable; its headers are not system headers here.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-variable"
#include <Eigen/Core>
#pragma GCC diagnostic pop

#include "tensor/cpu/backend.hpp"
#include "tensor/cpu/parallel.hpp"
#include "tensor/cpu/reduce_policy.hpp"
#include "tensor/cpu/reduce_walk.hpp"
#include "tensor/cpu/vector_math.hpp"

namespace cotan::cpu {

namespace {

constexpr int64_t kChunk = 1 << 14;        // elements of a row folded as one partial
constexpr int64_t kColumnBlock = 1024;     // outputs folded together in the column layout
constexpr int64_t kColumnTask = 1 << 16;   // elements per column task when rows are split
constexpr int64_t kMinColumns = 8;         // narrower stride-1 kept dims are read as rows
constexpr int64_t kColumnTasks = 64;       // below this many (output block) tasks, columns split rows

struct ReduceLayout {
  Walk<2> kept;     // strides: x, out
  Walk<1> reduced;  // strides: x
};

ReduceLayout plan_reduce(const Tensor& x, const std::vector<int64_t>& axes) {
  ReduceLayout plan;
  Shape kept_shape;
  for (int64_t d = 0; d < x.dim(); ++d)
    if (!std::binary_search(axes.begin(), axes.end(), d)) kept_shape.push_back(x.size(d));
  Strides out_strides = contiguous_strides(kept_shape);
  std::vector<std::pair<int64_t, int64_t>> reduced;  // (size, stride)
  size_t k = 0;
  for (int64_t d = 0; d < x.dim(); ++d) {
    if (std::binary_search(axes.begin(), axes.end(), d)) reduced.emplace_back(x.size(d), x.strides()[size_t(d)]);
    else plan.kept.add(x.size(d), {x.strides()[size_t(d)], out_strides[k++]});
  }
  // Walk the reduced dims in memory order: the fold order then follows the layout, not the axes.
  std::stable_sort(reduced.begin(), reduced.end(),
                   [](const auto& a, const auto& b) { return std::abs(a.second) > std::abs(b.second); });
  for (const auto& [size, stride] : reduced) plan.reduced.add(size, {stride});
  plan.kept.coalesce();
  plan.reduced.coalesce();
  return plan;
}

template <class P>
class Reducer {
  using In = typename P::In;
  using Acc = typename P::Acc;
  using Out = typename P::Out;

 public:
  Reducer(const Tensor& x, const std::vector<int64_t>& axes, const Tensor& out)
      : plan_(plan_reduce(x, axes)),
        x_(static_cast<const In*>(x.data_ptr())),
        out_(static_cast<Out*>(out.data_ptr())),
        rows_(plan_.kept.numel()),
        length_(plan_.reduced.numel()) {}

  void run() {
    if (rows_ == 0) return;
    if (length_ == 0) {
      std::fill(out_, out_ + rows_, P::finish(P::identity()));
      return;
    }
    const Walk<1>& r = plan_.reduced;
    direct_ = r.rank() == 0 || (r.rank() == 1 && r.stride(0, 0) == 1);
    if (!direct_)
      for (size_t d = plan_.kept.rank(); d-- > 0;)
        if (plan_.kept.stride(0, d) == 1 && plan_.kept.sizes[d] >= kMinColumns) return columns(d);
    rows();
  }

 private:
  // Folds positions [r0, r1) of the reduced dims of the row at x offset `base`.
  Acc fold_chunk(int64_t base, int64_t r0, int64_t r1, In* buffer) const {
    if (direct_) return fold_row<P>(x_ + base + r0, r1 - r0, r0);
    int64_t k = 0;
    plan_.reduced.runs(r0, r1, [&](const auto& off, int64_t run, const auto& inner) {
      const In* p = x_ + base + off[0];
      for (int64_t j = 0; j < run; ++j) buffer[k + j] = p[j * inner[0]];
      k += run;
    });
    return fold_row<P>(buffer, r1 - r0, r0);
  }

  void rows() {
    const int64_t chunks = (length_ + kChunk - 1) / kChunk;
    const int64_t width = std::min(length_, kChunk);
    if (chunks == 1) {
      parallel_for(rows_, std::max<int64_t>(1, kSerialElements / length_), [&](int64_t o0, int64_t o1) {
        std::unique_ptr<In[]> buffer(direct_ ? nullptr : new In[size_t(width)]);
        int64_t o = o0;
        plan_.kept.runs(o0, o1, [&](const auto& off, int64_t run, const auto& inner) {
          for (int64_t j = 0; j < run; ++j)
            out_[o++] = P::finish(fold_chunk(off[0] + j * inner[0], 0, length_, buffer.get()));
        });
      });
      return;
    }
    std::vector<Acc> partial(size_t(rows_ * chunks));
    parallel_for(rows_ * chunks, 1, [&](int64_t t0, int64_t t1) {
      std::unique_ptr<In[]> buffer(direct_ ? nullptr : new In[size_t(width)]);
      for (int64_t t = t0; t < t1; ++t) {
        int64_t o = t / chunks, c = t % chunks;
        int64_t base = plan_.kept.offsets(o)[0];
        partial[size_t(t)] = fold_chunk(base, c * kChunk, std::min(length_, (c + 1) * kChunk), buffer.get());
      }
    });
    parallel_for(rows_, std::max<int64_t>(1, kSerialElements / chunks), [&](int64_t o0, int64_t o1) {
      for (int64_t o = o0; o < o1; ++o) {
        Acc a = partial[size_t(o * chunks)];
        for (int64_t c = 1; c < chunks; ++c) a = combine<P>(a, partial[size_t(o * chunks + c)]);
        out_[o] = P::finish(a);
      }
    });
  }

  // Kept dim `cdim` has x stride 1: fold blocks of adjacent outputs row by row. With few output
  // blocks the reduced positions are also split into fixed slices, combined in order afterwards.
  void columns(size_t cdim) {
    const int64_t width = plan_.kept.sizes[cdim];
    const int64_t out_step = plan_.kept.stride(1, cdim);
    Walk<2> outer;
    for (size_t d = 0; d < plan_.kept.rank(); ++d)
      if (d != cdim) outer.add(plan_.kept.sizes[d], {plan_.kept.stride(0, d), plan_.kept.stride(1, d)});
    const int64_t outers = outer.numel();
    const int64_t block = std::min(width, kColumnBlock);
    const int64_t blocks = (width + block - 1) / block;
    int64_t slice = length_;
    if (outers * blocks < kColumnTasks) slice = std::max<int64_t>(16, kColumnTask / block);
    const int64_t slices = (length_ + slice - 1) / slice;
    std::vector<Acc> partial(slices > 1 ? size_t(outers * slices * width) : 0);

    auto task = [&](int64_t t) {
      const int64_t s = t % slices, b = (t / slices) % blocks, o = t / (slices * blocks);
      const int64_t c0 = b * block, cw = std::min(block, width - c0);
      const auto base = outer.offsets(o);
      Acc acc[kColumnBlock];
      for (int64_t j = 0; j < cw; ++j) acc[j] = P::identity();
      int64_t r = s * slice;
      plan_.reduced.runs(r, std::min(length_, r + slice), [&](const auto& off, int64_t run, const auto& inner) {
        const In* p = x_ + base[0] + off[0] + c0;
        for (int64_t j = 0; j < run; ++j, ++r) fold_columns<P>(acc, p + j * inner[0], cw, r);
      });
      if (slices == 1) {
        for (int64_t j = 0; j < cw; ++j) out_[base[1] + (c0 + j) * out_step] = P::finish(acc[j]);
      } else {
        std::copy(acc, acc + cw, partial.begin() + (o * slices + s) * width + c0);
      }
    };
    const int64_t tasks = outers * blocks * slices;
    const int64_t per_task = std::min(slice, length_) * block;
    parallel_for(tasks, std::max<int64_t>(1, kSerialElements / per_task), [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) task(t);
    });
    if (slices == 1) return;
    parallel_for(outers, std::max<int64_t>(1, kSerialElements / (width * slices)), [&](int64_t o0, int64_t o1) {
      for (int64_t o = o0; o < o1; ++o) {
        const int64_t dst = outer.offsets(o)[1];
        const Acc* p = partial.data() + o * slices * width;
        for (int64_t j = 0; j < width; ++j) {
          Acc a = p[j];
          for (int64_t s = 1; s < slices; ++s) a = combine<P>(a, p[s * width + j]);
          out_[dst + j * out_step] = P::finish(a);
        }
      }
    });
  }

  ReduceLayout plan_;
  const In* x_;
  Out* out_;
  int64_t rows_;    // outputs
  int64_t length_;  // elements folded into each output
  bool direct_ = false;
};

template <class P>
void reduce_with(const Tensor& x, const std::vector<int64_t>& axes, const Tensor& out) {
  Reducer<P>(x, axes, out).run();
}

// Ops along one axis (the softmax family, cumsum) see x as lines: one per position of the other
// dims, `length` elements `step` apart in x and `out_step` apart in the output (contiguous; it
// keeps the axis, or drops it for logsumexp). When the innermost other dim is contiguous in both
// (the axis is not the last), adjacent lines are handled together as a block of columns, so
// every access is contiguous. Each line's result depends only on its own elements.
constexpr int64_t kLineBlock = 256;

struct AxisLines {
  Walk<2> rows;  // the other dims; strides: x, out
  int64_t length = 0, step = 0, out_step = 0;
  bool columns = false;
};

AxisLines lines_along(const Tensor& x, int64_t axis, bool keep) {
  AxisLines lines;
  Shape out_shape = x.shape();
  if (!keep) out_shape.erase(out_shape.begin() + axis);
  const Strides out_strides = contiguous_strides(out_shape);
  for (int64_t d = 0, k = 0; d < x.dim(); ++d) {
    if (d == axis) {
      if (keep) lines.out_step = out_strides[size_t(k++)];
      continue;
    }
    lines.rows.add(x.size(d), {x.strides()[size_t(d)], out_strides[size_t(k++)]});
  }
  lines.rows.coalesce();
  lines.length = x.size(axis);
  lines.step = x.strides()[size_t(axis)];
  const size_t r = lines.rows.rank();
  lines.columns = r > 0 && lines.rows.stride(0, r - 1) == 1 && lines.rows.stride(1, r - 1) == 1;
  return lines;
}

// line(x_offset, out_offset) for single lines; block(x_offset, out_offset, width) for `width`
// adjacent lines (column layout).
template <class Line, class Block>
void for_each_line(const AxisLines& lines, Line&& line, Block&& block) {
  const int64_t n = lines.rows.numel();
  if (n == 0 || lines.length == 0) return;
  int64_t grain = std::max<int64_t>(1, kSerialElements / lines.length);
  if (lines.columns) grain = std::max(grain, kLineBlock);
  parallel_for(n, grain, [&](int64_t o0, int64_t o1) {
    lines.rows.runs(o0, o1, [&](const auto& off, int64_t run, const auto& inner) {
      if (lines.columns) {
        for (int64_t c = 0; c < run; c += kLineBlock) block(off[0] + c, off[1] + c, std::min(kLineBlock, run - c));
      } else {
        for (int64_t j = 0; j < run; ++j) line(off[0] + j * inner[0], off[1] + j * inner[1]);
      }
    });
  });
}

enum class SoftmaxKind { softmax, log_softmax, logsumexp };

// q[i * step] = value(i) for i < n, converted to T; the contiguous case vectorizes.
template <class T, class F>
inline void store_line(T* q, int64_t step, int64_t n, F&& value) {
  if (step == 1) {
    for (int64_t i = 0; i < n; ++i) q[i] = convert<T>(value(i));
  } else {
    for (int64_t i = 0; i < n; ++i) q[i * step] = convert<T>(value(i));
  }
}

// Each line: m = max (0 when not finite, so lines of -inf or +inf do not produce inf - inf),
// s = sum exp(x - m) in f64; softmax = exp(x - m) / s, log_softmax = (x - m) - log s,
// logsumexp = m + log s. Computed in compute_t<T> (f32 for bf16).
template <class T>
void softmax_lines(SoftmaxKind kind, const Tensor& x, int64_t axis, const Tensor& out) {
  using C = compute_t<T>;
  using Max = ExtremumPolicy<C, true>;
  using Line = Eigen::Array<C, Eigen::Dynamic, 1>;
  using Block = Eigen::Array<C, kLineBlock, 1>;
  const AxisLines lines = lines_along(x, axis, kind != SoftmaxKind::logsumexp);
  const int64_t length = lines.length, step = lines.step, out_step = lines.out_step;
  const T* src = static_cast<const T*>(x.data_ptr());
  T* dst = static_cast<T*>(out.data_ptr());
  if (length == 0 && kind == SoftmaxKind::logsumexp)
    std::fill(dst, dst + out.numel(), convert<T>(-std::numeric_limits<C>::infinity()));

  auto line = [&](int64_t in, int64_t to) {
    thread_local Line copy, e;
    const T* p = src + in;
    const C* row;  // the line in C, read in place when it already is
    if constexpr (std::is_same_v<T, C>) row = p;
    if (!std::is_same_v<T, C> || step != 1) {
      copy.resize(length);
      for (int64_t i = 0; i < length; ++i) copy[i] = to_compute(p[i * step]);
      row = copy.data();
    }
    C m = fold_row<Max>(row, length, 0);
    if (!std::isfinite(m)) m = C(0);
    e = (Eigen::Map<const Line>(row, length) - m).exp();
    repair_exp(row, m, e.data(), length);  // exp(-inf) = 0 exactly, underflow as in libm
    const double s = fold_row<SumPolicy<C>>(e.data(), length, 0);
    if (kind == SoftmaxKind::softmax) {
      const C scale = C(1.0 / s);
      store_line(dst + to, out_step, length, [&](int64_t i) { return e[i] * scale; });
    } else if (kind == SoftmaxKind::log_softmax) {
      const C log_s = C(std::log(s));
      store_line(dst + to, out_step, length, [&](int64_t i) { return (row[i] - m) - log_s; });
    } else {
      dst[to] = convert<T>(double(m) + std::log(s));
    }
  };

  auto block = [&](int64_t in, int64_t to, int64_t width) {
    C m[kLineBlock];
    double s[kLineBlock];
    Block a;
    Block shifted;
    auto shifted_row = [&](int64_t i) {  // a = x[i, :] - m
      const T* p = src + in + i * step;
      for (int64_t j = 0; j < width; ++j) a[j] = to_compute(p[j]) - m[j];
    };
    auto exp_row = [&] {  // a = exp(a), with libm's values outside the packet exp's exact range
      shifted.head(width) = a.head(width);
      a.head(width) = a.head(width).exp();
      repair_exp(shifted.data(), C(0), a.data(), width);
    };
    for (int64_t j = 0; j < width; ++j) m[j] = Max::identity();
    for (int64_t i = 0; i < length; ++i) {
      const T* p = src + in + i * step;
      for (int64_t j = 0; j < width; ++j) m[j] = Max::fold(m[j], to_compute(p[j]));
    }
    for (int64_t j = 0; j < width; ++j) {
      if (!std::isfinite(m[j])) m[j] = C(0);
      s[j] = 0;
    }
    for (int64_t i = 0; i < length; ++i) {
      shifted_row(i);
      exp_row();
      for (int64_t j = 0; j < width; ++j) s[j] += double(a[j]);
    }
    if (kind == SoftmaxKind::logsumexp) {
      for (int64_t j = 0; j < width; ++j) dst[to + j] = convert<T>(double(m[j]) + std::log(s[j]));
      return;
    }
    C factor[kLineBlock];
    for (int64_t j = 0; j < width; ++j) factor[j] = kind == SoftmaxKind::softmax ? C(1.0 / s[j]) : C(std::log(s[j]));
    for (int64_t i = 0; i < length; ++i) {
      shifted_row(i);
      T* q = dst + to + i * out_step;
      if (kind == SoftmaxKind::softmax) {
        exp_row();
        for (int64_t j = 0; j < width; ++j) q[j] = convert<T>(a[j] * factor[j]);
      } else {
        for (int64_t j = 0; j < width; ++j) q[j] = convert<T>(a[j] - factor[j]);
      }
    }
  };

  for_each_line(lines, line, block);
}

// axis in [0, ndim) and a floating x (Backend::softmax and its kin checked them).
Tensor softmax_family(SoftmaxKind kind, const Tensor& x, int64_t axis) {
  Shape shape = x.shape();
  if (kind == SoftmaxKind::logsumexp) shape.erase(shape.begin() + axis);
  Tensor out = Tensor::empty(shape, x.dtype());
  dispatch_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (kFloating<T>) softmax_lines<T>(kind, x, axis, out);
  });
  return out;
}

// Sequential along the axis (f64 accumulator for floats, i64 for integers and bool).
template <class T>
void cumsum_lines(const Tensor& x, int64_t axis, bool reverse, const Tensor& out) {
  using P = SumPolicy<T>;
  using Acc = typename P::Acc;
  using Out = typename P::Out;
  const AxisLines lines = lines_along(x, axis, true);
  const int64_t length = lines.length, step = lines.step, out_step = lines.out_step;
  const T* src = static_cast<const T*>(x.data_ptr());
  Out* dst = static_cast<Out*>(out.data_ptr());
  auto line = [&](int64_t in, int64_t to) {
    Acc acc = P::identity();
    for (int64_t n = 0; n < length; ++n) {
      const int64_t i = reverse ? length - 1 - n : n;
      acc += P::value(src[in + i * step]);
      dst[to + i * out_step] = P::finish(acc);
    }
  };
  auto block = [&](int64_t in, int64_t to, int64_t width) {
    Acc acc[kLineBlock];
    for (int64_t j = 0; j < width; ++j) acc[j] = P::identity();
    for (int64_t n = 0; n < length; ++n) {
      const int64_t i = reverse ? length - 1 - n : n;
      const T* p = src + in + i * step;
      Out* q = dst + to + i * out_step;
      for (int64_t j = 0; j < width; ++j) {
        acc[j] += P::value(p[j]);
        q[j] = P::finish(acc[j]);
      }
    }
  };
  for_each_line(lines, line, block);
}

}  // namespace

Tensor CpuBackend::reduce_kernel(ReduceOp op, const Tensor& x, const std::vector<int64_t>& axes_in, bool keepdim) {
  const bool indexed = op == ReduceOp::argmax || op == ReduceOp::argmin;
  const std::vector<int64_t>& axes = axes_in;  // normalized and sorted by Backend::reduce
  Shape shape;
  int64_t length = 1;
  for (int64_t d = 0; d < x.dim(); ++d) {
    if (!std::binary_search(axes.begin(), axes.end(), d)) shape.push_back(x.size(d));
    else {
      length *= x.size(d);
      if (keepdim) shape.push_back(1);
    }
  }
  DType out_dtype = x.dtype();
  if (indexed || x.dtype() == DType::boolean) out_dtype = DType::i64;
  Tensor out = Tensor::empty(shape, out_dtype);
  dispatch_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bool>) {
      reduce_with<SumPolicy<bool>>(x, axes, out);
    } else {
      switch (op) {
        case ReduceOp::sum: return reduce_with<SumPolicy<T>>(x, axes, out);
        case ReduceOp::max: return reduce_with<ExtremumPolicy<T, true>>(x, axes, out);
        case ReduceOp::min: return reduce_with<ExtremumPolicy<T, false>>(x, axes, out);
        case ReduceOp::argmax: return reduce_with<ArgPolicy<T, true>>(x, axes, out);
        case ReduceOp::argmin: return reduce_with<ArgPolicy<T, false>>(x, axes, out);
      }
    }
  });
  return out;
}

Tensor CpuBackend::softmax_kernel(const Tensor& x, int64_t axis) {
  return softmax_family(SoftmaxKind::softmax, x, axis);
}

Tensor CpuBackend::log_softmax_kernel(const Tensor& x, int64_t axis) {
  return softmax_family(SoftmaxKind::log_softmax, x, axis);
}

Tensor CpuBackend::logsumexp_kernel(const Tensor& x, int64_t axis) {
  return softmax_family(SoftmaxKind::logsumexp, x, axis);
}

Tensor CpuBackend::cumsum_kernel(const Tensor& x, int64_t axis, bool reverse) {
  const DType out_dtype = x.dtype() == DType::boolean ? DType::i64 : x.dtype();
  Tensor out = Tensor::empty(x.shape(), out_dtype);
  dispatch_dtype(x.dtype(), [&](auto tag) { cumsum_lines<decltype(tag)>(x, axis, reverse, out); });
  return out;
}

}  // namespace cotan::cpu
