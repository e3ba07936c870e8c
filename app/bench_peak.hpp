// The FMA peak of this CPU, measured in the run that quotes it: the benches show each figure as a
// fraction of it (BENCHMARKS.md), since absolute times on these shared machines mean little.
//
// The loop is fp32 vfmadd on kFmaAccumulators independent vector accumulators (AVX-512 when the
// build has __AVX512F__, else AVX2 + FMA, else scalar multiply-adds): enough independent chains
// to cover the FMA latency (4 cycles) on both FMA ports, with operands in registers only, so no
// real kernel can beat it. fp64 has half the lanes, hence half this peak.
#pragma once

#include <string>

namespace cotan::app {

inline constexpr int kFmaAccumulators = 12;

struct FmaPeak {
  std::string isa;     // "avx512", "avx2+fma" or "scalar": what the loop was compiled for
  int lanes = 1;       // fp32 lanes of one vector
  int threads = 1;     // threads the loop ran on
  double gflops = 0;   // fp32 GFLOP/s (an FMA is two flops), the best of a few rounds
};

// The fp32 FMA peak on `threads` threads: 1 runs on the calling thread; more run through
// tbb::parallel_for in the current arena (the one cotan's kernels use, capped by --threads), in
// many equal chunks so that a thread that starts late does not stretch the round; the best of
// 20 rounds. Takes a few tenths of a second.
FmaPeak measure_fma_peak(int threads);

// What the peaks measured around a run say of the host, as lines to print (empty when nothing):
// `threads` threads that get much less than `threads` times one thread's peak share cores (SMT
// siblings, or another tenant on them), and a peak that moved between `before` and `after` means
// the host's capacity changed during the run, so each %peak is uncertain by as much.
std::string host_capacity_notes(const FmaPeak& one_thread, const FmaPeak& before, const FmaPeak& after);

}  // namespace cotan::app
