// The CPU backend's row kernels of the fused layers: rms_norm, swiglu and rope, forward and
// backward (contract in tensor/fused_ops.hpp, ops in nn/fused.hpp). Rows (rms_norm, rope)
// or elements (swiglu) are cut into chunks that depend only on the sizes (tensor/cpu/parallel.hpp);
// the one reduction across rows, rms_norm's dweight, sums fixed blocks of rows into f64 partials
// and adds the partials in block order: the same bits with any number of threads.
//
// Row sums are f64 over eight interleaved lanes (products in the compute type first, as the
// composed square-then-sum does); bf16 rows are converted to f32 once per row or tile.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <type_traits>
#include <vector>

// Eigen 3.4's AVX bf16 packet code declares a variable it never uses.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-variable"
#include <Eigen/Core>
#pragma GCC diagnostic pop

#include "tensor/cpu/backend.hpp"
#include "tensor/cpu/parallel.hpp"

namespace cotan::cpu {

namespace {

// Elements of a swiglu tile: converted and computed together, small enough to stay in L1.
constexpr int64_t kTile = 256;
// Lanes of the f64 row sums.
constexpr int kLanes = 8;
// rope: rows read ahead of the one being rotated, in cache lines of kCacheLine bytes.
constexpr int64_t kPrefetchRows = 16;
constexpr int64_t kCacheLine = 64;
// dweight partials: at least kMinWeightRows rows per block and at most kMaxWeightBlocks blocks.
constexpr int64_t kMinWeightRows = 16;
constexpr int64_t kMaxWeightBlocks = 256;

template <class C>
using Array = Eigen::Array<C, Eigen::Dynamic, 1>;

// v rounded to T's precision and back: the composed ops' intermediate casts (identity unless bf16).
template <class T>
compute_t<T> round_to(compute_t<T> v) {
  if constexpr (std::is_same_v<T, bf16>) return float(bf16(v));
  else return v;
}

// Rows of work per parallel chunk: about kSerialElements elements.
int64_t row_grain(int64_t row_length) { return std::max<int64_t>(1, cpu::kSerialElements / std::max<int64_t>(row_length, 1)); }

// sum_i double(a_i b_i), the products in C; lane k takes i = k mod kLanes, lanes added as a tree.
template <class C>
double dot_f64(const C* a, const C* b, int64_t n) {
  double acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int k = 0; k < kLanes; ++k) acc[k] += double(a[i + k] * b[i + k]);
  for (int k = 0; i < n; ++i, ++k) acc[k] += double(a[i] * b[i]);
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

// n elements of src in the compute type: src itself when it is one, else converted into buffer.
template <class T>
const compute_t<T>* in_compute(const T* src, int64_t n, std::vector<compute_t<T>>& buffer) {
  if constexpr (std::is_same_v<T, compute_t<T>>) {
    return src;
  } else {
    buffer.resize(size_t(n));
    for (int64_t i = 0; i < n; ++i) buffer[size_t(i)] = float(src[i]);
    return buffer.data();
  }
}

template <class T>
std::vector<compute_t<T>> to_compute_vector(const Tensor& t) {
  const T* p = t.data<T>();
  std::vector<compute_t<T>> out(size_t(t.numel()));
  for (size_t i = 0; i < out.size(); ++i) out[i] = compute_t<T>(convert<compute_t<T>>(p[i]));
  return out;
}

// ---- rms_norm ----

template <class T>
void rms_norm_forward_typed(const Tensor& x, const Tensor& weight, double eps, const RmsNormForward& out) {
  using C = compute_t<T>;
  const int64_t rows = x.size(0), dim = x.size(1);
  const T* xp = x.data<T>();
  T* yp = out.y.data<T>();
  C* rstd = out.rstd.data<C>();
  const std::vector<C> w = to_compute_vector<T>(weight);
  const C inv_dim = C(1.0 / double(dim)), eps_c = C(eps);
  cpu::parallel_for(rows, row_grain(dim), [&](int64_t r0, int64_t r1) {
    thread_local std::vector<C> buffer;
    for (int64_t r = r0; r < r1; ++r) {
      const C* h = in_compute(xp + r * dim, dim, buffer);
      // mean(h^2) as the composed mean: the f64 sum rounded to C, times 1 / D in C.
      const C ms = C(dot_f64(h, h, dim)) * inv_dim;
      const C rs = C(1) / std::sqrt(ms + eps_c);
      rstd[r] = rs;
      T* y = yp + r * dim;
      for (int64_t j = 0; j < dim; ++j) y[j] = convert<T>(w[size_t(j)] * round_to<T>(h[j] * rs));
    }
  });
}

template <class T>
void rms_norm_backward_typed(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& rstd,
                             const RmsNormGrads& out) {
  using C = compute_t<T>;
  const int64_t rows = x.size(0), dim = x.size(1);
  const T *xp = x.data<T>(), *gp = dy.data<T>();
  const C* rstd_p = rstd.data<C>();
  T* dxp = out.dx.data<T>();
  const std::vector<C> w = to_compute_vector<T>(weight);
  const C inv_dim = C(1.0 / double(dim));

  // Block b holds rows [b * block, (b + 1) * block) and their dweight partial sums, in row order.
  const int64_t block = std::max(kMinWeightRows, (rows + kMaxWeightBlocks - 1) / kMaxWeightBlocks);
  const int64_t blocks = (rows + block - 1) / block;
  std::vector<double> partial(size_t(blocks * dim), 0.0);
  cpu::parallel_for(blocks, 1, [&](int64_t b0, int64_t b1) {
    thread_local std::vector<C> x_buffer, g_buffer, n_buffer, dn_buffer;
    n_buffer.resize(size_t(dim));
    dn_buffer.resize(size_t(dim));
    C* n = n_buffer.data();
    C* dn = dn_buffer.data();
    for (int64_t b = b0; b < b1; ++b) {
      double* part = partial.data() + b * dim;
      for (int64_t r = b * block; r < std::min(rows, (b + 1) * block); ++r) {
        const C* h = in_compute(xp + r * dim, dim, x_buffer);
        const C* g = in_compute(gp + r * dim, dim, g_buffer);
        const C rs = rstd_p[r];
        for (int64_t j = 0; j < dim; ++j) {
          n[j] = h[j] * rs;
          dn[j] = g[j] * w[size_t(j)];
        }
        // dx = rstd (dn - n mean(dn n)): the second term is the gradient through rstd.
        const C mean_dn_n = C(dot_f64(dn, n, dim)) * inv_dim;
        T* dx = dxp + r * dim;
        for (int64_t j = 0; j < dim; ++j) {
          dx[j] = convert<T>(rs * (dn[j] - n[j] * mean_dn_n));
          part[j] += double(g[j] * round_to<T>(n[j]));
        }
      }
    }
  });
  std::vector<double> sum(size_t(dim), 0.0);
  for (int64_t b = 0; b < blocks; ++b)
    for (int64_t j = 0; j < dim; ++j) sum[size_t(j)] += partial[size_t(b * dim + j)];
  T* dw = out.dweight.data<T>();
  for (int64_t j = 0; j < dim; ++j) dw[j] = convert<T>(sum[size_t(j)]);
}

// ---- swiglu ----

// The rows of a tensor of row length `width`: row r starts at data + r * stride and is contiguous.
// g and u are read this way in place, as the slices of the joint gate/up projection ([..., 2 width],
// so stride = 2 width) or as plain contiguous tensors (stride = width).
template <class P>
struct RowsOf {
  P* data = nullptr;
  int64_t stride = 0;
  P* row(int64_t r) const { return data + r * stride; }
};

// The row stride of x as [rows, x.size(-1)] (0 where one row is broadcast to all), or -1 where
// its rows are not evenly spaced contiguous runs.
int64_t row_stride(const Tensor& x) {
  const int64_t dims = x.dim();
  if (dims == 0) return 1;
  const int64_t width = x.size(-1);
  if (width > 1 && x.strides().back() != 1) return -1;
  std::optional<int64_t> stride;
  int64_t expect = 0;  // the stride the next outer dim must have
  for (int64_t i = dims - 2; i >= 0; --i) {
    const int64_t size = x.size(i), step = x.strides()[size_t(i)];
    if (size == 1) continue;
    if (!stride) stride = step;
    else if (step != expect) return -1;
    expect = step * size;
  }
  return stride.value_or(width);
}

// x in place when its rows are evenly spaced contiguous runs, else a contiguous copy.
template <class T>
RowsOf<const T> rows_of(const Tensor& x, Tensor& keep) {
  const int64_t stride = row_stride(x);
  keep = stride >= 0 ? x : contiguous_as(x);
  return {keep.data<T>(), stride >= 0 ? stride : row_stride(keep)};
}

// Calls tile(row, offset, length) over `rows` rows of `width` elements, in tiles of at most kTile
// elements, in parallel chunks fixed by the sizes. Contiguous rows are walked as one long row.
template <class F>
void for_row_tiles(int64_t rows, int64_t width, bool contiguous, F&& tile) {
  if (contiguous) {
    cpu::parallel_for(rows * width, cpu::kSerialElements, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; i += kTile) tile(0, i, std::min(kTile, i1 - i));
    });
    return;
  }
  cpu::parallel_for(rows, row_grain(width), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r)
      for (int64_t c = 0; c < width; c += kTile) tile(r, c, std::min(kTile, width - c));
  });
}

