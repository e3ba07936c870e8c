// Single safetensors files: the mapped reader with its header validation, and the writer.
#include "nn/safetensors.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "tensor/ops.hpp"
#include "util/atomic_file.hpp"
#include "util/json.hpp"

namespace cotan {

static_assert(std::endian::native == std::endian::little, "safetensors data is little endian");

namespace {

constexpr uint64_t kMaxHeaderBytes = 100'000'000;  // the reference implementation's limit
constexpr uint64_t kDataAlignment = 8;             // the writer starts the data section here
constexpr size_t kNamesListed = 5;                 // names shown when a lookup fails

// The dtypes a file may hold: name, element size, and what cotan loads them as.
struct FileDType {
  std::string_view name;
  size_t size;
  DType loads_as;
};
constexpr FileDType kFileDTypes[] = {
    {"F64", 8, DType::f64}, {"F32", 4, DType::f32}, {"BF16", 2, DType::bf16}, {"F16", 2, DType::f32},
    {"I32", 4, DType::i32}, {"I64", 8, DType::i64}, {"U8", 1, DType::i32},    {"BOOL", 1, DType::boolean},
};

const FileDType* find_file_dtype(std::string_view name) {
  for (const auto& d : kFileDTypes)
    if (d.name == name) return &d;
  return nullptr;
}

std::string_view file_dtype_name(DType t) {
  switch (t) {
    case DType::f64: return "F64";
    case DType::f32: return "F32";
    case DType::bf16: return "BF16";
    case DType::i32: return "I32";
    case DType::i64: return "I64";
    case DType::boolean: return "BOOL";
  }
  return "?";
}

// A file dtype stored exactly as cotan stores its loads_as dtype.
bool is_native(const FileDType& d) { return d.name != "F16" && d.name != "U8"; }

// "[2, -3]" from a JSON array (or its compact text when it is not one).
std::string json_list(const Json& value) {
  if (!value.is_array()) return value.dump();
  std::string out = "[";
  for (size_t i = 0; i < value.size(); ++i) out += (i ? ", " : "") + value[i].dump();
  return out + "]";
}

uint64_t read_le_u64(const unsigned char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

std::string system_error() { return std::strerror(errno); }

}  // namespace

std::string tensor_names_hint(const std::vector<std::string>& names) {
  if (names.empty()) return "it holds no tensors";
  std::string out = cat("it holds ", names.size(), names.size() == 1 ? " tensor: " : " tensors: ");
  for (size_t i = 0; i < names.size() && i < kNamesListed; ++i) out += cat(i ? ", '" : "'", names[i], "'");
  if (names.size() > kNamesListed) out += ", ...";
  return out;
}

float half_to_float(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000u) << 16;
  uint32_t exponent = (h >> 10) & 0x1fu;
  uint32_t mantissa = h & 0x3ffu;
  uint32_t bits;
  if (exponent == 0x1f) {
    bits = sign | 0x7f800000u | (mantissa << 13);  // infinity, or NaN keeping its payload
  } else if (exponent != 0) {
    bits = sign | ((exponent + 127 - 15) << 23) | (mantissa << 13);
  } else if (mantissa == 0) {
    bits = sign;
  } else {
    // Subnormal: mantissa * 2^-24. Shift the leading one up to the implicit bit.
    int shift = 0;
    while (!(mantissa & 0x400u)) {
      mantissa <<= 1;
      ++shift;
    }
    bits = sign | (uint32_t(127 - 15 + 1 - shift) << 23) | ((mantissa & 0x3ffu) << 13);
  }
  return std::bit_cast<float>(bits);
}

// ---- reading ----

struct SafetensorsFile::Mapping {
  unsigned char* base = nullptr;
  size_t size = 0;
  ~Mapping() {
    if (base) munmap(base, size);
  }
};

SafetensorsFile::SafetensorsFile(const std::string& path) : path_(path) {
  auto bad = [&](const auto&... args) { fail("safetensors", path_, ": ", args...); };

  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) bad("cannot open: ", system_error());
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    bad("not a regular file");
  }
  uint64_t file_size = uint64_t(st.st_size);
  if (file_size < 8) {
    ::close(fd);
    bad("file is ", file_size, file_size == 1 ? " byte" : " bytes", ", too short to hold the 8-byte header length");
  }
  // Private and writable: writing into a zero-copy tensor copies the page and never reaches the
  // file. NORESERVE: pages nobody writes need no swap.
  void* base = ::mmap(nullptr, file_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_NORESERVE, fd, 0);
  ::close(fd);
  if (base == MAP_FAILED) bad("cannot map the file: ", system_error());
  auto map = std::make_shared<Mapping>();
  map->base = static_cast<unsigned char*>(base);
  map->size = file_size;
  map_ = map;

  uint64_t header_bytes = read_le_u64(map->base);
  if (header_bytes > kMaxHeaderBytes)
    bad("header length ", header_bytes, " bytes exceeds the limit of ", kMaxHeaderBytes, " bytes");
  if (header_bytes > file_size - 8)
    bad("header length ", header_bytes, " bytes runs past the end of the file (", file_size - 8,
        " bytes follow the length)");
  data_start_ = 8 + header_bytes;
  const uint64_t data_bytes = file_size - data_start_;

  // Duplicate names are reported as the parser meets them: the parsed object keeps one of each.
  JsonParseOptions options;
  options.on_duplicate_key = [&](const std::vector<std::string>& path) {
    if (path.size() == 1 && path[0] == "__metadata__") bad("'__metadata__' appears twice in the header");
    if (path.size() == 1) bad("tensor '", path[0], "' appears twice in the header");
    if (path.size() == 2 && path[0] == "__metadata__") bad("__metadata__ key '", path[1], "' appears twice");
  };
  Json header;
  try {
    header = parse_json(std::string_view(reinterpret_cast<const char*>(map->base + 8), header_bytes), options);
  } catch (const JsonParseError& e) {
    bad("invalid JSON header at line ", e.line(), ", column ", e.column(), ": ", e.reason());
  }
  if (!header.is_object()) bad("header is ", kind_name(header), ", not a JSON object");

  for (const auto& [name, value] : header.items()) {
    if (name == "__metadata__") {
      if (!value.is_object()) bad("__metadata__ is ", kind_name(value), ", not an object of strings");
      for (const auto& [key, text] : value.items()) {
        if (!text.is_string()) bad("__metadata__ value for '", key, "' is ", kind_name(text), ", not a string");
        metadata_.emplace(key, text.get<std::string>());
      }
      continue;
    }
    // An init-capture: clang 14 (tests/fuzz builds this file with it) cannot capture a structured binding.
    auto tensor_bad = [&, &name = name](const auto&... args) { bad("tensor '", name, "' ", args...); };
    if (!value.is_object()) tensor_bad("has an entry that is ", kind_name(value), ", not an object");
    const Json* dtype = find_member(value, "dtype");
    const Json* shape = find_member(value, "shape");
    const Json* offsets = find_member(value, "data_offsets");
    if (!dtype) tensor_bad("has no 'dtype'");
    if (!shape) tensor_bad("has no 'shape'");
    if (!offsets) tensor_bad("has no 'data_offsets'");

    if (!dtype->is_string()) tensor_bad("has dtype ", dtype->dump(), ", not a string");
    const std::string& dtype_name = as_string(*dtype);
    const FileDType* file_dtype = find_file_dtype(dtype_name);
    if (!file_dtype)
      tensor_bad("has unknown dtype '", dtype_name, "' (supported: F64, F32, BF16, F16, I32, I64, U8, BOOL)");

    SafetensorsEntry entry;
    entry.dtype = dtype_name;
    entry.loads_as = file_dtype->loads_as;
    // Dimensions and offsets are integers in [0, INT64_MAX].
    auto is_size = [](const Json& v) {
      return v.is_number_unsigned() ? v.get<uint64_t>() <= uint64_t(INT64_MAX) : v.is_number_integer() && v.get<int64_t>() >= 0;
    };
    if (!shape->is_array()) tensor_bad("has shape ", shape->dump(), ", not a list of dimensions");
    for (const Json& d : *shape) {
      if (!is_size(d)) tensor_bad("has shape ", json_list(*shape), ": dimensions must be non-negative integers");
      entry.shape.push_back(d.get<int64_t>());
    }
    if (!offsets->is_array() || offsets->size() != 2 || !is_size((*offsets)[0]) || !is_size((*offsets)[1]))
      tensor_bad("has data_offsets ", json_list(*offsets), ", not [begin, end] with non-negative integers");
    entry.begin = (*offsets)[0].get<uint64_t>();
    entry.end = (*offsets)[1].get<uint64_t>();
    if (entry.begin > entry.end) tensor_bad("has data_offsets ", json_list(*offsets), ": begin is after end");
    if (entry.end > data_bytes)
      tensor_bad("has data_offsets ", json_list(*offsets), " past the end of the ", data_bytes, "-byte data section");

    uint64_t elements = 1;
    bool overflow = false;
    for (int64_t d : entry.shape) overflow |= __builtin_mul_overflow(elements, uint64_t(d), &elements);
    uint64_t bytes = 0;
    overflow |= __builtin_mul_overflow(elements, uint64_t(file_dtype->size), &bytes);
    if (overflow || elements > uint64_t(INT64_MAX))
      tensor_bad("has shape ", to_string(entry.shape), ", too many elements to address");
    if (bytes != entry.nbytes())
      tensor_bad("has shape ", to_string(entry.shape), " (", elements, elements == 1 ? " element" : " elements",
                 " of ", entry.dtype, " = ", bytes, " bytes) but data_offsets span ", entry.nbytes(), " bytes");
    entries_.emplace(name, std::move(entry));
  }

  // No two tensors may share a byte. Sorted by begin, each must start at or after the furthest
  // end seen so far; empty tensors occupy nothing.
  std::vector<const std::pair<const std::string, SafetensorsEntry>*> by_offset;
  for (const auto& item : entries_)
    if (item.second.nbytes() > 0) by_offset.push_back(&item);
  std::sort(by_offset.begin(), by_offset.end(), [](const auto* a, const auto* b) {
    return std::pair(a->second.begin, a->second.end) < std::pair(b->second.begin, b->second.end);
  });
  const std::pair<const std::string, SafetensorsEntry>* furthest = nullptr;
  for (const auto* item : by_offset) {
    if (furthest && item->second.begin < furthest->second.end)
      bad("tensors '", furthest->first, "' (bytes [", furthest->second.begin, ", ", furthest->second.end, "]) and '",
          item->first, "' (bytes [", item->second.begin, ", ", item->second.end, "]) overlap in the data section");
    if (!furthest || item->second.end > furthest->second.end) furthest = item;
  }

  names_.reserve(entries_.size());
  for (const auto& item : entries_) names_.push_back(item.first);
}

