// The part of the SIMT portability layer that is identical for nvcc and g++: the function
// qualifier macros, simt::Dim3, the current stream slot and bf16 packing. Include
// "cuda/simt/simt.hpp", not this file.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#include <cuda_runtime.h>
#define SIMT_GLOBAL __global__
#define SIMT_DEVICE __device__ __forceinline__
#define SIMT_HOST_DEVICE __host__ __device__ inline
#define SIMT_LAUNCH_BOUNDS(...) __launch_bounds__(__VA_ARGS__)
#else
#define SIMT_GLOBAL
#define SIMT_DEVICE inline
#define SIMT_HOST_DEVICE inline
#define SIMT_LAUNCH_BOUNDS(...)
#endif

namespace simt {

// A grid or block extent, or a block or thread index. One type for nvcc and g++ translation units
// (host code compiled by either may pass it to the other), so the conversion to CUDA's dim3 is
// the only member that exists on one side only; it adds no data.
struct Dim3 {
  unsigned x = 1, y = 1, z = 1;
#if defined(__CUDACC__)
  SIMT_HOST_DEVICE operator dim3() const { return dim3(x, y, z); }
#endif
};

SIMT_HOST_DEVICE unsigned volume(Dim3 d) { return d.x * d.y * d.z; }

// The stream launches go to, per host thread (an opaque cudaStream_t; nullptr is the default
// stream). One slot shared by nvcc and g++ translation units, so a stream set in C++ code is
// the one a launcher in a .cu file uses. The emulator ignores it.
namespace detail {
inline void*& stream_slot() noexcept {
  static thread_local void* stream = nullptr;
  return stream;
}
}  // namespace detail

// Sets the current stream for its lifetime, then restores the previous one.
class ScopedStream {
 public:
  explicit ScopedStream(void* stream) noexcept : previous_(detail::stream_slot()) {
    detail::stream_slot() = stream;
  }
  ~ScopedStream() { detail::stream_slot() = previous_; }
  ScopedStream(const ScopedStream&) = delete;
  ScopedStream& operator=(const ScopedStream&) = delete;

 private:
  void* previous_;
};

// --- bf16 in registers ------------------------------------------------------------------------
// bf16 is the upper half of an IEEE float. Conversions round to nearest even and keep NaNs
// quiet, as __float2bfloat16_rn does.

SIMT_HOST_DEVICE uint32_t float_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
#endif
}

SIMT_HOST_DEVICE float bits_float(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
#endif
}

// float -> bf16 bits, round to nearest even.
SIMT_HOST_DEVICE uint16_t float_to_bf16(float f) {
  const uint32_t u = float_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40u);  // NaN stays NaN
  return uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

SIMT_HOST_DEVICE float bf16_to_float(uint16_t h) { return bits_float(uint32_t(h) << 16); }

// Two bf16 in one 32-bit register, `lo` in bits 0-15: the element order of mma fragments.
SIMT_HOST_DEVICE uint32_t pack_bf16x2(float lo, float hi) {
  return uint32_t(float_to_bf16(lo)) | (uint32_t(float_to_bf16(hi)) << 16);
}
SIMT_HOST_DEVICE float bf16_lo(uint32_t r) { return bf16_to_float(uint16_t(r & 0xffffu)); }
SIMT_HOST_DEVICE float bf16_hi(uint32_t r) { return bf16_to_float(uint16_t(r >> 16)); }

}  // namespace simt