// Eigen evaluates an expression's whole packets with its vectorized exp, and any element ahead of
// an aligned destination or past the last whole packet with the scalar std::exp, which rounds
// differently. So every swiglu tile is evaluated as whole aligned packets: in place when it is
// one (the tiles of contiguous tensors, and of rows whose width is a multiple of kTile, as every
// HF model's MLP is), else through zero-padded stack tiles. An element's bits then never depend
// on where its tile lies: g and u in place in the joint projection give the bits of contiguous
// copies.
constexpr int64_t kPacket = 16;  // elements of the widest packet, AVX-512 f32

constexpr int64_t in_packets(int64_t len) { return (len + kPacket - 1) / kPacket * kPacket; }

bool whole_packets(const void* dst, int64_t len) {
  return len % kPacket == 0 && reinterpret_cast<uintptr_t>(dst) % 64 == 0;
}

// n = len rounded up to whole packets of src in the compute type: src itself when it is in the
// compute type and n = len, else converted into `buffer`, zero padded.
template <class T>
const compute_t<T>* padded_compute(const T* src, int64_t len, int64_t n, std::vector<compute_t<T>>& buffer) {
  if (std::is_same_v<T, compute_t<T>> && n == len) return in_compute(src, len, buffer);
  buffer.assign(size_t(n), compute_t<T>(0));
  for (int64_t i = 0; i < len; ++i) buffer[size_t(i)] = compute_t<T>(src[i]);
  return buffer.data();
}

