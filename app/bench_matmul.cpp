// `cotan bench matmul`: GFLOP/s (2 M N K / t) of the CPU backend's matmul kernel by size and dtype,
// and with --torch the same products timed by PyTorch in the same run. PyTorch runs in a child
// process, bench/torch_reference.py in its `serve` mode, started once as
//   env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE /usr/bin/python3 torch_reference.py serve --threads T
// (BENCHMARKS.md explains the environment); cotan and PyTorch then alternate call by call, so
// both see the same machine load, and the ratio of their medians is printed (> 1: cotan faster).
// The script is found with --torch-script, or as bench/torch_reference.py above the current
// directory or above the executable.
#include <algorithm>
#include <boost/program_options.hpp>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>

#include "app/bench_util.hpp"
#include "app/commands.hpp"
#include "app/options.hpp"
#include "tensor/error.hpp"
#include "tensor/op_table.hpp"
#include "tensor/ops.hpp"

namespace cotan::app {
namespace {

namespace po = boost::program_options;
namespace fs = std::filesystem;

constexpr const char* kPython = "/usr/bin/python3";
constexpr int kWarmup = 2;

struct Size {
  int64_t m, n, k;
};

// "1024" is 1024 x 1024 x 1024; "MxNxK" is [M, K] x [K, N].
std::vector<Size> parse_sizes(const std::string& text) {
  std::vector<Size> sizes;
  std::stringstream items(text);
  for (std::string item; std::getline(items, item, ',');) {
    std::vector<int64_t> parts;
    std::stringstream dims(item);
    for (std::string d; std::getline(dims, d, 'x');) {
      char* end = nullptr;
      long long v = std::strtoll(d.c_str(), &end, 10);
      if (d.empty() || *end != '\0' || v <= 0) fail("bench", "size '", item, "' is neither N nor MxNxK");
      parts.push_back(v);
    }
    if (parts.size() == 1) sizes.push_back({parts[0], parts[0], parts[0]});
    else if (parts.size() == 3) sizes.push_back({parts[0], parts[1], parts[2]});
    else fail("bench", "size '", item, "' is neither N nor MxNxK");
  }
  if (sizes.empty()) fail("bench", "--sizes is empty");
  return sizes;
}

std::vector<DType> parse_dtypes(const std::string& text) {
  std::vector<DType> dtypes;
  std::stringstream items(text);
  for (std::string item; std::getline(items, item, ',');) {
    if (item == "f32" || item == "float32") dtypes.push_back(DType::f32);
    else if (item == "f64" || item == "float64") dtypes.push_back(DType::f64);
    else if (item == "bf16" || item == "bfloat16") dtypes.push_back(DType::bf16);
    else fail("bench", "matmul takes f32, f64 or bf16, not '", item, "'");
  }
  if (dtypes.empty()) fail("bench", "--dtypes is empty");
  return dtypes;
}

// The value of "key" in a one-line JSON object written by torch_reference.py: a string, or the
// numbers of a list. Enough for the replies the script sends; not a JSON parser.
std::optional<std::string> json_string_field(const std::string& line, const std::string& key) {
  size_t at = line.find("\"" + key + "\": \"");
  if (at == std::string::npos) return std::nullopt;
  at += key.size() + 5;
  std::string out;
  for (; at < line.size() && line[at] != '"'; ++at) {
    if (line[at] == '\\' && at + 1 < line.size()) ++at;
    out += line[at];
  }
  return out;
}

std::vector<double> json_numbers_field(const std::string& line, const std::string& key) {
  std::vector<double> out;
  size_t at = line.find("\"" + key + "\": [");
  if (at == std::string::npos) return out;
  const char* p = line.c_str() + at + key.size() + 5;
  while (*p && *p != ']') {
    char* end = nullptr;
    double v = std::strtod(p, &end);
    if (end == p) break;
    out.push_back(v);
    p = end;
    while (*p == ',' || *p == ' ') ++p;
  }
  return out;
}

std::optional<fs::path> find_upward(fs::path dir, const fs::path& relative) {
  std::error_code ec;
  for (int depth = 0; depth < 16 && !dir.empty(); ++depth) {
    if (fs::exists(dir / relative, ec)) return dir / relative;
    if (dir == dir.parent_path()) break;
    dir = dir.parent_path();
  }
  return std::nullopt;
}

fs::path torch_script(const std::string& option) {
  if (!option.empty()) {
    if (!fs::exists(option)) fail("bench", "--torch-script ", option, " does not exist");
    return option;
  }
  const fs::path relative = fs::path("bench") / "torch_reference.py";
  std::error_code ec;
  if (auto found = find_upward(fs::current_path(ec), relative)) return *found;
  if (auto found = find_upward(fs::read_symlink("/proc/self/exe", ec).parent_path(), relative)) return *found;
  fail("bench", "--torch: cannot find bench/torch_reference.py above the current directory or the executable; "
                "pass --torch-script PATH");
}

// torch_reference.py's `serve` mode in a child process: one request line, one reply line.
class TorchReference {
 public:
  TorchReference(const fs::path& script, int threads) {
    if (access(kPython, X_OK) != 0)
      fail("bench", "--torch needs ", kPython, " with PyTorch (apt-get install python3-torch libopenblas0-pthread)");
    int to_child[2], from_child[2];
    if (pipe(to_child) != 0 || pipe(from_child) != 0) fail("bench", "--torch: cannot create pipes");
    const std::string script_arg = script.string(), threads_arg = std::to_string(threads);
    pid_ = fork();
    if (pid_ < 0) fail("bench", "--torch: cannot start ", kPython);
    if (pid_ == 0) {
      dup2(to_child[0], STDIN_FILENO);
      dup2(from_child[1], STDOUT_FILENO);
      close(to_child[0]), close(to_child[1]), close(from_child[0]), close(from_child[1]);
      execl("/usr/bin/env", "env", "-u", "OPENBLAS_CORETYPE", "-u", "OPENBLAS_L2_SIZE", kPython, script_arg.c_str(),
            "serve", "--threads", threads_arg.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    close(to_child[0]);
    close(from_child[1]);
    previous_sigpipe_ = std::signal(SIGPIPE, SIG_IGN);  // a dead child must fail a write, not kill us
    to_ = fdopen(to_child[1], "w");
    from_ = fdopen(from_child[0], "r");
    try {
      const std::string hello = read_line();
      if (auto error = json_string_field(hello, "error"))
        fail("bench", "--torch: PyTorch is not available (", *error, "); install python3-torch");
      version_ = json_string_field(hello, "torch").value_or("?");
      blas_ = json_string_field(hello, "blas").value_or("?");
    } catch (...) {
      stop();
      throw;
    }
  }
  ~TorchReference() { stop(); }
  TorchReference(const TorchReference&) = delete;
  TorchReference& operator=(const TorchReference&) = delete;

  const std::string& version() const { return version_; }
  const std::string& blas() const { return blas_; }

  // Seconds of each of `runs` torch.matmul calls on [m, k] x [k, n] operands of `dtype`.
  std::vector<double> time_matmul(const Size& s, DType dtype, int runs) {
    std::fprintf(to_, "{\"op\": \"matmul\", \"m\": %lld, \"n\": %lld, \"k\": %lld, \"dtype\": \"%s\", \"runs\": %d}\n",
                 static_cast<long long>(s.m), static_cast<long long>(s.n), static_cast<long long>(s.k),
                 std::string(dtype_name(dtype)).c_str(), runs);
    std::fflush(to_);
    const std::string reply = read_line();
    if (auto error = json_string_field(reply, "error")) fail("bench", "--torch: PyTorch failed: ", *error);
    std::vector<double> seconds = json_numbers_field(reply, "seconds");
    if (int(seconds.size()) != runs) fail("bench", "--torch: unexpected reply from the PyTorch reference: ", reply);
    return seconds;
  }

 private:
  std::string read_line() {
    std::string line;
    for (int c; (c = std::fgetc(from_)) != EOF && c != '\n';) line += char(c);
    if (line.empty()) fail("bench", "--torch: the PyTorch reference (", kPython, ") exited without answering");
    return line;
  }

  // An empty line asks the script to exit; then wait for it.
  void stop() {
    if (to_) {
      std::fputs("\n", to_);
      std::fclose(to_);
      to_ = nullptr;
    }
    if (from_) {
      std::fclose(from_);
      from_ = nullptr;
    }
    if (pid_ > 0) waitpid(pid_, nullptr, 0);
    pid_ = -1;
    std::signal(SIGPIPE, previous_sigpipe_);
  }

  pid_t pid_ = -1;
  FILE* to_ = nullptr;
  FILE* from_ = nullptr;
  void (*previous_sigpipe_)(int) = SIG_DFL;
  std::string version_, blas_;
};

struct Result {
  Size size;
  DType dtype;
  double seconds;
  std::optional<double> torch_seconds;
  double gflops() const { return 2.0 * double(size.m) * double(size.n) * double(size.k) / seconds / 1e9; }
  double torch_gflops() const {
    return 2.0 * double(size.m) * double(size.n) * double(size.k) / *torch_seconds / 1e9;
  }
};

double time_once(const Tensor& a, const Tensor& b) {
  return seconds_on(a.device(), [&] { Tensor c = backend(a.device()).matmul(a, b); });
}

}  // namespace

int bench_matmul(const Args& args) {
  po::options_description options("cotan bench matmul");
  options.add_options()
      ("help,h", "this message")
      ("json", "print one JSON object instead of a table")
      ("sizes", po::value<std::string>()->default_value("256,512,1024,2048"),
       "comma-separated sizes: N (square) or MxNxK ([M, K] x [K, N])")
      ("dtypes", po::value<std::string>()->default_value("f32,f64"), "comma-separated: f32, f64, bf16")
      ("repeat", po::value<int>()->default_value(10), "timed runs per product (the median is reported)")
      ("device", po::value<std::string>()->default_value("cpu"), "cpu | cuda | cuda:N (cuda: cuBLAS)")
      ("tf32", "f32 products on TF32 tensor cores (cuBLAS; --device cuda)")
      ("torch", "also time PyTorch (torch.matmul) in the same run, alternating call by call")
      ("torch-script", po::value<std::string>()->default_value(""),
       "path of bench/torch_reference.py (default: found above the current directory or the executable)");
  po::variables_map vm = parse_options(args, options);
  if (vm.count("help")) {
    std::cout << options << "\n";
    return 0;
  }
  check_integers(vm, {{"repeat", 1, 100000}});
  const bool json = vm.count("json") > 0;
  const std::vector<Size> sizes = parse_sizes(vm["sizes"].as<std::string>());
  const std::vector<DType> dtypes = parse_dtypes(vm["dtypes"].as<std::string>());
  const int repeat = vm["repeat"].as<int>();
  if (repeat < 1) fail("bench", "--repeat must be at least 1, got ", repeat);
  const int threads = num_threads();
  const Device device = device_option(vm["device"].as<std::string>());
  tf32_option(vm.count("tf32") > 0, device);
  if (vm.count("torch") && !device.is_cpu())
    fail("bench", "--torch times PyTorch on the CPU; it compares with --device cpu only");

  std::optional<TorchReference> torch;
  if (vm.count("torch")) torch.emplace(torch_script(vm["torch-script"].as<std::string>()), threads);

  if (!json) {
    std::printf("cotan bench matmul on %s: %d CPU threads, median of %d runs after %d warm-up runs\n",
                to_string(device).c_str(), threads, repeat, kWarmup);
    if (torch) std::printf("PyTorch %s (%s), alternating with cotan call by call\n", torch->version().c_str(),
                           torch->blas().c_str());
    std::printf("%6s %6s %6s  %-5s %10s %9s", "m", "n", "k", "dtype", "ms", "GFLOP/s");
    if (torch) std::printf(" %10s %11s %7s", "torch ms", "torch GF/s", "ratio");
    std::printf("\n");
  }
  std::vector<Result> results;
  Generator gen(0);
  for (const Size& size : sizes) {
    for (DType dtype : dtypes) {
      const Tensor a = to(randn({size.m, size.k}, gen, dtype), device);
      const Tensor b = to(randn({size.k, size.n}, gen, dtype), device);
      for (int i = 0; i < kWarmup; ++i) time_once(a, b);
      if (torch) torch->time_matmul(size, dtype, kWarmup);
      std::vector<double> ours, theirs;
      for (int r = 0; r < repeat; ++r) {
        ours.push_back(time_once(a, b));
        if (torch) theirs.push_back(torch->time_matmul(size, dtype, 1)[0]);
      }
      Result result{size, dtype, median(ours), std::nullopt};
      if (torch) result.torch_seconds = median(theirs);
      results.push_back(result);
      if (!json) {
        std::printf("%6lld %6lld %6lld  %-5s %10.3f %9.1f", static_cast<long long>(size.m),
                    static_cast<long long>(size.n), static_cast<long long>(size.k),
                    std::string(dtype_name(dtype)).c_str(), result.seconds * 1e3, result.gflops());
        if (torch) std::printf(" %10.3f %11.1f %7.2f", *result.torch_seconds * 1e3, result.torch_gflops(),
                               result.gflops() / result.torch_gflops());
        std::printf("\n");
        std::fflush(stdout);
      }
    }
  }
  if (json) {
    std::cout << "{\"device\":\"" << to_string(device) << "\",\"threads\":" << threads << ",\"repeat\":" << repeat;
    if (torch)
      std::cout << ",\"torch\":{\"version\":\"" << json_escape(torch->version()) << "\",\"blas\":\""
                << json_escape(torch->blas()) << "\"}";
    std::cout << ",\"results\":[";
    for (size_t i = 0; i < results.size(); ++i) {
      const Result& r = results[i];
      std::cout << (i ? "," : "") << "{\"m\":" << r.size.m << ",\"n\":" << r.size.n << ",\"k\":" << r.size.k
                << ",\"dtype\":\"" << dtype_name(r.dtype) << "\",\"ms\":" << json_number(r.seconds * 1e3)
                << ",\"gflops\":" << json_number(r.gflops());
      if (r.torch_seconds)
        std::cout << ",\"torch_ms\":" << json_number(*r.torch_seconds * 1e3)
                  << ",\"torch_gflops\":" << json_number(r.torch_gflops())
                  << ",\"ratio\":" << json_number(r.gflops() / r.torch_gflops());
      std::cout << "}";
    }
    std::cout << "]}\n";
  }
  return 0;
}

}  // namespace cotan::app
