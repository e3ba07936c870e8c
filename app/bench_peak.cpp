#include "app/bench_peak.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdint>
#include <vector>

#include <immintrin.h>
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/partitioner.h>
#include <tbb/task_arena.h>

#include "tensor/ops.hpp"

namespace cotan::app {

namespace {

constexpr int64_t kIterations = 1 << 18;  // of one chunk: about 1 ms on one core
constexpr int kChunksPerThread = 16;
constexpr int kRounds = 20;  // the best of them: on a shared machine some rounds lose the CPU

#if defined(__AVX512F__)
constexpr const char* kIsa = "avx512";
constexpr int kLanes = 16;
#elif defined(__AVX2__) && defined(__FMA__)
constexpr const char* kIsa = "avx2+fma";
constexpr int kLanes = 8;
#else
constexpr const char* kIsa = "scalar";
constexpr int kLanes = 1;
#endif

// kIterations x kFmaAccumulators dependent-per-accumulator FMAs; the result keeps the compiler
// from dropping the loop, and a multiplier just under 1 keeps the values finite.
float fma_chunk(float seed) {
#if defined(__AVX512F__)
  using V = __m512;
  auto set = [](float x) { return _mm512_set1_ps(x); };
  auto fma = [](V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); };
  auto add = [](V a, V b) { return _mm512_add_ps(a, b); };
  auto lane0 = [](V a) { return _mm512_cvtss_f32(a); };
#elif defined(__AVX2__) && defined(__FMA__)
  using V = __m256;
  auto set = [](float x) { return _mm256_set1_ps(x); };
  auto fma = [](V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); };
  auto add = [](V a, V b) { return _mm256_add_ps(a, b); };
  auto lane0 = [](V a) { return _mm256_cvtss_f32(a); };
#else
  using V = float;
  auto set = [](float x) { return x; };
  auto fma = [](V a, V b, V c) { return a * b + c; };
  auto add = [](V a, V b) { return a + b; };
  auto lane0 = [](V a) { return a; };
#endif
  // Twelve named accumulators, not an array: GCC keeps an array in memory across the asm below.
  V x0 = set(seed), x1 = set(seed + 1), x2 = set(seed + 2), x3 = set(seed + 3), x4 = set(seed + 4),
    x5 = set(seed + 5), x6 = set(seed + 6), x7 = set(seed + 7), x8 = set(seed + 8), x9 = set(seed + 9),
    x10 = set(seed + 10), x11 = set(seed + 11);
  const V a = set(0.999999f), b = set(1e-6f);
  for (int64_t it = 0; it < kIterations; ++it) {
    x0 = fma(x0, a, b), x1 = fma(x1, a, b), x2 = fma(x2, a, b), x3 = fma(x3, a, b);
    x4 = fma(x4, a, b), x5 = fma(x5, a, b), x6 = fma(x6, a, b), x7 = fma(x7, a, b);
    x8 = fma(x8, a, b), x9 = fma(x9, a, b), x10 = fma(x10, a, b), x11 = fma(x11, a, b);
    // The compiler must keep every accumulator in a register and every FMA in the loop.
    asm volatile("" : "+v"(x0), "+v"(x1), "+v"(x2), "+v"(x3), "+v"(x4), "+v"(x5));
    asm volatile("" : "+v"(x6), "+v"(x7), "+v"(x8), "+v"(x9), "+v"(x10), "+v"(x11));
  }
  return lane0(add(add(add(add(x0, x1), add(x2, x3)), add(add(x4, x5), add(x6, x7))),
                   add(add(x8, x9), add(x10, x11))));
}
static_assert(kFmaAccumulators == 12, "fma_chunk's register constraints name twelve accumulators");

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

FmaPeak measure_fma_peak(int threads) {
  threads = std::max(threads, 1);
  const int64_t chunks = threads == 1 ? 4 : int64_t(threads) * kChunksPerThread;
  const double flops = 2.0 * double(kLanes) * kFmaAccumulators * double(kIterations) * double(chunks);
  std::vector<float> results(static_cast<size_t>(chunks));  // kept, so that the loops are kept
  double best = 0;
  auto round = [&] {
    const auto start = std::chrono::steady_clock::now();
    if (threads == 1) {
      for (int64_t c = 0; c < chunks; ++c) results[size_t(c)] = fma_chunk(float(c));
    } else {
      tbb::parallel_for(tbb::blocked_range<int64_t>(0, chunks, 1), [&](const tbb::blocked_range<int64_t>& r) {
        for (int64_t c = r.begin(); c != r.end(); ++c) results[size_t(c)] = fma_chunk(float(c));
      }, tbb::simple_partitioner());
    }
    best = std::max(best, flops / seconds_since(start) / 1e9);
  };
  for (int r = 0; r < kRounds; ++r) {
    // A thread count other than cotan's (--threads) gets an arena of its own.
    if (threads == 1 || threads == num_threads()) round();
    else tbb::task_arena(threads).execute(round);
  }
  volatile float keep = results[0];
  (void)keep;
  return {kIsa, kLanes, threads, best};
}

std::string host_capacity_notes(const FmaPeak& one_thread, const FmaPeak& before, const FmaPeak& after) {
  std::string notes;
  char line[320];
  const double scaling = before.gflops / one_thread.gflops;
  if (before.threads > 1 && scaling < 0.85 * before.threads) {
    std::snprintf(line, sizeof line,
                  "note: %d threads reached %.2f times one thread's FMA peak, not %d: they share cores (SMT "
                  "siblings, or another tenant on them), which bounds every %d-thread figure\n",
                  before.threads, scaling, before.threads, before.threads);
    notes += line;
  }
  const double moved = std::abs(after.gflops - before.gflops) / std::max(after.gflops, before.gflops);
  if (moved > 0.1) {
    std::snprintf(line, sizeof line,
                  "note: the FMA peak moved by %.0f%% during the run: the host's capacity changed, and each "
                  "%%peak above is uncertain by as much\n",
                  100 * moved);
    notes += line;
  }
  return notes;
}

}  // namespace cotan::app
