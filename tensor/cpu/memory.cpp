// CPU memory kernels: allocate (64-byte aligned, blocks of 64 KiB and more cached by size), assign (strided
// copy with dtype conversion), fill, arange and random (Philox, layout in tensor/random.hpp).
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <mutex>
#include <numbers>
#include <unordered_map>
#include <vector>

#include "tensor/cpu/backend.hpp"
#include "tensor/cpu/elementwise_loops.hpp"
#include "tensor/cpu/memory_cache.hpp"
#include "tensor/cpu/parallel.hpp"
#include "tensor/random_bounds.hpp"

namespace cotan::cpu {

namespace {

constexpr size_t kAlignment = 64;
// Cached blocks are rounded up to a granularity, so that nearby sizes share a bucket: 16 KiB
// below 1 MiB, 64 KiB above (at most 25% and 6% more than asked for).
size_t cached_size(size_t nbytes) {
  const size_t granularity = nbytes < (size_t(1) << 20) ? size_t(16) << 10 : size_t(64) << 10;
  return (nbytes + granularity - 1) / granularity * granularity;
}

size_t round_up(size_t n, size_t multiple) { return (n + multiple - 1) / multiple * multiple; }

// Free large blocks, keyed by their (rounded) size. Every method is thread-safe.
class BlockCache {
 public:
  void* take(size_t bytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = free_.find(bytes);
    if (it == free_.end() || it->second.empty()) return nullptr;
    void* block = it->second.back();
    it->second.pop_back();
    cached_ -= bytes;
    return block;
  }
  // Keeps `block` for reuse; false (the caller frees it) when the cache is full.
  bool give(void* block, size_t bytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (cached_ + bytes > kCacheCapBytes) return false;
    free_[bytes].push_back(block);
    cached_ += bytes;
    return true;
  }
  void release() {
    std::unordered_map<size_t, std::vector<void*>> blocks;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      blocks.swap(free_);
      cached_ = 0;
    }
    for (auto& [bytes, list] : blocks)
      for (void* block : list) std::free(block);
  }
  size_t bytes() {
    std::lock_guard<std::mutex> lock(mutex_);
    return cached_;
  }

 private:
  std::mutex mutex_;
  std::unordered_map<size_t, std::vector<void*>> free_;
  size_t cached_ = 0;
};

// Never destroyed: storages released during static destruction may still return blocks to it.
BlockCache& block_cache() {
  static BlockCache* cache = new BlockCache();
  return *cache;
}

void* aligned_block(size_t bytes) {
  void* block = std::aligned_alloc(kAlignment, bytes);
  if (!block) {
    block_cache().release();
    block = std::aligned_alloc(kAlignment, bytes);
  }
  if (!block) fail("allocate", "out of memory allocating ", bytes, " bytes on the cpu");
  return block;
}

// The statistics of tensor memory (cpu_memory_stats): bytes in tensors now, the most at once and
// the largest single tensor since the last reset.
std::atomic<size_t> in_use{0}, peak_in_use{0}, largest{0};

void note_allocation(size_t nbytes) {
  const size_t now = in_use.fetch_add(nbytes) + nbytes;
  for (size_t seen = peak_in_use.load(); now > seen && !peak_in_use.compare_exchange_weak(seen, now);) {}
  for (size_t seen = largest.load(); nbytes > seen && !largest.compare_exchange_weak(seen, nbytes);) {}
}

}  // namespace

void* take_scratch(size_t bytes) {
  if (bytes < kCachedBlockBytes) return aligned_block(round_up(std::max<size_t>(bytes, 1), kAlignment));
  const size_t rounded = cached_size(bytes);
  void* block = block_cache().take(rounded);
  return block ? block : aligned_block(rounded);
}

void give_scratch(void* block, size_t bytes) {
  if (bytes >= kCachedBlockBytes && block_cache().give(block, cached_size(bytes))) return;
  std::free(block);
}

void release_cached_memory() { block_cache().release(); }
size_t cached_memory_bytes() { return block_cache().bytes(); }

CpuMemoryStats cpu_memory_stats() { return {in_use.load(), peak_in_use.load(), largest.load()}; }
void reset_cpu_memory_peak() {
  peak_in_use.store(in_use.load());
  largest.store(0);
}

