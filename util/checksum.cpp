#include "util/checksum.hpp"

#include <fcntl.h>
#include <unistd.h>
#include <xxhash.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>

#include "util/json.hpp"

namespace cotan {

namespace {

std::string hex16(uint64_t v) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(v));
  return text;
}

}  // namespace

FileChecksum checksum_file(const std::string& path, std::string_view op) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail(op, path, ": cannot read: ", std::strerror(errno));
  std::unique_ptr<XXH3_state_t, decltype(&XXH3_freeState)> state(XXH3_createState(), &XXH3_freeState);
  XXH3_64bits_reset(state.get());
  constexpr size_t kChunk = size_t(1) << 20;
  std::unique_ptr<char[]> buffer(new char[kChunk]);
  FileChecksum out;
  for (;;) {
    const ssize_t n = ::read(fd, buffer.get(), kChunk);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const std::string reason = std::strerror(errno);
      ::close(fd);
      fail(op, path, ": cannot read: ", reason);
    }
    if (n == 0) break;
    XXH3_64bits_update(state.get(), buffer.get(), size_t(n));
    out.bytes += uint64_t(n);
  }
  ::close(fd);
  out.xxh3 = XXH3_64bits_digest(state.get());
  return out;
}

Json checksum_manifest(const std::string& dir, const std::vector<std::string>& files, std::string_view op) {
  Json manifest = Json::object();
  for (const std::string& name : files) {
    const FileChecksum c = checksum_file((std::filesystem::path(dir) / name).string(), op);
    manifest[name] = {{"bytes", c.bytes}, {"xxh3_64", hex16(c.xxh3)}};
  }
  return manifest;
}

void verify_manifest(const std::string& dir, const Json& manifest, std::string_view op, const std::string& source) {
  const JsonFields files(manifest, op, source, "checksums");
  for (const auto& [name, entry] : manifest.items()) {
    const std::filesystem::path rel(name);
    if (rel.empty() || rel.is_absolute() || rel.filename() != rel)
      files.error("field 'checksums' names '", name, "', not a file of the directory");
    const JsonFields e = *files.object(name);
    const uint64_t bytes = e.required<uint64_t>("bytes");
    const std::string expected = e.required<std::string>("xxh3_64");
    const std::string path = (std::filesystem::path(dir) / name).string();
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec)) fail(op, path, ": missing (", source, " records it)");
    const FileChecksum c = checksum_file(path, op);
    if (c.bytes != bytes) fail(op, path, ": the file is ", c.bytes, " bytes, ", source, " recorded ", bytes, ": it is damaged");
    if (hex16(c.xxh3) != expected)
      fail(op, path, ": checksum mismatch (XXH3-64 is ", hex16(c.xxh3), ", ", source, " recorded ", expected,
           "): the file is corrupted");
  }
}

}  // namespace cotan
