// The SIMT emulator (cuda/simt/simt.hpp on g++): indices, barriers and shared memory, atomics,
// warp collectives and the tensor-core instructions, each against values computed on the host;
// the schedule's power to expose a missing barrier; and its errors.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <functional>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "cuda/simt/simt.hpp"
#include "tensor/error.hpp"

static_assert(COTAN_SIMT_EMULATED == 1);

namespace {

using simt::Dim3;

// --- kernels ----------------------------------------------------------------------------------

constexpr unsigned kIndexFields = 10;

SIMT_GLOBAL void record_indices(unsigned* out) {
  const Dim3 t = simt::thread_idx(), b = simt::block_idx(), bd = simt::block_dim(),
             g = simt::grid_dim();
  const unsigned block = b.x + g.x * (b.y + g.y * b.z);
  unsigned* o = out + (block * simt::volume(bd) + simt::linear_thread_idx()) * kIndexFields;
  const unsigned fields[kIndexFields] = {t.x, t.y, t.z, b.x, b.y, b.z, simt::lane_id(),
                                         simt::warp_id(), bd.x * 100 + bd.y * 10 + bd.z,
                                         g.x * 100 + g.y * 10 + g.z};
  for (unsigned i = 0; i < kIndexFields; ++i) o[i] = fields[i];
}

constexpr unsigned kReduceThreads = 256;

// Tree reduction in shared memory; one partial sum per block.
SIMT_GLOBAL void block_sum(const float* x, unsigned n, float* partial) {
  SIMT_SHARED(float, s, [kReduceThreads]);
  const unsigned t = simt::thread_idx().x;
  const unsigned i = simt::block_idx().x * kReduceThreads + t;
  s[t] = i < n ? x[i] : 0.0f;
  simt::sync_threads();
  for (unsigned half = kReduceThreads / 2; half > 0; half /= 2) {
    if (t < half) s[t] += s[t + half];
    simt::sync_threads();
  }
  if (t == 0) partial[simt::block_idx().x] = s[0];
}

// Reverses each block's slice through dynamic shared memory.
template <class T>
SIMT_GLOBAL void reverse_blocks(const T* x, T* y) {
  SIMT_DYNAMIC_SHARED(T, s);
  const unsigned t = simt::thread_idx().x, n = simt::block_dim().x;
  const unsigned base = simt::block_idx().x * n;
  s[t] = x[base + t];
  simt::sync_threads();
  y[base + t] = s[n - 1 - t];
}

// A helper that declares shared memory: every call in a block names the same array, as a
// __shared__ variable does.
SIMT_DEVICE int* scratch() {
  SIMT_SHARED(int, cell, [1]);
  return cell;
}

SIMT_GLOBAL void shared_per_declaration(int* out) {
  const unsigned t = simt::thread_idx().x;
  if (t == 0) *scratch() = 0;
  simt::sync_threads();
  for (int round = 0; round < 3; ++round) {
    SIMT_SHARED(int, counter, [1]);  // one array, however often the loop declares it
    if (round == 0 && t == 0) counter[0] = 0;
    simt::sync_threads();
    simt::atomic_add(&counter[0], 1);
    simt::atomic_add(scratch(), 2);
    simt::sync_threads();
    if (t == 0) out[round] = counter[0];
    simt::sync_threads();
  }
  if (t == 0) out[3] = *scratch();
}

SIMT_GLOBAL void atomics(const unsigned* x, unsigned n, unsigned* histogram, float* sum,
                         int* max_min, unsigned long long* count, unsigned* cas_count,
                         unsigned* slot, unsigned* previous) {
  const unsigned i = simt::block_idx().x * simt::block_dim().x + simt::thread_idx().x;
  if (i >= n) return;
  simt::atomic_add(&histogram[x[i] % 16], 1u);
  simt::atomic_add(sum, float(x[i] % 7));
  simt::atomic_max(&max_min[0], int(x[i]) - 500);
  simt::atomic_min(&max_min[1], int(x[i]) - 500);
  simt::atomic_add(count, 1ull);
  unsigned old = *cas_count, seen;  // a CAS loop increment
  while ((seen = simt::atomic_cas(cas_count, old, old + 1)) != old) old = seen;
  previous[i] = simt::atomic_exch(slot, i);
}

// Each thread appends its id to `order` twice, before and after a barrier.
SIMT_GLOBAL void append_order(unsigned* counter, unsigned* order) {
  const unsigned t = simt::linear_thread_idx();
  order[simt::atomic_add(counter, 1u)] = t;
  simt::sync_threads();
  order[simt::atomic_add(counter, 1u)] = t;
}

// Shared-memory handoff to the neighbour; the barrier is what the planted bug removes.
template <bool kBarrier>
SIMT_GLOBAL void neighbour(const float* x, float* y) {
  SIMT_SHARED(float, s, [64]);
  const unsigned t = simt::thread_idx().x;
  s[t] = x[t];
  if (kBarrier) simt::sync_threads();
  y[t] = s[(t + 1) % 64];
}

// Two warps stream 4 tiles through one shared buffer, each lane reading 8 values of the other
// warp's half, every read followed by a warp shuffle. Without the barrier at the top of the loop
// a warp that runs ahead overwrites the tile the other warp is still reading; if warps advanced
// one collective per round in lockstep, every read would come before the other warp's writes.
template <bool kTopBarrier>
SIMT_GLOBAL void streamed_tiles(const float* x, float* y) {
  SIMT_SHARED(float, tile, [64]);
  const unsigned t = simt::thread_idx().x;
  float acc = 0;
  for (unsigned step = 0; step < 4; ++step) {
    if (kTopBarrier) simt::sync_threads();
    tile[t] = x[step * 64 + t];
    simt::sync_threads();
    for (unsigned k = 0; k < 8; ++k) {
      acc += tile[(t + 32 + k) % 64];
      acc = simt::shfl_xor(0xffffffffu, acc, 0);
    }
  }
  y[t] = acc;
}

SIMT_GLOBAL void divergent_barrier() {
  if (simt::block_idx().x == 1 && simt::thread_idx().x < 10) return;
  simt::sync_threads();
}

SIMT_GLOBAL void throwing(int* out) {
  if (simt::block_idx().x == 2 && simt::thread_idx().x == 5) throw std::runtime_error("boom");
  simt::sync_threads();
  out[simt::block_idx().x * simt::block_dim().x + simt::thread_idx().x] = 1;
}

SIMT_GLOBAL void warp_deadlock(int* out) {
  if (simt::lane_id() >= 16) return;
  out[simt::lane_id()] = simt::shfl(0xffffffffu, int(simt::lane_id()), 0);
}

SIMT_GLOBAL void warp_mismatch(unsigned* out) {
  const unsigned lane = simt::lane_id();
  out[lane] = lane % 2 ? simt::ballot(0xffffffffu, true) : simt::shfl(0xffffffffu, lane, 0);
}

SIMT_GLOBAL void bad_width(int* out) {
  out[simt::lane_id()] = simt::shfl(0xffffffffu, 1, 0, 3);
}

SIMT_GLOBAL void mask_without_self(int* out) {
  out[simt::lane_id()] = simt::shfl(0xfffffffeu, 1, 0);
}

// A deep stack: kernels keep per-thread arrays.
SIMT_GLOBAL void big_locals(float* out) {
  float local[8192];
  const unsigned t = simt::thread_idx().x;
  for (unsigned i = 0; i < 8192; ++i) local[i] = float(i % 13 + t);
  simt::sync_threads();
  float s = 0;
  for (unsigned i = 0; i < 8192; i += 97) s += local[i];
  out[t] = s;
}

// Every shuffle and vote of one lane, for a host check. `value` = 1000 * warp + 3 * lane + 1.
constexpr unsigned kShuffleFields = 16;

SIMT_GLOBAL void shuffles(int* out) {
  const unsigned lane = simt::lane_id(), warp = simt::warp_id();
  const int v = int(1000 * warp + 3 * lane + 1);
  const unsigned full = 0xffffffffu;
  int* o = out + simt::linear_thread_idx() * kShuffleFields;
  o[0] = simt::shfl(full, v, int(lane * 7 + 3) % 32);
  o[1] = simt::shfl_xor(full, v, 5);
  o[2] = simt::shfl_down(full, v, 3u);
  o[3] = simt::shfl_up(full, v, 3u);
  o[4] = simt::shfl(full, v, 3, 8);
  o[5] = simt::shfl_xor(full, v, 1, 8);
  o[6] = simt::shfl_down(full, v, 2u, 8);
  o[7] = simt::shfl_up(full, v, 2u, 8);
  o[8] = int(simt::ballot(full, v % 3 == 0));
  o[9] = simt::any(full, lane == 5);
  o[10] = simt::all(full, lane < 40);
  o[11] = simt::all(full, lane < 20);
  // Two half-warp groups at once, each with its own mask.
  const unsigned half = lane < 16 ? 0x0000ffffu : 0xffff0000u;
  o[12] = simt::shfl(half, v, 15 - int(lane % 16), 16);
  o[13] = int(simt::ballot(half, lane % 4 == 0));
  // A warp sum by shfl_xor butterfly, in double.
  if (simt::block_dim().x - 32 * warp >= 32) {  // full warps only: other lanes are undefined
    double s = v;
    for (int m = 16; m > 0; m /= 2) s += simt::shfl_xor(full, s, m);
    o[14] = int(s);
  }
  simt::sync_warp();
  o[15] = simt::shfl(full, v, -1);  // lane 31 of the segment (index modulo width)
}

// mma.m16n8k16: fragments built from the PTX ISA's "Matrix Fragments for mma.m16n8k16 with
// floating point type" formulas (groupID = lane >> 2, threadID_in_group = lane % 4), element by
// element: A row-major 16x16, B row-major 16x8 (K x N), C and D row-major 16x8.
SIMT_GLOBAL void mma_from_registers(const float* A, const float* B, const float* C, float* D,
                                    bool alias) {
  const unsigned lane = simt::lane_id(), group = lane >> 2, tig = lane % 4;
  float a_el[8], b_el[4];
  for (unsigned i = 0; i < 8; ++i) {
    const unsigned row = (i < 2 || (i >= 4 && i < 6)) ? group : group + 8;
    const unsigned col = tig * 2 + (i & 1) + (i >= 4 ? 8 : 0);
    a_el[i] = A[row * 16 + col];
  }
  for (unsigned i = 0; i < 4; ++i) {
    const unsigned row = tig * 2 + (i & 1) + (i >= 2 ? 8 : 0), col = group;
    b_el[i] = B[row * 8 + col];
  }
  float c[4], d[4];
  for (unsigned i = 0; i < 4; ++i) c[i] = C[(i < 2 ? group : group + 8) * 8 + tig * 2 + (i & 1)];
  uint32_t a[4], b[2];
  for (unsigned r = 0; r < 4; ++r) a[r] = simt::pack_bf16x2(a_el[2 * r], a_el[2 * r + 1]);
  for (unsigned r = 0; r < 2; ++r) b[r] = simt::pack_bf16x2(b_el[2 * r], b_el[2 * r + 1]);
  if (alias) {
    simt::mma_m16n8k16_bf16(c, a, b, c);
    std::copy(c, c + 4, d);
  } else {
    simt::mma_m16n8k16_bf16(d, a, b, c);
  }
  for (unsigned i = 0; i < 4; ++i) D[(i < 2 ? group : group + 8) * 8 + tig * 2 + (i & 1)] = d[i];
}

// The same product with A and B loaded from shared memory by ldmatrix. `transposed` = false:
// A row-major, ldmatrix_x4; B row-major K x N, ldmatrix_x2_trans. `transposed` = true: A stored
// K x M, ldmatrix_x4_trans; B stored N x K, ldmatrix_x2.
SIMT_GLOBAL void mma_from_ldmatrix(const float* A, const float* B, const float* C, float* D,
                                   bool transposed) {
  SIMT_SHARED_ALIGNED(uint16_t, as, [16][16], 16);
  SIMT_SHARED_ALIGNED(uint16_t, bs, [16][16], 16);
  const unsigned lane = simt::lane_id(), group = lane >> 2, tig = lane % 4;
  for (unsigned e = lane; e < 256; e += 32) {
    const unsigned m = e / 16, k = e % 16;
    (transposed ? as[k][m] : as[m][k]) = simt::float_to_bf16(A[e]);
  }
  for (unsigned e = lane; e < 128; e += 32) {
    const unsigned k = e / 8, n = e % 8;
    if (transposed) bs[n][k] = simt::float_to_bf16(B[e]);
    else bs[k][n] = simt::float_to_bf16(B[e]);
  }
  simt::sync_threads();
  uint32_t a[4], b[2];
  const unsigned matrix = lane / 8, row = lane % 8;
  if (!transposed) {
    // a[j] covers rows 8 (j % 2) .. +7, columns 8 (j / 2) .. +7 of A.
    simt::ldmatrix_x4(a, &as[row + 8 * (matrix % 2)][8 * (matrix / 2)]);
    // b[j] covers k = 8 j .. 8 j + 7; lanes 16-31 are ignored by .x2.
    simt::ldmatrix_x2_trans(b, &bs[lane % 16][0]);
  } else {
    simt::ldmatrix_x4_trans(a, &as[8 * (matrix / 2) + row][8 * (matrix % 2)]);
    simt::ldmatrix_x2(b, &bs[row][8 * (matrix % 2)]);
  }
  float c[4], d[4];
  for (unsigned i = 0; i < 4; ++i) c[i] = C[(i < 2 ? group : group + 8) * 8 + tig * 2 + (i & 1)];
  simt::mma_m16n8k16_bf16(d, a, b, c);
  for (unsigned i = 0; i < 4; ++i) D[(i < 2 ? group : group + 8) * 8 + tig * 2 + (i & 1)] = d[i];
}

SIMT_GLOBAL void ldmatrix_unaligned(float* out) {
  SIMT_SHARED(uint16_t, pad, [1]);
  SIMT_SHARED(uint16_t, tile, [8][8]);  // aligned to 2 only
  pad[0] = 0;
  uint32_t r[2];
  simt::ldmatrix_x2(r, &tile[simt::lane_id() % 8][0]);
  out[0] = float(r[0]);
}

// --- host helpers -----------------------------------------------------------------------------

simt::EmulatorOptions with_seed(uint64_t seed, unsigned workers = 1) {
  simt::EmulatorOptions o;
  o.seed = seed;
  o.workers = workers;
  return o;
}

std::string thrown_message(const std::function<void()>& f) {
  try {
    f();
  } catch (const cotan::Error& e) {
    return e.what();
  }
  return "no cotan::Error";
}

// Random values that bf16 represents exactly: 8 significant bits.
std::vector<float> bf16_values(size_t n, std::mt19937& rng) {
  std::uniform_int_distribution<int> mantissa(-255, 255), exponent(-6, 2);
  std::vector<float> v(n);
  for (float& x : v) x = std::ldexp(float(mantissa(rng)), exponent(rng) - 7);
  return v;
}

}  // namespace

