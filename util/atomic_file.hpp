// Files replaced atomically: the bytes go to `path.tmp` in the same directory, which is flushed
// to disk (fsync), renamed over `path`, and then the directory is synced, so that a reader or a
// crash sees the old file or the new one, never half of one. An mmap of the old file stays
// valid: the rename keeps its inode alive. On any failure the temporary is removed, `path` is
// left as it was, and the error is "[op] path: cannot write: <reason>", e.g.
//   [safetensors] out/model.safetensors: cannot write: out/model.safetensors.tmp: Is a directory
//   [checkpoint] run/config.json: cannot write: fsync: No space left on device
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace cotan {

// For files written in pieces (token shards, safetensors data):
//   AtomicFile out(path, "data");
//   out.write(header);  out.write(block);  ...
//   out.commit();  // without it, the destructor removes the temporary and path is unchanged
class AtomicFile {
 public:
  AtomicFile(std::string path, std::string_view op);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(std::string_view bytes);
  void write(const void* data, size_t size) { write(std::string_view(static_cast<const char*>(data), size)); }
  // fsync, close, rename over the path, sync the directory. Nothing may be written after it.
  void commit();

  const std::string& path() const { return path_; }

 private:
  [[noreturn]] void abandon(std::string_view what);

  std::string path_, tmp_, op_;
  int fd_ = -1;
  bool committed_ = false;
};

// Writes `parts` one after another as one atomic file.
void write_file_atomically(const std::string& path, const std::vector<std::string_view>& parts, std::string_view op);

}  // namespace cotan
