// FNV-1a (64-bit): a fast, stable hash of bytes, for seeds and cache keys (not for security).
#pragma once

#include <cstdint>
#include <string_view>

namespace cotan {

inline constexpr uint64_t kFnv1aOffset = 0xcbf29ce484222325ull;
inline constexpr uint64_t kFnv1aPrime = 0x100000001b3ull;

// `h` continues an earlier hash: fnv1a(b, fnv1a(a)) == fnv1a(a + b).
constexpr uint64_t fnv1a(std::string_view bytes, uint64_t h = kFnv1aOffset) {
  for (char c : bytes) h = (h ^ uint8_t(c)) * kFnv1aPrime;
  return h;
}

}  // namespace cotan
