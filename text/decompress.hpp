// Reading a file that may be compressed, as a stream of its decompressed bytes:
//
//   ByteSource in("corpus.jsonl.zst");
//   char buf[1 << 16];
//   while (size_t n = in.read(buf, sizeof buf)) consume(buf, n);
//   progress(in.consumed(), in.file_size());   // bytes of the file on disk
//
//   std::string text = read_all("notes.txt.gz");
//
// The format is told by the first bytes, never by the name: gzip (1f 8b, through zlib), zstd
// (28 b5 2f fd, through libzstd), anything else is read as it is. A gzip file may hold several
// members one after another (`cat a.gz b.gz`, pigz) and a zstd file several frames (zstd's
// skippable frames included); their contents are read end to end. Bytes after the last gzip
// member that do not start another member are an error, as are bytes that do not start a zstd
// frame.
//
// Errors are cotan::Errors that name the file: "[corpus] FILE: cannot open: No such file or
// directory", "[corpus] FILE: cannot read: Is a directory", "[corpus] FILE: truncated gzip stream",
// "[corpus] FILE: corrupt gzip data (invalid block type)", "[corpus] FILE: truncated zstd stream",
// "[corpus] FILE: corrupt zstd data (Unknown frame descriptor)", "[corpus] FILE: 3 bytes after the
// end of the gzip stream at byte 120 are not another gzip member".
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace cotan::text {

enum class Compression { none, gzip, zstd };

// "plain", "gzip", "zstd".
std::string_view compression_name(Compression compression);

class ByteSource {
 public:
  // Opens the file and reads its first bytes to tell its format. Errors: cannot open, cannot read.
  explicit ByteSource(const std::string& path);
  ~ByteSource();
  ByteSource(ByteSource&&) noexcept;
  ByteSource& operator=(ByteSource&&) noexcept;

  // Up to n decompressed bytes into buf; 0 only at the end of the data (every later call gives 0
  // too). Throws on a read error, corrupt data, or a stream that ends before its end marker (a
  // truncated file).
  size_t read(char* buf, size_t n);

  // Bytes of the file on disk that went into the bytes read() has returned, up to what it buffers
  // ahead: file_size() once read() has returned 0.
  uint64_t consumed() const;
  // The file's size when it was opened (0 for a pipe or another file without one).
  uint64_t file_size() const;
  Compression compression() const;
  const std::string& path() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// All the decompressed bytes of a file, with ByteSource's errors.
std::string read_all(const std::string& path);

}  // namespace cotan::text
