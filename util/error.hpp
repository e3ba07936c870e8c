// Errors: every failure is a cotan::Error whose message names the op and what was wrong,
// e.g. "[matmul] shapes [4, 8] and [9, 2] do not match". Library code never exits.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>

namespace cotan {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Concatenates anything with operator<< into one string.
template <class... Args>
std::string cat(const Args&... args) {
  std::ostringstream out;
  (out << ... << args);
  return out.str();
}

// Throws "[op] message...".
template <class... Args>
[[noreturn]] void fail(std::string_view op, const Args&... args) {
  throw Error(cat("[", op, "] ", args...));
}

template <class... Args>
void check(bool condition, std::string_view op, const Args&... args) {
  if (!condition) fail(op, args...);
}

}  // namespace cotan
