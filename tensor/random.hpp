// Counter-based random numbers: Philox4x32-10 (Salmon et al., SC'11). A draw of n numbers from
// a Generator at (seed, offset) depends only on (seed, offset, element index), so the CPU and
// CUDA backends produce the same numbers, whatever the thread count or launch shape.
//
// Layout of a draw of n elements starting at block `start` = gen.advance(blocks), key = seed:
//   uniform f32/bf16, bernoulli: element i uses word i % 4 of block start + i / 4 (uniform24);
//                                bernoulli is uniform24 < p.
//   uniform f64, randint:        element i uses words 2 (i % 2), 2 (i % 2) + 1 of block
//                                start + i / 2 (uniform53); randint is low + floor(u (high - low)).
//   normal:                      element i uses block start + i / 2 (Box-Muller: radius from the
//                                first uniform, angle from the second; even i takes the cosine,
//                                odd i the sine); f32/bf16 take words 0 and 1 as uniform24,
//                                f64 takes words (0,1) and (2,3) as uniform53. A uniform u is
//                                used as 1 - u inside the log, so log never sees 0.
// The generator advances by the number of blocks the draw touched.
#pragma once

#include <array>
#include <cstdint>

// Philox is also compiled into CUDA kernels: its functions are host and device functions there.
#include "tensor/host_device.hpp"

namespace cotan {

// The four words of one Philox block, as a plain array that device code can hold.
struct PhiloxWords {
  uint32_t w[4];
};

struct Philox {
  // One Philox4x32-10 block: 4 words from a 128-bit counter and a 64-bit key.
  static std::array<uint32_t, 4> block(uint64_t counter, uint64_t key, uint64_t stream = 0);
  // The same block, usable in CUDA kernels: block() returns exactly these words.
  COTAN_HOST_DEVICE static constexpr PhiloxWords words(uint64_t counter, uint64_t key, uint64_t stream = 0) {
    constexpr uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;   // Philox4x32 multipliers
    constexpr uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;  // key schedule increments
    constexpr int kRounds = 10;
    uint32_t c0 = uint32_t(counter), c1 = uint32_t(counter >> 32), c2 = uint32_t(stream), c3 = uint32_t(stream >> 32);
    uint32_t k0 = uint32_t(key), k1 = uint32_t(key >> 32);
    for (int round = 0; round < kRounds; ++round) {
      uint64_t p0 = uint64_t(kMul0) * c0, p1 = uint64_t(kMul1) * c2;
      uint32_t n0 = uint32_t(p1 >> 32) ^ c1 ^ k0, n1 = uint32_t(p1);
      uint32_t n2 = uint32_t(p0 >> 32) ^ c3 ^ k1, n3 = uint32_t(p0);
      c0 = n0, c1 = n1, c2 = n2, c3 = n3;
      k0 += kWeyl0, k1 += kWeyl1;
    }
    return {{c0, c1, c2, c3}};
  }
  // Maps a word to [0, 1) with 24 random bits (f32-exact) or 53 bits from two words (f64).
  COTAN_HOST_DEVICE static float uniform24(uint32_t word) { return float(word >> 8) * (1.0f / 16777216.0f); }
  COTAN_HOST_DEVICE static double uniform53(uint32_t hi, uint32_t lo) {
    return double((uint64_t(hi) << 21) ^ (lo >> 11)) * (1.0 / 9007199254740992.0);
  }
};

class Generator {
 public:
  explicit Generator(uint64_t seed = 0, uint64_t offset = 0) : seed_(seed), offset_(offset) {}
  uint64_t seed() const { return seed_; }
  uint64_t offset() const { return offset_; }
  // Reserves `blocks` Philox blocks and returns the first block's counter.
  uint64_t advance(uint64_t blocks) {
    uint64_t start = offset_;
    offset_ += blocks;
    return start;
  }
  bool operator==(const Generator&) const = default;

 private:
  uint64_t seed_;
  uint64_t offset_;
};

}  // namespace cotan
