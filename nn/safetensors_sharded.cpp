// Sharded safetensors checkpoints: model.safetensors.index.json plus model-0000K-of-0000N files.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <set>
#include <sstream>

#include "nn/safetensors.hpp"
#include "util/atomic_file.hpp"
#include "util/json.hpp"

namespace cotan {

namespace fs = std::filesystem;

namespace {

std::string shard_name(size_t k, size_t n) {
  std::ostringstream out;
  out << "model-" << std::setfill('0') << std::setw(5) << k << "-of-" << std::setw(5) << n << ".safetensors";
  return out.str();
}

// model-<digits>-of-<digits>.safetensors, each number at least 5 digits, as shard_name makes them.
bool is_shard_name(std::string_view name) {
  auto take = [&](std::string_view word) {
    if (!name.starts_with(word)) return false;
    name.remove_prefix(word.size());
    return true;
  };
  auto take_number = [&] {
    size_t digits = 0;
    while (digits < name.size() && name[digits] >= '0' && name[digits] <= '9') ++digits;
    name.remove_prefix(digits);
    return digits >= 5;
  };
  return take("model-") && take_number() && take("-of-") && take_number() && name == ".safetensors";
}

// A relative path with a ".." component can reach outside the directory it is relative to
// ("../x", "a/../../b"); one without cannot, symbolic links aside. Shard names have no business
// with "..", so any is refused, even in "a/../b", which comes back inside.
bool leaves_directory(const std::string& relative) {
  const fs::path path(relative);
  return std::any_of(path.begin(), path.end(), [](const fs::path& part) { return part == ".."; });
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("safetensors", path, ": cannot open the file");
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) fail("safetensors", path, ": read error");
  return text.str();
}

}  // namespace

SafetensorsCheckpoint::SafetensorsCheckpoint(const std::string& path) {
  std::error_code ec;
  fs::path index = path;
  if (fs::is_directory(path, ec)) {
    index = fs::path(path) / kSafetensorsIndexName;
    if (!fs::exists(index, ec)) {
      fs::path single = fs::path(path) / kSafetensorsSingleName;
      if (!fs::exists(single, ec))
        fail("safetensors", path, ": directory holds neither ", kSafetensorsIndexName, " nor ", kSafetensorsSingleName);
      index = single;
    }
  } else if (!fs::exists(path, ec)) {
    fail("safetensors", path, ": no such file or directory");
  }
  source_ = index.string();

  if (index.extension() != ".json") {
    files_.emplace_back(source_);
    for (const auto& name : files_[0].names()) file_index_.emplace(name, 0);
    names_ = files_[0].names();
    return;
  }

  auto bad = [&](const auto&... args) { fail("safetensors", source_, ": ", args...); };
  Json root;
  try {
    root = parse_json(read_text(source_));
  } catch (const JsonParseError& e) {
    bad("invalid JSON at line ", e.line(), ", column ", e.column(), ": ", e.reason());
  }
  if (!root.is_object()) bad("index is ", kind_name(root), ", not a JSON object");
  if (const Json* metadata = find_member(root, "metadata"); metadata && !metadata->is_null()) {
    if (!metadata->is_object()) bad("'metadata' is ", kind_name(*metadata), ", not an object");
    for (const auto& [key, value] : metadata->items())
      index_metadata_[key] = value.is_string() ? value.get<std::string>() : value.dump();
  }
  const Json* weight_map = find_member(root, "weight_map");
  if (!weight_map) bad("index has no 'weight_map'");
  if (!weight_map->is_object()) bad("'weight_map' is ", kind_name(*weight_map), ", not an object");

  const fs::path dir = index.parent_path();
  std::map<std::string, size_t> opened;  // shard file name -> files_ position
  for (const auto& [name, value] : weight_map->items()) {
    if (!value.is_string()) bad("weight_map entry for '", name, "' is ", kind_name(value), ", not a file name");
    const std::string& file = as_string(value);
    if (fs::path(file).is_absolute()) bad("weight_map maps '", name, "' to absolute path '", file, "'");
    if (file.empty()) bad("weight_map maps '", name, "' to an empty file name");
    if (file.find('\0') != std::string::npos) bad("weight_map maps '", name, "' to a file name holding a NUL byte");
    if (leaves_directory(file)) bad("weight_map maps '", name, "' to '", file, "', outside the checkpoint directory");
    auto it = opened.find(file);
    if (it == opened.end()) {
      fs::path shard = dir / file;
      if (!fs::exists(shard, ec)) bad("weight_map maps '", name, "' to '", file, "', which does not exist");
      files_.emplace_back(shard.string());
      it = opened.emplace(file, files_.size() - 1).first;
    }
    if (!files_[it->second].contains(name)) bad("weight_map maps '", name, "' to '", file, "', which has no such tensor");
    file_index_.emplace(name, it->second);
  }
  names_.reserve(file_index_.size());
  for (const auto& item : file_index_) names_.push_back(item.first);
}

