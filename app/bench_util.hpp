// What the `cotan bench` commands share: timing, medians and the bits of JSON they print.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <unistd.h>

#include "tensor/cpu/gemm_info.hpp"
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

// A directory /tmp/<prefix>-<pid>, removed with everything in it when the object goes: where a
// bench hands tensors to the PyTorch reference.
struct TempDir {
  std::filesystem::path path;
  explicit TempDir(const std::string& prefix) {
    path = std::filesystem::temp_directory_path() / (prefix + "-" + std::to_string(getpid()));
    std::filesystem::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
};

// The CPU model as /proc/cpuinfo names it ("unknown" where it does not).
inline std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("model name", 0) != 0) continue;
    const size_t colon = line.find(':');
    if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
  }
  return "unknown";
}

// The 1, 5 and 15 minute load averages (zeros where getloadavg fails).
struct LoadAverage {
  double one = 0, five = 0, fifteen = 0;
};
inline LoadAverage load_average() {
  double v[3] = {0, 0, 0};
  if (getloadavg(v, 3) != 3) return {};
  return {v[0], v[1], v[2]};
}

// The CPU GEMM's kernel and blocking (tensor/cpu/gemm_info.hpp) as a JSON object.
inline std::string gemm_json() {
  const cpu::GemmInfo g = cpu::gemm_info();
  return "{\"kernel\":\"" + g.kernel + "\",\"mr\":" + std::to_string(g.mr) + ",\"nr_f32\":" + std::to_string(g.nr_f32) +
         ",\"kc_f32\":" + std::to_string(g.kc_f32) + ",\"mc_f32\":" + std::to_string(g.mc_f32) +
         ",\"bf16\":\"" + g.bf16 + "\",\"bf16_kernels\":\"" + g.bf16_kernels +
         "\",\"l2_bytes\":" + std::to_string(g.l2_bytes) + ",\"l2_source\":\"" + g.l2_source +
         "\",\"l3_bytes\":" + std::to_string(g.l3_bytes) + ",\"l3_source\":\"" + g.l3_source + "\"}";
}

// What every bench prints about the machine: `"host":{"cpu", "load_average": [1, 5, 15 min],
// "threads", "gemm"}` for its JSON, one line for its table. `threads` is cotan's (--threads);
// "gemm" is the CPU GEMM's kernel and blocking, which a number measured elsewhere depends on.
inline std::string host_json(int threads) {
  const LoadAverage load = load_average();
  return "\"host\":{\"cpu\":\"" + json_escape(cpu_model()) + "\",\"load_average\":[" + json_number(load.one) + "," +
         json_number(load.five) + "," + json_number(load.fifteen) + "],\"threads\":" + std::to_string(threads) +
         ",\"gemm\":" + gemm_json() + "}";
}
inline std::string host_line(int threads) {
  const LoadAverage load = load_average();
  char buffer[256];
  std::snprintf(buffer, sizeof buffer, "host: %s, cotan %d threads, load average %.2f %.2f %.2f", cpu_model().c_str(),
                threads, load.one, load.five, load.fifteen);
  return buffer;
}

}  // namespace cotan::app
