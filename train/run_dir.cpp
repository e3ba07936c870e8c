#include "train/run_dir.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
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

RunDirLock::RunDirLock(const std::string& dir, std::string_view op) : dir_(dir) {
  std::error_code ec;
  created_ = !fs::exists(dir, ec) && !ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir, ec))
    fail(op, "cannot create run directory ", dir, ": ", ec ? ec.message() : std::string("a file of that name is in the way"));
  path_ = (fs::path(dir) / kLockFileName).string();
  // A holder that releases unlinks the file before it closes it: a lock won on an inode that is no
  // longer at path_ is no lock, and the file now there (or a new one) is tried instead.
  constexpr int kAttempts = 100;
  for (int attempt = 0;; ++attempt) {
    fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0) {
      const int error = errno;
      if (created_) ::rmdir(dir_.c_str());
      if (error == EACCES || error == EROFS) fail(op, "run directory ", dir, " is not writable");
      fail(op, path_, ": cannot open the lock file: ", std::strerror(error));
    }
    if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      const int error = errno;
      std::ifstream in(path_);
      std::string pid, command;
      std::getline(in, pid);
      std::getline(in, command);
      ::close(fd_);
      fd_ = -1;
      if (error != EWOULDBLOCK) fail(op, path_, ": cannot lock: ", std::strerror(error));
      if (pid.empty()) fail(op, dir, " is in use by another process (it holds ", path_, ")");
      fail(op, dir, " is in use by process ", pid, command.empty() ? "" : " (" + command + ")",
           ": one run at a time in a directory");
    }
    struct stat held{}, named{};
    if (::fstat(fd_, &held) == 0 && ::stat(path_.c_str(), &named) == 0 && held.st_ino == named.st_ino &&
        held.st_dev == named.st_dev)
      break;
    ::close(fd_);
    fd_ = -1;
    if (attempt + 1 == kAttempts) fail(op, path_, ": cannot lock: the file keeps being replaced");
  }
  // Opening an existing lock file needs no write permission on the directory: probe it.
  const std::string probe = (fs::path(dir) / ".write-test").string();
  const int probe_fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (probe_fd < 0) {
    release();
    fail(op, "run directory ", dir, " is not writable");
  }
  ::close(probe_fd);
  ::unlink(probe.c_str());
  const std::string holder = std::to_string(::getpid()) + "\n" + own_command_line() + "\n";
  if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, holder.data(), holder.size(), 0) != ssize_t(holder.size())) {
    const std::string reason = std::strerror(errno);
    release();
    fail(op, "run directory ", dir, " is not writable: ", path_, ": ", reason);
  }
}

void RunDirLock::release() noexcept {
  if (fd_ < 0) return;
  ::unlink(path_.c_str());  // while still holding the lock: see the constructor
  ::close(fd_);             // closing releases the lock
  fd_ = -1;
  if (created_) ::rmdir(dir_.c_str());  // only when empty: a start that wrote nothing
}

RunDirLock::~RunDirLock() { release(); }

RunDirLock::RunDirLock(RunDirLock&& other) noexcept
    : fd_(other.fd_), dir_(std::move(other.dir_)), path_(std::move(other.path_)), created_(other.created_) {
  other.fd_ = -1;
}

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

std::string run_dir_name(const std::string& dir) {
  auto strip = [](fs::path p) {
    p = p.lexically_normal();
    if (p.filename().empty() && p.has_parent_path() && p != p.root_path()) p = p.parent_path();
    return p;
  };
  fs::path p = strip(dir);
  if (p.empty() || p.filename() == "." || p.filename() == "..") {
    std::error_code ec;
    const fs::path absolute = fs::absolute(dir, ec);
    if (!ec) p = strip(absolute);
  }
  return p.string();
}

std::string move_run_aside(const std::string& dir, std::string_view op) {
  const fs::path from = run_dir_name(dir);
  if (!from.has_filename() || from == from.root_path())
    fail(op, "cannot move ", dir, " aside: it has no parent directory to hold ", dir, ".old-1");
  std::error_code ec;
  fs::path aside;
  for (int k = 1;; ++k) {
    aside = from.string() + ".old-" + std::to_string(k);
    if (!fs::exists(aside, ec) && !ec) break;
  }
  fs::create_directory(aside, ec);
  if (ec) fail(op, "cannot move the earlier run in ", from.string(), " aside: cannot create ", aside.string(), ": ", ec.message());
  std::vector<std::string> moved;
  for (const std::string& name : run_dir_entries(from.string())) {
    fs::rename(from / name, aside / name, ec);
    if (ec) {
      const std::string reason = ec.message();
      // Back where they were, so that a failure changes nothing.
      std::error_code ignored;
      for (const std::string& back : moved) fs::rename(aside / back, from / back, ignored);
      fs::remove(aside, ignored);
      fail(op, "cannot move ", (from / name).string(), " to ", aside.string(), ": ", reason);
    }
    moved.push_back(name);
  }
  return aside.string();
}

}  // namespace cotan::train