std::shared_ptr<Storage> CpuBackend::allocate(size_t nbytes) {
  note_allocation(nbytes);
  if (nbytes < kCachedBlockBytes) {
    void* block = aligned_block(round_up(std::max<size_t>(nbytes, 1), kAlignment));
    return std::make_shared<Storage>(block, nbytes, Device::cpu(), [](void* p, size_t n) {
      std::free(p);
      in_use.fetch_sub(n);
    });
  }
  size_t bytes = cached_size(nbytes);
  void* block = block_cache().take(bytes);
  if (!block) block = aligned_block(bytes);
  return std::make_shared<Storage>(block, nbytes, Device::cpu(), [bytes](void* p, size_t n) {
    if (!block_cache().give(p, bytes)) std::free(p);
    in_use.fetch_sub(n);
  });
}

// ---- assign ----

namespace {

// Bool sources are read as bytes: gcc does not vectorize a conversion from a loaded bool.
template <class S>
struct Source {
  using type = S;
  static S value(S v) { return v; }
};
template <>
struct Source<bool> {
  using type = uint8_t;
  static bool value(uint8_t v) { return v != 0; }
};

template <class D, class S>
void assign_typed(const Tensor& dst, const Tensor& src) {
  D* out = static_cast<D*>(dst.data_ptr());
  using Load = typename Source<S>::type;
  const Load* in = static_cast<const Load*>(src.data_ptr());
  if (dst.is_contiguous() && src.is_contiguous()) {
    if constexpr (std::is_same_v<D, S>) {
      const int64_t grain = kElementwiseGrain * int64_t(sizeof(D));
      char* o = reinterpret_cast<char*>(out);
      const char* i = reinterpret_cast<const char*>(in);
      parallel_for(int64_t(dst.nbytes()), grain, [&](int64_t b, int64_t e) { std::memcpy(o + b, i + b, size_t(e - b)); });
    } else {
      parallel_for(dst.numel(), kElementwiseGrain, [&](int64_t b, int64_t e) {
        for (int64_t k = b; k < e; ++k) out[k] = convert<D>(Source<S>::value(in[k]));
      });
    }
    return;
  }
  auto loop = collapse_tensors(dst, src);
  const int64_t sd = loop.inner_stride(0), ss = loop.inner_stride(1);
  parallel_runs(loop, kElementwiseGrain, [&](const std::array<int64_t, 2>& at, int64_t n) {
    D* o = out + at[0];
    const Load* i = in + at[1];
    if (sd == 1 && ss == 1) {
      if constexpr (std::is_same_v<D, S>) std::memcpy(o, i, size_t(n) * sizeof(D));
      else for (int64_t k = 0; k < n; ++k) o[k] = convert<D>(Source<S>::value(i[k]));
    } else {
      for (int64_t k = 0; k < n; ++k) o[k * sd] = convert<D>(Source<S>::value(i[k * ss]));
    }
  });
}

}  // namespace

void CpuBackend::assign_kernel(const Tensor& dst, const Tensor& src) {
  if (dst.numel() == 0) return;
  dispatch_dtype(dst.dtype(), [&](auto d) {
    dispatch_dtype(src.dtype(), [&](auto s) { assign_typed<decltype(d), decltype(s)>(dst, src); });
  });
}

void CpuBackend::fill(const Tensor& dst, double value) {
  if (dst.numel() == 0) return;
  dispatch_dtype(dst.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T v = convert<T>(value);
    T* out = static_cast<T*>(dst.data_ptr());
    auto loop = collapse_tensors(dst);
    const int64_t stride = loop.inner_stride(0);
    parallel_runs(loop, kElementwiseGrain, [&](const std::array<int64_t, 1>& at, int64_t n) {
      T* o = out + at[0];
      if (stride == 1) std::fill_n(o, n, v);
      else for (int64_t k = 0; k < n; ++k) o[k * stride] = v;
    });
  });
}

Tensor CpuBackend::arange_kernel(double start, double step, int64_t n, DType dtype) {
  Tensor out = Tensor::empty({n}, dtype);
  dispatch_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    T* o = static_cast<T*>(out.data_ptr());
    parallel_for(n, kElementwiseGrain, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) o[i] = convert<T>(start + double(i) * step);
    });
  });
  return out;
}

// ---- random ----