template <class C>
using Aligned = Eigen::Map<Array<C>, Eigen::Aligned64>;

template <class T>
void swiglu_forward_typed(RowsOf<const T> gr, RowsOf<const T> ur, RowsOf<T> yr, int64_t rows, int64_t width) {
  using C = compute_t<T>;
  const bool contiguous = gr.stride == width && ur.stride == width && yr.stride == width;
  for_row_tiles(rows, width, contiguous, [&](int64_t r, int64_t i0, int64_t len) {
    T* yp = yr.row(r) + i0;
    const int64_t n = in_packets(len);
    thread_local std::vector<C> g_buffer, u_buffer;
    Eigen::Map<const Array<C>> g(padded_compute(gr.row(r) + i0, len, n, g_buffer), n),
        u(padded_compute(ur.row(r) + i0, len, n, u_buffer), n);
    if constexpr (std::is_same_v<T, C>) {
      // The composed silu(g) * u: silu rounded to C, then the product.
      if (whole_packets(yp, len)) {
        Aligned<C>(yp, n) = g * (C(1) + (-g).exp()).inverse() * u;
      } else {
        alignas(64) C y_tile[kTile];
        Aligned<C>(y_tile, n) = g * (C(1) + (-g).exp()).inverse() * u;
        std::copy(y_tile, y_tile + len, yp);
      }
    } else {
      alignas(64) C silu_tile[kTile];  // on the stack: an Array here was a malloc per tile
      Aligned<C> silu(silu_tile, n);
      silu = g * (C(1) + (-g).exp()).inverse();
      for (int64_t i = 0; i < len; ++i) yp[i] = convert<T>(round_to<T>(silu[i]) * u[i]);
    }
  });
}

