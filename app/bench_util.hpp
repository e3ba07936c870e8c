// What the `cotan bench` commands share: timing, medians and the bits of JSON they print.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "tensor/op_table.hpp"

namespace cotan::app {

// Wall-clock seconds of one call of run().
template <class F>
double seconds_of(F&& run) {
  auto start = std::chrono::steady_clock::now();
  run();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// seconds_of for work queued on `device`: waits for the queue before starting the clock and
// again before stopping it (a no-op on the CPU).
template <class F>
double seconds_on(Device device, F&& run) {
  Backend& b = backend(device);
  b.synchronize();
  return seconds_of([&] {
    run();
    b.synchronize();
  });
}

// The median (the mean of the two middle values for an even count).
inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// A JSON number with 6 significant digits.
inline std::string json_number(double v) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.6g", v);
  return buffer;
}

// The inside of a JSON string: quotes and backslashes escaped, control characters dropped.
inline std::string json_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) >= 0x20) out += c;
  }
  return out;
}

}  // namespace cotan::app
