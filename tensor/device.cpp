#include "tensor/device.hpp"

#include <charconv>

#include "tensor/error.hpp"

namespace cotan {

std::string to_string(Device device) {
  return device.is_cpu() ? "cpu" : "cuda:" + std::to_string(device.index);
}

Device parse_device(std::string_view text) {
  if (text == "cpu") return Device::cpu();
  if (text == "cuda") return Device::cuda(0);
  if (text.starts_with("cuda:")) {
    std::string_view digits = text.substr(5);
    int index = -1;
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
    if (ec == std::errc() && end == digits.data() + digits.size() && index >= 0) return Device::cuda(index);
  }
  fail("device", "unknown device '", text, "' (expected cpu, cuda or cuda:N)");
}

}  // namespace cotan
