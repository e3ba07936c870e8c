// The cached attention kernel (tensor/fused_ops.hpp, CachedAttentionSpec): the new queries of
// incremental decoding against the KV cache, every kind, f32 or bf16 (computed in f32).
//
// One block of kRowBlock threads per query row (i, h, b). The slots the row sees are streamed in
// tiles of kRowBlock, one slot per thread: the thread's score c q . k_j (q staged in shared
// memory), the block's tile maximum and sum of exp (group_reduce, a fixed tree), and the online
// softmax's running max m and sum l, identical in every thread. The tile's weights go to shared
// memory, where thread x < d accumulates sum_j p_j v_j[x] in slot order (reads of v rows are
// coalesced across x). The sink adds exp(sigma_h) to the normaliser at the end; affine adds
// beta U from the cache's prefix sum u. No atomics: the same bits for any schedule.
#pragma once

#include "cuda/kernels/row_group.cuh"
#include "tensor/core_kind.hpp"

namespace cotan::COTAN_KERNELS {

constexpr int kCachedMaxHeadDim = 128;  // launch::kCachedAttentionMaxHeadDim
static_assert(kCachedMaxHeadDim <= int(kRowBlock), "thread x < d owns column x");

// The problem: q [B, H, Tq, d], visible [B, S], sigma and alpha_ma [H], alpha [B, H, Tq],
// u [B, Hkv, Tq, d] and count [B, Tq] contiguous; k and v [B, Hkv, S, d] with their last dim
// contiguous and any batch, head and slot strides (the KV cache is a view of longer buffers; a
// batch stride of 0, rows sharing one entry, is read as such). Plain data.
template <class T>
struct CachedAttentionArgs {
  CoreKind kind;
  int heads, kv_heads, tq, slots, d;
  float scale;  // c = 1 / sqrt(d)
  const T *q, *k, *v, *sigma, *alpha, *alpha_ma, *u;
  int64_t k_strides[3], v_strides[3];  // batch, kv head and slot strides of k and v, in elements
  const bool* visible;
  const int64_t* count;
};

struct MaxOf {
  SIMT_DEVICE float operator()(float a, float b) const { return b > a ? b : a; }
};
struct SumOf {
  SIMT_DEVICE float operator()(float a, float b) const { return a + b; }
};

// Grid (Tq, H, B), block kRowBlock. Writes o [B, H, Tq, d].
template <class T>
SIMT_GLOBAL void cached_attention_kernel(CachedAttentionArgs<T> a, T* o_out) {
  using Block = RowGroup<kRowBlock>;
  SIMT_SHARED(float, q_row, [kCachedMaxHeadDim]);
  SIMT_SHARED(float, weights, [kRowBlock]);
  const int tid = int(Block::rank());
  const int i = int(simt::block_idx().x), h = int(simt::block_idx().y), b = int(simt::block_idx().z);
  const int g = h / (a.heads / a.kv_heads), d = a.d;
  const int64_t row = (int64_t(b) * a.heads + h) * a.tq + i;  // of q, o and alpha
  const T* k = a.k + int64_t(b) * a.k_strides[0] + int64_t(g) * a.k_strides[1];
  const T* v = a.v + int64_t(b) * a.v_strides[0] + int64_t(g) * a.v_strides[1];
  const int64_t k_slot = a.k_strides[2], v_slot = a.v_strides[2];
  const bool* visible = a.visible + int64_t(b) * a.slots;
  const int last = a.slots - a.tq + i;  // the last slot query i sees

  if (tid < d) q_row[tid] = a.scale * load(a.q + row * d + tid);
  simt::sync_threads();
  float m = -INFINITY, l = 0, acc = 0;
  for (int j0 = 0; j0 <= last; j0 += int(kRowBlock)) {
    const int j = j0 + tid;
    float s = -INFINITY;
    if (j <= last && visible[j]) {
      s = 0;
      for (int x = 0; x < d; ++x) s += q_row[x] * load(k + int64_t(j) * k_slot + x);
    }
    const float tile_max = group_reduce<kRowBlock>(s, MaxOf());
    if (tile_max == -INFINITY) continue;  // no visible slot in this tile (the same in every thread)
    const float top = m > tile_max ? m : tile_max;
    const float rescale = math::exp(m - top);  // 0 on the first visible tile (m = -inf)
    const float p = s == -INFINITY ? 0.0f : math::exp(s - top);
    weights[tid] = p;
    const float tile_sum = group_reduce<kRowBlock>(p, SumOf());  // its barriers publish weights
    l = l * rescale + tile_sum;
    m = top;
    if (tid < d) {
      float pv = 0;
      const int end = last - j0 + 1 < int(kRowBlock) ? last - j0 + 1 : int(kRowBlock);
      for (int jj = 0; jj < end; ++jj) pv += weights[jj] * load(v + int64_t(j0 + jj) * v_slot + tid);
      acc = acc * rescale + pv;
    }
    simt::sync_threads();  // weights are read before the next tile writes them
  }
  if (tid >= d) return;
  float inv = 1.0f / l;
  if (a.kind == CoreKind::sink) {  // S = acc / (l + exp(sigma - m)), shifted by the larger of m and sigma
    const float sigma = load(a.sigma + h), top = m > sigma ? m : sigma;
    const float lse = top + math::log(l * math::exp(m - top) + math::exp(sigma - top));
    inv = math::exp(m - lse);
  }
  float value = acc * inv;
  if (a.kind == CoreKind::affine) {
    const float alpha = load(a.alpha + row);
    const float beta = (load(a.alpha_ma + h) - alpha) / float(a.count[int64_t(b) * a.tq + i]);
    value = alpha * value + beta * load(a.u + ((int64_t(b) * a.kv_heads + g) * a.tq + i) * d + tid);
  }
  o_out[row * d + tid] = convert_to<T>(value);
}

}  // namespace cotan::COTAN_KERNELS
