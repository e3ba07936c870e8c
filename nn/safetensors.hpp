// safetensors files (https://github.com/huggingface/safetensors), single and sharded.
//
// Layout: an 8-byte little-endian u64 N, then N bytes of UTF-8 JSON header, then the data section.
// The header maps each tensor name to {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}
// (byte offsets relative to the start of the data section, tensors stored row-major, little
// endian) and may hold "__metadata__": {string: string}.
//
// Reading maps the file (private, copy-on-write: writing into a loaded tensor never changes the
// file) and validates the whole header when it is opened, so a bad file fails with one message
// naming the file and the tensor. The header (at most 100 MB) is checked against the format as
// it is parsed and only its entries are kept, so a hostile one costs memory of the order of its
// size and fails at its first violation. Members of an entry other than dtype, shape and
// data_offsets are skipped (JSON nesting is limited to 512 levels); a shape has at most 64
// dimensions, and the product of its dimensions with zeros counted as ones must fit in an int64
// (strides reach that far even in an empty tensor). Tensors load as zero-copy views into the map when their dtype
// is one of cotan's and their start is aligned for it; the map stays alive as long as any such
// tensor does. Other tensors are copied, with these conversions:
//   F16 -> f32 (exact, subnormals, infinities and NaN included)
//   U8  -> i32 (cotan has no unsigned 8-bit type)
//   BOOL bytes other than 0 and 1 -> true (copied, so that every bool is 0 or 1)
// Holes between tensors in the data section are allowed; overlapping tensors are not. A file that
// another program truncates in place while it is mapped can still fault on access; cotan's own
// writer never does that (it replaces files by rename).
//
// Writing stores cotan dtypes as F64, F32, BF16, I32, I64 and BOOL. The header is compact JSON
// with "__metadata__" first and the tensors in sorted name order, packed tightly in that order,
// padded with spaces so the data section starts at a multiple of 8 bytes. A file is written
// atomically (util/atomic_file.hpp), so a crash never leaves a half-written file and readers that
// mapped the old file keep a valid map.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tensor/tensor.hpp"

namespace cotan {

// A header entry. begin and end are byte offsets relative to the data section.
struct SafetensorsEntry {
  std::string dtype;  // as in the file: "F32", "BF16", "F16", "U8", ...
  Shape shape;
  uint64_t begin = 0;
  uint64_t end = 0;
  DType loads_as = DType::f32;  // the dtype load() returns

  uint64_t nbytes() const { return end - begin; }
};

// One mapped safetensors file.
class SafetensorsFile {
 public:
  // Maps `path` and validates its header; throws "[safetensors] path: ..." on any problem.
  explicit SafetensorsFile(const std::string& path);

  const std::string& path() const { return path_; }
  const std::vector<std::string>& names() const { return names_; }  // sorted
  bool contains(std::string_view name) const;
  // Throws "[safetensors] path: no tensor 'x'; it holds N tensors: 'a', 'b', ..." when missing.
  const SafetensorsEntry& info(std::string_view name) const;
  Tensor load(std::string_view name) const;
  std::map<std::string, Tensor> load_all() const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // File offset of the data section (8 + header length).
  uint64_t data_start() const { return data_start_; }

 private:
  struct Mapping;
  std::string path_;
  std::shared_ptr<const Mapping> map_;
  uint64_t data_start_ = 0;
  std::map<std::string, SafetensorsEntry, std::less<>> entries_;
  std::vector<std::string> names_;
  std::map<std::string, std::string> metadata_;
};

std::map<std::string, Tensor> load_safetensors(const std::string& path);

// Tensors may have any strides and live on any device; they are written as contiguous row-major
// data. Throws when a name is "__metadata__" or not valid UTF-8.
void save_safetensors(const std::string& path, const std::map<std::string, Tensor>& tensors,
                      const std::map<std::string, std::string>& metadata = {});

// The bytes save_safetensors writes before the tensor data: length prefix, header and padding.
std::string safetensors_header(const std::map<std::string, Tensor>& tensors,
                               const std::map<std::string, std::string>& metadata = {});

// ---- sharded checkpoints ----

inline constexpr std::string_view kSafetensorsIndexName = "model.safetensors.index.json";
inline constexpr std::string_view kSafetensorsSingleName = "model.safetensors";

// A checkpoint made of one or more safetensors files. Opened from
//   - a directory holding model.safetensors.index.json (preferred) or model.safetensors,
//   - an index file {"metadata": {...}, "weight_map": {"name": "model-00001-of-00002.safetensors"}},
//     whose shard names are relative to the index's directory and may not leave it (no absolute
//     paths, no ".." components),
//   - or a single .safetensors file.
// Every shard is opened (and its header validated) up front; every name in the weight map must be
// in the shard it names.
class SafetensorsCheckpoint {
 public:
  explicit SafetensorsCheckpoint(const std::string& path);

  const std::vector<std::string>& names() const { return names_; }  // sorted
  bool contains(std::string_view name) const;
  const SafetensorsEntry& info(std::string_view name) const;
  const SafetensorsFile& file_of(std::string_view name) const;
  Tensor load(std::string_view name) const;
  std::map<std::string, Tensor> load_all() const;
  const std::vector<SafetensorsFile>& files() const { return files_; }
  // The index's "metadata" object as strings (numbers written in decimal); empty without an index.
  const std::map<std::string, std::string>& index_metadata() const { return index_metadata_; }

 private:
  std::string source_;  // the index or file that lists the tensors, for error messages
  std::vector<SafetensorsFile> files_;
  std::map<std::string, size_t, std::less<>> file_index_;  // tensor name -> files_ position
  std::vector<std::string> names_;
  std::map<std::string, std::string> index_metadata_;
};

std::map<std::string, Tensor> load_sharded(const std::string& dir_or_index_path);

// Writes `dir`/model-0000K-of-0000N.safetensors and `dir`/model.safetensors.index.json (creating
// `dir` when needed). Tensors go to shards in sorted name order; a shard is closed before a tensor
// that would take it past max_shard_bytes (a larger tensor gets a shard of its own). Every shard
// carries `metadata`; the index's metadata holds "total_size" (the bytes of tensor data). Each
// file is written atomically and the index last; afterwards model.safetensors and shard files of
// the same pattern that are not part of this save are removed from `dir`. Returns the shard names.
std::vector<std::string> save_sharded(const std::string& dir, const std::map<std::string, Tensor>& tensors,
                                      uint64_t max_shard_bytes,
                                      const std::map<std::string, std::string>& metadata = {});

// The end of a failed lookup's message: "it holds 12 tensors: 'a', 'b', 'c', 'd', 'e', ...".
std::string tensor_names_hint(const std::vector<std::string>& names);

// IEEE half precision (F16) bits to float; exact for every input.
float half_to_float(uint16_t bits);

}  // namespace cotan
