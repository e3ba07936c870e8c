// The CPU allocator's cache of large blocks. Blocks of at least kCachedBlockBytes are kept, keyed
// by their size, when their tensor dies, and handed out again to the next request of that size:
// a training step allocates the same sizes every step, and reusing warm pages avoids the kernel
// zeroing and faulting fresh ones. At most kCacheCapBytes stay cached; beyond that blocks are
// freed.
#pragma once

#include <cstddef>

namespace cotan::cpu {

// Smaller blocks come from malloc's own free lists; from about 128 KiB up glibc maps fresh pages
// for each request and unmaps them on free, which costs a page fault per 4 KiB on every use.
constexpr size_t kCachedBlockBytes = size_t(64) << 10;
constexpr size_t kCacheCapBytes = size_t(2) << 30;

// Scratch memory of a kernel (the packed GEMM's panels): 64-byte aligned, uninitialised, from
// the same cache of large blocks as tensors (a step asks for the same sizes every time), not
// counted in CpuMemoryStats. Each block goes back with the size it was taken with.
void* take_scratch(size_t bytes);
void give_scratch(void* block, size_t bytes);

// Frees every cached block (blocks in use are not affected).
void release_cached_memory();
// Bytes held in the cache, not in use by any tensor.
size_t cached_memory_bytes();

// Tensor memory on the CPU, in requested bytes (the cache's blocks not counted): what tests and
// memory estimates compare with.
struct CpuMemoryStats {
  size_t in_use = 0;       // bytes of the tensors alive now
  size_t peak_in_use = 0;  // the most at once since the start or the last reset
  size_t largest = 0;      // the largest single tensor allocated since the last reset
};
CpuMemoryStats cpu_memory_stats();
// Starts the peak over from what is in use now, and the largest tensor from 0.
void reset_cpu_memory_peak();

}  // namespace cotan::cpu
