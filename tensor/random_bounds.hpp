// Where a uniform draw U[a, b) must be clamped after rounding to its dtype: shared by every
// backend so that the CPU and CUDA draws agree bit for bit.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "tensor/dtype.hpp"

namespace cotan {

// The largest value of T below `bound`: where a uniform draw lands after rounding it to T would
// reach the excluded upper bound.
template <class T>
T largest_below(double bound) {
  if constexpr (std::is_same_v<T, double>) {
    return std::nextafter(bound, -std::numeric_limits<double>::infinity());
  } else if constexpr (std::is_same_v<T, float>) {
    float b = float(bound);
    return double(b) < bound ? b : std::nextafter(b, -std::numeric_limits<float>::infinity());
  } else {
    static_assert(std::is_same_v<T, bf16>);
    bf16 b{float(bound)};
    if (double(float(b)) < bound) return b;
    float f = float(b);
    if (f > 0) b.bits = uint16_t(b.bits - 1);
    else if (f == 0) b.bits = 0x8001;  // the smallest negative subnormal
    else b.bits = uint16_t(b.bits + 1);
    return b;
  }
}

}  // namespace cotan