template <class T>
void swiglu_backward_typed(RowsOf<const T> dyr, RowsOf<const T> gr, RowsOf<const T> ur, RowsOf<T> dgr, RowsOf<T> dur,
                           int64_t rows, int64_t width) {
  using C = compute_t<T>;
  const bool contiguous = dyr.stride == width && gr.stride == width && ur.stride == width && dgr.stride == width &&
                          dur.stride == width;
  for_row_tiles(rows, width, contiguous, [&](int64_t r, int64_t i0, int64_t len) {
    T *dgp = dgr.row(r) + i0, *dup = dur.row(r) + i0;
    const int64_t n = in_packets(len);
    thread_local std::vector<C> dy_buffer, g_buffer, u_buffer;
    alignas(64) C s_tile[kTile], dg_tile[kTile], du_tile[kTile];
    Aligned<C> s(s_tile, n);
    Eigen::Map<const Array<C>> dy(padded_compute(dyr.row(r) + i0, len, n, dy_buffer), n);
    Eigen::Map<const Array<C>> g(padded_compute(gr.row(r) + i0, len, n, g_buffer), n),
        u(padded_compute(ur.row(r) + i0, len, n, u_buffer), n);
    s = (C(1) + (-g).exp()).inverse();  // sigmoid(g)
    // d silu(g) = s (1 + g (1 - s)), after the product's dy u (the composed order); du takes
    // silu(g) as the forward rounded it.
    if constexpr (std::is_same_v<T, C>) {
      const bool in_place = whole_packets(dgp, len) && whole_packets(dup, len);
      Aligned<C> dg(in_place ? dgp : dg_tile, n), du(in_place ? dup : du_tile, n);
      dg = dy * u * s * (C(1) + g * (C(1) - s));
      du = dy * (g * s);
      if (!in_place) {
        std::copy(dg_tile, dg_tile + len, dgp);
        std::copy(du_tile, du_tile + len, dup);
      }
    } else {
      Aligned<C> dg(dg_tile, n);
      dg = dy * u * s * (C(1) + g * (C(1) - s));
      for (int64_t i = 0; i < len; ++i) {
        dgp[i] = convert<T>(dg[i]);
        dup[i] = convert<T>(dy[i] * round_to<T>(g[i] * s[i]));
      }
    }
  });
}

// dg and du for g and u of one shape: when g and u are the two halves of one joint tensor
// [..., 2 width] (the slices of the joint gate/up projection), views of one buffer of that joint
// shape, so that the joint value's cotangent needs no assembling (autograd/engine.cpp); else two
// contiguous tensors.
SwigluGrads swiglu_grads_like(const Tensor& g, const Tensor& u) {
  const int64_t width = g.dim() == 0 ? 1 : g.size(-1);
  Shape joint_shape = g.shape();
  if (g.dim() > 0) joint_shape.back() *= 2;
  const bool halves = g.dim() > 0 && width > 0 && g.same_storage(u) && u.offset() == g.offset() + width &&
                      g.strides() == contiguous_strides(joint_shape) && u.strides() == g.strides();
  if (!halves) return {Tensor::empty(g.shape(), g.dtype()), Tensor::empty(g.shape(), g.dtype())};
  const Tensor joint = Tensor::empty(joint_shape, g.dtype());
  return {joint.as_strided(g.shape(), g.strides(), 0), joint.as_strided(g.shape(), g.strides(), width)};
}

// ---- rope ----

// The row offsets of three operands of one shape [..., d]: row r is the r-th position of the
// leading dims in row-major order; `at` walks them one row at a time.
struct RowWalk {
  Shape sizes;
  Strides strides[3];
  std::vector<int64_t> index;
  int64_t at[3] = {0, 0, 0};

