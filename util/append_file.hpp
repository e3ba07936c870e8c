// A log file that only grows, one whole record at a time (metrics.jsonl). A failed append (a full
// disk, an I/O error) cuts the file back to its length before it, so no torn record is left,
// and throws "[op] path: cannot append: No space left on device".
//
//   AppendFile log("run/metrics.jsonl", "train");
//   log.append(line + "\n");
//   log.sync();  // before a checkpoint that the lines must survive
#pragma once

#include <string>
#include <string_view>

namespace cotan {

class AppendFile {
 public:
  // Opens (creating when absent) for appending; "[op] path: cannot open for appending: reason".
  AppendFile(std::string path, std::string_view op);
  ~AppendFile();
  AppendFile(const AppendFile&) = delete;
  AppendFile& operator=(const AppendFile&) = delete;

  void append(std::string_view bytes);
  // fdatasync: the appended records are on disk.
  void sync();

  const std::string& path() const { return path_; }

 private:
  std::string path_, op_;
  int fd_ = -1;
};

}  // namespace cotan
