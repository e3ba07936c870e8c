// ByteSource: a file read through a buffer, decoded by zlib's inflate or libzstd's streaming
// decoder when its first bytes say it is compressed.
#include "text/decompress.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>

#include "util/error.hpp"

namespace cotan::text {

namespace {

constexpr const char* kOp = "corpus";
constexpr size_t kInputBytes = size_t(1) << 18;  // read from the file at a time
constexpr unsigned char kGzipMagic[2] = {0x1f, 0x8b};
constexpr unsigned char kZstdMagic[4] = {0x28, 0xb5, 0x2f, 0xfd};
constexpr int kGzipWindowBits = 16 + MAX_WBITS;  // 16 +: a gzip header and trailer, not zlib's

bool starts_with(const char* data, size_t size, const unsigned char* magic, size_t magic_size) {
  return size >= magic_size && std::memcmp(data, magic, magic_size) == 0;
}

}  // namespace

std::string_view compression_name(Compression compression) {
  switch (compression) {
    case Compression::none: return "plain";
    case Compression::gzip: return "gzip";
    case Compression::zstd: return "zstd";
  }
  return "?";
}

// The input buffer holds [begin, end): bytes read from the file that the decoder has not taken
// yet. consumed() = bytes read from the file - (end - begin).
struct ByteSource::Impl {
  // Closes the file also when the constructor throws.
  struct Descriptor {
    int fd = -1;
    ~Descriptor() {
      if (fd >= 0) ::close(fd);
    }
  };

  std::string path;
  Descriptor file;
  uint64_t size = 0;
  uint64_t read_from_file = 0;
  bool at_file_end = false;  // read(2) returned 0
  bool done = false;         // the data ended: read() gives 0 from now on
  Compression compression = Compression::none;
  std::unique_ptr<char[]> input{new char[kInputBytes]};
  size_t begin = 0, end = 0;

  z_stream gzip{};
  bool gzip_ready = false;   // inflateInit2 succeeded (inflateEnd is due)
  bool member_open = false;  // inside a gzip member: its end marker and trailer are still due
  ZSTD_DCtx* zstd = nullptr;
  size_t zstd_hint = 1;  // ZSTD_decompressStream's last result: 0 between frames

  explicit Impl(const std::string& file_path) : path(file_path) {
    file.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (file.fd < 0) error("cannot open: ", std::strerror(errno));
    struct stat st {};
    if (::fstat(file.fd, &st) == 0 && S_ISREG(st.st_mode)) size = uint64_t(st.st_size);
    while (buffered() < sizeof kZstdMagic && fill()) {
    }
    const char* head = input.get() + begin;
    if (starts_with(head, buffered(), kGzipMagic, sizeof kGzipMagic)) {
      compression = Compression::gzip;
      if (inflateInit2(&gzip, kGzipWindowBits) != Z_OK)
        error("cannot start the gzip decoder: ", gzip.msg ? gzip.msg : "out of memory");
      gzip_ready = true;
      member_open = true;
    } else if (starts_with(head, buffered(), kZstdMagic, sizeof kZstdMagic)) {
      compression = Compression::zstd;
      zstd = ZSTD_createDCtx();
      if (!zstd) error("cannot start the zstd decoder: out of memory");
    }
  }

  ~Impl() {
    if (gzip_ready) inflateEnd(&gzip);
    ZSTD_freeDCtx(zstd);
  }

  template <class... Args>
  [[noreturn]] void error(const Args&... args) const {
    fail(kOp, path, ": ", args...);
  }

  size_t buffered() const { return end - begin; }
  uint64_t consumed() const { return read_from_file - buffered(); }

  // One read(2) into `to`; 0 at the end of the file.
  size_t read_file(char* to, size_t n) {
    for (;;) {
      const ssize_t got = ::read(file.fd, to, n);
      if (got >= 0) {
        read_from_file += uint64_t(got);
        if (got == 0) at_file_end = true;
        return size_t(got);
      }
      if (errno != EINTR) error("cannot read: ", std::strerror(errno));
    }
  }

  // Moves the buffered bytes to the front and reads more after them; whether it read any.
  bool fill() {
    if (at_file_end) return false;
    if (begin > 0) {
      std::memmove(input.get(), input.get() + begin, buffered());
      end -= begin;
      begin = 0;
    }
    if (end == kInputBytes) return false;
    const size_t got = read_file(input.get() + end, kInputBytes - end);
    end += got;
    return got > 0;
  }

