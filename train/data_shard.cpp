// Token shards (mmap reading, atomic writing), token sequences and load_tokens.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>

#include "train/data.hpp"
#include "util/atomic_file.hpp"

namespace cotan::train {

namespace fs = std::filesystem;

// Tokens and header fields are copied to and from memory as they are: the formats are
// little-endian, and so must the host be.
static_assert(std::endian::native == std::endian::little, "token shards assume a little-endian host");

namespace {

size_t dtype_width(TokenDType dtype) { return dtype == TokenDType::u16 ? 2 : 4; }

struct Mapping {
  void* addr = nullptr;
  size_t length = 0;
  Mapping(void* a, size_t n) : addr(a), length(n) {}
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  ~Mapping() { munmap(addr, length); }
};

template <class T>
T read_field(const unsigned char* bytes, size_t offset) {
  T value;
  std::memcpy(&value, bytes + offset, sizeof value);
  return value;
}

int64_t token_at(const void* data, TokenDType dtype, uint64_t i) {
  if (dtype == TokenDType::u16) return static_cast<const uint16_t*>(data)[i];
  return static_cast<const uint32_t*>(data)[i];
}

void copy_tokens(const void* data, TokenDType dtype, uint64_t start, uint64_t count, int64_t* out) {
  if (dtype == TokenDType::u16) {
    const uint16_t* p = static_cast<const uint16_t*>(data) + start;
    std::copy(p, p + count, out);
  } else {
    const uint32_t* p = static_cast<const uint32_t*>(data) + start;
    std::copy(p, p + count, out);
  }
}

bool has_shard_magic(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return false;
  char magic[sizeof kShardMagic] = {};
  const bool ok = std::fread(magic, 1, sizeof magic, f) == sizeof magic &&
                  std::memcmp(magic, kShardMagic, sizeof magic) == 0;
  std::fclose(f);
  return ok;
}

bool starts_with(const std::string& s, std::string_view prefix) { return s.rfind(prefix, 0) == 0; }
bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The *.tok files directly in `dir`, by name.
std::vector<std::string> shard_names(const fs::path& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (ends_with(name, ".tok") && it->is_regular_file(ec)) names.push_back(name);
  }
  if (ec) fail("data", dir.string(), ": cannot list: ", ec.message());
  std::sort(names.begin(), names.end());
  return names;
}

// The shards whose names start with `prefix`, end to end; each must record the same tokenizer
// as the first shard of the directory, whose path and tokenizer `first` keeps.
TokenSequence read_shards(const fs::path& dir, const std::vector<std::string>& names, std::string_view prefix,
                          std::optional<std::pair<std::string, ShardTokenizer>>& first) {
  TokenSequence tokens;
  for (const std::string& name : names) {
    if (!starts_with(name, prefix)) continue;
    const TokenShard shard = TokenShard::open((dir / name).string());
    if (!first) {
      first.emplace(shard.path(), shard.tokenizer());
    } else if (shard.tokenizer() != first->second) {
      fail("data", shard.path(), " was made with ", describe(shard.tokenizer()), ", but ", first->first, " with ",
           describe(first->second), ": the shards of one directory must come from one tokenizer");
    }
    tokens.append(TokenSequence(shard));
  }
  return tokens;
}

}  // namespace

// ---- shards ----

