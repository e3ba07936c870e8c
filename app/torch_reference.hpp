// The PyTorch reference of `cotan bench ... --torch`: bench/torch_reference.py in its `serve` mode,
// run as a child process with Debian's interpreter and OpenBLAS's own kernel choice
// (BENCHMARKS.md):
//   env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE /usr/bin/python3 torch_reference.py serve --threads T
// It answers one JSON line per request line; the first line it writes is {"torch", "blas",
// "threads"}, or {"error"} when PyTorch cannot be imported. While the child waits for a request
// it uses no CPU, so cotan and PyTorch can be timed alternately in one run on the same load.
#pragma once

#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <sys/types.h>

#include "util/json_fwd.hpp"

namespace cotan::app {

inline constexpr const char* kTorchPython = "/usr/bin/python3";

// bench/torch_reference.py: `option` when not empty (it must exist), else found above the
// current directory or above the executable; nothing when it cannot be found.
std::optional<std::filesystem::path> find_torch_script(const std::string& option);

class TorchReference {
 public:
  // Starts the child, with `environment` ("NAME=VALUE" settings) added to its environment;
  // throws "[bench] --torch: ..." when it cannot start or PyTorch is missing.
  TorchReference(const std::filesystem::path& script, int threads, const std::vector<std::string>& environment = {});
  ~TorchReference();
  TorchReference(const TorchReference&) = delete;
  TorchReference& operator=(const TorchReference&) = delete;

  const std::string& version() const { return version_; }
  const std::string& blas() const { return blas_; }
  int threads() const { return threads_; }

  // Sends one request and returns the reply; a reply {"error": ...} throws with that message.
  Json request(const Json& message);

 private:
  std::string read_line();
  void stop();

  pid_t pid_ = -1;
  FILE* to_ = nullptr;
  FILE* from_ = nullptr;
  void (*previous_sigpipe_)(int) = nullptr;
  bool sigpipe_ignored_ = false;
  std::string version_, blas_;
  int threads_ = 0;
};

}  // namespace cotan::app
