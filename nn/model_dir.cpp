#include "nn/model_dir.hpp"

#include <filesystem>

#include "nn/model.hpp"
#include "nn/safetensors.hpp"
#include "tensor/ops.hpp"
#include "util/atomic_file.hpp"
#include "util/checksum.hpp"
#include "util/json.hpp"

namespace cotan::nn {

namespace fs = std::filesystem;

namespace {

// config.json's path, after verifying checksums.json when the directory has one (directories
// cotan wrote record checksums; others, HF's, are read as they are).
fs::path checked_config_path(const std::string& dir) {
  if (!fs::is_directory(dir)) fail("checkpoint", dir, ": not a directory");
  fs::path config_path = fs::path(dir) / "config.json";
  if (!fs::is_regular_file(config_path)) fail("checkpoint", dir, ": no config.json");
  const fs::path checksums = fs::path(dir) / kChecksumsName;
  if (fs::is_regular_file(checksums))
    verify_manifest(dir, read_json_file(checksums.string()), "checkpoint", checksums.string());
  return config_path;
}

// The weight files of a directory: the sharded index, else model.safetensors.
std::string weights_path(const std::string& dir) {
  fs::path index = fs::path(dir) / "model.safetensors.index.json", single = fs::path(dir) / "model.safetensors";
  if (!fs::exists(index) && !fs::exists(single)) fail("checkpoint", dir, ": no model.safetensors or model.safetensors.index.json");
  return fs::exists(index) ? index.string() : single.string();
}

// Every declared parameter, checked for presence, shape and a floating dtype, cast to `dtype`.
Params read_params(const SafetensorsCheckpoint& weights, const std::string& source, const std::vector<ParamSpec>& specs,
                   DType dtype) {
  Params out;
  for (const ParamSpec& spec : specs) {
    if (!weights.contains(spec.name))
      fail("checkpoint", source, ": missing tensor '", spec.name, "' (", tensor_names_hint(weights.names()), ")");
    const SafetensorsEntry& info = weights.info(spec.name);
    if (info.shape != spec.shape)
      fail("checkpoint", weights.file_of(spec.name).path(), ": tensor '", spec.name, "' has shape ",
           to_string(info.shape), " but the config needs ", to_string(spec.shape));
    Tensor t = weights.load(spec.name);
    if (!is_floating(t.dtype()))
      fail("checkpoint", weights.file_of(spec.name).path(), ": tensor '", spec.name, "' has dtype ", t.dtype(),
           ", expected a floating dtype");
    out.emplace(spec.name, contiguous(cast(t, dtype)));
  }
  return out;
}

// One buffer of the file into `buffer` (shape and a floating dtype checked), cast to `dtype`.
void read_buffer(const SafetensorsCheckpoint& weights, const std::string& name, Tensor& buffer, DType dtype) {
  const Tensor t = weights.load(name);
  if (t.shape() != buffer.shape() || !is_floating(t.dtype()))
    fail("checkpoint", weights.file_of(name).path(), ": buffer '", name, "' is ", t.dtype(), " ", to_string(t.shape()),
         ", the config needs a floating ", to_string(buffer.shape()));
  buffer = contiguous(cast(t, dtype));
}

}  // namespace

LoadedModel load_model_dir(const std::string& dir, DType dtype, const std::optional<AttentionConfig>& attention) {
  const fs::path config_path = checked_config_path(dir);
  LoadedModel out;
  out.config = ModelConfig::from_json(read_json_file(config_path.string()), config_path.string());
  if (attention) out.config.attention = *attention;

  const std::string source = weights_path(dir);
  SafetensorsCheckpoint weights(source);
  CausalLM model(out.config);
  out.params = read_params(weights, source, model.param_specs(), dtype);
  out.state = model.init_state(dtype);
  for (auto& [name, buffer] : out.state.buffers) {
    if (!weights.contains(name)) {
      if (attention) continue;  // another kind than the file's: its buffers start afresh
      fail("checkpoint", source, ": missing buffer '", name, "' (the ", name_of(out.config.attention.kind),
           " kind's running average of alpha; the forward pass reads it)");
    }
    read_buffer(weights, name, buffer, dtype);
  }
  // HF tied checkpoints sometimes still carry lm_head.weight: it must equal the embedding then.
  for (const std::string& name : weights.names()) {
    if (out.params.count(name) || out.state.buffers.count(name)) continue;
    if (name == "lm_head.weight" && out.config.tie_word_embeddings) continue;
    if (name.ends_with("rotary_emb.inv_freq")) continue;  // a buffer older HF versions saved
    fail("checkpoint", weights.file_of(name).path(), ": unexpected tensor '", name, "' for a ",
         name_of(out.config.attention.kind), " model of this config");
  }
  return out;
}

LoadedLanguageModel load_model(const std::string& dir, DType dtype) {
  const fs::path config_path = checked_config_path(dir);
  const Json config = read_json_file(config_path.string());
  LoadedLanguageModel out;
  std::unique_ptr<LanguageModel> model = make_model(config, config_path.string());
  if (const auto* lm = dynamic_cast<const CausalLM*>(model.get())) {
    // The built-in families: HF's directories with their leniencies (a tied lm_head.weight, an
    // old inv_freq buffer).
    LoadedModel loaded = load_model_dir(dir, dtype);
    out.model = std::make_shared<const CausalLM>(lm->config());
    out.params = std::move(loaded.params);
    out.state = std::move(loaded.state);
    return out;
  }
  const std::string source = weights_path(dir);
  SafetensorsCheckpoint weights(source);
  out.params = read_params(weights, source, model->param_specs(), dtype);
  out.state = model->init_state(dtype);
  out.state.training = false;
  for (auto& [name, buffer] : out.state.buffers) {
    if (!weights.contains(name))
      fail("checkpoint", source, ": missing buffer '", name, "' (the ", model->family(), " model's State; the forward pass reads it)");
    read_buffer(weights, name, buffer, dtype);
  }
  for (const std::string& name : weights.names())
    if (!out.params.count(name) && !out.state.buffers.count(name))
      fail("checkpoint", weights.file_of(name).path(), ": unexpected tensor '", name, "' for a ", model->family(),
           " model of this config");
  out.model = std::move(model);
  return out;
}

std::vector<std::string> take_weights(Params& init, const Params& loaded, const std::string& source) {
  std::vector<std::string> unused;
  for (const auto& [name, t] : loaded) {
    auto it = init.find(name);
    if (it == init.end()) {
      unused.push_back(name);
      continue;
    }
    if (t.shape() != it->second.shape())
      fail("checkpoint", source, ": tensor '", name, "' has shape ", to_string(t.shape()), " but the model needs ",
           to_string(it->second.shape()));
    it->second = contiguous(cast(t, it->second.dtype()));
  }
  return unused;
}

void save_model_dir(const std::string& dir, const LanguageModel& model, const Params& params, const State& state,
                    const ModelDirExtras& extras, uint64_t max_shard_bytes) {
  check_params(model.param_specs(), params, dir);
  const State expected = model.init_state();
  for (const auto& [name, buffer] : expected.buffers) {
    const auto it = state.buffers.find(name);
    if (it == state.buffers.end()) fail("checkpoint", dir, ": the State has no buffer '", name, "' to save");
    if (it->second.shape() != buffer.shape())
      fail("checkpoint", dir, ": buffer '", name, "' has shape ", to_string(it->second.shape()), ", expected ",
           to_string(buffer.shape()));
  }
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) fail("checkpoint", dir, ": cannot create directory: ", ec.message());
  std::map<std::string, Tensor> tensors(params.begin(), params.end());
  for (const auto& item : expected.buffers) tensors.emplace(item.first, state.buffers.at(item.first));
  uint64_t total = 0;
  for (const auto& [name, t] : tensors) total += t.nbytes();
  std::map<std::string, std::string> metadata{{"format", "pt"}};
  // The checksums of an earlier save name files this one may not write.
  fs::remove(fs::path(dir) / kChecksumsName, ec);
  // The weights only: config.json is a text a user may edit (the attention options, say).
  std::vector<std::string> files;
  if (total <= max_shard_bytes) {
    save_safetensors((fs::path(dir) / "model.safetensors").string(), tensors, metadata);
    fs::remove(fs::path(dir) / "model.safetensors.index.json", ec);
    files.push_back("model.safetensors");
  } else {
    for (std::string& shard : save_sharded(dir, tensors, max_shard_bytes, metadata)) files.push_back(std::move(shard));
    files.push_back("model.safetensors.index.json");
  }
  std::vector<ModelDirFile> written = model.export_files();
  written.insert(written.end(), extras.files.begin(), extras.files.end());
  for (const ModelDirFile& f : written) {
    const std::string path = (fs::path(dir) / f.name).string();
    if (f.remove) {
      fs::remove(path, ec);
    } else {
      write_file_atomically(path, {f.text}, "checkpoint");
    }
  }
  Json config = model.export_config();
  for (const auto& [key, value] : extras.config_fields) config[key] = parse_json(value);
  std::string json = dump_json(config, 2) + "\n";
  write_file_atomically((fs::path(dir) / "config.json").string(), {json}, "checkpoint");
  const std::string manifest = dump_json(checksum_manifest(dir, files, "checkpoint"), 2) + "\n";
  write_file_atomically((fs::path(dir) / kChecksumsName).string(), {manifest}, "checkpoint");
}

void save_model_dir(const std::string& dir, const ModelConfig& config, const Params& params, const State& state,
                    const ModelDirExtras& extras, uint64_t max_shard_bytes) {
  save_model_dir(dir, CausalLM(config), params, state, extras, max_shard_bytes);
}

void save_model_dir(const std::string& dir, const LanguageModel& model, const Params& params, const State& state,
                    uint64_t max_shard_bytes) {
  save_model_dir(dir, model, params, state, ModelDirExtras{}, max_shard_bytes);
}

void save_model_dir(const std::string& dir, const ModelConfig& config, const Params& params, const State& state,
                    uint64_t max_shard_bytes) {
  save_model_dir(dir, CausalLM(config), params, state, ModelDirExtras{}, max_shard_bytes);
}

}  // namespace cotan::nn
