// The SIMT emulator: CUDA kernels on the CPU, for tests. Include "cuda/simt/simt.hpp".
//
// simt::launch runs every block of the grid; a block's threads are fibers (Boost.Context) on
// one OS thread, scheduled cooperatively:
//  - Between two synchronisation points (sync_threads, a warp collective) the runnable threads
//    of a block are resumed one after another, each until it reaches the next synchronisation
//    point or exits, in an order drawn from EmulatorOptions::seed mixed with the block index.
//    Code that reads another thread's shared memory without a barrier therefore sees the value
//    from before (or the poison pattern) for some orders, and results change with the seed.
//    Warps drift apart: when a collective or a barrier releases a warp, half of the time it
//    sits out 1 to 3 rounds, so a warp may run several collectives ahead of another (into the
//    next tile of a loop whose top barrier is missing) instead of all advancing in lockstep.
//  - sync_threads releases when every thread of the block waits there. Threads waiting while
//    others exited is an error ("barrier divergence").
//  - A warp collective completes when every lane named in its mask that exists (a partial last
//    warp has fewer lanes) has arrived at the same collective with the same mask; the last lane
//    to arrive computes every participant's result. Lanes that disagree, or never arrive, are
//    an error.
//  - Shared memory, static and dynamic, is filled with 0xFF bytes (a NaN pattern) when a block
//    starts, and a shuffle from a lane outside the mask returns the same pattern.
// Errors are cotan::Error ("[simt] ...") naming the block; an exception thrown by a kernel ends
// the launch and is rethrown as a cotan::Error naming block and thread (one not derived from
// std::exception as it is). After either, the emulator is ready for the next launch. Each
// thread has its own stack (EmulatorOptions::stack_bytes, with a guard page), pooled.
//
// Blocks run one at a time, in a seeded random order, unless EmulatorOptions::workers > 1 runs
// them on that many OS threads (the schedule inside each block stays deterministic; the order
// of atomics between blocks does not). Atomics are real atomics either way.
#pragma once

#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <tuple>
#include <type_traits>
#include <utility>

#include "cuda/simt/common.hpp"

