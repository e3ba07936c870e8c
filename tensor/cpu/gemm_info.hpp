// What the CPU GEMM (tensor/cpu/matmul.cpp) runs on this machine: its micro-kernel and the
// blocking it derived from the cache sizes. `cotan info` and `cotan bench matmul --json` print it,
// so that a measurement on another CPU says which kernel and blocking it measured.
#pragma once

#include <cstdint>
#include <string>

namespace cotan::cpu {

struct GemmInfo {
  std::string kernel;          // "avx512", "avx2+fma" (cotan's packed GEMM) or "eigen"
  int64_t mr = 0;              // rows of a micro-kernel tile (0 with Eigen)
  int64_t nr_f32 = 0;          // its columns in f32 (two vector registers)
  int64_t kc_f32 = 0;          // K chunk: fixes the summation order, so f32 results on this machine
  int64_t mc_f32 = 0;          // rows of packed A per tile
  std::string bf16;            // how bf16 operands are multiplied: "f32" (widened as they are
                               // packed) or "avx512_bf16" (pairs along K on vdpbf16ps, f32 sums),
                               // as COTAN_GEMM_BF16 chose
  std::string bf16_kernels;    // the choices this build has: "f32" or "f32,avx512_bf16"
  int64_t l2_bytes = 0;        // the cache sizes the blocking was derived from, per core (L2)
  int64_t l3_bytes = 0;        // and shared (L3)
  std::string l2_source;       // "environment" (COTAN_GEMM_CACHE_SIZES), "sysfs", "sysconf" or
                               // "typical" (none gave a plausible size)
  std::string l3_source;
};

GemmInfo gemm_info();

}  // namespace cotan::cpu