TEST_CASE("thread, block, lane and warp indices over 3-D grids and blocks") {
  const Dim3 grid{2, 3, 2}, block{8, 4, 3};
  const unsigned threads = simt::volume(block), blocks = simt::volume(grid);
  std::vector<unsigned> out(size_t(threads) * blocks * kIndexFields, 12345);
  simt::launch(record_indices, grid, block, 0, out.data());
  unsigned checked = 0;
  for (unsigned bz = 0; bz < 2; ++bz)
    for (unsigned by = 0; by < 3; ++by)
      for (unsigned bx = 0; bx < 2; ++bx)
        for (unsigned tz = 0; tz < 3; ++tz)
          for (unsigned ty = 0; ty < 4; ++ty)
            for (unsigned tx = 0; tx < 8; ++tx) {
              const unsigned b = bx + 2 * (by + 3 * bz), t = tx + 8 * (ty + 4 * tz);
              const unsigned* o = &out[(b * threads + t) * kIndexFields];
              const unsigned expected[kIndexFields] = {tx, ty, tz, bx, by, bz, t % 32, t / 32,
                                                       843, 232};
              for (unsigned f = 0; f < kIndexFields; ++f) {
                CHECK(o[f] == expected[f]);
                ++checked;
              }
            }
  CHECK(checked == out.size());
}