  RowWalk(const Tensor& a, const Tensor& b, const Tensor& c, int64_t first_row) {
    const int64_t lead = a.dim() - 1;
    sizes.assign(a.shape().begin(), a.shape().begin() + lead);
    const Tensor* ts[3] = {&a, &b, &c};
    for (int k = 0; k < 3; ++k) strides[k].assign(ts[k]->strides().begin(), ts[k]->strides().begin() + lead);
    index.assign(size_t(lead), 0);
    int64_t rest = first_row;
    for (int64_t d = lead - 1; d >= 0; --d) {
      index[size_t(d)] = rest % sizes[size_t(d)];
      rest /= sizes[size_t(d)];
      for (int k = 0; k < 3; ++k) at[k] += index[size_t(d)] * strides[k][size_t(d)];
    }
  }

  // Rows left in the innermost leading dim from the current one (the whole tensor when there is
  // none), and that dim's stride in operand k: such a run is walked with a constant step.
  int64_t run() const { return sizes.empty() ? std::numeric_limits<int64_t>::max() : sizes.back() - index.back(); }
  int64_t step(int k) const { return sizes.empty() ? 0 : strides[k].back(); }
  // Moves n rows on, n <= run().
  void skip(int64_t n) {
    if (n <= 0) return;
    if (!sizes.empty()) {
      for (int k = 0; k < 3; ++k) at[k] += (n - 1) * strides[k].back();
      index.back() += n - 1;
    }
    next();
  }

  void next() {
    for (size_t d = sizes.size(); d-- > 0;) {
      for (int k = 0; k < 3; ++k) at[k] += strides[k][d];
      if (++index[d] < sizes[d]) return;
      for (int k = 0; k < 3; ++k) at[k] -= index[d] * strides[k][d];
      index[d] = 0;
    }
  }
};

// One row of RoPE: y1 = x1 c1 - x2 s1, y2 = x2 c2 + x1 s2 over the halves (backward: the
// transpose of the rotation). Its own function so that the pointers are known not to overlap:
// GCC then vectorizes the loop, bf16 conversions included (inlined into rope_typed's walk it
// stayed scalar: in bf16 3x slower, 5% of a KD step).
template <class T, bool kBackward>
void rope_row(const T* __restrict x, const T* __restrict c, const T* __restrict s, T* __restrict y, int64_t half) {
  using C = compute_t<T>;
  for (int64_t i = 0; i < half; ++i) {
    const C x1 = convert<C>(x[i]), x2 = convert<C>(x[i + half]);
    const C c1 = convert<C>(c[i]), c2 = convert<C>(c[i + half]);
    const C s1 = convert<C>(s[i]), s2 = convert<C>(s[i + half]);
    if constexpr (kBackward) {
      // The transpose of the rotation: x1 feeds y1 through c1 and y2 through s2.
      y[i] = convert<T>(x1 * c1 + x2 * s2);
      y[i + half] = convert<T>(x2 * c2 - x1 * s1);
    } else {
      y[i] = convert<T>(round_to<T>(x1 * c1) - round_to<T>(x2 * s1));
      y[i + half] = convert<T>(round_to<T>(x2 * c2) + round_to<T>(x1 * s2));
    }
  }
}

template <class T, bool kBackward>
void rope_typed(const Tensor& a, const Tensor& cos, const Tensor& sin, const Tensor& out) {
  const int64_t d = a.size(-1), half = d / 2, rows = a.numel() / std::max<int64_t>(d, 1);
  const T *ap = static_cast<const T*>(a.data_ptr()), *cp = static_cast<const T*>(cos.data_ptr()),
          *sp = static_cast<const T*>(sin.data_ptr());
  T* yp = out.data<T>();
  const int64_t row_bytes = d * int64_t(sizeof(T));
  cpu::parallel_for(rows, row_grain(d), [&](int64_t r0, int64_t r1) {
    // Runs of rows along the innermost leading dim (T of q as [B, H, T, d]), each walked with
    // constant steps: rows of 64 or 128 elements are too short to pay for a full walk per row.
    RowWalk walk(a, cos, sin, r0);
    for (int64_t r = r0; r < r1;) {
      const int64_t n = std::min(walk.run(), r1 - r);
      const int64_t sx = walk.step(0), sc = walk.step(1), ss = walk.step(2);
      const T *x = ap + walk.at[0], *c = cp + walk.at[1], *s = sp + walk.at[2];
      T* y = yp + r * d;
      for (int64_t i = 0; i < n; ++i, x += sx, c += sc, s += ss, y += d) {
        // Rows of a transposed view (q as [B, H, T, d] over [B, T, H, d] memory) lie pages
        // apart, out of the hardware prefetcher's reach: fetch the row kPrefetchRows ahead (in
        // this run) by hand.
        if (i + kPrefetchRows < n) {
          const char* next = reinterpret_cast<const char*>(x + kPrefetchRows * sx);
          for (int64_t byte = 0; byte < row_bytes; byte += kCacheLine) __builtin_prefetch(next + byte);
        }
        rope_row<T, kBackward>(x, c, s, y, half);
      }
      walk.skip(n);
      r += n;
    }
  });
}

