#include "nn/model.hpp"

#include <tuple>

#include "autograd/autograd.hpp"
#include "nn/hf_remote_code.hpp"
#include "nn/model_dir.hpp"
#include "tensor/ops.hpp"
#include "util/json.hpp"

namespace cotan::nn {

namespace {
std::string layer_prefix(size_t i) { return "model.layers." + std::to_string(i); }
}  // namespace

CausalLM::CausalLM(ModelConfig config, bool checkpoint_layers)
    : config_(std::move(config)), checkpoint_layers_(checkpoint_layers) {
  config_.validate("model");
  const ModelConfig& c = config_;
  embed_ = Embedding{c.vocab_size, c.hidden_size};
  norm_ = RMSNorm{c.hidden_size, c.rms_norm_eps};
  Rope rope{c.dim_per_head(), c.rope_theta, c.rope_scaling};
  for (int64_t i = 0; i < c.num_layers; ++i) {
    DecoderBlock block;
    block.input_norm = block.post_norm = RMSNorm{c.hidden_size, c.rms_norm_eps};
    block.attention =
        Attention{c.hidden_size, c.num_heads, c.num_kv_heads, c.dim_per_head(), c.qkv_bias, c.attention, rope, c.o_bias};
    block.mlp = SwiGLU{c.hidden_size, c.intermediate_size,
                       c.hidden_act == "silu" ? MlpActivation::silu : MlpActivation::gelu_tanh, c.mlp_bias};
    blocks_.push_back(block);
  }
  embed_.specs(specs_, "model.embed_tokens");
  for (size_t i = 0; i < blocks_.size(); ++i) blocks_[i].specs(specs_, layer_prefix(i));
  norm_.specs(specs_, "model.norm");
  if (!c.tie_word_embeddings) Linear{c.hidden_size, c.vocab_size}.specs(specs_, "lm_head");
}

Json CausalLM::config_json() const { return config_.to_json(); }

bool CausalLM::has_kv_cache() const {
  return attention_kind(config_.attention.kind).has_cached_step() &&
         !(config_.attention.affine_n == AffineN::full && is_affine(config_.attention.kind));
}

Json CausalLM::export_config() const {
  Json exported = config_.to_json();
  // Non-softmax kinds leave as their own model type with transformers remote code: HF cannot run
  // them as plain Llama by mistake, and runs their math with trust_remote_code (the built-in
  // cores; a kind with a core of its own is refused there, by name: exported_remote_code).
  if (config_.attention.kind != AttentionKind::softmax) {
    exported["base_model_type"] = config_.model_type;
    exported["model_type"] = kRemoteModelType;
    exported["architectures"] = Json::array({"CotanForCausalLM"});
    exported["auto_map"] = {{"AutoConfig", "configuration_cotan.CotanConfig"},
                            {"AutoModelForCausalLM", "modeling_cotan.CotanForCausalLM"}};
  }
  return exported;
}

std::vector<ModelDirFile> CausalLM::export_files() const {
  const bool remote = config_.attention.kind != AttentionKind::softmax;
  std::vector<ModelDirFile> files;
  // A softmax student is a plain HF directory: an earlier save's remote code goes.
  for (ExportedFile& f : exported_remote_code()) files.push_back({std::move(f.name), remote ? std::move(f.text) : "", !remote});
  return files;
}

State CausalLM::init_state(DType dtype) const {
  State st;
  for (size_t i = 0; i < blocks_.size(); ++i) blocks_[i].attention.buffers(st, layer_prefix(i) + ".self_attn", dtype);
  return st;
}

std::vector<std::vector<std::string>> CausalLM::joint_weight_groups() const {
  std::vector<std::vector<std::string>> groups;
  for (size_t i = 0; i < blocks_.size(); ++i) blocks_[i].joint_weight_groups(groups, layer_prefix(i));
  return groups;
}

const Tensor& CausalLM::head_weight(const Params& ps) const {
  ParamView view(ps);
  return config_.tie_word_embeddings ? view["model.embed_tokens.weight"] : view["lm_head.weight"];
}

std::pair<Tensor, State> CausalLM::run(const Tensor& ids, const Params& ps, State st,
                                       std::vector<LayerAnalysis>* analysis, std::vector<LayerCache>* cache) const {
  if (ids.dim() != 2) fail("model", "token ids must be [batch, seq], got shape ", to_string(ids.shape()));
  if (!is_integral(ids.dtype())) fail("model", "token ids must be i32 or i64, got ", ids.dtype());
  ParamView view(ps);
  Tensor x = embed_.apply(ids, view.sub("model.embed_tokens"));
  for (size_t i = 0; i < blocks_.size(); ++i) {
    const DecoderBlock& block = blocks_[i];
    std::string prefix = layer_prefix(i);
    // An analysis vector may come sized, with its requests (analyze).
    LayerAnalysis* layer = !analysis ? nullptr : analysis->size() > i ? &(*analysis)[i] : &analysis->emplace_back();
    LayerCache* layer_cache = cache ? &cache->emplace_back() : nullptr;
    if (!checkpoint_layers_ || analysis || cache) {
      std::tie(x, st) = block.apply(x, view.sub(prefix), st, prefix, layer, layer_cache);
      continue;
    }
    // Only this block's own parameters enter the checkpoint, so the recomputation sees the same
    // values; its State comes from the first run only (the recomputation's is the same, since
    // next_alpha_ma replays the first run's value, and is dropped).
    std::vector<std::string> names;
    std::vector<Tensor> inputs{x};
    for (const auto& [name, t] : ps)
      if (name.starts_with(prefix + ".")) names.push_back(name), inputs.push_back(t);
    // The recomputation runs after this function returns: capture by value.
    auto first_state = std::make_shared<State>();
    x = checkpoint(
        [block, names, prefix, before = st, first_state](const std::vector<Tensor>& in) {
          Params local;
          for (size_t k = 0; k < names.size(); ++k) local.emplace(names[k], in[k + 1]);
          auto [y, after] = block.apply(in[0], ParamView(local).sub(prefix), before, prefix);
          if (!recomputing()) *first_state = std::move(after);
          return y;
        },
        inputs);
    st = *first_state;
  }
  return {norm_.apply(x, view.sub("model.norm")), std::move(st)};
}

std::pair<Tensor, State> CausalLM::hidden(const Tensor& ids, const Params& ps, const State& st) const {
  return run(ids, ps, st, nullptr);
}

std::vector<LayerAnalysis> CausalLM::analyze(const Tensor& ids, const Params& ps, const State& st,
                                             bool weights_of_last_layer) const {
  NoGrad no_grad;
  State eval = st;
  eval.training = false;
  std::vector<LayerAnalysis> out;
  out.reserve(blocks_.size());
  if (weights_of_last_layer && !blocks_.empty()) {
    out.resize(blocks_.size());
    out.back().with_weights = true;
  }
  run(ids, ps, std::move(eval), &out);
  return out;
}

}  // namespace cotan::nn