TEST_CASE("a shared-memory block reduction equals the host sum") {
  const unsigned n = 1700, blocks = (n + kReduceThreads - 1) / kReduceThreads;
  std::vector<float> x(n);
  for (unsigned i = 0; i < n; ++i) x[i] = float(int(i * 37 % 101) - 50);
  for (uint64_t seed : {0, 1, 2}) {
    simt::ScopedEmulatorOptions options(with_seed(seed));
    std::vector<float> partial(blocks, -1.0f);
    simt::launch(block_sum, Dim3{blocks}, Dim3{kReduceThreads}, 0, x.data(), n, partial.data());
    for (unsigned b = 0; b < blocks; ++b) {
      double expected = 0;
      for (unsigned i = b * kReduceThreads; i < std::min(n, (b + 1) * kReduceThreads); ++i)
        expected += x[i];
      CHECK(partial[b] == expected);
    }
  }
}

TEST_CASE("dynamic shared memory") {
  const unsigned threads = 96, blocks = 5;
  std::vector<double> x(threads * blocks), y(x.size(), -1);
  std::iota(x.begin(), x.end(), 0.5);
  simt::launch(reverse_blocks<double>, Dim3{blocks}, Dim3{threads}, threads * sizeof(double),
               x.data(), y.data());
  for (unsigned b = 0; b < blocks; ++b)
    for (unsigned t = 0; t < threads; ++t)
      CHECK(y[b * threads + t] == x[b * threads + threads - 1 - t]);

  std::vector<int> xi(64 * 3), yi(xi.size());
  std::iota(xi.begin(), xi.end(), -7);
  simt::launch(reverse_blocks<int>, Dim3{3}, Dim3{64}, 64 * sizeof(int), xi.data(), yi.data());
  for (unsigned i = 0; i < xi.size(); ++i) CHECK(yi[i] == xi[i / 64 * 64 + 63 - i % 64]);
}

