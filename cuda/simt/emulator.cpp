// The SIMT emulator's scheduler: launches, blocks as groups of fibers, barriers, shared memory.
// The warp collectives are in warp.cpp; the scheduling rules are described in emulator.hpp.
#include "cuda/simt/emulator.hpp"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#endif
#include <sys/mman.h>
#include <unistd.h>

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <numeric>
#include <thread>

#include "cuda/simt/block.hpp"
#include "tensor/error.hpp"

namespace simt {
inline namespace emulated {

EmulatorOptions& emulator_options() {
  static EmulatorOptions options;
  return options;
}

namespace detail {

constinit thread_local ThreadView* current_thread = nullptr;

namespace {

namespace ctx = boost::context;

// CUDA's limits for one block (sm_90 allows 227 KiB of shared memory with the opt-in).
constexpr uint64_t max_block_threads = 1024;
constexpr size_t max_static_shared = size_t(48) << 10;
constexpr size_t max_shared = size_t(227) << 10;
constexpr size_t shared_alignment = 128;

// Fiber stacks: mmap'd with a guard page below, kept for reuse by later blocks.
class StackPool {
 public:
  ~StackPool() { release(); }

  // Stacks of `bytes` from now on; call only while no stack is in use.
  void resize(size_t bytes) {
    const size_t page = size_t(sysconf(_SC_PAGESIZE));
    bytes = std::max<size_t>(bytes, size_t(64) << 10);
    bytes = (bytes + page - 1) / page * page + page;  // + guard page
    if (bytes == total_) return;
    release();
    total_ = bytes;
  }

  ctx::stack_context allocate() {
    if (!free_.empty()) {
      ctx::stack_context sc = free_.back();
      free_.pop_back();
      return sc;
    }
    void* base = mmap(nullptr, total_, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (base == MAP_FAILED) throw std::bad_alloc();
    mprotect(base, size_t(sysconf(_SC_PAGESIZE)), PROT_NONE);
    ctx::stack_context sc;
    sc.size = total_;
    sc.sp = static_cast<char*>(base) + total_;
    return sc;
  }

  void deallocate(ctx::stack_context& sc) noexcept {
#if defined(__SANITIZE_ADDRESS__)
    // Unwinding inside a fiber leaves AddressSanitizer's marks on the stack it ran on (Boost's
    // fiber switches are not annotated); clear them before the stack is reused.
    const size_t page = size_t(sysconf(_SC_PAGESIZE));
    ASAN_UNPOISON_MEMORY_REGION(static_cast<char*>(sc.sp) - sc.size + page, sc.size - page);
#endif
    free_.push_back(sc);
  }

 private:
  void release() {
    for (ctx::stack_context& sc : free_) munmap(static_cast<char*>(sc.sp) - sc.size, sc.size);
    free_.clear();
  }

  size_t total_ = 0;
  std::vector<ctx::stack_context> free_;
};

// Boost.Context's StackAllocator concept, backed by a pool; tells the thread its stack.
struct PooledStack {
  StackPool* pool;
  ThreadState* thread;
  ctx::stack_context allocate() {
    const ctx::stack_context sc = pool->allocate();
    thread->stack_bottom = static_cast<char*>(sc.sp) - sc.size;
    thread->stack_size = sc.size;
    return sc;
  }
  void deallocate(ctx::stack_context& sc) noexcept { pool->deallocate(sc); }
};

// AddressSanitizer must be told about every stack switch (Boost.Context 1.74 does not): before
// it, the stack switched to; after it, on the new stack, which stack was left.
#if defined(__SANITIZE_ADDRESS__)
void start_switch(void** fake_stack, const void* bottom, size_t size) {
  __sanitizer_start_switch_fiber(fake_stack, bottom, size);
}
void finish_switch(void* fake_stack, const void** bottom, size_t* size) {
  __sanitizer_finish_switch_fiber(fake_stack, bottom, size);
}
#else
void start_switch(void**, const void*, size_t) {}
void finish_switch(void*, const void**, size_t*) {}
#endif

// Under AddressSanitizer, shared memory outside the declared arrays and past the dynamic bytes
// is poisoned, so a kernel's out-of-bounds shared access is reported; arrays get a red zone.
#if defined(__SANITIZE_ADDRESS__)
constexpr size_t red_zone = 32;
void poison(const void* p, size_t bytes) { ASAN_POISON_MEMORY_REGION(p, bytes); }
void unpoison(const void* p, size_t bytes) { ASAN_UNPOISON_MEMORY_REGION(p, bytes); }
#else
constexpr size_t red_zone = 0;
void poison(const void*, size_t) {}
void unpoison(const void*, size_t) {}
#endif
// The static arena holds max_static_shared declared bytes plus alignment padding and red zones.
constexpr size_t static_arena_bytes = 2 * max_static_shared;

class AlignedBuffer {
 public:
  // At least `bytes` (never a null pointer, even for 0), aligned to shared_alignment.
  std::byte* reserve(size_t bytes) {
    if (bytes > capacity_ || storage_ == nullptr) {
      bytes = std::max(bytes, shared_alignment);
      storage_ = std::make_unique<std::byte[]>(bytes + shared_alignment);
      capacity_ = bytes;
    }
    auto p = reinterpret_cast<uintptr_t>(storage_.get());
    return reinterpret_cast<std::byte*>((p + shared_alignment - 1) & ~(shared_alignment - 1));
  }
  size_t capacity() const { return capacity_; }

 private:
  std::unique_ptr<std::byte[]> storage_;
  size_t capacity_ = 0;
};

// splitmix64: the schedule's random numbers.
uint64_t next_random(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

template <class T>
void shuffle(std::vector<T>& v, uint64_t& state) {
  for (size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[next_random(state) % i]);
}

// One round has passed: held threads whose count runs out become runnable.
void count_down_held(Block& b) {
  size_t kept = 0;
  for (Block::Held& h : b.held) {
    if (--h.rounds == 0) b.make_runnable(h.linear);
    else b.held[kept++] = h;
  }
  b.held.resize(kept);
}

Dim3 unflatten(uint64_t i, Dim3 d) {
  return Dim3{unsigned(i % d.x), unsigned(i / d.x % d.y), unsigned(i / (uint64_t(d.x) * d.y))};
}

// Everything one OS thread needs to run blocks, kept between blocks and launches.
struct Worker {
  StackPool stacks;
  Block block;
  AlignedBuffer static_shared, dynamic_shared;
  std::vector<unsigned> batch;
};

Worker& worker() {
  static thread_local Worker w;
  return w;
}

void resume(ThreadState& t) {
  current_thread = &t;
  void* fake_stack = nullptr;
  start_switch(&fake_stack, t.stack_bottom, t.stack_size);
  t.fiber = std::move(t.fiber).resume();
  finish_switch(fake_stack, nullptr, nullptr);
  current_thread = nullptr;
}

// Called when no thread of the block is runnable: releases the barrier, or says why the block
// cannot go on. Returns false when every thread exited.
bool release_barrier(Block& b) {
  unsigned at_barrier = 0, at_warp = 0, exited = 0;
  const ThreadState* stuck = nullptr;
  for (const ThreadState& t : b.threads) {
    if (t.wait == Wait::barrier) ++at_barrier;
    if (t.wait == Wait::done) ++exited;
    if (t.wait == Wait::warp && at_warp++ == 0) stuck = &t;
  }
  if (exited == b.size) return false;
  if (stuck != nullptr) {
    // A collective that never completes: some lane of its mask exited or waits elsewhere.
    const unsigned warp = stuck->linear / 32;
    const unsigned group = stuck->mask & b.present_lanes(warp);
    unsigned waiting = 0, gone = 0, barrier = 0, elsewhere = 0;
    for (unsigned lane = 0; lane < 32; ++lane) {
      if (!(group >> lane & 1)) continue;
      const ThreadState& o = b.threads[warp * 32 + lane];
      if (o.wait == Wait::warp && o.op == stuck->op && o.mask == stuck->mask) ++waiting;
      else if (o.wait == Wait::done) ++gone;
      else if (o.wait == Wait::barrier) ++barrier;
      else ++elsewhere;
    }
    b.record(std::make_exception_ptr(cotan::Error(cotan::cat(
        "[simt] warp collective deadlock in ", b.where(), ", warp ", warp, ": ", waiting,
        " lanes wait at ", op_name(stuck->op), " with mask ", hex(stuck->mask), ", ",
        gone + barrier + elsewhere, " lanes of the mask never arrive (", gone, " exited, ",
        barrier, " wait at sync_threads, ", elsewhere, " wait at another collective)"))));
    return false;
  }
  if (exited > 0) {
    b.record(std::make_exception_ptr(cotan::Error(
        cotan::cat("[simt] barrier divergence in ", b.where(), ": ", at_barrier,
                   " threads wait at sync_threads, ", exited, " exited"))));
    return false;
  }
  for (unsigned warp = 0; warp * 32 < b.size; ++warp) b.release_lanes(warp, b.present_lanes(warp));
  return true;
}

// Resumes every unfinished thread of an abandoned block so that it unwinds (yield throws
// AbortThread; a thread that never started skips the kernel). A thread that swallows the
// unwinding and keeps waiting is finally unwound by Boost.Context when its fiber is destroyed.
void abandon(Block& b) {
  b.aborting = true;
  for (int pass = 0; pass < 4; ++pass)
    for (ThreadState& t : b.threads)
      if (t.wait != Wait::done && t.fiber) resume(t);
  for (ThreadState& t : b.threads) t.fiber = ctx::fiber();
}

void run_block(Worker& w, const Launch& launch, const EmulatorOptions& options,
               uint64_t block_linear) {
  Block& b = w.block;
  b.block_idx = unflatten(block_linear, launch.grid);
  b.block_dim = launch.block;
  b.grid_dim = launch.grid;
  b.size = volume(launch.block);
  b.options = &options;
  b.aborting = false;
  b.error = nullptr;
  b.static_base = w.static_shared.reserve(static_arena_bytes);
  b.static_used = b.static_declared = 0;
  poison(b.static_base, static_arena_bytes);
  b.arrays.clear();
  b.dynamic_bytes = launch.dynamic_shared_bytes;
  b.dynamic_base = w.dynamic_shared.reserve(launch.dynamic_shared_bytes);
  poison(b.dynamic_base, w.dynamic_shared.capacity());
  unpoison(b.dynamic_base, b.dynamic_bytes);
  if (options.poison_shared) std::memset(b.dynamic_base, 0xff, b.dynamic_bytes);
  b.random = options.seed ^ (block_linear * 0xd1b54a32d192ed03ull);
  next_random(b.random);

  b.threads.resize(b.size);
  b.runnable.clear();
  b.held.clear();
  b.pending.resize((b.size + 31) / 32);
  for (auto& warp : b.pending) warp.clear();
  for (unsigned i = 0; i < b.size; ++i) {
    ThreadState& t = b.threads[i];
    t.thread_idx = unflatten(i, launch.block);
    t.block_idx = b.block_idx;
    t.block_dim = b.block_dim;
    t.grid_dim = b.grid_dim;
    t.linear = i;
    t.block = &b;
    t.wait = Wait::running;
    t.untagged_shared = 0;
    t.io = nullptr;
    t.fiber = ctx::fiber(std::allocator_arg, PooledStack{&w.stacks, &t},
                         [&t, &launch](ctx::fiber&& scheduler) {
                           finish_switch(nullptr, &t.scheduler_bottom, &t.scheduler_size);
                           t.scheduler = std::move(scheduler);
                           Block& block = *t.block;
                           if (!block.aborting) {
                             try {
                               launch.body(launch.context);
                             } catch (const AbortThread&) {
                             } catch (const ctx::detail::forced_unwind&) {
                               throw;
                             } catch (const std::exception& e) {
                               block.record(std::make_exception_ptr(cotan::Error(cotan::cat(
                                   "[simt] kernel threw in ", block.where(), ", thread ",
                                   str(t.thread_idx), ": ", e.what()))));
                             } catch (...) {
                               block.record(std::current_exception());
                             }
                           }
                           t.wait = Wait::done;
                           start_switch(nullptr, t.scheduler_bottom, t.scheduler_size);
                           return std::move(t.scheduler);
                         });
    b.runnable.push_back(i);
  }

  // Rounds: every thread released since the previous round runs, in random order, until it
  // reaches a barrier or collective or exits. A completed warp collective releases its lanes
  // into the next round; when nothing is runnable the barrier releases everyone.
  while (!b.error) {
    count_down_held(b);
    if (b.runnable.empty()) {
      if (!b.held.empty()) continue;  // only held threads: their rounds pass
      if (!release_barrier(b)) break;
      continue;
    }
    w.batch.swap(b.runnable);
    b.runnable.clear();
    if (options.shuffle) shuffle(w.batch, b.random);
    for (unsigned i : w.batch) {
      resume(b.threads[i]);
      if (b.error) break;
    }
  }
  if (b.error) {
    abandon(b);
    std::rethrow_exception(b.error);
  }
}

}  // namespace

std::string str(Dim3 d) { return cotan::cat("(", d.x, ",", d.y, ",", d.z, ")"); }

std::string hex(unsigned mask) {
  char text[16];
  std::snprintf(text, sizeof text, "0x%08x", mask);
  return text;
}

std::string Block::where() const { return "block " + str(block_idx); }

void Block::release_lanes(unsigned warp, unsigned lanes) {
  unsigned rounds = 0;
  if (options->shuffle) {
    const uint64_t r = next_random(random);
    if (r & 1) rounds = 1 + unsigned((r >> 1) % 3);
  }
  for (unsigned lane = 0; lane < 32; ++lane) {
    if (!(lanes >> lane & 1)) continue;
    if (rounds == 0) {
      make_runnable(warp * 32 + lane);
    } else {
      threads[warp * 32 + lane].wait = Wait::running;
      held.push_back({warp * 32 + lane, rounds});
    }
  }
}

unsigned Block::present_lanes(unsigned warp) const {
  const unsigned lanes = std::min(32u, size - warp * 32);
  return lanes == 32 ? 0xffffffffu : (1u << lanes) - 1;
}

bool Block::in_shared(const void* p, size_t bytes) const {
  const auto* q = static_cast<const std::byte*>(p);
  return (q >= static_base && q + bytes <= static_base + static_used) ||
         (q >= dynamic_base && q + bytes <= dynamic_base + dynamic_bytes);
}

void Block::yield(ThreadState& t) {
  void* fake_stack = nullptr;
  start_switch(&fake_stack, t.scheduler_bottom, t.scheduler_size);
  t.scheduler = std::move(t.scheduler).resume();
  finish_switch(fake_stack, &t.scheduler_bottom, &t.scheduler_size);
  if (aborting) throw AbortThread{};
}

void Block::record(std::exception_ptr e) {
  if (!error) error = std::move(e);
  aborting = true;
}

void Block::fail_thread(const std::string& message) {
  record(std::make_exception_ptr(cotan::Error("[simt] " + message)));
  throw AbortThread{};
}

ThreadState& current_state(const char* function) {
  if (current_thread == nullptr) outside_kernel(function);
  return *static_cast<ThreadState*>(current_thread);
}

void outside_kernel(const char* function) {
  cotan::fail("simt", "simt::", function, " called outside a kernel");
}

void run_grid(const Launch& launch) {
  if (current_thread != nullptr) cotan::fail("simt", "launch from inside a kernel is not supported");
  const Dim3 g = launch.grid, k = launch.block;
  const uint64_t threads = uint64_t(k.x) * k.y * k.z;
  if (threads == 0 || threads > max_block_threads || k.x > 1024 || k.y > 1024 || k.z > 64)
    cotan::fail("simt", "invalid block ", str(k), ": a block has 1 to ", max_block_threads,
                " threads, at most (1024,1024,64)");
  if (g.x == 0 || g.y == 0 || g.z == 0 || g.x > 0x7fffffffu || g.y > 65535 || g.z > 65535)
    cotan::fail("simt", "invalid grid ", str(g), ": 1 to (2^31-1,65535,65535) blocks");
  if (launch.dynamic_shared_bytes > max_shared)
    cotan::fail("simt", launch.dynamic_shared_bytes, " bytes of dynamic shared memory exceed the ",
                max_shared, " bytes a block can have");

  const EmulatorOptions options = emulator_options();
  const uint64_t blocks = uint64_t(g.x) * g.y * g.z;
  // Blocks run in a random order too: kernels must not depend on it.
  std::vector<uint64_t> order(blocks);
  std::iota(order.begin(), order.end(), uint64_t(0));
  if (options.shuffle) {
    uint64_t random = options.seed ^ 0x5851f42d4c957f2dull;
    shuffle(order, random);
  }
  auto run = [&](uint64_t i) {
    Worker& w = worker();
    w.stacks.resize(options.stack_bytes);
    run_block(w, launch, options, order[i]);
  };
  unsigned workers = options.workers != 0 ? options.workers : std::thread::hardware_concurrency();
  workers = unsigned(std::min<uint64_t>(std::max(workers, 1u), blocks));
  if (workers == 1) {
    for (uint64_t i = 0; i < blocks; ++i) run(i);
    return;
  }
  tbb::task_arena arena(static_cast<int>(workers));
  arena.execute([&] {
    tbb::parallel_for(tbb::blocked_range<uint64_t>(0, blocks), [&](const auto& range) {
      for (uint64_t i = range.begin(); i != range.end(); ++i) run(i);
    });
  });
}

void* shared_array(const void* site, size_t bytes, size_t alignment) {
  ThreadState& t = current_state("shared");
  Block& b = *t.block;
  const unsigned index = site == nullptr ? t.untagged_shared++ : 0;
  for (const SharedArray& a : b.arrays) {
    if (a.site != site || a.index != index) continue;
    if (a.bytes != bytes)
      b.fail_thread(cotan::cat("a shared array of ", b.where(), " is declared with ", a.bytes,
                               " bytes by one thread and ", bytes, " bytes by thread ",
                               str(t.thread_idx), " (untagged declarations must come in the "
                               "same order in every thread)"));
    return b.static_base + a.offset;
  }
  // Aligned as declared, and off 16-byte boundaries when the declaration allows it (see shared).
  size_t offset = (b.static_used + red_zone + alignment - 1) / alignment * alignment;
  if (alignment < 16 && offset % 16 == 0) offset += alignment;
  b.static_declared += bytes;
  if (b.static_declared > max_static_shared || b.static_declared + b.dynamic_bytes > max_shared ||
      offset + bytes > static_arena_bytes)
    b.fail_thread(cotan::cat("static shared memory of ", b.where(), " exceeds ",
                             max_static_shared, " bytes (or ", max_shared,
                             " with the dynamic shared memory)"));
  unpoison(b.static_base + offset, bytes);
  if (b.options->poison_shared) std::memset(b.static_base + offset, 0xff, bytes);
  b.arrays.push_back(SharedArray{site, index, offset, bytes});
  b.static_used = offset + bytes;
  return b.static_base + offset;
}

}  // namespace detail

void sync_threads() {
  detail::ThreadState& t = detail::current_state("sync_threads");
  t.wait = detail::Wait::barrier;
  t.block->yield(t);
}

void* dynamic_shared_memory() {
  return detail::current_state("dynamic_shared_memory").block->dynamic_base;
}

}  // namespace emulated
}  // namespace simt
