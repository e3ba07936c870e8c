// Element types. bf16 is stored as the upper 16 bits of an f32 and converted with
// round-to-nearest-even; NaN stays NaN (quiet).
#pragma once

#include <cstdint>
#include <cstring>
#include <string_view>

#include "tensor/error.hpp"

namespace cotan {

enum class DType : uint8_t { f64, f32, bf16, i32, i64, boolean };

struct bf16 {
  uint16_t bits = 0;

  bf16() = default;
  explicit bf16(float value) : bits(round_from(value)) {}
  explicit operator float() const {
    uint32_t wide = uint32_t(bits) << 16;
    float out;
    std::memcpy(&out, &wide, sizeof out);
    return out;
  }

  static uint16_t round_from(float value) {
    uint32_t u;
    std::memcpy(&u, &value, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40);  // quiet NaN
    uint32_t lsb = (u >> 16) & 1u;
    return uint16_t((u + 0x7fffu + lsb) >> 16);
  }
};

constexpr size_t dtype_size(DType t) {
  switch (t) {
    case DType::f64: return 8;
    case DType::f32: return 4;
    case DType::bf16: return 2;
    case DType::i32: return 4;
    case DType::i64: return 8;
    case DType::boolean: return 1;
  }
  return 0;
}

constexpr std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::f64: return "f64";
    case DType::f32: return "f32";
    case DType::bf16: return "bf16";
    case DType::i32: return "i32";
    case DType::i64: return "i64";
    case DType::boolean: return "bool";
  }
  return "?";
}

inline std::ostream& operator<<(std::ostream& out, DType t) { return out << dtype_name(t); }

constexpr bool is_floating(DType t) { return t == DType::f64 || t == DType::f32 || t == DType::bf16; }
constexpr bool is_integral(DType t) { return t == DType::i32 || t == DType::i64; }

// Parses "f32", "float32", "bf16", ...; throws naming the text otherwise.
DType parse_dtype(std::string_view name);

template <class T> struct dtype_of;
template <> struct dtype_of<double> { static constexpr DType value = DType::f64; };
template <> struct dtype_of<float> { static constexpr DType value = DType::f32; };
template <> struct dtype_of<bf16> { static constexpr DType value = DType::bf16; };
template <> struct dtype_of<int32_t> { static constexpr DType value = DType::i32; };
template <> struct dtype_of<int64_t> { static constexpr DType value = DType::i64; };
template <> struct dtype_of<bool> { static constexpr DType value = DType::boolean; };
template <class T> constexpr DType dtype_v = dtype_of<T>::value;

// Calls f(T{}) with T the C++ type of `t`: dispatch_dtype(t, [&](auto tag) { using T = decltype(tag); ... }).
template <class F>
decltype(auto) dispatch_dtype(DType t, F&& f) {
  switch (t) {
    case DType::f64: return f(double{});
    case DType::f32: return f(float{});
    case DType::bf16: return f(bf16{});
    case DType::i32: return f(int32_t{});
    case DType::i64: return f(int64_t{});
    case DType::boolean: return f(bool{});
  }
  fail("dtype", "invalid dtype tag ", int(t));
}

// The type arithmetic is done in: bf16 computes in f32.
template <class T> struct compute_type { using type = T; };
template <> struct compute_type<bf16> { using type = float; };
template <class T> using compute_t = typename compute_type<T>::type;

// dispatch_dtype for the floating dtypes (f64, f32, bf16); any other is refused in op's name:
// "[op] expects a floating dtype, got i32".
template <class F>
void dispatch_floating(std::string_view op, DType t, F&& f) {
  dispatch_dtype(t, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point_v<compute_t<T>>) f(tag);
    else fail(op, "expects a floating dtype, got ", t);
  });
}

template <class To, class From>
inline To convert(From v) {
  if constexpr (std::is_same_v<To, From>) return v;
  else if constexpr (std::is_same_v<To, bf16>) return bf16(float(v));
  else if constexpr (std::is_same_v<From, bf16>) return To(float(v));
  else return To(v);
}

}  // namespace cotan
