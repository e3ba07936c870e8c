// Small helpers the test suites share.
#pragma once

#include <sys/resource.h>

#include <csignal>
#include <string>

#include "util/error.hpp"

// The message of the cotan::Error that f throws, or "(no error)" when it throws none; for tests
// that compare a message as a whole or look into it.
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const cotan::Error& e) {
    return e.what();
  }
  return "(no error)";
}

// Limits the size of the files this process writes (RLIMIT_FSIZE) while it lives: a write past
// the limit fails with EFBIG ("File too large"), as a write to a full disk fails.
class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) {
    getrlimit(RLIMIT_FSIZE, &saved_);
    previous_ = std::signal(SIGXFSZ, SIG_IGN);
    rlimit limit = saved_;
    limit.rlim_cur = bytes;
    setrlimit(RLIMIT_FSIZE, &limit);
  }
  ~FileSizeLimit() {
    setrlimit(RLIMIT_FSIZE, &saved_);
    std::signal(SIGXFSZ, previous_);
  }
  FileSizeLimit(const FileSizeLimit&) = delete;
  FileSizeLimit& operator=(const FileSizeLimit&) = delete;

 private:
  rlimit saved_{};
  void (*previous_)(int) = nullptr;
};
