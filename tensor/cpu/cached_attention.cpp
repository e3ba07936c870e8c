// The CPU backend's cached attention (Backend::cached_attention, tensor/fused_ops.hpp): the new
// queries of incremental decoding against the KV cache, every kind in one pass per query.
//
// One query row (b, h, i) at a time, rows spread across threads: the scores c q_i . k_j of the
// slots it sees go to a per-task buffer with their maximum m, then one more pass over the slots
// sums p_j = exp(s_j - m) and accumulates p_j v_j. The sink adds exp(sigma_h) to the normaliser;
// affine adds beta_i U_i from the cache's prefix sum, so its term costs O(d) whatever the length.
// A row is computed by one thread in slot order: the same bits whatever the thread count. The
// operands are read in place through their strides (the cache is usually a view of a longer
// buffer); bf16 computes in f32.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "tensor/cpu/backend.hpp"
#include "tensor/cpu/parallel.hpp"

namespace cotan::cpu {

namespace {

// Element (i0, i1, i2, i3) of a 4-d operand through its strides.
template <class S>
struct View4 {
  const S* data = nullptr;
  int64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  explicit View4(const Tensor& t) : data(t.data<S>()) {
    s0 = t.strides()[0];
    s1 = t.strides()[1];
    s2 = t.strides()[2];
    s3 = t.strides()[3];
  }
  const S* row(int64_t i0, int64_t i1, int64_t i2) const { return data + i0 * s0 + i1 * s1 + i2 * s2; }
};

template <class S>
void cached_attention_typed(const CachedAttentionSpec& c, const Tensor& out) {
  using C = compute_t<S>;
  const int64_t b_n = c.q.size(0), heads = c.q.size(1), tq = c.q.size(2), d = c.q.size(3);
  const int64_t kv_heads = c.k.size(1), slots = c.k.size(2), group = heads / kv_heads;
  const C scale = C(1.0 / std::sqrt(double(d)));
  const View4<S> q(c.q), k(c.k), v(c.v);
  const bool* visible = c.visible.data<bool>();
  const int64_t vis_s0 = c.visible.strides()[0], vis_s1 = c.visible.strides()[1];
  const bool affine = c.kind == CoreKind::affine, sink = c.kind == CoreKind::sink;
  S* o = out.data<S>();
  auto at = [](const Tensor& t, std::initializer_list<int64_t> index) {
    int64_t offset = 0;
    size_t a = 0;
    for (int64_t i : index) offset += i * t.strides()[a++];
    return offset;
  };

  const int64_t rows = b_n * heads * tq;
  const int64_t work = std::max<int64_t>(1, slots * d);
  parallel_for(rows, std::max<int64_t>(1, kSerialElements / work), [&](int64_t r0, int64_t r1) {
    std::vector<C> scores(static_cast<size_t>(slots)), qi(static_cast<size_t>(d)), acc(static_cast<size_t>(d));
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t i = r % tq, h = (r / tq) % heads, b = r / (tq * heads), g = h / group;
      const int64_t last = slots - tq + i;  // the last slot query i sees
      const S* qrow = q.row(b, h, i);
      for (int64_t x = 0; x < d; ++x) qi[size_t(x)] = scale * C(qrow[x * q.s3]);
      C m = -std::numeric_limits<C>::infinity();
      for (int64_t j = 0; j <= last; ++j) {
        C s = -std::numeric_limits<C>::infinity();
        if (visible[b * vis_s0 + j * vis_s1]) {
          const S* krow = k.row(b, g, j);
          s = 0;
          for (int64_t x = 0; x < d; ++x) s += qi[size_t(x)] * C(krow[x * k.s3]);
          m = std::max(m, s);
        }
        scores[size_t(j)] = s;
      }
      std::fill(acc.begin(), acc.end(), C(0));
      C l = 0;
      for (int64_t j = 0; j <= last; ++j) {
        if (scores[size_t(j)] == -std::numeric_limits<C>::infinity()) continue;
        const C p = std::exp(scores[size_t(j)] - m);
        l += p;
        const S* vrow = v.row(b, g, j);
        for (int64_t x = 0; x < d; ++x) acc[size_t(x)] += p * C(vrow[x * v.s3]);
      }
      C inv = C(1) / l;
      if (sink) {  // S_i = acc / (l + exp(sigma - m)), shifted by the larger of m and sigma
        const C sigma = C(c.sigma.data<S>()[h * c.sigma.strides()[0]]), top = std::max(m, sigma);
        const C lse = top + std::log(l * std::exp(m - top) + std::exp(sigma - top));
        inv = std::exp(m - lse);
      }
      C alpha = 1, beta = 0;
      const S* urow = nullptr;
      if (affine) {
        alpha = C(c.alpha.data<S>()[at(c.alpha, {b, h, i})]);
        const C n = C(c.count.data<int64_t>()[at(c.count, {b, i})]);
        beta = (C(c.alpha_ma.data<S>()[h * c.alpha_ma.strides()[0]]) - alpha) / n;
        urow = View4<S>(c.u).row(b, g, i);
      }
      S* orow = o + r * d;
      const int64_t u_s3 = affine ? c.u.strides()[3] : 0;
      for (int64_t x = 0; x < d; ++x) {
        C value = acc[size_t(x)] * inv;
        if (affine) value = alpha * value + beta * C(urow[x * u_s3]);
        orow[x] = S(value);
      }
    }
  });
}

}  // namespace

Tensor CpuBackend::cached_attention(const CachedAttentionSpec& c) {
  Tensor out = Tensor::empty(c.q.shape(), c.q.dtype());
  dispatch_floating("cached_attention", c.q.dtype(), [&](auto tag) { cached_attention_typed<decltype(tag)>(c, out); });
  return out;
}

}  // namespace cotan::cpu