namespace {

// Writes n draws of `op` into out, drawn from blocks start, start + 1, ... under `key`.
// per_block: how many elements one Philox block feeds (4 for 24-bit draws, 2 otherwise).
template <class T, class Values>
void fill_from_blocks(T* out, int64_t n, int64_t per_block, uint64_t start, uint64_t key, Values&& values) {
  const int64_t blocks = (n + per_block - 1) / per_block;
  parallel_for(blocks, kElementwiseGrain / per_block, [&](int64_t b0, int64_t b1) {
    std::array<T, 4> v;
    for (int64_t blk = b0; blk < b1; ++blk) {
      values(Philox::block(start + uint64_t(blk), key), v);
      int64_t first = blk * per_block;
      int64_t count = std::min(per_block, n - first);
      for (int64_t j = 0; j < count; ++j) out[first + j] = v[size_t(j)];
    }
  });
}

template <class T>
void random_typed(RandomOp op, T* out, int64_t n, Generator& gen, double a, double b) {
  const uint64_t key = gen.seed();
  using Words = std::array<uint32_t, 4>;
  if constexpr (is_floating(dtype_v<T>)) {
    using C = compute_t<T>;
    constexpr bool wide = std::is_same_v<T, double>;
    if (op == RandomOp::uniform) {
      const C lo = C(a), span = C(b - a);
      const bool clamp = a < b;
      const T top = clamp ? largest_below<T>(b) : T(0);
      auto draw = [&](C u) {
        T t = convert<T>(C(lo + u * span));
        return clamp && double(convert<double>(t)) >= b ? top : t;
      };
      if constexpr (wide) {
        uint64_t start = gen.advance(uint64_t((n + 1) / 2));
        fill_from_blocks(out, n, 2, start, key, [&](const Words& w, std::array<T, 4>& v) {
          v[0] = draw(Philox::uniform53(w[0], w[1]));
          v[1] = draw(Philox::uniform53(w[2], w[3]));
        });
      } else {
        uint64_t start = gen.advance(uint64_t((n + 3) / 4));
        fill_from_blocks(out, n, 4, start, key, [&](const Words& w, std::array<T, 4>& v) {
          for (size_t j = 0; j < 4; ++j) v[j] = draw(Philox::uniform24(w[j]));
        });
      }
      return;
    }
    if (op == RandomOp::normal) {
      // Box-Muller: radius from the first uniform (as 1 - u, so log never sees 0), angle from
      // the second; even elements take the cosine, odd ones the sine.
      const C mean = C(a), stddev = C(b);
      constexpr C two_pi = C(2) * std::numbers::pi_v<C>;
      uint64_t start = gen.advance(uint64_t((n + 1) / 2));
      fill_from_blocks(out, n, 2, start, key, [&](const Words& w, std::array<T, 4>& v) {
        C u1, u2;
        if constexpr (wide) {
          u1 = Philox::uniform53(w[0], w[1]);
          u2 = Philox::uniform53(w[2], w[3]);
        } else {
          u1 = Philox::uniform24(w[0]);
          u2 = Philox::uniform24(w[1]);
        }
        C radius = std::sqrt(C(-2) * std::log(C(1) - u1));
        C angle = two_pi * u2;
        v[0] = convert<T>(C(mean + stddev * radius * std::cos(angle)));
        v[1] = convert<T>(C(mean + stddev * radius * std::sin(angle)));
      });
      return;
    }
  }
  // Backend::random has ruled out uniform and normal on integers, randint on bool, empty ranges.
  if (op == RandomOp::randint) {
    const int64_t low = int64_t(a), span = int64_t(b) - low;
    auto draw = [&](double u) {
      int64_t k = int64_t(std::floor(u * double(span)));
      return convert<T>(low + std::min(k, span - 1));
    };
    uint64_t start = gen.advance(uint64_t((n + 1) / 2));
    fill_from_blocks(out, n, 2, start, key, [&](const Words& w, std::array<T, 4>& v) {
      v[0] = draw(Philox::uniform53(w[0], w[1]));
      v[1] = draw(Philox::uniform53(w[2], w[3]));
    });
    return;
  }
  if (op == RandomOp::bernoulli) {
    const double p = a;
    uint64_t start = gen.advance(uint64_t((n + 3) / 4));
    fill_from_blocks(out, n, 4, start, key, [&](const Words& w, std::array<T, 4>& v) {
      for (size_t j = 0; j < 4; ++j) v[j] = convert<T>(double(Philox::uniform24(w[j])) < p);
    });
    return;
  }
  fail("random", "unknown random op ", int(op));
}

}  // namespace

Tensor CpuBackend::random_kernel(RandomOp op, const Shape& shape, DType dtype, Generator& gen, double a, double b) {
  Tensor out = Tensor::empty(shape, dtype);
  const int64_t n = out.numel();
  dispatch_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    random_typed<T>(op, static_cast<T*>(out.data_ptr()), n, gen, a, b);
  });
  return out;
}

}  // namespace cotan::cpu