TEST_CASE("a static shared declaration names one array per block") {
  std::vector<int> out(4, -1);
  simt::launch(shared_per_declaration, Dim3{2}, Dim3{40}, 0, out.data());
  CHECK(out == std::vector<int>{40, 80, 120, 240});
}

TEST_CASE("atomics across blocks match the host") {
  const unsigned n = 5000;
  std::vector<unsigned> x(n);
  std::mt19937 rng(7);
  for (unsigned& v : x) v = rng() % 1000;
  std::vector<unsigned> expected_hist(16, 0);
  double expected_sum = 0;
  for (unsigned v : x) {
    ++expected_hist[v % 16];
    expected_sum += v % 7;
  }
  const int expected_max = int(*std::max_element(x.begin(), x.end())) - 500;
  const int expected_min = int(*std::min_element(x.begin(), x.end())) - 500;
  for (unsigned workers : {1u, 2u}) {
    CAPTURE(workers);
    simt::ScopedEmulatorOptions options(with_seed(3, workers));
    std::vector<unsigned> hist(16, 0);
    float sum = 0;
    int max_min[2] = {-1000000, 1000000};
    unsigned long long count = 0;
    unsigned cas_count = 0, slot = n;
    std::vector<unsigned> previous(n);
    simt::launch(atomics, Dim3{(n + 127) / 128}, Dim3{128}, 0, x.data(), n, hist.data(), &sum,
                 max_min, &count, &cas_count, &slot, previous.data());
    CHECK(hist == expected_hist);
    CHECK(sum == expected_sum);  // small integers: exact in any order
    CHECK(max_min[0] == expected_max);
    CHECK(max_min[1] == expected_min);
    CHECK(count == n);
    CHECK(cas_count == n);
    // The exchanges form one chain: the values seen, plus the last one left, are 0..n.
    previous.push_back(slot);
    std::sort(previous.begin(), previous.end());
    for (unsigned i = 0; i <= n; ++i) REQUIRE(previous[i] == i);
  }
}

