#include "util/atomic_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "util/error.hpp"

namespace cotan {

AtomicFile::AtomicFile(std::string path, std::string_view op) : path_(std::move(path)), tmp_(path_ + ".tmp"), op_(op) {
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) fail(op_, path_, ": cannot write: ", tmp_, ": ", std::strerror(errno));
}

AtomicFile::~AtomicFile() {
  if (committed_) return;
  if (fd_ >= 0) ::close(fd_);
  ::unlink(tmp_.c_str());
}

void AtomicFile::abandon(std::string_view what) {
  const std::string reason = cat(what, ": ", std::strerror(errno));
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  ::unlink(tmp_.c_str());
  committed_ = true;  // nothing left for the destructor
  fail(op_, path_, ": cannot write: ", reason);
}

void AtomicFile::write(std::string_view bytes) {
  check(fd_ >= 0 && !committed_, op_, path_, ": write after commit");
  const char* p = bytes.data();
  size_t left = bytes.size();
  while (left > 0) {
    const ssize_t written = ::write(fd_, p, left);
    if (written < 0) {
      if (errno == EINTR) continue;
      abandon("write");
    }
    p += written;
    left -= size_t(written);
  }
}

void AtomicFile::commit() {
  check(fd_ >= 0 && !committed_, op_, path_, ": commit twice");
  if (::fsync(fd_) != 0) abandon("fsync");
  const int closed = ::close(fd_);
  fd_ = -1;
  if (closed != 0) abandon("close");
  if (::rename(tmp_.c_str(), path_.c_str()) != 0) abandon("rename");
  committed_ = true;
  // Make the rename itself durable.
  const std::string dir = std::filesystem::path(path_).parent_path().string();
  const int dir_fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd >= 0) {
    ::fsync(dir_fd);
    ::close(dir_fd);
  }
}

void write_file_atomically(const std::string& path, const std::vector<std::string_view>& parts, std::string_view op) {
  AtomicFile out(path, op);
  for (std::string_view part : parts) out.write(part);
  out.commit();
}

}  // namespace cotan
