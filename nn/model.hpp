// A Llama/Qwen2-style causal language model, built from a ModelConfig.
//
// nn::LanguageModel (nn/language_model.hpp) is the interface it implements for the trainer,
// evaluation, generation and model directories.
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
//
// Incremental decoding (nn/kv_cache.hpp, docs/generation.md): prefill runs the prompts and fills a
// KVCache, each decode_step (or extend) feeds one token (or several) per row and returns the next
// logits. They run without gradients in evaluation mode (alpha_ma frozen, whatever st.training
// says).
#pragma once

#include <utility>
#include <vector>

#include "nn/config.hpp"
#include "nn/kv_cache.hpp"
#include "nn/language_model.hpp"
#include "nn/layers.hpp"
#include "nn/params.hpp"

namespace cotan::nn {

class CausalLM final : public LanguageModel {
 public:
  explicit CausalLM(ModelConfig config, bool checkpoint_layers = false);

  const ModelConfig& config() const { return config_; }
  // LanguageModel: the family is config().model_type, config_json() is config().to_json().
  std::string family() const override { return config_.model_type; }
  Json config_json() const override;
  int64_t vocab_size() const override { return config_.vocab_size; }
  int64_t max_positions() const override { return config_.max_position_embeddings; }
  double init_std() const override { return config_.init_std; }
  // Every parameter: name (HF naming), shape, init, weight decay.
  const std::vector<ParamSpec>& param_specs() const override { return specs_; }

  State init_state(DType dtype = DType::f32) const override;

  // The final hidden states [B, T, D] (after the last norm), for losses that apply the head in chunks.
  std::pair<Tensor, State> hidden(const Tensor& ids, const Params& ps, const State& st) const override;
  // The output projection [V, D] (embed_tokens.weight when tied).
  const Tensor& head_weight(const Params& ps) const override;
  // Per layer, the full names of the weights each joint product stacks (q/k/v with the kind's
  // extra projections; gate/up): nn::adjoin(ps, groups) lays a frozen model's out so that the
  // products read them in place instead of stacking copies on every call.
  std::vector<std::vector<std::string>> joint_weight_groups() const override;
  // An evaluation pass that also returns per-layer attention statistics (docs/attention.md, "Attention statistics").
  // With `weights_of_last_layer`, the last layer's analysis also holds batch row 0's attention
  // weights averaged over heads (AttentionStats::weights, [T, T]).
  // The statistics read the Backend cores' weights: kinds registered with a core of their own
  // have none (analyze refuses them, naming the kind).
  bool has_attention_stats() const override { return attention_kind(config_.attention.kind).core.has_value(); }
  std::vector<LayerAnalysis> analyze(const Tensor& ids, const Params& ps, const State& st,
                                     bool weights_of_last_layer = false) const override;

  // Incremental decoding: for every kind with a cached decoding step (the built-in ones do) but
  // affine_n 'full' (whose N_i = T changes every earlier row as the sequence grows). Without it,
  // prefill, extend and decode_step throw "[decode] attention kind 'x' has no cached decoding
  // step ...", and generation and evaluation recompute whole sequences with apply.
  bool has_kv_cache() const override;
  // Runs the prompts ids [B, T] (every row T >= 1 tokens) and replaces `cache` with their keys
  // and values; its max_length and prefill_chunk are kept. The first cache.prefill_chunk tokens
  // go through the forward pass's fused attention, each later chunk through the cached attention
  // against the slots before it. Returns the logits of each row's last token, [B, V]. Throws
  // "[prefill] ..." for ids that are not [B, T] integers, T past the cache's max_length, or
  // affine_n 'full'.
  Tensor prefill(const Tensor& ids, const Params& ps, const State& st, KVCache& cache) const;
  // Prompts of different lengths (each at least one token), as one batch: the rows are padded to
  // the longest, and the padded slots are masked out and hold zeros (nn/kv_cache.hpp).
  Tensor prefill(const std::vector<std::vector<int32_t>>& prompts, const Params& ps, const State& st,
                 KVCache& cache) const override;
  // Feeds ids [B, Tq], Tq >= 1 tokens per row of a prefilled cache, at RoPE positions
  // cache.length(b), ..., and returns the logits [B, Tq, V] at every new position; the cache
  // grows by Tq slots. Throws "[decode] ..." when the cache is empty or has another batch size,
  // when a row would hold more than max_length tokens (the model's max_position_embeddings by
  // default), or for affine_n 'full'. Equals those positions of apply() on each row's whole
  // sequence.
  Tensor extend(const Tensor& ids, const Params& ps, const State& st, KVCache& cache) const override;
  // extend with one token per row, ids [B, 1]: the logits [B, V] of the token that follows.
  Tensor decode_step(const Tensor& ids, const Params& ps, const State& st, KVCache& cache) const;

  // Model directories: HF's config.json for softmax students; other kinds leave as model_type
  // "cotan" with the transformers remote code beside them (nn/model_dir.hpp).
  Json export_config() const override;
  std::vector<ModelDirFile> export_files() const override;

 private:
  std::pair<Tensor, State> run(const Tensor& ids, const Params& ps, State st, std::vector<LayerAnalysis>* analysis,
                               std::vector<LayerCache>* cache = nullptr) const;
  int64_t cache_limit(const KVCache& cache) const;
  // The blocks on Tq new tokens per row, against `layers` (replaced only when every layer
  // succeeds): the final hidden states [B, Tq, D], after the last norm.
  Tensor advance(const Tensor& ids, const Params& ps, const State& st, const CacheStep& step,
                 std::vector<LayerCache>& layers) const;

  ModelConfig config_;
  bool checkpoint_layers_;
  Embedding embed_;
  std::vector<DecoderBlock> blocks_;
  RMSNorm norm_;
  std::vector<ParamSpec> specs_;
};

}  // namespace cotan::nn
