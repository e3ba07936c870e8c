#include "nn/config.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iostream>

#include "util/json.hpp"

namespace cotan::nn {

namespace {

template <class E, size_t N>
E parse_enum(std::string_view text, const std::string_view (&names)[N], const char* what) {
  for (size_t i = 0; i < N; ++i)
    if (names[i] == text) return E(i);
  std::string known;
  for (size_t i = 0; i < N; ++i) known += (i ? ", " : "") + std::string(names[i]);
  fail("config", "unknown ", what, " '", text, "' (known: ", known, ")");
}

constexpr std::string_view kPhis[] = {"linear_clip", "sigmoid"};
constexpr std::string_view kAffineN[] = {"visible", "full"};

}  // namespace

std::string_view name_of(AlphaFn phi) { return kPhis[int(phi)]; }
std::string_view name_of(AffineN n) { return kAffineN[int(n)]; }
AlphaFn parse_alpha_fn(std::string_view t) { return parse_enum<AlphaFn>(t, kPhis, "alpha function"); }
AffineN parse_affine_n(std::string_view t) { return parse_enum<AffineN>(t, kAffineN, "affine_n"); }

namespace {

// Bounds of an accepted config, far above any released model (the largest have vocabularies of
// 256k, hidden sizes of 16k and MLPs of 53k): a config beyond them is a typo or a hostile file.
constexpr int64_t kMaxDimension = int64_t(1) << 24;
constexpr int64_t kMaxLayers = 1 << 16;
constexpr int64_t kMaxParameters = int64_t(1) << 40;

}  // namespace

void ModelConfig::validate(std::string_view source) const {
  auto bad = [&](const auto&... args) { fail("config", source, ": ", args...); };
  auto dimension = [&](int64_t v, const char* name, int64_t limit) {
    if (v <= 0) bad(name, " must be positive, got ", v);
    if (v > limit) bad(name, " ", v, " is above the limit of ", limit);
  };
  dimension(vocab_size, "vocab_size", kMaxDimension);
  dimension(hidden_size, "hidden_size", kMaxDimension);
  dimension(num_layers, "num_hidden_layers", kMaxLayers);
  dimension(num_heads, "num_attention_heads", kMaxDimension);
  dimension(num_kv_heads, "num_key_value_heads", kMaxDimension);
  dimension(intermediate_size, "intermediate_size", kMaxDimension);
  dimension(max_position_embeddings, "max_position_embeddings", int64_t(1) << 40);
  if (head_dim != 0) dimension(head_dim, "head_dim", kMaxDimension);
  if (num_heads % num_kv_heads != 0)
    bad("num_attention_heads ", num_heads, " is not a multiple of num_key_value_heads ", num_kv_heads);
  if (head_dim == 0 && hidden_size % num_heads != 0)
    bad("hidden_size ", hidden_size, " is not a multiple of num_attention_heads ", num_heads, " (give head_dim)");
  if (dim_per_head() % 2 != 0) bad("head dim ", dim_per_head(), " must be even for RoPE");
  if (model_type != "llama" && model_type != "qwen2" && model_type != "mistral")
    bad("unsupported model_type '", model_type, "' (supported: llama, qwen2, mistral)");
  if (rope_scaling.type != "none" && rope_scaling.type != "llama3" && rope_scaling.type != "linear")
    bad("unsupported rope type '", rope_scaling.type, "' (supported: default, linear, llama3)");
  if (rope_scaling.type == "linear" && (!(rope_scaling.factor > 0) || !std::isfinite(rope_scaling.factor)))
    bad("rope_scaling.factor must be positive, got ", rope_scaling.factor);
  if (!(rope_theta > 0) || !std::isfinite(rope_theta)) bad("rope_theta must be a positive number, got ", rope_theta);
  if (rope_scaling.type == "llama3") {
    if (!(rope_scaling.factor >= 1) || !std::isfinite(rope_scaling.factor))
      bad("rope_scaling.factor must be at least 1, got ", rope_scaling.factor);
    if (!(rope_scaling.high_freq_factor > rope_scaling.low_freq_factor) || !(rope_scaling.low_freq_factor > 0) ||
        !std::isfinite(rope_scaling.high_freq_factor))
      bad("rope_scaling needs 0 < low_freq_factor < high_freq_factor, got ", rope_scaling.low_freq_factor, " and ",
          rope_scaling.high_freq_factor);
    dimension(rope_scaling.original_max_position_embeddings, "rope_scaling.original_max_position_embeddings",
              int64_t(1) << 40);
  }
  if (!(attention.rho >= 0 && attention.rho < 1)) bad("attention rho ", attention.rho, " is outside [0, 1)");
  if (!(rms_norm_eps > 0) || !std::isfinite(rms_norm_eps)) bad("rms_norm_eps must be positive, got ", rms_norm_eps);
  if (!(init_std >= 0) || !std::isfinite(init_std)) bad("initializer_range must be non-negative, got ", init_std);
  if (hidden_act != "silu" && hidden_act != "gelu_pytorch_tanh" && hidden_act != "gelu_new")
    bad("hidden_act '", hidden_act, "' is not supported (supported: silu, gelu_pytorch_tanh, gelu_new)");
  // Every dimension is at most 2^24 here, so no product of two overflows; the sums and the
  // products with the layer count are checked.
  int64_t count = 0;
  if (!checked_parameter_count(count) || count > kMaxParameters)
    bad("the model would have more than ", kMaxParameters, " parameters (2^40)");
}

bool ModelConfig::checked_parameter_count(int64_t& count) const {
  const int64_t q = num_heads * dim_per_head(), kv = num_kv_heads * dim_per_head();
  int64_t layer = hidden_size * q + 2 * hidden_size * kv + q * hidden_size + 3 * hidden_size * intermediate_size +
                  2 * hidden_size + (qkv_bias ? q + 2 * kv : 0) + (o_bias ? hidden_size : 0) +
                  (mlp_bias ? 2 * intermediate_size + hidden_size : 0);
  int64_t embeddings = vocab_size * hidden_size * (tie_word_embeddings ? 1 : 2) + hidden_size, layers = 0;
  return !__builtin_mul_overflow(layer, num_layers, &layers) && !__builtin_add_overflow(layers, embeddings, &count);
}

Json ModelConfig::to_json() const {
  Json j = Json::object();
  j["model_type"] = model_type;
  j["architectures"] = Json::array({model_type == "qwen2"     ? "Qwen2ForCausalLM"
                                    : model_type == "mistral" ? "MistralForCausalLM"
                                                              : "LlamaForCausalLM"});
  j["vocab_size"] = vocab_size;
  j["hidden_size"] = hidden_size;
  j["num_hidden_layers"] = num_layers;
  j["num_attention_heads"] = num_heads;
  j["num_key_value_heads"] = num_kv_heads;
  j["intermediate_size"] = intermediate_size;
  if (head_dim) j["head_dim"] = head_dim;
  j["max_position_embeddings"] = max_position_embeddings;
  j["rope_theta"] = rope_theta;
  if (rope_scaling.type == "none") {
    j["rope_scaling"] = nullptr;
  } else {
    Json r = Json::object();
    r["rope_type"] = rope_scaling.type;
    r["factor"] = rope_scaling.factor;
    if (rope_scaling.type == "llama3") {
      r["low_freq_factor"] = rope_scaling.low_freq_factor;
      r["high_freq_factor"] = rope_scaling.high_freq_factor;
      r["original_max_position_embeddings"] = rope_scaling.original_max_position_embeddings;
    }
    j["rope_scaling"] = r;
  }
  j["rms_norm_eps"] = rms_norm_eps;
  j["tie_word_embeddings"] = tie_word_embeddings;
  j["hidden_act"] = hidden_act;
  if (mlp_bias) j["mlp_bias"] = true;
  if (model_type != "qwen2") j["attention_bias"] = qkv_bias;
  j["initializer_range"] = init_std;
  Json a = Json::object();
  a["kind"] = name_of(attention.kind);
  a["phi"] = name_of(attention.phi);
  a["rho"] = attention.rho;
  a["affine_n"] = name_of(attention.affine_n);
  j["attention"] = a;
  return j;
}

namespace {

// Top-level fields that do not change the forward pass (generation settings, bookkeeping, the
// storage dtype, the remote-code map): read by nobody, reported by nobody.
constexpr std::string_view kNoMathFields[] = {
    "_name_or_path", "transformers_version", "torch_dtype", "dtype", "use_cache", "pad_token_id", "bos_token_id",
    "eos_token_id", "pretraining_tp", "output_attentions", "output_hidden_states", "return_dict", "is_decoder",
    "auto_map", "chunk_size_feed_forward", "max_window_layers"};

// Top-level fields that from_json, read_rope or refuse_unsupported read or check.
constexpr std::string_view kReadFields[] = {
    "model_type", "base_model_type", "architectures", "vocab_size", "hidden_size", "num_hidden_layers",
    "num_attention_heads", "num_key_value_heads", "intermediate_size", "head_dim", "max_position_embeddings",
    "rms_norm_eps", "tie_word_embeddings", "attention_bias", "mlp_bias", "hidden_act", "initializer_range",
    "rope_theta", "rope_scaling", "rope_parameters", "attention_dropout", "sliding_window", "use_sliding_window",
    "layer_types", "attention"};

constexpr std::string_view kArchitectures[] = {"LlamaForCausalLM", "Qwen2ForCausalLM", "MistralForCausalLM",
                                               "CotanForCausalLM"};

// The RoPE settings, from transformers 4.x's rope_theta and rope_scaling or 5.x's rope_parameters
// (which holds rope_theta too); a config giving both must give the same values.
void read_rope(const JsonFields& f, ModelConfig& c) {
  auto read_scaling = [&](const JsonFields& r, RopeScaling& out) {
    const std::string type = r.optional("rope_type", r.optional("type", "default"));
    out.type = type == "default" ? "none" : type;
    out.factor = r.optional("factor", 1.0);
    out.low_freq_factor = r.optional("low_freq_factor", 1.0);
    out.high_freq_factor = r.optional("high_freq_factor", 4.0);
    out.original_max_position_embeddings = r.optional("original_max_position_embeddings", int64_t{8192});
  };
  c.rope_theta = f.optional("rope_theta", 10000.0);
  if (const auto r = f.object("rope_scaling")) read_scaling(*r, c.rope_scaling);
  const auto p = f.object("rope_parameters");
  if (!p) return;
  RopeScaling scaling;
  read_scaling(*p, scaling);
  const double theta = p->optional("rope_theta", c.rope_theta);
  if (f.find("rope_theta") && theta != c.rope_theta)
    f.error("rope_theta ", c.rope_theta, " and rope_parameters.rope_theta ", theta, " disagree");
  if (f.find("rope_scaling") && (scaling.type != c.rope_scaling.type || scaling.factor != c.rope_scaling.factor))
    f.error("rope_scaling and rope_parameters disagree (", c.rope_scaling.type, " x", c.rope_scaling.factor, " against ",
            scaling.type, " x", scaling.factor, ")");
  c.rope_theta = theta;
  c.rope_scaling = scaling;
}

// Fields that would change the math in ways cotan does not implement are refused, naming the field.
void refuse_unsupported(const JsonFields& f, const ModelConfig& c) {
  if (const Json* a = f.find("architectures")) {
    if (!a->is_array() || a->size() != 1 || !(*a)[0].is_string())
      f.error("field 'architectures' must be a list of one class name, got ", dump_json(*a));
    const std::string& name = as_string((*a)[0]);
    if (std::find(std::begin(kArchitectures), std::end(kArchitectures), name) == std::end(kArchitectures))
      f.error("architectures '", name, "' is not supported (supported: LlamaForCausalLM, Qwen2ForCausalLM, ",
              "MistralForCausalLM, CotanForCausalLM)");
  }
  if (const double p = f.optional("attention_dropout", 0.0); p != 0)
    f.error("attention_dropout ", p, " is not supported (cotan trains without dropout)");
  // Sliding-window attention: Qwen2 applies it only with use_sliding_window, Mistral whenever
  // sliding_window is set; a window as long as the context changes nothing.
  const bool qwen = c.model_type == "qwen2";
  if (const Json* w = f.find("sliding_window"); w && (!qwen || f.optional("use_sliding_window", false))) {
    const int64_t window = f.required<int64_t>("sliding_window");
    if (window < c.max_position_embeddings)
      f.error("sliding_window ", window, " is not supported (sliding-window attention; max_position_embeddings is ",
              c.max_position_embeddings, ")");
  }
  if (const Json* layers = f.find("layer_types")) {
    if (!layers->is_array()) f.error("field 'layer_types' must be a list, got ", kind_name(*layers));
    for (const Json& t : *layers)
      if (!t.is_string() || as_string(t) != "full_attention")
        f.error("layer_types holds ", dump_json(t), ": only full_attention layers are supported");
  }
}

}  // namespace

ModelConfig ModelConfig::from_json(const Json& j, std::string_view source) {
  const JsonFields f(j, "config", source);
  ModelConfig c;
  c.model_type = f.optional("model_type", "llama");
  // cotan's exported non-softmax students (nn/model_dir.hpp): the base family's config.
  if (c.model_type == "cotan") c.model_type = f.required<std::string>("base_model_type");
  c.vocab_size = f.required<int64_t>("vocab_size");
  c.hidden_size = f.required<int64_t>("hidden_size");
  c.num_layers = f.required<int64_t>("num_hidden_layers");
  c.num_heads = f.required<int64_t>("num_attention_heads");
  c.num_kv_heads = f.optional("num_key_value_heads", c.num_heads);
  c.intermediate_size = f.required<int64_t>("intermediate_size");
  // An explicit head_dim must be positive; one equal to hidden_size / num_attention_heads is the default.
  c.head_dim = f.optional("head_dim", int64_t{0});
  if (f.find("head_dim") && c.head_dim <= 0) f.error("head_dim must be positive, got ", c.head_dim);
  c.max_position_embeddings = f.optional("max_position_embeddings", int64_t{2048});
  c.rms_norm_eps = f.optional("rms_norm_eps", 1e-6);
  c.tie_word_embeddings = f.optional("tie_word_embeddings", false);
  // HF Qwen2 has q/k/v biases always; HF Llama's attention_bias puts one on o_proj as well.
  c.qkv_bias = c.model_type == "qwen2" ? true : f.optional("attention_bias", false);
  c.o_bias = c.model_type != "qwen2" && c.qkv_bias;
  c.init_std = f.optional("initializer_range", 0.02);
  c.mlp_bias = f.optional("mlp_bias", false);
  c.hidden_act = f.optional("hidden_act", "silu");
  read_rope(f, c);
  if (const auto a = f.object("attention")) {
    c.attention.kind = parse_attention_kind(a->optional("kind", "softmax"));
    c.attention.phi = parse_alpha_fn(a->optional("phi", "linear_clip"));
    c.attention.rho = a->optional("rho", 0.9);
    c.attention.affine_n = parse_affine_n(a->optional("affine_n", "visible"));
  }
  c.validate(source);
  refuse_unsupported(f, c);
  if (c.head_dim != 0 && c.head_dim * c.num_heads == c.hidden_size) c.head_dim = 0;  // validated: no overflow
  // What is left: fields no part of cotan reads.
  for (const auto& item : j.items()) {
    const std::string& key = item.key();
    const auto known = [&](const auto& list) { return std::find(std::begin(list), std::end(list), key) != std::end(list); };
    if (!known(kReadFields) && !known(kNoMathFields)) c.unknown_fields.push_back(key);
  }
  return c;
}

namespace {

struct Preset {
  const char* name;
  const char* type;
  int64_t hidden, layers, heads, kv, inter, vocab;
  double theta;
  const char* scaling;  // "none" or "llama3"
  double factor;
  double eps;
  bool tied, bias;
  int64_t max_positions;
};

// docs/models.md ("Configs and presets"), plus the tiny pair of the default recipe and the small pair of the `small` recipe (byte vocabulary: 256 + end of document).
constexpr Preset kPresets[] = {
    {"tiny-teacher", "llama", 192, 4, 6, 2, 512, 257, 10000.0, "none", 1, 1e-5, false, false, 1024},
    {"tiny-student", "llama", 128, 2, 4, 2, 384, 257, 10000.0, "none", 1, 1e-5, false, false, 1024},
    // The `small` recipe's pair: deeper, for the first-token sink to have a chance to form.
    {"small-teacher", "llama", 256, 6, 8, 4, 704, 257, 10000.0, "none", 1, 1e-5, false, false, 1024},
    {"small-student", "llama", 192, 4, 6, 2, 512, 257, 10000.0, "none", 1, 1e-5, false, false, 1024},
    {"qwen1.5-0.5b", "qwen2", 1024, 24, 16, 16, 2816, 151936, 1e6, "none", 1, 1e-6, true, true, 32768},
    {"qwen1.5-1.8b", "qwen2", 2048, 24, 16, 16, 5504, 151936, 1e6, "none", 1, 1e-6, false, true, 32768},
    {"llama3.2-1b", "llama", 2048, 16, 32, 8, 8192, 128256, 5e5, "llama3", 32, 1e-5, true, false, 131072},
    {"llama3.2-3b", "llama", 3072, 28, 24, 8, 8192, 128256, 5e5, "llama3", 32, 1e-5, true, false, 131072},
    {"llama3.1-8b", "llama", 4096, 32, 32, 8, 14336, 128256, 5e5, "llama3", 8, 1e-5, false, false, 131072},
};

}  // namespace

ModelConfig preset(std::string_view name) {
  for (const Preset& p : kPresets) {
    if (name != p.name) continue;
    ModelConfig c;
    c.model_type = p.type;
    c.hidden_size = p.hidden;
    c.num_layers = p.layers;
    c.num_heads = p.heads;
    c.num_kv_heads = p.kv;
    c.intermediate_size = p.inter;
    c.vocab_size = p.vocab;
    c.rope_theta = p.theta;
    c.rope_scaling.type = p.scaling;
    c.rope_scaling.factor = p.factor;
    c.rms_norm_eps = p.eps;
    c.tie_word_embeddings = p.tied;
    c.qkv_bias = p.bias;
    c.max_position_embeddings = p.max_positions;
    return c;
  }
  std::string known;
  for (const Preset& p : kPresets) known += (known.empty() ? "" : ", ") + std::string(p.name);
  fail("config", "unknown preset '", name, "' (known: ", known, ")");
}

ModelConfig load_config(const std::string& name_or_path) {
  namespace fs = std::filesystem;
  fs::path path(name_or_path);
  if (fs::is_directory(path)) path /= "config.json";
  if (fs::is_regular_file(path)) {
    ModelConfig c = ModelConfig::from_json(read_json_file(path.string()), path.string());
    if (!c.unknown_fields.empty()) {
      std::string names;
      for (const std::string& n : c.unknown_fields) names += (names.empty() ? "" : ", ") + n;
      std::cerr << "note: " << path.string() << ": fields cotan does not read (they change nothing here): " << names << "\n";
    }
    return c;
  }
  if (name_or_path.find('/') != std::string::npos || name_or_path.ends_with(".json"))
    fail("config", name_or_path, ": no such file or directory");
  return preset(name_or_path);
}

}  // namespace cotan::nn
