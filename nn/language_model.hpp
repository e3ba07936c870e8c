// The model interface everything above nn/ takes: the trainer (fit, the objective, the teacher),
// evaluation, generation and model directories work with any LanguageModel, so a model written
// in user code gets all of them. nn::CausalLM (nn/model.hpp) is one implementation.
//
// A model is a description, Lux-style: its parameters live outside it in Params and its buffers
// in State (nn/params.hpp); nothing is updated in place.
//
//   struct MyLM final : nn::LanguageModel { ... };        // the required members below
//   nn::register_model_family("my_lm", [](const Json& config, std::string_view source) {
//     return std::make_unique<MyLM>(MyLM::from_json(config, source));
//   });
//   auto [ps, st] = model.init(gen);
//   auto [logits, st2] = model.apply(ids, ps, st);         // ids [B, T] -> logits [B, T, V]
//
// Required: family, config_json, vocab_size, max_positions, param_specs, hidden and head_weight.
// Optional capabilities, each refused with an error naming the family and what is missing when a
// model does not give it:
//   - incremental decoding (has_kv_cache, prefill, extend): generation and evaluation recompute
//     the whole sequence instead;
//   - attention statistics (analyze), for the study;
//   - joint weight groups, for frozen teachers whose products read stacked weights in place.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "nn/kv_cache.hpp"
#include "nn/params.hpp"
#include "util/json_fwd.hpp"

namespace cotan::nn {

struct LayerAnalysis;  // nn/layers.hpp

// A file a model directory holds beside config.json and the weights (transformers remote code).
// `remove`: a file of that name must not be there (an earlier save's, stale now): it is deleted.
struct ModelDirFile {
  std::string name;
  std::string text;
  bool remove = false;
};

class LanguageModel {
 public:
  virtual ~LanguageModel() = default;

  // ---- required ----
  // The family: the "model_type" of config_json() and the key of the family registry below.
  virtual std::string family() const = 0;
  // The configuration as JSON, with "model_type": family(). make_model(config_json()) rebuilds an
  // equal model; checkpoints record it, and a resume compares it.
  virtual Json config_json() const = 0;
  virtual int64_t vocab_size() const = 0;
  // The longest sequence the model is trained for (its RoPE table, its position embedding).
  virtual int64_t max_positions() const = 0;
  // Every parameter: full name, shape, init, weight decay. init() draws them in this order.
  virtual const std::vector<ParamSpec>& param_specs() const = 0;
  // The final hidden states [B, T, D] (after the last norm) of ids [B, T] (i32 or i64), and the
  // new State (training passes update buffers; st itself is never changed).
  virtual std::pair<Tensor, State> hidden(const Tensor& ids, const Params& ps, const State& st) const = 0;
  // The output projection [V, D]: logits = hidden head^T. Losses apply it in chunks of rows.
  virtual const Tensor& head_weight(const Params& ps) const = 0;

  // ---- with defaults ----
  // The parameters drawn from param_specs (normal(0, init_std())) and init_state.
  virtual std::pair<Params, State> init(Generator& gen, DType dtype = DType::f32) const;
  virtual double init_std() const { return 0.02; }
  // The buffers (none by default), in evaluation mode.
  virtual State init_state(DType dtype = DType::f32) const;
  // logits [B, T, V] = hidden(ids) head_weight^T.
  virtual std::pair<Tensor, State> apply(const Tensor& ids, const Params& ps, const State& st) const;
  int64_t num_params() const { return count_params(param_specs()); }

  // ---- incremental decoding (optional) ----
  virtual bool has_kv_cache() const { return false; }
  // Runs the prompts (ragged rows, each at least one token) and replaces `cache` with them;
  // returns the logits of each row's last token [B, V]. Evaluation mode, no gradients.
  virtual Tensor prefill(const std::vector<std::vector<int32_t>>& prompts, const Params& ps, const State& st,
                         KVCache& cache) const;
  // Feeds ids [B, Tq] to a prefilled cache and returns the logits [B, Tq, V] at the new positions.
  virtual Tensor extend(const Tensor& ids, const Params& ps, const State& st, KVCache& cache) const;
  // extend with one token per row, ids [B, 1]: the logits [B, V] of the token that follows.
  Tensor decode_step(const Tensor& ids, const Params& ps, const State& st, KVCache& cache) const;

  // ---- attention statistics (optional) ----
  virtual bool has_attention_stats() const { return false; }
  // An evaluation pass that returns per-layer attention statistics (docs/attention.md).
  virtual std::vector<LayerAnalysis> analyze(const Tensor& ids, const Params& ps, const State& st,
                                             bool weights_of_last_layer = false) const;

  // ---- joint weight groups (optional) ----
  // Per group, the full names of weights one product stacks (nn::adjoin lays them out adjacent
  // for a frozen model). None by default.
  virtual std::vector<std::vector<std::string>> joint_weight_groups() const { return {}; }

  // ---- model directories ----
  // config.json as written into a model directory (config_json() by default), and the files
  // written beside it (none by default).
  virtual Json export_config() const;
  virtual std::vector<ModelDirFile> export_files() const { return {}; }

 protected:
  [[noreturn]] void lacks(std::string_view op, std::string_view capability) const;
};

// ---- families ----

// Builds a model from its config.json; errors name `source` and the field.
using ModelFactory = std::function<std::unique_ptr<LanguageModel>(const Json& config, std::string_view source)>;

// Registers a family under a model_type; thread-safe, callable from static initialisers. The
// built-in llama, qwen2, mistral and cotan (exported non-softmax students) are nn::CausalLM. A
// name already registered is refused: "[model] model family 'x' is already registered".
void register_model_family(const std::string& model_type, ModelFactory factory);
bool has_model_family(std::string_view model_type);
std::vector<std::string> model_family_names();

// The model of a config.json, by its "model_type" (the built-in families when absent: llama).
// Throws "[model] <source>: unknown model_type 'x' (known: ...)": a family defined in user code
// must be registered before its directories are read.
std::unique_ptr<LanguageModel> make_model(const Json& config, std::string_view source);

}  // namespace cotan::nn
