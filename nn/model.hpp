// A Llama/Qwen2-style causal language model, built from a ModelConfig.
//
//   nn::CausalLM model(nn::preset("tiny-student"));
//   Generator gen(42);
//   auto [ps, st] = model.init(gen);                 // Params (HF names) and State (alpha_ma, ...)
//   st.training = true;
//   auto [logits, st2] = model.apply(ids, ps, st);   // ids [B, T] -> logits [B, T, V]
//
// apply never changes `st`: the updated buffers come back in st2. With checkpoint_layers, each
// decoder block's activations are recomputed in the backward pass (its state from the
// recomputation is dropped, so alpha_ma is updated once per training pass).
#pragma once

#include <utility>
#include <vector>

#include "nn/config.hpp"
#include "nn/layers.hpp"
#include "nn/params.hpp"

namespace cotan::nn {

class CausalLM {
 public:
  explicit CausalLM(ModelConfig config, bool checkpoint_layers = false);

  const ModelConfig& config() const { return config_; }
  // Every parameter: name (HF naming), shape, init, weight decay.
  const std::vector<ParamSpec>& param_specs() const { return specs_; }
  int64_t num_params() const { return count_params(specs_); }

  std::pair<Params, State> init(Generator& gen, DType dtype = DType::f32) const;
  State init_state(DType dtype = DType::f32) const;

  std::pair<Tensor, State> apply(const Tensor& ids, const Params& ps, const State& st) const;
  // The final hidden states [B, T, D] (after the last norm), for losses that apply the head in chunks.
  std::pair<Tensor, State> hidden(const Tensor& ids, const Params& ps, const State& st) const;
  // The output projection [V, D] (embed_tokens.weight when tied).
  const Tensor& head_weight(const Params& ps) const;
  // An evaluation pass that also returns per-layer attention statistics (docs/attention.md, "Attention statistics").
  std::vector<LayerAnalysis> analyze(const Tensor& ids, const Params& ps, const State& st) const;

 private:
  std::pair<Tensor, State> run(const Tensor& ids, const Params& ps, State st, std::vector<LayerAnalysis>* analysis) const;

  ModelConfig config_;
  bool checkpoint_layers_;
  Embedding embed_;
  std::vector<DecoderBlock> blocks_;
  RMSNorm norm_;
  std::vector<ParamSpec> specs_;
};

}  // namespace cotan::nn
