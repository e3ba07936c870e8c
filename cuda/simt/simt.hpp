// The SIMT portability header: kernel code written once against namespace `simt`, compiled by
// nvcc for the GPU (__CUDACC__: every name maps to the CUDA builtin) and by g++ for the CPU,
// where the emulator (cuda/simt/emulator.hpp) runs each block's threads as fibers with real
// barriers, shared memory and warp collectives. COTAN_SIMT_EMULATED is 1 in the emulator branch.
//
// Device side:
//   SIMT_GLOBAL, SIMT_DEVICE, SIMT_HOST_DEVICE, SIMT_LAUNCH_BOUNDS(...)
//   SIMT_SHARED(float, tile, [32][33]);   static shared array (CUDA: __shared__ float tile[32][33])
//   SIMT_SHARED_ALIGNED(uint16_t, tile, [64][64], 16);  the same, aligned (ldmatrix rows need 16)
//   SIMT_DYNAMIC_SHARED(float, buf);      float* buf = the launch's dynamic shared memory
//   thread_idx() block_idx() block_dim() grid_dim() -> Dim3; linear_thread_idx(), lane_id(),
//   warp_id(); sync_threads(), sync_warp(mask); shfl, shfl_xor, shfl_down, shfl_up (mask, v,
//   lane or delta, width); ballot, any, all; atomic_add/max/min/cas/exch; thread_fence();
//   rsqrt(float); bf16: float_to_bf16, bf16_to_float, pack_bf16x2, bf16_lo, bf16_hi;
//   tensor cores (cuda/simt/tensor_core.hpp): mma_m16n8k16_bf16, ldmatrix_x4/_x2[_trans].
// Host side:
//   simt::launch(kernel, grid, block, dynamic_shared_bytes, args...) on current_stream().
//
// A warp is 32 consecutive linear thread ids (x fastest, then y, then z).
#pragma once

#include <cstddef>
#include <utility>

#include "cuda/simt/common.hpp"

#if defined(__CUDACC__)

#include "cuda/runtime.hpp"

#define SIMT_SHARED(type, name, dims) __shared__ type name dims
#define SIMT_SHARED_ALIGNED(type, name, dims, alignment) \
  __shared__ __align__(alignment) type name dims
#define SIMT_DYNAMIC_SHARED(type, name) \
  type* name = reinterpret_cast<type*>(::simt::dynamic_shared_memory())

namespace simt {
// The nvcc and g++ definitions differ, so they live in different inline namespaces: a program
// may link both (a .cu launcher and its emulated twin) without one replacing the other.
inline namespace native {

SIMT_DEVICE void* dynamic_shared_memory() {
  extern __shared__ __align__(16) unsigned char simt_dynamic_shared_[];
  return simt_dynamic_shared_;
}

SIMT_DEVICE Dim3 thread_idx() { return Dim3{threadIdx.x, threadIdx.y, threadIdx.z}; }
SIMT_DEVICE Dim3 block_idx() { return Dim3{blockIdx.x, blockIdx.y, blockIdx.z}; }
SIMT_DEVICE Dim3 block_dim() { return Dim3{blockDim.x, blockDim.y, blockDim.z}; }
SIMT_DEVICE Dim3 grid_dim() { return Dim3{gridDim.x, gridDim.y, gridDim.z}; }
SIMT_DEVICE unsigned linear_thread_idx() {
  return threadIdx.x + threadIdx.y * blockDim.x + threadIdx.z * blockDim.x * blockDim.y;
}
SIMT_DEVICE unsigned lane_id() { return linear_thread_idx() % 32u; }
SIMT_DEVICE unsigned warp_id() { return linear_thread_idx() / 32u; }

SIMT_DEVICE void sync_threads() { __syncthreads(); }
SIMT_DEVICE void sync_warp(unsigned mask = 0xffffffffu) { __syncwarp(mask); }

template <class T>
SIMT_DEVICE T shfl(unsigned mask, T v, int src_lane, int width = 32) {
  return __shfl_sync(mask, v, src_lane, width);
}
template <class T>
SIMT_DEVICE T shfl_xor(unsigned mask, T v, int lane_mask, int width = 32) {
  return __shfl_xor_sync(mask, v, lane_mask, width);
}
template <class T>
SIMT_DEVICE T shfl_down(unsigned mask, T v, unsigned delta, int width = 32) {
  return __shfl_down_sync(mask, v, delta, width);
}
template <class T>
SIMT_DEVICE T shfl_up(unsigned mask, T v, unsigned delta, int width = 32) {
  return __shfl_up_sync(mask, v, delta, width);
}
SIMT_DEVICE unsigned ballot(unsigned mask, bool p) { return __ballot_sync(mask, p); }
SIMT_DEVICE bool any(unsigned mask, bool p) { return __any_sync(mask, p) != 0; }
SIMT_DEVICE bool all(unsigned mask, bool p) { return __all_sync(mask, p) != 0; }

template <class T>
SIMT_DEVICE T atomic_add(T* addr, T v) { return atomicAdd(addr, v); }
template <class T>
SIMT_DEVICE T atomic_max(T* addr, T v) { return atomicMax(addr, v); }
template <class T>
SIMT_DEVICE T atomic_min(T* addr, T v) { return atomicMin(addr, v); }
template <class T>
SIMT_DEVICE T atomic_cas(T* addr, T compare, T val) { return atomicCAS(addr, compare, val); }
template <class T>
SIMT_DEVICE T atomic_exch(T* addr, T v) { return atomicExch(addr, v); }
SIMT_DEVICE void thread_fence() { __threadfence(); }

SIMT_DEVICE float rsqrt(float x) { return rsqrtf(x); }

inline cudaStream_t current_stream() noexcept {
  return static_cast<cudaStream_t>(detail::stream_slot());
}

// kernel<<<grid, block, dynamic_shared_bytes, current_stream()>>>(args...), checked.
template <class... Params, class... Args>
void launch(void (*kernel)(Params...), Dim3 grid, Dim3 block, size_t dynamic_shared_bytes,
            Args&&... args) {
  static_assert(sizeof...(Params) == sizeof...(Args), "simt::launch: wrong number of arguments");
  kernel<<<dim3(grid), dim3(block), dynamic_shared_bytes, current_stream()>>>(
      std::forward<Args>(args)...);
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace native
}  // namespace simt

#else  // g++: the emulator

#define COTAN_SIMT_EMULATED 1

#include "cuda/simt/emulator.hpp"

// Every thread of a block gets the same storage. The lambda gives each declaration its own type,
// so a declaration names one array per block however often it executes (in a loop, in a helper
// called twice), as a __shared__ variable does.
#define SIMT_SHARED(type, name, dims) type(&name) dims = ::simt::shared<type dims>([] {})
#define SIMT_SHARED_ALIGNED(type, name, dims, alignment) \
  type(&name) dims = ::simt::shared<type dims, alignment>([] {})
#define SIMT_DYNAMIC_SHARED(type, name) \
  type* name = static_cast<type*>(::simt::dynamic_shared_memory())

#endif

#include "cuda/simt/tensor_core.hpp"