TEST_CASE("the schedule: same seed, same order; other seeds, other orders") {
  const unsigned threads = 128;
  auto run = [&](const simt::EmulatorOptions& o) {
    simt::ScopedEmulatorOptions options(o);
    unsigned counter = 0;
    std::vector<unsigned> order(2 * threads);
    simt::launch(append_order, Dim3{1}, Dim3{threads}, 0, &counter, order.data());
    REQUIRE(counter == 2 * threads);
    // Each phase holds every thread once: the barrier separates them.
    for (unsigned phase = 0; phase < 2; ++phase) {
      std::vector<unsigned> ids(order.begin() + phase * threads,
                                order.begin() + (phase + 1) * threads);
      std::sort(ids.begin(), ids.end());
      for (unsigned i = 0; i < threads; ++i) REQUIRE(ids[i] == i);
    }
    return order;
  };
  CHECK(run(with_seed(11)) == run(with_seed(11)));
  CHECK(run(with_seed(11)) != run(with_seed(12)));
  std::vector<unsigned> linear(2 * threads);
  for (unsigned i = 0; i < 2 * threads; ++i) linear[i] = i % threads;
  simt::EmulatorOptions in_order;
  in_order.shuffle = false;
  CHECK(run(in_order) == linear);
  CHECK(run(with_seed(11)) != linear);
}