bool SafetensorsFile::contains(std::string_view name) const { return entries_.find(name) != entries_.end(); }

const SafetensorsEntry& SafetensorsFile::info(std::string_view name) const {
  auto it = entries_.find(name);
  if (it == entries_.end()) fail("safetensors", path_, ": no tensor '", name, "'; ", tensor_names_hint(names_));
  return it->second;
}

Tensor SafetensorsFile::load(std::string_view name) const {
  const SafetensorsEntry& entry = info(name);
  const FileDType& file_dtype = *find_file_dtype(entry.dtype);
  const unsigned char* src = map_->base + data_start_ + entry.begin;
  const size_t n = size_t(numel(entry.shape));
  const Strides strides = contiguous_strides(entry.shape);

  bool zero_copy = is_native(file_dtype) && n > 0 && reinterpret_cast<uintptr_t>(src) % file_dtype.size == 0;
  if (zero_copy && file_dtype.name == "BOOL") zero_copy = std::all_of(src, src + n, [](unsigned char b) { return b <= 1; });
  if (zero_copy) {
    // The storage's deleter holds the map: it stays mapped while any view of it lives.
    auto storage = std::make_shared<Storage>(const_cast<unsigned char*>(src), size_t(entry.nbytes()), Device::cpu(),
                                             [map = map_](void*, size_t) {});
    return Tensor(std::move(storage), entry.shape, strides, 0, entry.loads_as);
  }

  auto storage = allocate(n * dtype_size(entry.loads_as), Device::cpu());
  auto* dst = static_cast<unsigned char*>(storage->data);
  if (file_dtype.name == "F16") {
    auto* out = reinterpret_cast<float*>(dst);
    for (size_t i = 0; i < n; ++i) {
      uint16_t h;
      std::memcpy(&h, src + 2 * i, 2);
      out[i] = half_to_float(h);
    }
  } else if (file_dtype.name == "U8") {
    auto* out = reinterpret_cast<int32_t*>(dst);
    for (size_t i = 0; i < n; ++i) out[i] = int32_t(src[i]);
  } else if (file_dtype.name == "BOOL") {
    for (size_t i = 0; i < n; ++i) dst[i] = src[i] != 0;
  } else if (n > 0) {
    std::memcpy(dst, src, size_t(entry.nbytes()));
  }
  return Tensor(std::move(storage), entry.shape, strides, 0, entry.loads_as);
}