bool SafetensorsCheckpoint::contains(std::string_view name) const { return file_index_.find(name) != file_index_.end(); }

const SafetensorsFile& SafetensorsCheckpoint::file_of(std::string_view name) const {
  auto it = file_index_.find(name);
  if (it == file_index_.end()) fail("safetensors", source_, ": no tensor '", name, "'; ", tensor_names_hint(names_));
  return files_[it->second];
}

const SafetensorsEntry& SafetensorsCheckpoint::info(std::string_view name) const { return file_of(name).info(name); }

Tensor SafetensorsCheckpoint::load(std::string_view name) const { return file_of(name).load(name); }

std::map<std::string, Tensor> SafetensorsCheckpoint::load_all() const {
  std::map<std::string, Tensor> out;
  for (const auto& name : names_) out.emplace(name, load(name));
  return out;
}

std::map<std::string, Tensor> load_sharded(const std::string& dir_or_index_path) {
  return SafetensorsCheckpoint(dir_or_index_path).load_all();
}

std::vector<std::string> save_sharded(const std::string& dir, const std::map<std::string, Tensor>& tensors,
                                      uint64_t max_shard_bytes, const std::map<std::string, std::string>& metadata) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) fail("safetensors", dir, ": cannot create the directory: ", ec.message());

  // Greedy packing in name order; a shard always takes at least one tensor.
  std::vector<std::map<std::string, Tensor>> shards;
  uint64_t shard_bytes = 0, total_bytes = 0;
  for (const auto& [name, t] : tensors) {
    if (!t.defined()) fail("safetensors", dir, ": tensor '", name, "' is undefined");
    uint64_t bytes = t.nbytes();
    if (shards.empty() || (!shards.back().empty() && shard_bytes + bytes > max_shard_bytes)) {
      shards.emplace_back();
      shard_bytes = 0;
    }
    shards.back().emplace(name, t);
    shard_bytes += bytes;
    total_bytes += bytes;
  }
  if (shards.empty()) shards.emplace_back();  // an empty checkpoint is still one (empty) shard

  std::vector<std::string> written;
  Json weight_map = Json::object();
  for (size_t k = 0; k < shards.size(); ++k) {
    written.push_back(shard_name(k + 1, shards.size()));
    save_safetensors((fs::path(dir) / written.back()).string(), shards[k], metadata);
    for (const auto& item : shards[k]) weight_map[item.first] = written.back();
  }
  Json index = Json::object();
  index["metadata"] = {{"total_size", total_bytes}};
  index["weight_map"] = std::move(weight_map);
  std::string text = dump_json(index, 2) + "\n";
  write_file_atomically((fs::path(dir) / kSafetensorsIndexName).string(), {text}, "safetensors");

  // Files of an earlier save that this one does not replace would be mistaken for part of it.
  std::set<std::string> keep(written.begin(), written.end());
  for (const auto& item : fs::directory_iterator(dir, ec)) {
    std::string name = item.path().filename().string();
    if ((name == kSafetensorsSingleName || is_shard_name(name)) && !keep.count(name)) fs::remove(item.path(), ec);
  }
  return written;
}

}  // namespace cotan
