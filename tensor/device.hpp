// Where a tensor lives. "cpu", "cuda", "cuda:1".
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>

namespace cotan {

enum class DeviceKind : uint8_t { cpu, cuda };

struct Device {
  DeviceKind kind = DeviceKind::cpu;
  int index = 0;

  static constexpr Device cpu() { return {DeviceKind::cpu, 0}; }
  static constexpr Device cuda(int index = 0) { return {DeviceKind::cuda, index}; }
  bool is_cpu() const { return kind == DeviceKind::cpu; }
  bool is_cuda() const { return kind == DeviceKind::cuda; }
  bool operator==(const Device&) const = default;
};

std::string to_string(Device device);
// Parses "cpu", "cuda", "cuda:N"; throws "[device] unknown device 'x'".
Device parse_device(std::string_view text);

inline std::ostream& operator<<(std::ostream& out, Device d) { return out << to_string(d); }

}  // namespace cotan