TokenShard TokenShard::open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail("data", path, ": cannot open: ", std::strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    fail("data", path, ": cannot stat: ", std::strerror(err));
  }
  const size_t file_size = size_t(st.st_size);
  if (file_size < kShardV1HeaderBytes) {
    ::close(fd);
    fail("data", path, ": ", file_size, " bytes is too short for a token shard (the header alone is ",
         kShardV1HeaderBytes, ")");
  }
  void* addr = mmap(nullptr, file_size, PROT_READ, MAP_PRIVATE, fd, 0);
  const int err = errno;
  ::close(fd);
  if (addr == MAP_FAILED) fail("data", path, ": cannot map: ", std::strerror(err));
  auto mapping = std::make_shared<Mapping>(addr, file_size);

  const auto* bytes = static_cast<const unsigned char*>(addr);
  if (std::memcmp(bytes, kShardMagic, sizeof kShardMagic) != 0)
    fail("data", path, ": not a token shard (the magic is not COTANTOK)");
  const auto version = read_field<uint32_t>(bytes, 8);
  if (version < 1 || version > kShardVersion)
    fail("data", path, ": token shard version ", version, " is not supported (expected 1 to ", kShardVersion, ")");
  const size_t header_bytes = version == 1 ? kShardV1HeaderBytes : version == 2 ? kShardV2HeaderBytes : kShardHeaderBytes;
  if (file_size < header_bytes)
    fail("data", path, ": ", file_size, " bytes is too short for a version ", version, " token shard (the header alone is ",
         header_bytes, ")");
  const auto code = read_field<uint32_t>(bytes, 12);
  if (code != uint32_t(TokenDType::u16) && code != uint32_t(TokenDType::u32))
    fail("data", path, ": unknown token dtype code ", code, " (1 = u16, 2 = u32)");
  const auto dtype = TokenDType(code);
  const auto count = read_field<uint64_t>(bytes, 16);
  const size_t width = dtype_width(dtype), payload = file_size - header_bytes;
  if (payload % width != 0 || payload / width != count)
    fail("data", path, ": the header says ", count, " tokens, but the file holds ", payload,
         " bytes of ", width, "-byte tokens after the header");

  TokenShard shard;
  shard.path_ = path;
  shard.dtype_ = dtype;
  shard.count_ = count;
  shard.data_ = bytes + header_bytes;
  if (version == 1) {
    for (uint64_t i = 0; i < count; ++i) shard.max_id_ = std::max(shard.max_id_, token_at(shard.data_, dtype, i));
  } else {
    shard.max_id_ = read_field<uint32_t>(bytes, 24);
    if (version == 2) {
      if (read_field<uint32_t>(bytes, 28) != 0) fail("data", path, ": header bytes 28..31 must be zero");
    } else {
      shard.tokenizer_ = {read_field<uint64_t>(bytes, 32), read_field<uint32_t>(bytes, 28)};
      if (shard.tokenizer_.known() != (shard.tokenizer_.vocab_size != 0))
        fail("data", path, ": the header records a tokenizer hash without a vocabulary size, or the reverse");
      if (shard.tokenizer_.known() && count > 0 && shard.max_id_ >= int64_t(shard.tokenizer_.vocab_size))
        fail("data", path, ": the header's largest id ", shard.max_id_, " is not below its tokenizer's vocabulary size ",
             shard.tokenizer_.vocab_size);
    }
    if (count == 0 && shard.max_id_ != 0) fail("data", path, ": the header gives a largest id for an empty shard");
    if (dtype == TokenDType::u16 && shard.max_id_ > 65535)
      fail("data", path, ": the header's largest id ", shard.max_id_, " does not fit the shard's u16 tokens");
  }
  shard.mapping_ = std::move(mapping);
  return shard;
}

int64_t TokenShard::operator[](uint64_t i) const { return token_at(data_, dtype_, i); }

std::vector<int32_t> TokenShard::to_vector() const {
  std::vector<int64_t> wide(count_);
  copy_tokens(data_, dtype_, 0, count_, wide.data());
  return std::vector<int32_t>(wide.begin(), wide.end());
}

std::string describe(const ShardTokenizer& tokenizer) {
  if (tokenizer == kByteTokenizer) return "the byte tokenizer";
  if (!tokenizer.known()) return "an unrecorded tokenizer";
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(tokenizer.hash));
  return cat("tokenizer ", hex, " (vocabulary ", tokenizer.vocab_size, ")");
}

void write_token_shard(const std::string& path, std::span<const int32_t> tokens, const ShardTokenizer& tokenizer) {
  int32_t max_id = 0;
  for (int32_t id : tokens) {
    if (id < 0) fail("data", path, ": token id ", id, " is negative");
    max_id = std::max(max_id, id);
  }
  if (tokenizer.known() != (tokenizer.vocab_size != 0))
    fail("data", path, ": a tokenizer needs both its hash and its vocabulary size");
  if (tokenizer.known() && !tokens.empty() && uint32_t(max_id) >= tokenizer.vocab_size)
    fail("data", path, ": token id ", max_id, " is not below the tokenizer's vocabulary size ", tokenizer.vocab_size);
  const bool narrow = tokenizer.known() ? tokenizer.vocab_size <= 65536 : max_id < 65536;
  const TokenDType dtype = narrow ? TokenDType::u16 : TokenDType::u32;

  unsigned char header[kShardHeaderBytes] = {};
  const uint32_t version = kShardVersion, code = uint32_t(dtype), largest = uint32_t(max_id);
  const uint64_t count = tokens.size();
  std::memcpy(header, kShardMagic, sizeof kShardMagic);
  std::memcpy(header + 8, &version, 4);
  std::memcpy(header + 12, &code, 4);
  std::memcpy(header + 16, &count, 8);
  std::memcpy(header + 24, &largest, 4);
  std::memcpy(header + 28, &tokenizer.vocab_size, 4);
  std::memcpy(header + 32, &tokenizer.hash, 8);

  AtomicFile out(path, "data");
  out.write(header, sizeof header);
  if (dtype == TokenDType::u32) {
    out.write(tokens.data(), tokens.size_bytes());
  } else {
    constexpr size_t kBlock = size_t(1) << 20;
    std::vector<uint16_t> block;
    for (size_t begin = 0; begin < tokens.size(); begin += kBlock) {
      const size_t n = std::min(kBlock, tokens.size() - begin);
      block.assign(tokens.begin() + std::ptrdiff_t(begin), tokens.begin() + std::ptrdiff_t(begin + n));
      out.write(block.data(), 2 * n);
    }
  }
  out.commit();
}