TEST_CASE("a missing barrier is caught by some seed; with the barrier every seed is right") {
  std::vector<float> x(64), expected(64);
  for (unsigned i = 0; i < 64; ++i) x[i] = float(i) * 0.5f + 1.0f;
  for (unsigned i = 0; i < 64; ++i) expected[i] = x[(i + 1) % 64];
  bool caught = false;
  for (uint64_t seed = 0; seed < 4; ++seed) {
    simt::ScopedEmulatorOptions options(with_seed(seed));
    std::vector<float> good(64, 0.0f), bad(64, 0.0f);
    simt::launch(neighbour<true>, Dim3{1}, Dim3{64}, 0, x.data(), good.data());
    CHECK(good == expected);
    simt::launch(neighbour<false>, Dim3{1}, Dim3{64}, 0, x.data(), bad.data());
    for (unsigned i = 0; i < 64; ++i) caught |= !(bad[i] == expected[i]);  // NaN poison counts
  }
  CHECK_MESSAGE(caught, "the kernel without sync_threads gave the right result for every seed");
}

TEST_CASE("warps drift apart: a missing barrier at the top of a loop is caught by some seed") {
  std::vector<float> x(256), expected(64, 0.0f);
  for (unsigned i = 0; i < 256; ++i) x[i] = float(i % 17) + 0.25f * float(i / 17);
  for (unsigned t = 0; t < 64; ++t)
    for (unsigned step = 0; step < 4; ++step)
      for (unsigned k = 0; k < 8; ++k) expected[t] += x[step * 64 + (t + 32 + k) % 64];
  bool caught = false;
  for (uint64_t seed = 0; seed < 8; ++seed) {
    simt::ScopedEmulatorOptions options(with_seed(seed));
    std::vector<float> good(64), bad(64);
    simt::launch(streamed_tiles<true>, Dim3{1}, Dim3{64}, 0, x.data(), good.data());
    CHECK(good == expected);  // the same additions in the same order: exact
    simt::launch(streamed_tiles<false>, Dim3{1}, Dim3{64}, 0, x.data(), bad.data());
    caught |= bad != expected;
  }
  CHECK_MESSAGE(caught, "the loop without its top barrier gave the right result for every seed");
}

