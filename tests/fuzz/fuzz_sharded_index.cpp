// Fuzzes the sharded checkpoint reader (nn/safetensors_sharded.cpp): the input is
// model.safetensors.index.json, in a directory that also holds the two valid shards of
// fuzz::shard_tensors(). A checkpoint the reader opens must load every name it lists, each
// tensor equal to the one saved under that name.
#include <optional>

#include "nn/safetensors.hpp"
#include "tests/fuzz/fuzz_support.hpp"

using namespace cotan;
using cotan::fuzz::accepts;
using cotan::fuzz::bytes_of;
using cotan::fuzz::require;

namespace {

// The checkpoint directory, its shards written once per process.
const std::string& checkpoint_dir() {
  static const std::string dir = [] {
    std::string d = fuzz::scratch_dir() + "/checkpoint";
    save_sharded(d, fuzz::shard_tensors(), fuzz::kShardBytes);
    return d;
  }();
  return dir;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::map<std::string, Tensor> saved = fuzz::shard_tensors();
  const std::string& dir = checkpoint_dir();
  fuzz::write_file(dir + "/" + std::string(kSafetensorsIndexName), {reinterpret_cast<const char*>(data), size});
  std::optional<SafetensorsCheckpoint> checkpoint;
  if (!accepts([&] { checkpoint.emplace(dir); })) return 0;

  for (const std::string& name : checkpoint->names()) {
    const SafetensorsEntry& entry = checkpoint->info(name);
    require(checkpoint->file_of(name).contains(name), "a listed tensor is in the shard it maps to");
    Tensor t = checkpoint->load(name);
    require(t.shape() == entry.shape && t.dtype() == entry.loads_as, "a tensor loads with its header's shape and dtype");
    const auto original = saved.find(name);
    require(original != saved.end(), "every listed name was saved");
    require(t.shape() == original->second.shape() && t.dtype() == original->second.dtype() &&
                bytes_of(t) == bytes_of(original->second),
            "a tensor loads as it was saved");
  }
  require(checkpoint->load_all().size() == checkpoint->names().size(), "load_all loads every name");
  require(!accepts([&] { checkpoint->load("\xff not a tensor name"); }), "a missing name is an error");
  return 0;
}
