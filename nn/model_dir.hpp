// HF model directories: config.json plus model.safetensors (or a sharded checkpoint with
// model.safetensors.index.json). A student saved here loads into HF transformers apart from the
// extra tensors of the non-softmax kinds, under model.layers.N.self_attn with the names of their
// rows in nn/attention_kinds.hpp (alpha_proj.weight [H, D], sinks [H], gate_proj.weight [H d, D]).
// Tied models carry no lm_head.weight. The alpha_ma buffers (State) are saved with the training
// checkpoint, not in the model directory.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "nn/config.hpp"
#include "nn/language_model.hpp"
#include "nn/params.hpp"

namespace cotan::nn {

// Written last by save_model_dir: the XXH3-64 checksums of the weight files (util/checksum.hpp;
// config.json is left out, users edit it), verified by load_model_dir when present. HF ignores it.
inline constexpr const char* kChecksumsName = "checksums.json";

// The model_type of an exported student whose kind is not softmax (config.json also gets
// base_model_type, architectures CotanForCausalLM, auto_map and the remote-code files).
inline constexpr const char* kRemoteModelType = "cotan";

struct LoadedModel {
  ModelConfig config;
  Params params;
  State state;  // the buffers the forward pass reads (alpha_ma of the affine kinds), evaluation mode
};

// Verifies checksums.json when the directory has one (a mismatch names the file), then reads
// config.json (attention options from `attention` when given, else from the file, else
// softmax) and every tensor the config needs, cast to `dtype`: the parameters, and the State
// buffers (alpha_ma) saved beside them. Missing, extra or misshapen tensors are errors naming the
// file and the tensor; a missing buffer too, unless `attention` overrides the file's kind (the
// buffers then start as init_state() has them).
LoadedModel load_model_dir(const std::string& dir, DType dtype = DType::f32,
                           const std::optional<AttentionConfig>& attention = std::nullopt);

// Initial weights from a loaded model: every tensor of `init` that `loaded` holds is replaced by
// it (cast to init's dtype); the others (the extra tensors of another attention kind) keep their
// initialisation. A tensor of another shape is an error naming `source`. Returns the names of the
// loaded tensors `init` has no place for (another kind's extras), for the caller to report.
std::vector<std::string> take_weights(Params& init, const Params& loaded, const std::string& source);

// What a model directory holds for its tokenizer, beside the model (train::CorpusTokenizer's
// model_dir_files() makes it): files such as tokenizer.json, tokenizer_config.json and
// generation_config.json, and the special token ids config.json records, as JSON text
// (("eos_token_id", "2"), ("eos_token_id", "[128001, 128009]"), ("pad_token_id", "null")).
struct ModelDirExtras {
  std::vector<ModelDirFile> files;
  std::vector<std::pair<std::string, std::string>> config_fields;
};

// Writes config.json (model.export_config(), with extras.config_fields set in it), the files
// model.export_files() and extras.files give, and the weights with the State's buffers (under
// their names, e.g. model.layers.0.self_attn.alpha_ma: one file up to max_shard_bytes, shards
// beyond), each atomically. Params and buffers are checked against model.param_specs() and
// model.init_state() first. checksums.json covers the weights only: config.json and the
// tokenizer's files are texts a user may edit.
void save_model_dir(const std::string& dir, const LanguageModel& model, const Params& params, const State& state,
                    const ModelDirExtras& extras, uint64_t max_shard_bytes = uint64_t(4) << 30);
// The same for the CausalLM of `config`.
void save_model_dir(const std::string& dir, const ModelConfig& config, const Params& params, const State& state,
                    const ModelDirExtras& extras, uint64_t max_shard_bytes = uint64_t(4) << 30);
// Without extras: the model alone (no tokenizer files).
void save_model_dir(const std::string& dir, const LanguageModel& model, const Params& params, const State& state,
                    uint64_t max_shard_bytes = uint64_t(4) << 30);
void save_model_dir(const std::string& dir, const ModelConfig& config, const Params& params, const State& state,
                    uint64_t max_shard_bytes = uint64_t(4) << 30);

// A model directory of any registered family (nn/language_model.hpp): the model made from its
// config.json by make_model, and its parameters and buffers.
struct LoadedLanguageModel {
  std::shared_ptr<const LanguageModel> model;
  Params params;
  State state;  // evaluation mode
};

// Verifies checksums.json when present, builds the model of config.json's model_type (a family
// of user code must be registered first) and reads every tensor model.param_specs() and
// model.init_state() declare, cast to `dtype`. Missing, extra or misshapen tensors are errors
// naming the file and the tensor. The built-in families give what load_model_dir gives.
LoadedLanguageModel load_model(const std::string& dir, DType dtype = DType::f32);

}  // namespace cotan::nn