std::map<std::string, Tensor> SafetensorsFile::load_all() const {
  std::map<std::string, Tensor> out;
  for (const auto& name : names_) out.emplace(name, load(name));
  return out;
}

std::map<std::string, Tensor> load_safetensors(const std::string& path) { return SafetensorsFile(path).load_all(); }

// ---- writing ----

namespace {

// Contiguous CPU copies (or the tensors themselves when they already are), detached.
std::map<std::string, Tensor> host_tensors(const std::map<std::string, Tensor>& tensors, const std::string& where) {
  std::map<std::string, Tensor> out;
  for (const auto& [name, t] : tensors) {
    if (name == "__metadata__") fail("safetensors", where, ": '__metadata__' is reserved and cannot name a tensor");
    if (!t.defined()) fail("safetensors", where, ": tensor '", name, "' is undefined");
    Tensor host = t.detach();
    if (!host.device().is_cpu()) host = to(host, Device::cpu());
    if (!host.is_contiguous()) host = contiguous(host);
    out.emplace(name, host);
  }
  return out;
}

std::string header_bytes(const std::map<std::string, Tensor>& tensors, const std::map<std::string, std::string>& metadata,
                         const std::string& where) {
  Json header = Json::object();
  if (!metadata.empty()) {
    Json& meta = header["__metadata__"] = Json::object();
    for (const auto& [key, value] : metadata) meta[key] = value;
  }
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    uint64_t end = offset + t.nbytes();
    header[name] = {{"dtype", file_dtype_name(t.dtype())}, {"shape", t.shape()}, {"data_offsets", {offset, end}}};
    offset = end;
  }
  std::string text;
  try {
    text = dump_json(header);
  } catch (const Error&) {
    fail("safetensors", where, ": tensor names and metadata must be valid UTF-8");
  }
  // Pad with spaces so that the data section starts 8-byte aligned.
  text.append(size_t((kDataAlignment - (8 + text.size()) % kDataAlignment) % kDataAlignment), ' ');
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[size_t(i)] = char((uint64_t(text.size()) >> (8 * i)) & 0xff);
  return out + text;
}

}  // namespace

std::string safetensors_header(const std::map<std::string, Tensor>& tensors,
                               const std::map<std::string, std::string>& metadata) {
  for (const auto& [name, t] : tensors)
    if (name == "__metadata__") fail("safetensors", "'__metadata__' is reserved and cannot name a tensor");
  return header_bytes(tensors, metadata, "header");
}

void save_safetensors(const std::string& path, const std::map<std::string, Tensor>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  auto host = host_tensors(tensors, path);
  std::string header = header_bytes(host, metadata, path);
  std::vector<std::string_view> parts{header};
  for (const auto& [name, t] : host)
    if (t.nbytes() > 0) parts.emplace_back(static_cast<const char*>(t.data_ptr()), t.nbytes());
  write_file_atomically(path, parts, "safetensors");
}

}  // namespace cotan
