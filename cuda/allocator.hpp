// The caching allocator of device memory (CUDA builds only). cudaMalloc and cudaFree are slow
// and synchronise the device, and a training step asks for the same sizes every step: a freed
// block goes to a free list of its size class on its device and serves the next request of that
// class. Size classes: multiples of 512 bytes below 1 MiB; above, eight classes per power of two
// (a block is at most 12.5% larger than asked for).
//
// Reuse needs no event: every kernel and copy of a device runs on one stream, so work queued
// after a block changed hands is ordered after the work that used it before. When cudaMalloc runs
// out of memory, the device's cached blocks are freed and the call retried once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "tensor/storage.hpp"

namespace cotan::cuda {

struct AllocatorStats {
  size_t in_use_bytes = 0;       // held by live storages (size classes, not requests)
  size_t peak_in_use_bytes = 0;  // since the start, or the last reset_peak()
  size_t cached_bytes = 0;       // free blocks kept for reuse
  uint64_t device_allocations = 0;  // cudaMalloc calls
  uint64_t cache_hits = 0;          // requests served from a free list
};

// nbytes of device memory on the current device; the storage's release returns the block to
// the cache. Throws "[cuda] out of memory ..." when even an emptied cache does not make room.
std::shared_ptr<Storage> allocate_device(size_t nbytes);
// The counters of `device`.
AllocatorStats allocator_stats(int device);
void reset_peak(int device);
// The size class of a request (exposed for tests).
size_t size_class(size_t nbytes);

}  // namespace cotan::cuda
