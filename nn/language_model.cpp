#include "nn/language_model.hpp"

#include <map>
#include <mutex>

#include "nn/layers.hpp"
#include "nn/model.hpp"
#include "nn/model_dir.hpp"
#include "tensor/ops.hpp"
#include "util/json.hpp"

namespace cotan::nn {

std::pair<Params, State> LanguageModel::init(Generator& gen, DType dtype) const {
  return {init_params(param_specs(), gen, dtype, init_std()), init_state(dtype)};
}

State LanguageModel::init_state(DType) const { return {}; }

std::pair<Tensor, State> LanguageModel::apply(const Tensor& ids, const Params& ps, const State& st) const {
  auto [h, next] = hidden(ids, ps, st);
  return {matmul(h, transpose(head_weight(ps))), std::move(next)};
}

void LanguageModel::lacks(std::string_view op, std::string_view capability) const {
  fail(op, "the model family '", family(), "' has no ", capability);
}

Tensor LanguageModel::prefill(const std::vector<std::vector<int32_t>>&, const Params&, const State&, KVCache&) const {
  lacks("prefill", "incremental decoding (has_kv_cache() is false: recompute the whole sequence instead)");
}

Tensor LanguageModel::extend(const Tensor&, const Params&, const State&, KVCache&) const {
  lacks("decode", "incremental decoding (has_kv_cache() is false: recompute the whole sequence instead)");
}

Tensor LanguageModel::decode_step(const Tensor& ids, const Params& ps, const State& st, KVCache& cache) const {
  if (ids.dim() != 2 || ids.size(1) != 1)
    fail("decode", "decode_step takes one token per row, ids [B, 1], got ", to_string(ids.shape()));
  Tensor logits = extend(ids, ps, st, cache);  // [B, 1, V]
  return reshape(logits, {logits.size(0), logits.size(2)});
}

std::vector<LayerAnalysis> LanguageModel::analyze(const Tensor&, const Params&, const State&, bool) const {
  lacks("analyze", "attention statistics");
}

Json LanguageModel::export_config() const { return config_json(); }

namespace {

struct FamilyRegistry {
  std::mutex mutex;
  std::map<std::string, ModelFactory, std::less<>> factories;
};

std::unique_ptr<LanguageModel> make_causal_lm(const Json& config, std::string_view source) {
  return std::make_unique<CausalLM>(ModelConfig::from_json(config, source));
}

FamilyRegistry& families() {
  static FamilyRegistry* registry = [] {
    auto* r = new FamilyRegistry;  // never destroyed: user families may register from static initialisers
    for (const char* name : {"llama", "qwen2", "mistral", kRemoteModelType}) r->factories.emplace(name, make_causal_lm);
    return r;
  }();
  return *registry;
}

}  // namespace

void register_model_family(const std::string& model_type, ModelFactory factory) {
  if (model_type.empty()) fail("model", "a model family needs a name (its config.json model_type)");
  if (!factory) fail("model", "model family '", model_type, "' has no factory");
  FamilyRegistry& r = families();
  std::lock_guard lock(r.mutex);
  if (!r.factories.emplace(model_type, std::move(factory)).second)
    fail("model", "model family '", model_type, "' is already registered");
}

bool has_model_family(std::string_view model_type) {
  FamilyRegistry& r = families();
  std::lock_guard lock(r.mutex);
  return r.factories.find(model_type) != r.factories.end();
}

std::vector<std::string> model_family_names() {
  FamilyRegistry& r = families();
  std::lock_guard lock(r.mutex);
  std::vector<std::string> names;
  for (const auto& item : r.factories) names.push_back(item.first);
  return names;
}

std::unique_ptr<LanguageModel> make_model(const Json& config, std::string_view source) {
  if (!config.is_object()) fail("model", source, ": a model config must be a JSON object");
  std::string type = "llama";
  if (const Json* t = find_member(config, "model_type")) {
    if (!t->is_string()) fail("model", source, ": field 'model_type' must be a string");
    type = as_string(*t);
  }
  ModelFactory factory;
  {
    FamilyRegistry& r = families();
    std::lock_guard lock(r.mutex);
    if (auto it = r.factories.find(type); it != r.factories.end()) factory = it->second;
  }
  if (!factory) {
    std::string known;
    for (const std::string& name : model_family_names()) known += (known.empty() ? "" : ", ") + name;
    fail("model", source, ": unknown model_type '", type, "' (known: ", known,
         "; a family defined in your own code must be registered with nn::register_model_family first)");
  }
  std::unique_ptr<LanguageModel> model = factory(config, source);
  if (!model) fail("model", source, ": the factory of model family '", type, "' returned no model");
  return model;
}

}  // namespace cotan::nn
