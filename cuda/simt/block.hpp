// Internal to the SIMT emulator: the run state of one block, shared by the scheduler
// (emulator.cpp) and the warp collectives (warp.cpp). Kernel code never includes this.
#pragma once

#include <boost/context/fiber.hpp>

#include <cstddef>
#include <cstdint>
#include <exception>
#include <string>
#include <vector>

#include "cuda/simt/emulator.hpp"

namespace simt {
inline namespace emulated {
namespace detail {

// Where a thread is. A thread that is not running is suspended at a barrier or a warp
// collective, or has exited; `running` also covers "ready, not resumed yet".
enum class Wait : uint8_t { running, barrier, warp, done };

class Block;

struct ThreadState : ThreadView {
  Block* block = nullptr;
  Wait wait = Wait::running;
  boost::context::fiber fiber;      // the suspended thread; held by the scheduler
  boost::context::fiber scheduler;  // the scheduler; held by the thread while it runs
  unsigned untagged_shared = 0;     // untagged shared<T>() declarations made so far
  // The two stacks, for AddressSanitizer's fiber annotations.
  const void* stack_bottom = nullptr;
  size_t stack_size = 0;
  const void* scheduler_bottom = nullptr;
  size_t scheduler_size = 0;
  // While wait == Wait::warp: the collective this lane waits at.
  WarpOp op = WarpOp::sync_warp;
  unsigned mask = 0;
  LaneIO* io = nullptr;
};

// Unwinds a kernel thread when its block is abandoned; deliberately not a std::exception, so
// kernel code that catches std::exception does not swallow it.
struct AbortThread {};

// One static shared array of the block: declaration `site` (or the `index`-th untagged one).
struct SharedArray {
  const void* site;
  unsigned index;
  size_t offset, bytes;
};

// Lanes of one warp waiting at one collective: the same op, mask and (for shuffles) width.
struct PendingCollective {
  WarpOp op;
  unsigned mask;
  int width;
  unsigned arrived;  // lanes
};

class Block {
 public:
  Dim3 block_idx, block_dim, grid_dim;
  unsigned size = 0;  // threads
  std::vector<ThreadState> threads;
  std::vector<unsigned> runnable;  // released since the current round began
  // Warp skew: threads released but held back from the next rounds, each with the rounds left.
  struct Held {
    unsigned linear, rounds;
  };
  std::vector<Held> held;
  uint64_t random = 0;  // the schedule's random state (EmulatorOptions::seed and the block index)
  // Per warp, the collectives some lanes wait at (disjoint lane sets, usually one).
  std::vector<std::vector<PendingCollective>> pending;
  bool aborting = false;
  std::exception_ptr error;
  const EmulatorOptions* options = nullptr;

  // Shared memory: a fixed static arena and the launch's dynamic bytes.
  std::byte* static_base = nullptr;
  size_t static_used = 0;      // bytes of the arena used, with alignment padding
  size_t static_declared = 0;  // bytes of the declared arrays (CUDA's limit applies to these)
  std::vector<SharedArray> arrays;
  std::byte* dynamic_base = nullptr;
  size_t dynamic_bytes = 0;

  // "block (x,y,z)"
  std::string where() const;
  // The lanes of warp `warp` that exist (a partial last warp has fewer than 32).
  unsigned present_lanes(unsigned warp) const;
  // Whether [p, p + bytes) lies in this block's shared memory.
  bool in_shared(const void* p, size_t bytes) const;

  void make_runnable(unsigned linear) {
    threads[linear].wait = Wait::running;
    runnable.push_back(linear);
  }
  // Releases `lanes` of warp `warp` after a collective or a barrier: into the next round or,
  // with EmulatorOptions::shuffle, for half of the releases 1 to 3 rounds later, so that warps
  // drift apart as on hardware instead of advancing one collective per round in lockstep (a
  // warp that runs ahead into the next tile exposes a missing barrier before it).
  void release_lanes(unsigned warp, unsigned lanes);
  // From a kernel thread: back to the scheduler until resumed; throws AbortThread when the
  // block is being abandoned.
  void yield(ThreadState& t);
  // Records the block's first error and stops scheduling it.
  void record(std::exception_ptr e);
  // From a kernel thread: records "[simt] message" and unwinds the calling thread.
  [[noreturn]] void fail_thread(const std::string& message);
};

// The running kernel thread; throws "[simt] <function> called outside a kernel" when none.
ThreadState& current_state(const char* function);

std::string str(Dim3 d);  // "(x,y,z)"
const char* op_name(WarpOp op);
std::string hex(unsigned mask);  // "0x0000ffff"

}  // namespace detail
}  // namespace emulated
}  // namespace simt
