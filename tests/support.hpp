// Small helpers the test suites share.
#pragma once

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "tensor/tensor.hpp"
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

// A fresh directory under the system temp directory (mkdtemp), removed with everything in it.
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "cotan-test-XXXXXX").string();
    if (!mkdtemp(pattern.data())) throw std::runtime_error("cannot create a directory like " + pattern);
    path = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string operator/(const std::string& name) const { return (path / name).string(); }
};

// Writes `bytes` to `path`, creating its parent directories; throws when it cannot.
inline void write_file(const std::string& path, std::string_view bytes) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), std::streamsize(bytes.size()));
  if (!out) throw std::runtime_error("cannot write " + path);
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

// The largest |a - b| over the elements of two tensors of one shape, read back as f64; throws
// when the shapes differ.
inline double max_abs_diff(const cotan::Tensor& a, const cotan::Tensor& b) {
  if (a.shape() != b.shape())
    throw std::runtime_error("max_abs_diff: shapes " + cotan::to_string(a.shape()) + " and " +
                             cotan::to_string(b.shape()) + " differ");
  const std::vector<double> x = a.to_vector<double>(), y = b.to_vector<double>();
  double diff = 0;
  for (size_t i = 0; i < x.size(); ++i) diff = std::max(diff, std::abs(x[i] - y[i]));
  return diff;
}
