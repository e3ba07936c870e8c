// What the fuzz harnesses (fuzz_*.cpp, built by clang++ with libFuzzer) and the seed generator
// (make_seeds.cpp, built with the project's compiler) share: the process's scratch directory,
// files from bytes, the fixed files a harness puts beside the fuzzed one, and the rule that bad
// input may fail only with a cotan::Error.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "tensor/ops.hpp"
#include "util/error.hpp"

namespace cotan::fuzz {

// One directory per process, made on first use under $TMPDIR (else /tmp) and removed at exit.
inline const std::string& scratch_dir() {
  static const std::string dir = [] {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/cotan-fuzz-XXXXXX";
    if (!mkdtemp(pattern.data())) {
      std::perror("[fuzz] mkdtemp");
      std::abort();
    }
    return pattern;
  }();
  static const bool cleanup = [] {
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(scratch_dir(), ec);
    });
    return true;
  }();
  (void)cleanup;
  return dir;
}

// A new file each time: ext4 flushes a file truncated and rewritten in place when it is closed
// (auto_da_alloc), which would cost milliseconds per input.
inline void write_file(const std::string& path, std::string_view bytes) {
  std::remove(path.c_str());
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), std::streamsize(bytes.size()));
  if (!out) {
    std::fprintf(stderr, "[fuzz] cannot write %s\n", path.c_str());
    std::abort();
  }
}

// Runs f on an input that may be bad: true when it returns, false when it throws a cotan::Error.
// Any other exception escapes, and libFuzzer reports it as a crash.
template <class F>
bool accepts(F&& f) {
  try {
    f();
    return true;
  } catch (const Error&) {
    return false;
  }
}

// A property of an accepted input that does not hold: a finding, reported as a crash.
inline void require(bool holds, std::string_view what) {
  if (holds) return;
  std::fprintf(stderr, "[fuzz] property broken: %.*s\n", int(what.size()), what.data());
  std::abort();
}

// A tensor's bytes (contiguous tensors only, as the readers make them).
inline std::string_view bytes_of(const Tensor& t) { return {static_cast<const char*>(t.data_ptr()), t.nbytes()}; }

// The checkpoint that sharded_index's indexes point into: two shards of small tensors, split by
// save_sharded at kShardBytes.
inline constexpr uint64_t kShardBytes = 64;
inline std::map<std::string, Tensor> shard_tensors() {
  return {{"model.embed_tokens.weight", from_vector<float>({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, {3, 4})},
          {"model.norm.weight", from_vector<float>({1, 1, 1, 1}, {4})},
          {"lm_head.weight", from_vector<double>({0.5, -0.5}, {2, 1})},
          {"step", from_vector<int64_t>({7}, {})}};
}

// The training tokens checkpoint_meta restores a loader on; the seeds' loader states are for them.
inline constexpr int64_t kLoaderTokens = 300, kLoaderSeqLen = 16, kLoaderBatch = 2;
inline std::vector<int32_t> loader_tokens() {
  std::vector<int32_t> tokens(kLoaderTokens);
  for (int64_t i = 0; i < kLoaderTokens; ++i) tokens[size_t(i)] = int32_t(i % 257);
  return tokens;
}

}  // namespace cotan::fuzz