  size_t read_plain(char* buf, size_t n) {
    if (buffered() == 0) {
      if (n >= kInputBytes) return read_file(buf, n);  // large reads skip the buffer
      fill();
    }
    const size_t taken = std::min(n, buffered());
    std::memcpy(buf, input.get() + begin, taken);
    begin += taken;
    return taken;
  }

  size_t read_gzip(char* buf, size_t n) {
    gzip.next_out = reinterpret_cast<Bytef*>(buf);
    gzip.avail_out = uInt(std::min<size_t>(n, UINT_MAX));
    const uInt room = gzip.avail_out;
    for (;;) {
      if (!member_open) {
        // Between members: another one starts here, or the data ends.
        while (buffered() < sizeof kGzipMagic && fill()) {
        }
        if (buffered() == 0) {
          done = true;
          return room - gzip.avail_out;
        }
        if (!starts_with(input.get() + begin, buffered(), kGzipMagic, sizeof kGzipMagic))
          error("the bytes after the end of the gzip stream at byte ", consumed(), " are not another gzip member");
        inflateReset(&gzip);
        member_open = true;
      }
      if (buffered() == 0) fill();
      gzip.next_in = reinterpret_cast<Bytef*>(input.get() + begin);
      gzip.avail_in = uInt(buffered());
      const int rc = inflate(&gzip, Z_NO_FLUSH);
      begin = size_t(reinterpret_cast<char*>(gzip.next_in) - input.get());
      const size_t produced = room - gzip.avail_out;
      if (rc == Z_STREAM_END) {
        member_open = false;
        if (produced > 0) return produced;
      } else if (rc == Z_OK || rc == Z_BUF_ERROR) {
        // Z_BUF_ERROR: no progress was possible, which is only an error at the end of the file.
        if (produced > 0) return produced;
        if (buffered() == 0 && at_file_end) error("truncated gzip stream");
      } else if (rc == Z_MEM_ERROR) {
        error("out of memory in the gzip decoder");
      } else {
        error("corrupt gzip data (", gzip.msg ? gzip.msg : "a preset dictionary is needed", ")");
      }
    }
  }

  size_t read_zstd(char* buf, size_t n) {
    ZSTD_outBuffer out{buf, n, 0};
    for (;;) {
      if (buffered() == 0) fill();
      if (buffered() == 0 && at_file_end && zstd_hint == 0) {
        done = true;
        return out.pos;
      }
      ZSTD_inBuffer in{input.get() + begin, buffered(), 0};
      const size_t rc = ZSTD_decompressStream(zstd, &out, &in);
      begin += in.pos;
      if (ZSTD_isError(rc)) error("corrupt zstd data (", ZSTD_getErrorName(rc), ")");
      zstd_hint = rc;
      if (out.pos > 0) return out.pos;
      // No output from no input: the frame needs bytes the file does not have.
      if (buffered() == 0 && at_file_end && rc != 0) error("truncated zstd stream");
    }
  }
};

ByteSource::ByteSource(const std::string& path) : impl_(std::make_unique<Impl>(path)) {}
ByteSource::~ByteSource() = default;
ByteSource::ByteSource(ByteSource&&) noexcept = default;
ByteSource& ByteSource::operator=(ByteSource&&) noexcept = default;

size_t ByteSource::read(char* buf, size_t n) {
  Impl& s = *impl_;
  if (n == 0 || s.done) return 0;
  size_t got = 0;
  switch (s.compression) {
    case Compression::none: got = s.read_plain(buf, n); break;
    case Compression::gzip: got = s.read_gzip(buf, n); break;
    case Compression::zstd: got = s.read_zstd(buf, n); break;
  }
  if (got == 0) s.done = true;
  return got;
}

uint64_t ByteSource::consumed() const { return impl_->consumed(); }
uint64_t ByteSource::file_size() const { return impl_->size; }
Compression ByteSource::compression() const { return impl_->compression; }
const std::string& ByteSource::path() const { return impl_->path; }

std::string read_all(const std::string& path) {
  ByteSource in(path);
  constexpr size_t kMinChunk = size_t(1) << 16;
  // A plain file fits exactly (+1 to see its end without growing); compressed text is often
  // 3-5 times its file.
  const uint64_t guess = in.compression() == Compression::none ? in.file_size() + 1 : 4 * in.file_size();
  std::string text(std::max<size_t>(size_t(guess), kMinChunk), '\0');
  size_t size = 0;
  while (size_t got = in.read(text.data() + size, text.size() - size)) {
    size += got;
    if (size == text.size()) text.resize(2 * text.size());
  }
  text.resize(size);
  return text;
}

}  // namespace cotan::text