// ---- sequences ----

TokenSequence::TokenSequence(std::vector<int32_t> tokens) {
  for (int32_t id : tokens) {
    if (id < 0) fail("data", "token id ", id, " is negative");
    max_id_ = std::max<int64_t>(max_id_, id);
  }
  if (tokens.empty()) return;
  auto owned = std::make_shared<const std::vector<int32_t>>(std::move(tokens));
  // Non-negative int32 values read the same as uint32.
  chunks_.push_back({owned, owned->data(), TokenDType::u32, 0, owned->size()});
  size_ = owned->size();
}

TokenSequence::TokenSequence(const TokenShard& shard) {
  if (shard.size() == 0) return;
  // The aliasing constructor would do; sharing through a copy of the shard is simpler.
  auto owner = std::make_shared<const TokenShard>(shard);
  chunks_.push_back({owner, shard.data(), shard.dtype(), 0, shard.size()});
  size_ = shard.size();
  max_id_ = shard.max_id();
}

void TokenSequence::append(const TokenSequence& other) {
  for (Chunk chunk : other.chunks_) {
    chunk.start += size_;
    chunks_.push_back(std::move(chunk));
  }
  size_ += other.size_;
  max_id_ = std::max(max_id_, other.max_id_);
}

size_t TokenSequence::chunk_index(uint64_t position) const {
  auto it = std::upper_bound(chunks_.begin(), chunks_.end(), position,
                             [](uint64_t p, const Chunk& c) { return p < c.start; });
  return size_t(it - chunks_.begin()) - 1;
}

int64_t TokenSequence::operator[](uint64_t i) const {
  if (i >= size_) fail("data", "token index ", i, " is out of range for ", size_, " tokens");
  const Chunk& c = chunks_[chunk_index(i)];
  return token_at(c.data, c.dtype, i - c.start);
}

void TokenSequence::copy_to(uint64_t start, uint64_t count, int64_t* out) const {
  if (start > size_ || count > size_ - start)
    fail("data", "tokens [", start, ", ", start + count, ") are out of range for ", size_, " tokens");
  for (size_t k = count ? chunk_index(start) : chunks_.size(); count > 0; ++k) {
    const Chunk& c = chunks_[k];
    const uint64_t local = start - c.start, n = std::min(count, c.size - local);
    copy_tokens(c.data, c.dtype, local, n, out);
    out += n, start += n, count -= n;
  }
}

std::vector<int32_t> TokenSequence::to_vector() const {
  std::vector<int64_t> wide(size_);
  copy_to(0, size_, wide.data());
  return std::vector<int32_t>(wide.begin(), wide.end());
}

// ---- load_tokens ----

bool is_token_data(const std::string& path) {
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  if (fs::is_regular_file(status)) return ends_with(path, ".tok") || has_shard_magic(path);
  return fs::is_directory(status) && !shard_names(path).empty();
}

ShardFiles shard_files(const std::string& path) {
  if (!is_token_data(path)) fail("data", path, ": not token shards (a .tok file or a directory of them)");
  ShardFiles files;
  if (!fs::is_directory(path)) {
    files.train.push_back(path);
    return files;
  }
  for (const std::string& name : shard_names(path)) {
    if (starts_with(name, "train-")) files.train.push_back((fs::path(path) / name).string());
    if (starts_with(name, "val-")) files.val.push_back((fs::path(path) / name).string());
  }
  return files;
}

TokenData load_tokens(const std::string& path, double val_fraction, uint64_t seed) {
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  if (!fs::exists(status)) fail("data", path, ": no such file or directory");

  if (fs::is_regular_file(status) && (ends_with(path, ".tok") || has_shard_magic(path))) {
    const TokenShard shard = TokenShard::open(path);
    return {TokenSequence(shard), TokenSequence(), shard.tokenizer()};
  }

  if (fs::is_directory(status)) {
    const std::vector<std::string> names = shard_names(path);
    if (!names.empty()) {
      std::optional<std::pair<std::string, ShardTokenizer>> first;
      TokenData data{read_shards(path, names, "train-", first), read_shards(path, names, "val-", first), {}};
      if (first) data.tokenizer = first->second;
      if (data.train.empty() &&
          std::none_of(names.begin(), names.end(), [](const std::string& n) { return starts_with(n, "train-"); }))
        fail("data", path, ": holds .tok files but no train-*.tok shards");
      return data;
    }
  }

  DocumentSplit split = split_train_val(read_documents(path), val_fraction, seed);
  return {TokenSequence(encode_documents(split.train)), TokenSequence(encode_documents(split.val)), kByteTokenizer};
}

}  // namespace cotan::train