template <bool kBackward>
Tensor rope_rows(const Tensor& a, const Tensor& cos, const Tensor& sin) {
  Tensor out = Tensor::empty(a.shape(), a.dtype());
  if (out.numel() == 0) return out;
  dispatch_floating("rope", a.dtype(), [&](auto tag) { rope_typed<decltype(tag), kBackward>(a, cos, sin, out); });
  return out;
}

}  // namespace

RmsNormForward CpuBackend::rms_norm_forward(const Tensor& x, const Tensor& weight, double eps) {
  const Tensor xc = contiguous_as(x), wc = contiguous_as(weight);
  RmsNormForward out{Tensor::empty(x.shape(), x.dtype()),
                     Tensor::empty({x.size(0)}, row_compute_dtype(x.dtype()))};
  if (x.numel() == 0) return out;
  dispatch_floating("rms_norm", x.dtype(),
                    [&](auto tag) { rms_norm_forward_typed<decltype(tag)>(xc, wc, eps, out); });
  return out;
}

RmsNormGrads CpuBackend::rms_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight,
                                           const Tensor& rstd) {
  const Tensor dyc = contiguous_as(dy), xc = contiguous_as(x), wc = contiguous_as(weight), rc = contiguous_as(rstd);
  RmsNormGrads out{Tensor::empty(x.shape(), x.dtype()), Tensor::empty(weight.shape(), weight.dtype())};
  fill(out.dweight, 0);
  if (x.numel() == 0) return out;
  dispatch_floating("rms_norm", x.dtype(),
                    [&](auto tag) { rms_norm_backward_typed<decltype(tag)>(dyc, xc, wc, rc, out); });
  return out;
}

Tensor CpuBackend::swiglu_forward(const Tensor& g, const Tensor& u) {
  Tensor y = Tensor::empty(g.shape(), g.dtype());
  if (y.numel() == 0) return y;
  const int64_t width = g.dim() == 0 ? 1 : g.size(-1), rows = y.numel() / width;
  dispatch_floating("swiglu", g.dtype(), [&](auto tag) {
    using T = decltype(tag);
    Tensor gk, uk;
    swiglu_forward_typed<T>(rows_of<T>(g, gk), rows_of<T>(u, uk), {y.data<T>(), width}, rows, width);
  });
  return y;
}

SwigluGrads CpuBackend::swiglu_backward(const Tensor& dy, const Tensor& g, const Tensor& u) {
  SwigluGrads out = swiglu_grads_like(g, u);
  if (g.numel() == 0) return out;
  const int64_t width = g.dim() == 0 ? 1 : g.size(-1), rows = g.numel() / width;
  dispatch_floating("swiglu", g.dtype(), [&](auto tag) {
    using T = decltype(tag);
    Tensor dyk, gk, uk;
    swiglu_backward_typed<T>(rows_of<T>(dy, dyk), rows_of<T>(g, gk), rows_of<T>(u, uk),
                             {out.dg.data<T>(), row_stride(out.dg)}, {out.du.data<T>(), row_stride(out.du)}, rows,
                             width);
  });
  return out;
}

Tensor CpuBackend::rope_forward(const Tensor& x, const Tensor& cos, const Tensor& sin) {
  return rope_rows<false>(x, cos, sin);
}

Tensor CpuBackend::rope_backward(const Tensor& dy, const Tensor& cos, const Tensor& sin) {
  return rope_rows<true>(dy, cos, sin);
}

}  // namespace cotan::cpu
