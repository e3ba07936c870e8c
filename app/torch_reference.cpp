#include "app/torch_reference.hpp"

#include <csignal>
#include <cstdlib>
#include <iostream>

#include <sys/wait.h>
#include <unistd.h>

#include "tensor/error.hpp"
#include "util/json.hpp"

namespace cotan::app {

namespace fs = std::filesystem;

namespace {

std::optional<fs::path> find_upward(fs::path dir, const fs::path& relative) {
  std::error_code ec;
  for (int depth = 0; depth < 16 && !dir.empty(); ++depth) {
    if (fs::exists(dir / relative, ec)) return dir / relative;
    if (dir == dir.parent_path()) break;
    dir = dir.parent_path();
  }
  return std::nullopt;
}

bool executable_file(const fs::path& path) {
  std::error_code ec;
  return fs::is_regular_file(path, ec) && access(path.c_str(), X_OK) == 0;
}

std::string string_or(const Json& object, std::string_view key, const std::string& otherwise) {
  const Json* v = find_member(object, key);
  return v && v->is_string() ? v->get<std::string>() : otherwise;
}

}  // namespace

void add_torch_options(po::options_description& options) {
  options.add_options()
      ("torch-python", po::value<std::string>()->default_value(""),
       "the reference's interpreter (default: $COTAN_TORCH_ENV/bin/python, else "
       "~/.cache/cotan/torchenv/bin/python from bench/setup-reference.sh, else /usr/bin/python3 with a warning)")
      ("torch-script", po::value<std::string>()->default_value(""),
       "path of bench/torch_reference.py (default: found above the current directory or the executable)");
}

fs::path default_torch_env() {
  if (const char* env = std::getenv("COTAN_TORCH_ENV"); env && *env) return env;
  if (const char* cache = std::getenv("XDG_CACHE_HOME"); cache && *cache) return fs::path(cache) / "cotan" / "torchenv";
  const char* home = std::getenv("HOME");
  return fs::path(home && *home ? home : "/") / ".cache" / "cotan" / "torchenv";
}

TorchPython find_torch_python(const std::string& option) {
  if (!option.empty()) {
    if (!executable_file(option)) fail("bench", "--torch-python ", option, " is not an executable file");
    return {option, false, ""};
  }
  const fs::path env = default_torch_env();
  if (executable_file(env / "bin" / "python")) return {(env / "bin" / "python").string(), false, ""};
  std::cerr << "[bench] warning: no PyTorch reference environment at " << env.string()
            << " (bench/setup-reference.sh makes one); falling back to " << kSystemPython
            << ", whose torch (Debian's 1.13) may run OpenBLAS on crippled SSE3 kernels on this CPU\n";
  return {kSystemPython, true, env.string()};
}

std::optional<fs::path> find_torch_script(const std::string& option) {
  if (!option.empty()) {
    if (!fs::exists(option)) fail("bench", "--torch-script ", option, " does not exist");
    return fs::path(option);
  }
  const fs::path relative = fs::path("bench") / "torch_reference.py";
  std::error_code ec;
  if (auto found = find_upward(fs::current_path(ec), relative)) return found;
  return find_upward(fs::read_symlink("/proc/self/exe", ec).parent_path(), relative);
}

TorchReference::TorchReference(const po::variables_map& vm, int threads, const std::vector<std::string>& environment)
    : TorchReference(
          [&] {
            auto script = find_torch_script(vm["torch-script"].as<std::string>());
            if (!script) fail("bench", "--torch: cannot find bench/torch_reference.py; pass --torch-script PATH");
            return *script;
          }(),
          find_torch_python(vm["torch-python"].as<std::string>()), threads, environment) {}

TorchReference::TorchReference(const fs::path& script, const TorchPython& python, int threads,
                               const std::vector<std::string>& environment)
    : python_(python) {
  if (!executable_file(python_.path))
    fail("bench", "--torch needs ", python_.path, " with PyTorch (run bench/setup-reference.sh)");
  int to_child[2], from_child[2];
  if (pipe(to_child) != 0 || pipe(from_child) != 0) fail("bench", "--torch: cannot create pipes");
  // The thread counts are set before the interpreter starts: MKL, OpenMP and OpenBLAS size their
  // pools when they load, and torch.set_num_threads alone leaves OpenBLAS's at one per core.
  const std::string t = std::to_string(threads);
  std::vector<std::string> words = {"env", "-u", "OPENBLAS_CORETYPE", "-u", "OPENBLAS_L2_SIZE",
                                    "MKL_NUM_THREADS=" + t, "OMP_NUM_THREADS=" + t, "OPENBLAS_NUM_THREADS=" + t};
  words.insert(words.end(), environment.begin(), environment.end());
  words.insert(words.end(), {python_.path, script.string(), "serve", "--threads", t});
  std::vector<char*> argv;
  for (std::string& word : words) argv.push_back(word.data());
  argv.push_back(nullptr);
  pid_ = fork();
  if (pid_ < 0) fail("bench", "--torch: cannot start ", python_.path);
  if (pid_ == 0) {
    dup2(to_child[0], STDIN_FILENO);
    dup2(from_child[1], STDOUT_FILENO);
    close(to_child[0]), close(to_child[1]), close(from_child[0]), close(from_child[1]);
    execv("/usr/bin/env", argv.data());
    _exit(127);
  }
  close(to_child[0]);
  close(from_child[1]);
  previous_sigpipe_ = std::signal(SIGPIPE, SIG_IGN);  // a dead child must fail a write, not kill us
  sigpipe_ignored_ = true;
  to_ = fdopen(to_child[1], "w");
  from_ = fdopen(from_child[0], "r");
  try {
    const Json hello = parse_json(read_line());
    const JsonFields f(hello, "bench", "--torch");
    if (f.find("error"))
      fail("bench", "--torch: PyTorch is not available to ", python_.path, " (", f.required<std::string>("error"),
           "); run bench/setup-reference.sh");
    version_ = f.required<std::string>("torch");
    blas_ = f.required<std::string>("blas");
    threads_ = int(f.required<int64_t>("threads"));
    Json described = hello;
    described["python"] = python_.path;
    described["fallback"] = python_.fallback;
    described["settle_ms"] = std::chrono::duration<double, std::milli>(kSettle).count();
    hello_ = dump_json(described);
    const std::string core = string_or(hello, "openblas_core", "");
    if (!core.empty())
      std::cerr << "[bench] warning: the reference's BLAS is OpenBLAS, core " << core
                << (core == "Prescott" ? " (SSE3 kernels only: a crippled reference)" : "") << "\n";
    if (threads_ != threads)
      std::cerr << "[bench] warning: the reference runs " << threads_ << " threads, not the " << threads << " asked for\n";
  } catch (...) {
    stop();
    throw;
  }
}

TorchReference::~TorchReference() { stop(); }

std::string TorchReference::describe() const {
  const Json hello = parse_json(hello_);
  std::string out = "PyTorch " + version_ + " (" + blas_ + "), " + std::to_string(threads_) + " threads";
  if (const Json* interop = find_member(hello, "interop_threads"); interop && interop->is_number_integer())
    out += " (interop " + std::to_string(interop->get<int64_t>()) + ")";
  out += ", " + python_.path;
  if (python_.fallback) out += " [fallback: not a fair reference]";
  return out;
}

Json TorchReference::description() const { return parse_json(hello_); }

std::string TorchReference::json_field() const { return "\"torch\":" + hello_; }

std::vector<double> TorchReference::numbers(const Json& reply, std::string_view key) {
  const Json& array = member(reply, key);
  if (!array.is_array()) fail("bench", "--torch: the reply's '", key, "' is ", kind_name(array), ", not an array");
  std::vector<double> out;
  for (const Json& v : array) out.push_back(as_double(v));
  return out;
}

Json TorchReference::request(const Json& message) {
  std::fputs((dump_json(message) + "\n").c_str(), to_);
  std::fflush(to_);
  Json reply = parse_json(read_line());
  const JsonFields f(reply, "bench", "--torch");
  if (f.find("error")) fail("bench", "--torch: PyTorch failed: ", f.required<std::string>("error"));
  return reply;
}

std::string TorchReference::read_line() {
  std::string line;
  for (int c; (c = std::fgetc(from_)) != EOF && c != '\n';) line += char(c);
  if (line.empty()) {
    exited_ = true;
    fail("bench", "--torch: the PyTorch reference (", python_.path, ") exited without answering");
  }
  return line;
}

// An empty line asks the script to exit; then wait for it.
void TorchReference::stop() {
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
  if (sigpipe_ignored_) std::signal(SIGPIPE, previous_sigpipe_);
  sigpipe_ignored_ = false;
}

}  // namespace cotan::app