TEST_CASE("shuffles, votes and partial warps against host expectations") {
  // 80 threads: warps 0 and 1 full, warp 2 has 16 lanes.
  const unsigned threads = 80;
  std::vector<int> out(threads * kShuffleFields, -7);
  simt::launch(shuffles, Dim3{1}, Dim3{threads}, 0, out.data());
  for (unsigned t = 0; t < threads; ++t) {
    CAPTURE(t);
    const unsigned warp = t / 32, lane = t % 32, lanes = std::min(32u, threads - 32 * warp);
    auto value = [&](unsigned l) { return int(1000 * warp + 3 * l + 1); };
    auto present = [&](unsigned l) { return l < lanes; };
    const int* o = &out[t * kShuffleFields];
    // Sources outside the warp's lanes give undefined values: checked only where defined.
    auto check_from = [&](int got, unsigned src) {
      if (present(src)) CHECK(got == value(src));
    };
    check_from(o[0], (lane * 7 + 3) % 32);
    check_from(o[1], lane ^ 5);
    check_from(o[2], lane + 3 < 32 ? lane + 3 : lane);
    check_from(o[3], lane >= 3 ? lane - 3 : lane);
    const unsigned base8 = lane / 8 * 8;
    check_from(o[4], base8 + 3);
    check_from(o[5], lane ^ 1);
    check_from(o[6], lane + 2 < base8 + 8 ? lane + 2 : lane);
    check_from(o[7], lane >= base8 + 2 ? lane - 2 : lane);
    unsigned ballot = 0;
    for (unsigned l = 0; l < lanes; ++l)
      if (value(l) % 3 == 0) ballot |= 1u << l;
    CHECK(unsigned(o[8]) == ballot);
    CHECK(o[9] == (lanes > 5));
    CHECK(o[10] == 1);
    CHECK(o[11] == (lanes <= 20));
    const unsigned half_base = lane / 16 * 16;
    check_from(o[12], half_base + 15 - lane % 16);
    unsigned half_ballot = 0;
    for (unsigned l = half_base; l < half_base + 16; ++l)
      if (present(l) && l % 4 == 0) half_ballot |= 1u << l;
    CHECK(unsigned(o[13]) == half_ballot);
    if (lanes == 32) {
      int sum = 0;
      for (unsigned l = 0; l < 32; ++l) sum += value(l);
      CHECK(o[14] == sum);
    }
    check_from(o[15], 31);
  }
}

TEST_CASE("a shuffle from a lane outside the mask gives the poison pattern") {
  // Warp 2 of an 80-thread block has lanes 0-15: shfl_down by 8 from lanes 8-15 reads lanes
  // 16-23, which do not exist.
  std::vector<int> out(80 * kShuffleFields, 0);
  simt::launch(shuffles, Dim3{1}, Dim3{80}, 0, out.data());
  for (unsigned lane = 13; lane < 16; ++lane)  // o[2] = shfl_down(v, 3): lanes 13-15 read 16-18
    CHECK(out[(64 + lane) * kShuffleFields + 2] == -1);
}

TEST_CASE("mma.m16n8k16 bf16 from register fragments equals a host matmul") {
  std::mt19937 rng(2024);
  for (int trial = 0; trial < 3; ++trial) {
    const std::vector<float> A = bf16_values(256, rng), B = bf16_values(128, rng),
                             C = bf16_values(128, rng);
    for (float v : A) REQUIRE(simt::bf16_lo(simt::pack_bf16x2(v, 0)) == v);
    std::vector<double> expected(128);
    for (unsigned m = 0; m < 16; ++m)
      for (unsigned n = 0; n < 8; ++n) {
        double s = C[m * 8 + n];
        for (unsigned k = 0; k < 16; ++k) s += double(A[m * 16 + k]) * double(B[k * 8 + n]);
        expected[m * 8 + n] = s;
      }
    auto check_d = [&](const std::vector<float>& D) {
      for (unsigned i = 0; i < 128; ++i) {
        CAPTURE(i);
        CHECK(std::abs(D[i] - expected[i]) <= 1e-5 * std::max(1.0, std::abs(expected[i])));
      }
    };
    for (bool alias : {false, true}) {
      std::vector<float> D(128, -1.0f);
      simt::launch(mma_from_registers, Dim3{1}, Dim3{32}, 0, A.data(), B.data(), C.data(),
                   D.data(), alias);
      check_d(D);
    }
    for (bool transposed : {false, true}) {
      CAPTURE(transposed);
      std::vector<float> D(128, -1.0f);
      simt::launch(mma_from_ldmatrix, Dim3{1}, Dim3{32}, 0, A.data(), B.data(), C.data(),
                   D.data(), transposed);
      check_d(D);
    }
  }
}

TEST_CASE("bf16 packing rounds to nearest even") {
  CHECK(simt::float_to_bf16(1.0f) == 0x3f80);
  CHECK(simt::float_to_bf16(simt::bits_float(0x3f808000u)) == 0x3f80);  // tie, to even
  CHECK(simt::float_to_bf16(simt::bits_float(0x3f818000u)) == 0x3f82);  // tie, to even (up)
  CHECK(simt::float_to_bf16(simt::bits_float(0x3f808001u)) == 0x3f81);
  CHECK(std::isnan(simt::bf16_to_float(simt::float_to_bf16(std::nanf("")))));
  const uint32_t r = simt::pack_bf16x2(1.5f, -2.0f);
  CHECK(simt::bf16_lo(r) == 1.5f);
  CHECK(simt::bf16_hi(r) == -2.0f);
}