namespace simt {
inline namespace emulated {

struct EmulatorOptions {
  uint64_t seed = 0;
  bool shuffle = true;        // random resume order (else linear thread id order; blocks too)
  bool poison_shared = true;  // 0xFF bytes in shared memory at block start, and from shuffles
                              // whose source lane is not in the mask
  unsigned workers = 1;       // OS threads running blocks; 0: one per core
  size_t stack_bytes = size_t(256) << 10;  // per emulated thread; stacks are pooled
};

// The process-wide options, read at each launch.
EmulatorOptions& emulator_options();

// Replaces the options for its lifetime.
class ScopedEmulatorOptions {
 public:
  explicit ScopedEmulatorOptions(const EmulatorOptions& options)
      : previous_(emulator_options()) {
    emulator_options() = options;
  }
  ~ScopedEmulatorOptions() { emulator_options() = previous_; }
  ScopedEmulatorOptions(const ScopedEmulatorOptions&) = delete;
  ScopedEmulatorOptions& operator=(const ScopedEmulatorOptions&) = delete;

 private:
  EmulatorOptions previous_;
};

// Accepted for symmetry with the CUDA branch; the emulator runs launches synchronously.
inline void* current_stream() noexcept { return detail::stream_slot(); }

namespace detail {

// What a running kernel thread sees of itself; set by the scheduler before it resumes a fiber.
struct ThreadView {
  Dim3 thread_idx, block_idx, block_dim, grid_dim;
  unsigned linear = 0;  // linear thread index in the block
};
extern constinit thread_local ThreadView* current_thread;
[[noreturn]] void outside_kernel(const char* function);

inline const ThreadView& current(const char* function) {
  const ThreadView* t = current_thread;
  if (t == nullptr) outside_kernel(function);
  return *t;
}

// Runs `body(context)` as every thread of every block.
struct Launch {
  Dim3 grid, block;
  size_t dynamic_shared_bytes = 0;
  void (*body)(void* context) = nullptr;
  void* context = nullptr;
};
void run_grid(const Launch& launch);

// Static shared memory: the block's array for declaration `site` (nullptr: the k-th untagged
// declaration this thread makes).
void* shared_array(const void* site, size_t bytes, size_t alignment);

// A warp collective. Each lane passes its inputs in `in` (and `ptr`, `arg`, `width`); the call
// returns once the collective completed, with this lane's results in `out`.
enum class WarpOp : uint8_t {
  sync_warp, shfl_idx, shfl_up, shfl_down, shfl_xor, ballot, vote_any, vote_all,
  mma_m16n8k16_bf16, ldmatrix_x1, ldmatrix_x2, ldmatrix_x4,
  ldmatrix_x1_trans, ldmatrix_x2_trans, ldmatrix_x4_trans,
};
struct LaneIO {
  uint32_t in[10] = {};
  const void* ptr = nullptr;
  int arg = 0;
  int width = 32;
  uint32_t out[4] = {};
};
void warp_collective(WarpOp op, unsigned mask, LaneIO& io);

template <class T>
void check_shuffle_type() {
  static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= 8,
                "simt shuffles move values of at most 8 bytes, as __shfl_sync does");
}

template <class T>
T shuffle(WarpOp op, unsigned mask, T v, int arg, int width) {
  check_shuffle_type<T>();
  LaneIO io;
  std::memcpy(io.in, &v, sizeof(T));
  io.arg = arg;
  io.width = width;
  warp_collective(op, mask, io);
  T result;
  std::memcpy(&result, io.out, sizeof(T));
  return result;
}

}  // namespace detail

// --- device side --------------------------------------------------------------------------------

inline Dim3 thread_idx() { return detail::current("thread_idx").thread_idx; }
inline Dim3 block_idx() { return detail::current("block_idx").block_idx; }
inline Dim3 block_dim() { return detail::current("block_dim").block_dim; }
inline Dim3 grid_dim() { return detail::current("grid_dim").grid_dim; }
inline unsigned linear_thread_idx() { return detail::current("linear_thread_idx").linear; }
inline unsigned lane_id() { return linear_thread_idx() % 32u; }
inline unsigned warp_id() { return linear_thread_idx() / 32u; }

void sync_threads();
inline void sync_warp(unsigned mask = 0xffffffffu) {
  detail::LaneIO io;
  detail::warp_collective(detail::WarpOp::sync_warp, mask, io);
}

// T is an array type (float[32][33]) or any trivial type; see SIMT_SHARED. Arrays are aligned
// to `Alignment` and, when that is below 16, deliberately not to 16, so that a 16-byte access
// (ldmatrix) to an array declared without SIMT_SHARED_ALIGNED fails here as it may on a GPU.
template <class T, size_t Alignment = alignof(T)>
T& shared() {
  return *static_cast<T*>(detail::shared_array(nullptr, sizeof(T), Alignment));
}
template <class T, size_t Alignment = alignof(T), class Site>
T& shared(Site) {
  static const char site = 0;  // one per declaration (Site) and type
  return *static_cast<T*>(detail::shared_array(&site, sizeof(T), Alignment));
}
void* dynamic_shared_memory();

template <class T>
T shfl(unsigned mask, T v, int src_lane, int width = 32) {
  return detail::shuffle(detail::WarpOp::shfl_idx, mask, v, src_lane, width);
}
template <class T>
T shfl_xor(unsigned mask, T v, int lane_mask, int width = 32) {
  return detail::shuffle(detail::WarpOp::shfl_xor, mask, v, lane_mask, width);
}
template <class T>
T shfl_down(unsigned mask, T v, unsigned delta, int width = 32) {
  return detail::shuffle(detail::WarpOp::shfl_down, mask, v, int(delta), width);
}
template <class T>
T shfl_up(unsigned mask, T v, unsigned delta, int width = 32) {
  return detail::shuffle(detail::WarpOp::shfl_up, mask, v, int(delta), width);
}
namespace detail {
inline unsigned vote(WarpOp op, unsigned mask, bool p) {
  LaneIO io;
  io.in[0] = p ? 1u : 0u;
  warp_collective(op, mask, io);
  return io.out[0];
}
}  // namespace detail
inline unsigned ballot(unsigned mask, bool p) {
  return detail::vote(detail::WarpOp::ballot, mask, p);
}
inline bool any(unsigned mask, bool p) { return detail::vote(detail::WarpOp::vote_any, mask, p); }
inline bool all(unsigned mask, bool p) { return detail::vote(detail::WarpOp::vote_all, mask, p); }

// Atomics: real atomics (blocks may run on several OS threads), sequentially consistent.
template <class T>
T atomic_add(T* addr, T v) {
  static_assert(std::is_arithmetic_v<T>, "simt::atomic_add: arithmetic types only");
  return std::atomic_ref<T>(*addr).fetch_add(v);
}
template <class T>
T atomic_max(T* addr, T v) {
  static_assert(std::is_integral_v<T>, "simt::atomic_max: integer types only");
  std::atomic_ref<T> a(*addr);
  T old = a.load();
  while (old < v && !a.compare_exchange_weak(old, v)) {
  }
  return old;
}
template <class T>
T atomic_min(T* addr, T v) {
  static_assert(std::is_integral_v<T>, "simt::atomic_min: integer types only");
  std::atomic_ref<T> a(*addr);
  T old = a.load();
  while (v < old && !a.compare_exchange_weak(old, v)) {
  }
  return old;
}
template <class T>
T atomic_cas(T* addr, T compare, T val) {
  std::atomic_ref<T>(*addr).compare_exchange_strong(compare, val);
  return compare;  // the old value whether or not it was replaced
}
template <class T>
T atomic_exch(T* addr, T v) {
  return std::atomic_ref<T>(*addr).exchange(v);
}
inline void thread_fence() { std::atomic_thread_fence(std::memory_order_seq_cst); }

inline float rsqrt(float x) { return 1.0f / std::sqrt(x); }

// --- host side ----------------------------------------------------------------------------------

// Runs kernel(args...) as every thread of a grid x block launch. Each thread gets its own copy
// of the arguments, converted once to the kernel's parameter types.
template <class... Params, class... Args>
void launch(void (*kernel)(Params...), Dim3 grid, Dim3 block, size_t dynamic_shared_bytes,
            Args&&... args) {
  static_assert(sizeof...(Params) == sizeof...(Args), "simt::launch: wrong number of arguments");
  struct Context {
    void (*kernel)(Params...);
    std::tuple<std::decay_t<Params>...> params;
  } context{kernel, std::tuple<std::decay_t<Params>...>(std::forward<Args>(args)...)};
  detail::Launch l;
  l.grid = grid;
  l.block = block;
  l.dynamic_shared_bytes = dynamic_shared_bytes;
  l.context = &context;
  l.body = [](void* c) {
    auto& ctx = *static_cast<Context*>(c);
    std::apply(ctx.kernel, ctx.params);
  };
  detail::run_grid(l);
}

}  // namespace emulated
}  // namespace simt
