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
constexpr size_t kMaxRank = 64;                    // dimensions a tensor's shape may have
constexpr size_t kMaxQuoted = 200;                 // characters of a bad value quoted in a message

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

uint64_t read_le_u64(const unsigned char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

std::string system_error() { return std::strerror(errno); }

// The compact text of a JSON value rebuilt from its parse events, as Json::dump writes it, cut
// after kMaxQuoted characters. As a list, an outermost array has ", " between its elements
// ("[2, -3]", as shapes are written in messages).
class QuotedValue {
 public:
  explicit QuotedValue(bool as_list = false) : as_list_(as_list) {}

  void scalar(const Json& value) {
    const std::string_view separator = separate();
    if (value.is_string() && value.get_ref<const std::string&>().size() > kMaxQuoted) cut_ = true;
    if (!cut_) append(separator, value.dump());
  }
  void key(const std::string& key) {
    const std::string_view separator = separate();
    if (key.size() > kMaxQuoted) cut_ = true;
    if (!cut_) append(separator, Json(key).dump() + ":");
    after_key_ = true;
  }
  void open(bool object) {
    const std::string_view separator = separate();
    if (empty_.empty()) as_list_ &= !object;
    append(separator, object ? "{" : "[");
    empty_.push_back(true);
  }
  void close(bool object) {
    empty_.pop_back();
    append("", object ? "}" : "]");
  }
  size_t depth() const { return empty_.size(); }  // arrays and objects open
  bool cut() const { return cut_; }
  std::string text() const { return cut_ ? text_ + "..." : text_; }

 private:
  // What goes before the next value: nothing after a key or first in its array or object.
  std::string_view separate() {
    if (after_key_) {
      after_key_ = false;
      return "";
    }
    if (empty_.empty()) return "";
    const bool first = empty_.back();
    empty_.back() = false;
    return first ? "" : empty_.size() == 1 && as_list_ ? ", " : ",";
  }
  // Whole values only: after the first that does not fit, nothing more.
  void append(std::string_view separator, std::string_view value) {
    if (text_.size() + separator.size() + value.size() > kMaxQuoted) cut_ = true;
    if (cut_) return;
    text_ += separator;
    text_ += value;
  }

  std::string text_;
  std::vector<bool> empty_;  // per open array or object: nothing written in it yet
  bool as_list_;
  bool after_key_ = false;
  bool cut_ = false;
};

// An integer in [0, INT64_MAX]: a dimension or an offset.
bool is_size(const Json& v) {
  return v.is_number_unsigned() ? v.get<uint64_t>() <= uint64_t(INT64_MAX) : v.is_number_integer() && v.get<int64_t>() >= 0;
}

// Reads the header as it is parsed, following the format's schema:
//   {"__metadata__": {key: string}, name: {"dtype": string, "shape": [size, ...],
//    "data_offsets": [begin, end], other members: anything, skipped}}
// and refuses it at the first violation. It keeps the entries and the metadata and, while one
// member is read, that member's name and the quoted text of a bad value; unknown members are
// skipped without keeping their keys. So memory is that of what the header declares, not of its
// JSON (a shape's dimensions past kMaxRank are counted, not kept).
class HeaderReader final : public JsonSax {
 public:
  HeaderReader(const std::string& path, uint64_t data_bytes, std::map<std::string, SafetensorsEntry, std::less<>>& entries,
               std::map<std::string, std::string>& metadata)
      : path_(path), data_bytes_(data_bytes), entries_(entries), metadata_(metadata) {}

  bool null() override { return scalar(nullptr); }
  bool boolean(bool value) override { return scalar(value); }
  bool number_integer(number_integer_t value) override { return scalar(value); }
  bool number_unsigned(number_unsigned_t value) override { return scalar(value); }
  bool number_float(number_float_t value, const string_t&) override { return scalar(value); }
  bool string(string_t& value) override { return scalar(std::move(value)); }
  bool start_object(size_t) override { return open(true); }
  bool start_array(size_t) override { return open(false); }
  bool end_object() override { return close(true); }
  bool end_array() override { return close(false); }
  bool key(string_t& key) override;

 private:
  // What the next event belongs to.
  enum class At {
    root,            // the header
    top,             // the header object: a key or its end
    member,          // the value of a header member: __metadata__ or a tensor's entry
    metadata,        // __metadata__: a key or its end
    metadata_value,  // the value of a __metadata__ key
    entry,           // a tensor's entry: a key or its end
    field,           // the value of dtype, shape or data_offsets
    skipped,         // the value of another member of an entry
  };
  enum class Field { dtype, shape, data_offsets };

  bool scalar(Json value);
  bool open(bool object);
  bool close(bool object);
  void start_field(Field field);
  void field_scalar(const Json& value);
  void field_open(bool object);
  void end_field();
  void end_entry();

  template <class... Args>
  [[noreturn]] void bad(const Args&... args) const {
    fail("safetensors", path_, ": ", args...);
  }
  template <class... Args>
  [[noreturn]] void tensor_bad(const Args&... args) const {
    bad("tensor '", name_, "' ", args...);
  }

  const std::string& path_;
  const uint64_t data_bytes_;
  std::map<std::string, SafetensorsEntry, std::less<>>& entries_;
  std::map<std::string, std::string>& metadata_;

  At at_ = At::root;
  bool in_metadata_ = false, seen_metadata_ = false;  // the member is __metadata__; it was met
  std::string name_;                                  // the tensor (or metadata key) being read
  SafetensorsEntry entry_;
  size_t file_dtype_size_ = 0;
  bool has_dtype_ = false, has_shape_ = false, has_offsets_ = false;
  // The field being read: its quoted text, whether it is an array, whether it is already known
  // to be bad, and its elements (integers in [0, INT64_MAX] kept up to kMaxRank, all counted).
  Field field_ = Field::dtype;
  QuotedValue quoted_;
  bool field_array_ = false, field_bad_ = false;
  std::vector<uint64_t> sizes_;
  size_t elements_ = 0;
  size_t skip_depth_ = 0;  // arrays and objects open in a skipped value
};

bool HeaderReader::key(string_t& key) {
  switch (at_) {
    case At::top:
      in_metadata_ = key == "__metadata__";
      if (in_metadata_ && seen_metadata_) bad("'__metadata__' appears twice in the header");
      if (!in_metadata_ && entries_.count(key)) bad("tensor '", key, "' appears twice in the header");
      seen_metadata_ |= in_metadata_;
      name_ = std::move(key);
      at_ = At::member;
      break;
    case At::metadata:
      if (metadata_.count(key)) bad("__metadata__ key '", key, "' appears twice");
      name_ = std::move(key);
      at_ = At::metadata_value;
      break;
    case At::entry: {
      bool* seen = key == "dtype" ? &has_dtype_ : key == "shape" ? &has_shape_ : key == "data_offsets" ? &has_offsets_ : nullptr;
      if (!seen) {
        at_ = At::skipped;
        break;
      }
      if (*seen) key_error(cat("duplicate key '", key, "'"));
      *seen = true;
      start_field(key == "dtype" ? Field::dtype : key == "shape" ? Field::shape : Field::data_offsets);
      break;
    }
    case At::field:
      quoted_.key(key);
      if (quoted_.cut()) end_field();  // a key is in an object, which no field may be
      break;
    default: break;  // inside a skipped value
  }
  return true;
}

bool HeaderReader::scalar(Json value) {
  switch (at_) {
    case At::root: bad("header is ", kind_name(value), ", not a JSON object");
    case At::member:
      if (in_metadata_) bad("__metadata__ is ", kind_name(value), ", not an object of strings");
      tensor_bad("has an entry that is ", kind_name(value), ", not an object");
    case At::metadata_value:
      if (!value.is_string()) bad("__metadata__ value for '", name_, "' is ", kind_name(value), ", not a string");
      metadata_.emplace(std::move(name_), std::move(value.get_ref<std::string&>()));
      at_ = At::metadata;
      break;
    case At::field: field_scalar(value); break;
    case At::skipped:
      if (skip_depth_ == 0) at_ = At::entry;
      break;
    default: break;  // the parser gives no value where a key belongs
  }
  return true;
}

bool HeaderReader::open(bool object) {
  const std::string_view kind = object ? "an object" : "an array";
  switch (at_) {
    case At::root:
      if (!object) bad("header is ", kind, ", not a JSON object");
      at_ = At::top;
      break;
    case At::member:
      if (in_metadata_) {
        if (!object) bad("__metadata__ is ", kind, ", not an object of strings");
        at_ = At::metadata;
        break;
      }
      if (!object) tensor_bad("has an entry that is ", kind, ", not an object");
      entry_ = SafetensorsEntry();
      has_dtype_ = has_shape_ = has_offsets_ = false;
      at_ = At::entry;
      break;
    case At::metadata_value: bad("__metadata__ value for '", name_, "' is ", kind, ", not a string");
    case At::field: field_open(object); break;
    case At::skipped: ++skip_depth_; break;
    default: break;
  }
  return true;
}

bool HeaderReader::close(bool object) {
  switch (at_) {
    case At::top: at_ = At::root; break;  // the parser refuses anything after the header
    case At::metadata: at_ = At::top; break;
    case At::entry:
      end_entry();
      at_ = At::top;
      break;
    case At::field:
      quoted_.close(object);
      if (quoted_.depth() == 0) end_field();
      break;
    case At::skipped:
      if (--skip_depth_ == 0) at_ = At::entry;
      break;
    default: break;
  }
  return true;
}

void HeaderReader::start_field(Field field) {
  at_ = At::field;
  field_ = field;
  quoted_ = QuotedValue(field != Field::dtype);
  field_array_ = field_bad_ = false;
  sizes_.clear();
  elements_ = 0;
}

void HeaderReader::field_scalar(const Json& value) {
  quoted_.scalar(value);
  if (quoted_.depth() == 0) {  // the whole field
    if (field_ == Field::dtype && value.is_string()) {
      const std::string& name = value.get_ref<const std::string&>();
      const FileDType* file_dtype = find_file_dtype(name);
      if (!file_dtype)
        tensor_bad("has unknown dtype '", name.size() > kMaxQuoted ? name.substr(0, kMaxQuoted) + "..." : name,
                   "' (supported: F64, F32, BF16, F16, I32, I64, U8, BOOL)");
      entry_.dtype = name;
      entry_.loads_as = file_dtype->loads_as;
      file_dtype_size_ = file_dtype->size;
      at_ = At::entry;
      return;
    }
    field_bad_ = true;
    end_field();
  }
  if (quoted_.depth() == 1) {  // an element of the field's array
    ++elements_;
    if (!is_size(value)) field_bad_ = true;
    else if (sizes_.size() < kMaxRank) sizes_.push_back(value.get<uint64_t>());
  }
  if (field_bad_ && quoted_.cut()) end_field();  // no need to read the rest
}

void HeaderReader::field_open(bool object) {
  if (quoted_.depth() == 0) {
    field_array_ = !object;
    field_bad_ = field_ == Field::dtype || object;
  } else if (quoted_.depth() == 1) {
    ++elements_;
    field_bad_ = true;
  }
  quoted_.open(object);
  if (field_bad_ && quoted_.cut()) end_field();
}

// The field's value is complete, or known to be bad and quoted as far as a message shows it.
void HeaderReader::end_field() {
  at_ = At::entry;
  const std::string quoted = quoted_.text();
  switch (field_) {
    case Field::dtype: tensor_bad("has dtype ", quoted, ", not a string");
    case Field::shape:
      if (!field_array_) tensor_bad("has shape ", quoted, ", not a list of dimensions");
      if (field_bad_) tensor_bad("has shape ", quoted, ": dimensions must be non-negative integers");
      if (elements_ > kMaxRank) tensor_bad("has rank ", elements_, ", more than the ", kMaxRank, " dimensions supported");
      entry_.shape.assign(sizes_.begin(), sizes_.end());
      return;
    case Field::data_offsets:
      if (!field_array_ || field_bad_ || elements_ != 2)
        tensor_bad("has data_offsets ", quoted, ", not [begin, end] with non-negative integers");
      entry_.begin = sizes_[0];
      entry_.end = sizes_[1];
      if (entry_.begin > entry_.end) tensor_bad("has data_offsets ", quoted, ": begin is after end");
      if (entry_.end > data_bytes_)
        tensor_bad("has data_offsets ", quoted, " past the end of the ", data_bytes_, "-byte data section");
      return;
  }
}

void HeaderReader::end_entry() {
  if (!has_dtype_) tensor_bad("has no 'dtype'");
  if (!has_shape_) tensor_bad("has no 'shape'");
  if (!has_offsets_) tensor_bad("has no 'data_offsets'");
  // Strides reach the product of the dimensions with zeros read as ones, so that must be
  // addressable too, even when the tensor is empty.
  uint64_t elements = 1, reach = 1, bytes = 0;
  bool overflow = false;
  for (int64_t d : entry_.shape) {
    overflow |= __builtin_mul_overflow(elements, uint64_t(d), &elements);
    overflow |= __builtin_mul_overflow(reach, uint64_t(std::max<int64_t>(d, 1)), &reach);
  }
  overflow |= __builtin_mul_overflow(elements, uint64_t(file_dtype_size_), &bytes);
  if (overflow || reach > uint64_t(INT64_MAX))
    tensor_bad("has shape ", to_string(entry_.shape), ", too many elements to address");
  if (bytes != entry_.nbytes())
    tensor_bad("has shape ", to_string(entry_.shape), " (", elements, elements == 1 ? " element" : " elements", " of ",
               entry_.dtype, " = ", bytes, " bytes) but data_offsets span ", entry_.nbytes(), " bytes");
  entries_.emplace(std::move(name_), std::move(entry_));
}

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

  HeaderReader reader(path_, data_bytes, entries_, metadata_);
  try {
    sax_parse_json(std::string_view(reinterpret_cast<const char*>(map->base + 8), header_bytes), reader);
  } catch (const JsonParseError& e) {
    bad("invalid JSON header at line ", e.line(), ", column ", e.column(), ": ", e.reason());
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
