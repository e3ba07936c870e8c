#include "util/append_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "util/error.hpp"

namespace cotan {

AppendFile::AppendFile(std::string path, std::string_view op) : path_(std::move(path)), op_(op) {
  fd_ = ::open(path_.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) fail(op_, path_, ": cannot open for appending: ", std::strerror(errno));
}

AppendFile::~AppendFile() {
  if (fd_ >= 0) ::close(fd_);
}

void AppendFile::append(std::string_view bytes) {
  struct stat st {};
  if (::fstat(fd_, &st) != 0) fail(op_, path_, ": cannot append: fstat: ", std::strerror(errno));
  const char* p = bytes.data();
  size_t left = bytes.size();
  while (left > 0) {
    const ssize_t written = ::write(fd_, p, left);
    if (written < 0 && errno == EINTR) continue;
    if (written <= 0) {
      const std::string reason = written < 0 ? std::strerror(errno) : "nothing written";
      // Cut off the part of the record that made it, so that the file ends with a whole record.
      const bool cut = ::ftruncate(fd_, st.st_size) == 0;
      fail(op_, path_, ": cannot append: ", reason, cut ? "" : " (and the partial record could not be removed)");
    }
    p += written;
    left -= size_t(written);
  }
}

void AppendFile::sync() {
  if (::fdatasync(fd_) != 0) fail(op_, path_, ": cannot sync: ", std::strerror(errno));
}

}  // namespace cotan
