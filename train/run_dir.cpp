#include "train/run_dir.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "util/error.hpp"

namespace cotan::train {

namespace fs = std::filesystem;

namespace {

// This process's command line, its arguments joined by spaces.
std::string own_command_line() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::string raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  while (!raw.empty() && raw.back() == '\0') raw.pop_back();
  std::replace(raw.begin(), raw.end(), '\0', ' ');
  return raw;
}

}  // namespace

RunDirLock::RunDirLock(const std::string& dir, std::string_view op) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir, ec))
    fail(op, "cannot create run directory ", dir, ": ", ec ? ec.message() : std::string("a file of that name is in the way"));
  const std::string path = (fs::path(dir) / kLockFileName).string();
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) {
    if (errno == EACCES || errno == EROFS) fail(op, "run directory ", dir, " is not writable");
    fail(op, path, ": cannot open the lock file: ", std::strerror(errno));
  }
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int error = errno;
    std::ifstream in(path);
    std::string pid, command;
    std::getline(in, pid);
    std::getline(in, command);
    ::close(fd_);
    fd_ = -1;
    if (error != EWOULDBLOCK) fail(op, path, ": cannot lock: ", std::strerror(error));
    if (pid.empty()) fail(op, dir, " is in use by another process (it holds ", path, ")");
    fail(op, dir, " is in use by process ", pid, command.empty() ? "" : " (" + command + ")",
         ": one run at a time in a directory");
  }
  // Opening an existing lock file needs no write permission on the directory: probe it.
  const std::string probe = (fs::path(dir) / ".write-test").string();
  const int probe_fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (probe_fd < 0) {
    ::close(fd_);
    fd_ = -1;
    fail(op, "run directory ", dir, " is not writable");
  }
  ::close(probe_fd);
  ::unlink(probe.c_str());
  const std::string holder = std::to_string(::getpid()) + "\n" + own_command_line() + "\n";
  if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, holder.data(), holder.size(), 0) != ssize_t(holder.size())) {
    const std::string reason = std::strerror(errno);
    ::close(fd_);
    fd_ = -1;
    fail(op, "run directory ", dir, " is not writable: ", path, ": ", reason);
  }
}

RunDirLock::~RunDirLock() {
  if (fd_ >= 0) ::close(fd_);  // closing releases the lock
}

RunDirLock::RunDirLock(RunDirLock&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }

std::vector<std::string> run_dir_entries(const std::string& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    std::string name = entry.path().filename().string();
    if (name != kLockFileName && name != ".write-test") names.push_back(std::move(name));
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::string describe_entries(const std::string& dir, const std::vector<std::string>& names) {
  constexpr size_t kShown = 3;
  std::string text;
  std::error_code ec;
  for (size_t i = 0; i < names.size() && i < kShown; ++i)
    text += (i ? ", " : "") + names[i] + (fs::is_directory(fs::path(dir) / names[i], ec) ? "/" : "");
  if (names.size() > kShown) text += cat(" and ", names.size() - kShown, " more");
  return text;
}

std::string move_run_aside(const std::string& dir, std::string_view op) {
  const fs::path from(dir);
  const fs::path base = from.has_filename() ? from : from.parent_path();
  std::error_code ec;
  fs::path aside;
  for (int k = 1;; ++k) {
    aside = base.string() + ".old-" + std::to_string(k);
    if (!fs::exists(aside, ec)) break;
  }
  fs::create_directories(aside, ec);
  if (ec) fail(op, "cannot move the earlier run aside: cannot create ", aside.string(), ": ", ec.message());
  for (const std::string& name : run_dir_entries(dir)) {
    fs::rename(from / name, aside / name, ec);
    if (ec) fail(op, "cannot move ", (from / name).string(), " to ", aside.string(), ": ", ec.message());
  }
  return aside.string();
}

}  // namespace cotan::train
