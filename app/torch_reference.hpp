// The PyTorch reference of `cotan bench ... --torch`: bench/torch_reference.py in its `serve` mode,
// run as a child process with OpenBLAS's own kernel choice (BENCHMARKS.md):
//   env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE MKL_NUM_THREADS=T OMP_NUM_THREADS=T
//       OPENBLAS_NUM_THREADS=T PYTHON torch_reference.py serve --threads T
// It answers one JSON line per request line; the first line it writes describes the reference
// ({"torch", "blas", "mkl", "onednn", "openblas_core", "threads", "interop_threads", ...}), or is
// {"error"} when PyTorch cannot be imported. While the child waits for a request it uses no CPU,
// so cotan and PyTorch can be timed alternately in one run on the same load.
//
// PYTHON is the reference environment's interpreter: --torch-python PATH when given, else
// $COTAN_TORCH_ENV/bin/python, else ~/.cache/cotan/torchenv/bin/python (what
// bench/setup-reference.sh makes: PyTorch 2.x from PyPI, MKL and oneDNN). Without one it falls
// back to /usr/bin/python3 and warns: Debian's torch 1.13 calls OpenBLAS 0.3.21, which runs SSE3
// kernels on CPUs newer than it knows, a reference no user would pick.
#pragma once

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <sys/types.h>

#include "app/options.hpp"
#include "util/json_fwd.hpp"

namespace cotan::app {

inline constexpr const char* kSystemPython = "/usr/bin/python3";

// The pause before each call that follows the other side's, so that the partner's idle worker
// threads have gone to sleep: OpenBLAS's spin and yield for about 0.1 s after a call, libgomp's
// and oneTBB's spin for less (seen here: an idle PyTorch process used 20-30 ms of CPU in the
// 50-400 ms after a training step).
inline constexpr auto kSettle = std::chrono::milliseconds(100);

// --torch-script and --torch-python, for each bench with a PyTorch side.
void add_torch_options(po::options_description& options);

// The reference environment: $COTAN_TORCH_ENV, else ${XDG_CACHE_HOME:-~/.cache}/cotan/torchenv.
std::filesystem::path default_torch_env();

struct TorchPython {
  std::string path;
  bool fallback = false;  // no reference environment: the system's python3
  std::string missing;    // the environment looked for, when fallback
};

// The interpreter to run the reference with: --torch-python `option` when not empty (it must be
// an executable file), else the reference environment's, else kSystemPython (fallback), with a
// warning on stderr.
TorchPython find_torch_python(const std::string& option);

// bench/torch_reference.py: `option` when not empty (it must exist), else found above the
// current directory or above the executable; nothing when it cannot be found.
std::optional<std::filesystem::path> find_torch_script(const std::string& option);

class TorchReference {
 public:
  // Starts the child, with `environment` ("NAME=VALUE" settings) added to its environment after
  // the thread counts; throws "[bench] --torch: ..." when it cannot start or PyTorch is missing.
  // Warns on stderr when its BLAS is OpenBLAS (naming the core) or its thread count is not
  // `threads`.
  TorchReference(const std::filesystem::path& script, const TorchPython& python, int threads,
                 const std::vector<std::string>& environment = {});
  // The same, with the options of add_torch_options.
  TorchReference(const po::variables_map& vm, int threads, const std::vector<std::string>& environment = {});
  ~TorchReference();
  TorchReference(const TorchReference&) = delete;
  TorchReference& operator=(const TorchReference&) = delete;

  const std::string& version() const { return version_; }
  const std::string& blas() const { return blas_; }
  int threads() const { return threads_; }  // torch.get_num_threads(), read back
  bool fallback() const { return python_.fallback; }

  // One line: version, BLAS and oneDNN, verified thread counts, interpreter.
  std::string describe() const;
  // The reference's own description (its first line) plus "python", "fallback" and "settle_ms".
  Json description() const;
  // `"torch":{...}`: description() for --json.
  std::string json_field() const;

  // Sends one request and returns the reply; a reply {"error": ...} throws with that message.
  Json request(const Json& message);
  // Whether the reference has ended (a request found its output closed): no request can follow.
  bool exited() const { return exited_; }
  // The numbers of a reply's array `key`; "[bench] --torch: ..." when it is not an array of them.
  static std::vector<double> numbers(const Json& reply, std::string_view key);

 private:
  std::string read_line();
  void stop();

  TorchPython python_;
  pid_t pid_ = -1;
  FILE* to_ = nullptr;
  FILE* from_ = nullptr;
  void (*previous_sigpipe_)(int) = nullptr;
  bool sigpipe_ignored_ = false;
  std::string version_, blas_, hello_;
  int threads_ = 0;
  bool exited_ = false;
};

}  // namespace cotan::app
