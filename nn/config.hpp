// Model configurations: HF config.json fields plus cotan's attention options, and the presets of
// docs/models.md, "Configs and presets".
//
// JSON (HF names are read as HF writes them; cotan adds an "attention" object):
//   {"model_type": "llama", "vocab_size": 128256, "hidden_size": 2048, "num_hidden_layers": 16,
//    "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 8192,
//    "rope_theta": 500000.0, "rope_scaling": {"rope_type": "llama3", "factor": 32.0, ...},
//    "rms_norm_eps": 1e-05, "tie_word_embeddings": true, "attention_bias": false,
//    "attention": {"kind": "affine", "phi": "linear_clip", "rho": 0.9, "affine_n": "visible"}}
// model_type "qwen2" implies q/k/v biases (as in HF Qwen2); "attention_bias" sets them and the
// o_proj bias for llama and mistral. Both transformers spellings of RoPE are read: 4.x's
// rope_theta + rope_scaling and 5.x's rope_parameters (types default, linear, llama3). Every field
// that would change the math in a way cotan does not implement is refused, naming the field
// (hidden_act other than silu and the tanh GELUs, attention_dropout, a sliding window shorter
// than the context, layer_types other than full_attention, an unknown architecture).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "nn/attention.hpp"
#include "nn/attention_kinds.hpp"
#include "tensor/shape.hpp"
#include "util/json_fwd.hpp"

namespace cotan::nn {

enum class AlphaFn { linear_clip, sigmoid };
enum class AttentionImpl { fused, composed };

std::string_view name_of(AlphaFn phi);
std::string_view name_of(AffineN n);
// Parsers throw "[config] unknown alpha function 'x' (known: linear_clip, sigmoid)". The attention
// kinds, their names and parser are in nn/attention_kinds.hpp.
AlphaFn parse_alpha_fn(std::string_view text);
AffineN parse_affine_n(std::string_view text);

struct AttentionConfig {
  AttentionKind kind = AttentionKind::softmax;
  AlphaFn phi = AlphaFn::linear_clip;
  double rho = 0.9;  // alpha_ma <- rho alpha_ma + (1 - rho) mean(alpha)
  AffineN affine_n = AffineN::visible;
  AttentionImpl impl = AttentionImpl::fused;
};

struct RopeScaling {
  std::string type = "none";  // "none", "linear" or "llama3"
  double factor = 1.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int64_t original_max_position_embeddings = 8192;
  bool operator==(const RopeScaling&) const = default;
};

struct ModelConfig {
  std::string model_type = "llama";  // "llama", "qwen2" or "mistral" (Llama's math, its own name)
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t intermediate_size = 0;
  int64_t head_dim = 0;  // 0: hidden_size / num_heads
  int64_t max_position_embeddings = 2048;
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;
  double rms_norm_eps = 1e-6;
  bool tie_word_embeddings = false;
  bool qkv_bias = false;
  bool o_bias = false;     // o_proj bias: HF Llama's attention_bias sets it with the q/k/v ones
  bool mlp_bias = false;   // biases on gate_proj, up_proj and down_proj (HF's mlp_bias)
  // The MLP's activation: "silu", or the tanh approximation of GELU, which HF names
  // "gelu_pytorch_tanh" and "gelu_new" (kept as written).
  std::string hidden_act = "silu";
  double init_std = 0.02;  // normal init of every matrix; norms start at 1, biases and sinks at 0
  AttentionConfig attention;
  // Top-level fields of the file that cotan neither reads nor knows to leave the math unchanged
  // (load_config prints them once); empty for presets.
  std::vector<std::string> unknown_fields;

  int64_t dim_per_head() const { return head_dim ? head_dim : hidden_size / num_heads; }
  // Throws "[config] <source>: num_attention_heads 12 is not a multiple of num_key_value_heads 5".
  // Every dimension positive and bounded (2^24, layers 2^16), the parameter count at most 2^40,
  // computed in checked arithmetic; errors name the field: "[config] a/config.json: hidden_size
  // 4611686018427387904 is above the limit of 16777216".
  void validate(std::string_view source) const;
  // The parameter count of the softmax model (kinds add a few per head); false when it overflows
  // an int64. Needs dimensions within validate's bounds.
  bool checked_parameter_count(int64_t& count) const;
  Json to_json() const;
  // Reads HF config.json fields; missing required fields are named in the error with `source`.
  static ModelConfig from_json(const Json& json, std::string_view source);
};

// Throws "[config] unknown preset 'x' (known: tiny-teacher, ...)".
ModelConfig preset(std::string_view name);
// A preset name, a config.json file, or a directory holding config.json.
ModelConfig load_config(const std::string& name_or_path);

}  // namespace cotan::nn
