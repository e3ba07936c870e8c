#include "app/torch_reference.hpp"

#include <csignal>

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

}  // namespace

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

TorchReference::TorchReference(const fs::path& script, int threads, const std::vector<std::string>& environment) {
  if (access(kTorchPython, X_OK) != 0)
    fail("bench", "--torch needs ", kTorchPython, " with PyTorch (apt-get install python3-torch libopenblas0-pthread)");
  int to_child[2], from_child[2];
  if (pipe(to_child) != 0 || pipe(from_child) != 0) fail("bench", "--torch: cannot create pipes");
  // env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE [NAME=VALUE...] python3 script serve --threads T
  std::vector<std::string> words = {"env", "-u", "OPENBLAS_CORETYPE", "-u", "OPENBLAS_L2_SIZE"};
  words.insert(words.end(), environment.begin(), environment.end());
  words.insert(words.end(), {kTorchPython, script.string(), "serve", "--threads", std::to_string(threads)});
  std::vector<char*> argv;
  for (std::string& word : words) argv.push_back(word.data());
  argv.push_back(nullptr);
  pid_ = fork();
  if (pid_ < 0) fail("bench", "--torch: cannot start ", kTorchPython);
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
      fail("bench", "--torch: PyTorch is not available (", f.required<std::string>("error"), "); install python3-torch");
    version_ = f.required<std::string>("torch");
    blas_ = f.required<std::string>("blas");
    threads_ = int(f.required<int64_t>("threads"));
  } catch (...) {
    stop();
    throw;
  }
}

TorchReference::~TorchReference() { stop(); }

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
  if (line.empty()) fail("bench", "--torch: the PyTorch reference (", kTorchPython, ") exited without answering");
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
