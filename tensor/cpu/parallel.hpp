// Parallel loops for the CPU kernels (oneTBB). Work is cut into chunks whose boundaries depend
// only on the problem size, never on the thread count, and reductions combine chunk partials in
// chunk order: results are the same bits with 1 or N threads.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include <tbb/blocked_range.h>
#include <tbb/global_control.h>
#include <tbb/parallel_for.h>
#include <tbb/partitioner.h>
#include <tbb/task_arena.h>

namespace cotan::cpu {

// Elements below which a loop stays on the calling thread.
constexpr int64_t kSerialElements = 1 << 15;

// Threads a parallel loop may use: the arena's, capped by tbb::global_control (set_num_threads).
// Only for choosing how to cut work that gives the same bits however it is cut.
inline int64_t worker_threads() {
  return std::min<int64_t>(tbb::this_task_arena::max_concurrency(),
                           int64_t(tbb::global_control::active_value(tbb::global_control::max_allowed_parallelism)));
}

// body(begin, end) over [0, n), in chunks of `grain` (the last one shorter).
template <class F>
void parallel_for(int64_t n, int64_t grain, F&& body) {
  if (n <= 0) return;
  if (grain < 1) grain = 1;
  if (n <= grain) {
    body(int64_t(0), n);
    return;
  }
  int64_t chunks = (n + grain - 1) / grain;
  tbb::parallel_for(tbb::blocked_range<int64_t>(0, chunks, 1), [&](const tbb::blocked_range<int64_t>& r) {
    for (int64_t c = r.begin(); c != r.end(); ++c) body(c * grain, std::min(n, (c + 1) * grain));
  }, tbb::simple_partitioner());
}

// Sums partial(begin, end) over fixed chunks of [0, n) and combines them in chunk order.
template <class T, class Partial, class Combine>
T chunked_reduce(int64_t n, int64_t chunk, T init, Partial&& partial, Combine&& combine) {
  if (n <= 0) return init;
  int64_t chunks = (n + chunk - 1) / chunk;
  std::vector<T> partials(size_t(chunks), init);
  parallel_for(chunks, 1, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) partials[size_t(c)] = partial(c * chunk, std::min(n, (c + 1) * chunk));
  });
  T acc = init;
  for (const T& p : partials) acc = combine(acc, p);
  return acc;
}

}  // namespace cotan::cpu