TEST_CASE("errors: barrier divergence, warp deadlock and mismatch, kernel exceptions") {
  CHECK(thrown_message([] { simt::launch(divergent_barrier, Dim3{3}, Dim3{32}, 0); }) ==
        "[simt] barrier divergence in block (1,0,0): 22 threads wait at sync_threads, 10 exited");

  std::vector<int> out(32 * 4, 0);
  CHECK(thrown_message([&] { simt::launch(throwing, Dim3{4}, Dim3{32}, 0, out.data()); }) ==
        "[simt] kernel threw in block (2,0,0), thread (5,0,0): boom");

  const std::string deadlock =
      thrown_message([&] { simt::launch(warp_deadlock, Dim3{1}, Dim3{32}, 0, out.data()); });
  CHECK(deadlock ==
        "[simt] warp collective deadlock in block (0,0,0), warp 0: 16 lanes wait at shfl with "
        "mask 0xffffffff, 16 lanes of the mask never arrive (16 exited, 0 wait at "
        "sync_threads, 0 wait at another collective)");

  std::vector<unsigned> uout(32);
  const std::string mismatch =
      thrown_message([&] { simt::launch(warp_mismatch, Dim3{1}, Dim3{32}, 0, uout.data()); });
  CHECK(mismatch.find("[simt] warp collective mismatch: ") == 0);
  CHECK(mismatch.find("block (0,0,0)") != std::string::npos);

  CHECK(thrown_message([&] { simt::launch(bad_width, Dim3{1}, Dim3{32}, 0, out.data()); })
            .find("width 3 is not a power of two from 1 to 32") != std::string::npos);
  CHECK(thrown_message([&] { simt::launch(mask_without_self, Dim3{1}, Dim3{32}, 0, out.data()); })
            .find("(warp 0, lane 0): the mask 0xfffffffe does not name the calling lane") !=
        std::string::npos);

  std::vector<float> f(1);
  const std::string unaligned =
      thrown_message([&] { simt::launch(ldmatrix_unaligned, Dim3{1}, Dim3{32}, 0, f.data()); });
  CHECK(unaligned.find("not 16 bytes of shared memory aligned to 16") != std::string::npos);

  CHECK(thrown_message([&] { simt::launch(throwing, Dim3{1}, Dim3{1025}, 0, out.data()); })
            .find("[simt] invalid block (1025,1,1)") == 0);
  CHECK(thrown_message([&] { simt::launch(throwing, Dim3{1}, Dim3{0}, 0, out.data()); })
            .find("[simt] invalid block (0,1,1)") == 0);
  CHECK(thrown_message([] { simt::sync_threads(); }) ==
        "[simt] simt::sync_threads called outside a kernel");

  // After all of these, the emulator still runs kernels.
  const unsigned n = 300;
  std::vector<float> x(n, 1.0f), partial(2);
  simt::launch(block_sum, Dim3{2}, Dim3{kReduceThreads}, 0, x.data(), n, partial.data());
  CHECK(partial[0] == 256.0f);
  CHECK(partial[1] == 44.0f);
}

TEST_CASE("the current stream is one per host thread, kept across scopes") {
  int a = 0, b = 0;
  CHECK(simt::current_stream() == nullptr);
  {
    simt::ScopedStream outer(&a);
    CHECK(simt::current_stream() == &a);
    {
      simt::ScopedStream inner(&b);
      CHECK(simt::current_stream() == &b);
    }
    CHECK(simt::current_stream() == &a);
  }
  CHECK(simt::current_stream() == nullptr);
}

TEST_CASE("threads have deep stacks") {
  std::vector<float> out(64);
  simt::launch(big_locals, Dim3{1}, Dim3{64}, 0, out.data());
  for (unsigned t = 0; t < 64; ++t) {
    float s = 0;
    for (unsigned i = 0; i < 8192; i += 97) s += float(i % 13 + t);
    CHECK(out[t] == s);
  }
}
