// Fuzzes the safetensors reader (nn/safetensors.cpp): the input is a whole file. A file the
// reader opens must load every tensor it lists, with the shape and dtype of its header entry;
// the header the writer makes for those tensors must read back to the same names, metadata,
// shapes, dtypes and bytes.
#include <cstring>
#include <optional>

#include "nn/safetensors.hpp"
#include "tests/fuzz/fuzz_support.hpp"

using namespace cotan;
using cotan::fuzz::accepts;
using cotan::fuzz::bytes_of;
using cotan::fuzz::require;

namespace {

// Every byte of the tensor, read: AddressSanitizer checks the reads.
unsigned checksum(const Tensor& t) {
  unsigned sum = 0;
  for (char c : bytes_of(t)) sum = sum * 31 + unsigned(uint8_t(c));
  return sum;
}

// The tensors written the way save_safetensors writes them (its header, then the data in name
// order), without its fsync: what save_safetensors would make of them.
std::string rewritten(const std::map<std::string, Tensor>& tensors, const std::map<std::string, std::string>& metadata) {
  std::string out = safetensors_header(tensors, metadata);
  for (const auto& [name, t] : tensors) out += bytes_of(t);
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = fuzz::scratch_dir() + "/input.safetensors";
  fuzz::write_file(path, {reinterpret_cast<const char*>(data), size});
  std::optional<SafetensorsFile> file;
  if (!accepts([&] { file.emplace(path); })) return 0;

  std::map<std::string, Tensor> tensors;
  volatile unsigned sink = 0;
  for (const std::string& name : file->names()) {
    const SafetensorsEntry& entry = file->info(name);
    Tensor t = file->load(name);
    require(t.shape() == entry.shape && t.dtype() == entry.loads_as, "a tensor loads with its header's shape and dtype");
    require(t.is_contiguous(), "a loaded tensor is contiguous");
    sink = sink + checksum(t);
    tensors.emplace(name, t);
  }
  require(file->load_all().size() == tensors.size(), "load_all loads every name");
  require(!accepts([&] { file->info("\xff not a tensor name"); }), "a missing name is an error");

  const std::string copy = fuzz::scratch_dir() + "/rewritten.safetensors";
  fuzz::write_file(copy, rewritten(tensors, file->metadata()));
  std::optional<SafetensorsFile> again;
  require(accepts([&] { again.emplace(copy); }), "the writer's file for the loaded tensors reads back");
  require(again->names() == file->names() && again->metadata() == file->metadata(),
          "the rewritten file has the same names and metadata");
  for (const auto& [name, t] : tensors) {
    Tensor back = again->load(name);
    require(back.shape() == t.shape() && back.dtype() == t.dtype() && bytes_of(back) == bytes_of(t),
            "a rewritten tensor reads back bit for bit");
  }
  return 0;
}
