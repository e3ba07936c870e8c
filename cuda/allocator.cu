// The caching allocator of device memory; see cuda/allocator.hpp.
#include "cuda/allocator.hpp"

#include <algorithm>
#include <bit>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "cuda/runtime.hpp"
#include "tensor/error.hpp"

namespace cotan::cuda {
namespace {

constexpr size_t kSmallGranularity = 512;
constexpr size_t kSmallLimit = size_t(1) << 20;
constexpr int kClassesPerOctave = 8;

struct DevicePool {
  std::unordered_map<size_t, std::vector<void*>> free;  // size class -> blocks
  AllocatorStats stats;
};

class Allocator {
 public:
  void* take(int device, size_t bytes) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      DevicePool& pool = pool_of(device);
      auto it = pool.free.find(bytes);
      if (it != pool.free.end() && !it->second.empty()) {
        void* block = it->second.back();
        it->second.pop_back();
        pool.stats.cached_bytes -= bytes;
        pool.stats.cache_hits += 1;
        note_in_use(pool, bytes);
        return block;
      }
    }
    void* block = nullptr;
    cudaError_t status = cudaMalloc(&block, bytes);
    if (status == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();
      release_cached(device);
      status = cudaMalloc(&block, bytes);
    }
    if (status == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();
      const AllocatorStats s = stats(device);
      fail("cuda", "out of memory allocating ", bytes, " bytes on cuda:", device, " (", s.in_use_bytes,
           " bytes in use, ", s.cached_bytes, " cached)");
    }
    CUDA_CHECK(status);
    std::lock_guard<std::mutex> lock(mutex_);
    DevicePool& pool = pool_of(device);
    pool.stats.device_allocations += 1;
    note_in_use(pool, bytes);
    return block;
  }

  // Called from Storage destructors: never throws.
  void give(int device, void* block, size_t bytes) noexcept {
    try {
      std::lock_guard<std::mutex> lock(mutex_);
      DevicePool& pool = pool_of(device);
      pool.free[bytes].push_back(block);
      pool.stats.cached_bytes += bytes;
      pool.stats.in_use_bytes -= bytes;
    } catch (...) {
      (void)cudaFree(block);  // the free list could not grow: give the block back to CUDA
    }
  }

  // Frees the cached blocks of `device` (every device when device < 0).
  void release_cached(int device) {
    std::vector<void*> blocks;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (size_t d = 0; d < pools_.size(); ++d) {
        if (device >= 0 && int(d) != device) continue;
        for (auto& [bytes, list] : pools_[d].free) blocks.insert(blocks.end(), list.begin(), list.end());
        pools_[d].free.clear();
        pools_[d].stats.cached_bytes = 0;
      }
    }
    for (void* block : blocks) CUDA_CHECK(cudaFree(block));
  }

  AllocatorStats stats(int device) {
    std::lock_guard<std::mutex> lock(mutex_);
    return pool_of(device).stats;
  }

  void reset_peak(int device) {
    std::lock_guard<std::mutex> lock(mutex_);
    AllocatorStats& s = pool_of(device).stats;
    s.peak_in_use_bytes = s.in_use_bytes;
  }

 private:
  DevicePool& pool_of(int device) {
    if (size_t(device) >= pools_.size()) pools_.resize(size_t(device) + 1);
    return pools_[size_t(device)];
  }
  static void note_in_use(DevicePool& pool, size_t bytes) {
    pool.stats.in_use_bytes += bytes;
    if (pool.stats.in_use_bytes > pool.stats.peak_in_use_bytes) pool.stats.peak_in_use_bytes = pool.stats.in_use_bytes;
  }

  std::mutex mutex_;
  std::vector<DevicePool> pools_;
};

// Never destroyed: storages released during static destruction still return their blocks here.
Allocator& allocator() {
  static Allocator* instance = new Allocator();
  return *instance;
}

int current_device() {
  int device = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  return device;
}

}  // namespace

size_t size_class(size_t nbytes) {
  if (nbytes < kSmallLimit)
    return std::max<size_t>((nbytes + kSmallGranularity - 1) / kSmallGranularity, 1) * kSmallGranularity;
  const size_t step = std::bit_floor(nbytes) / kClassesPerOctave;
  return (nbytes + step - 1) / step * step;
}

std::shared_ptr<Storage> allocate_device(size_t nbytes) {
  const int device = current_device();
  const size_t bytes = size_class(nbytes);
  void* block = allocator().take(device, bytes);
  return std::make_shared<Storage>(block, nbytes, Device::cuda(device),
                                   [device, bytes](void* p, size_t) { allocator().give(device, p, bytes); });
}

AllocatorStats allocator_stats(int device) { return allocator().stats(device); }

void reset_peak(int device) { allocator().reset_peak(device); }

}  // namespace cotan::cuda
