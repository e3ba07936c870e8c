#include "nn/config.hpp"

#include <filesystem>

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

void ModelConfig::validate(std::string_view source) const {
  auto positive = [&](int64_t v, const char* name) {
    if (v <= 0) fail("config", source, ": ", name, " must be positive, got ", v);
  };
  positive(vocab_size, "vocab_size");
  positive(hidden_size, "hidden_size");
  positive(num_layers, "num_hidden_layers");
  positive(num_heads, "num_attention_heads");
  positive(num_kv_heads, "num_key_value_heads");
  positive(intermediate_size, "intermediate_size");
  if (num_heads % num_kv_heads != 0)
    fail("config", source, ": num_attention_heads ", num_heads, " is not a multiple of num_key_value_heads ", num_kv_heads);
  if (head_dim == 0 && hidden_size % num_heads != 0)
    fail("config", source, ": hidden_size ", hidden_size, " is not a multiple of num_attention_heads ", num_heads);
  if (dim_per_head() % 2 != 0) fail("config", source, ": head dim ", dim_per_head(), " must be even for RoPE");
  if (model_type != "llama" && model_type != "qwen2")
    fail("config", source, ": unsupported model_type '", model_type, "' (supported: llama, qwen2)");
  if (rope_scaling.type != "none" && rope_scaling.type != "llama3")
    fail("config", source, ": unsupported rope_scaling type '", rope_scaling.type, "' (supported: llama3)");
  if (!(attention.rho >= 0 && attention.rho < 1)) fail("config", source, ": attention rho ", attention.rho, " is outside [0, 1)");
  if (!(rms_norm_eps > 0)) fail("config", source, ": rms_norm_eps must be positive");
}

Json ModelConfig::to_json() const {
  Json j = Json::object();
  j["model_type"] = model_type;
  j["architectures"] = Json::array({model_type == "qwen2" ? "Qwen2ForCausalLM" : "LlamaForCausalLM"});
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
    r["low_freq_factor"] = rope_scaling.low_freq_factor;
    r["high_freq_factor"] = rope_scaling.high_freq_factor;
    r["original_max_position_embeddings"] = rope_scaling.original_max_position_embeddings;
    j["rope_scaling"] = r;
  }
  j["rms_norm_eps"] = rms_norm_eps;
  j["tie_word_embeddings"] = tie_word_embeddings;
  j["hidden_act"] = "silu";
  if (model_type == "llama") j["attention_bias"] = qkv_bias;
  j["initializer_range"] = init_std;
  Json a = Json::object();
  a["kind"] = name_of(attention.kind);
  a["phi"] = name_of(attention.phi);
  a["rho"] = attention.rho;
  a["affine_n"] = name_of(attention.affine_n);
  j["attention"] = a;
  return j;
}

ModelConfig ModelConfig::from_json(const Json& j, std::string_view source) {
  const JsonFields f(j, "config", source);
  ModelConfig c;
  c.model_type = f.optional("model_type", "llama");
  c.vocab_size = f.required<int64_t>("vocab_size");
  c.hidden_size = f.required<int64_t>("hidden_size");
  c.num_layers = f.required<int64_t>("num_hidden_layers");
  c.num_heads = f.required<int64_t>("num_attention_heads");
  c.num_kv_heads = f.optional("num_key_value_heads", c.num_heads);
  c.intermediate_size = f.required<int64_t>("intermediate_size");
  c.head_dim = f.optional("head_dim", int64_t{0});
  if (c.head_dim * c.num_heads == c.hidden_size) c.head_dim = 0;
  c.max_position_embeddings = f.optional("max_position_embeddings", int64_t{2048});
  c.rope_theta = f.optional("rope_theta", 10000.0);
  c.rms_norm_eps = f.optional("rms_norm_eps", 1e-6);
  c.tie_word_embeddings = f.optional("tie_word_embeddings", false);
  c.qkv_bias = c.model_type == "qwen2" ? true : f.optional("attention_bias", false);
  c.init_std = f.optional("initializer_range", 0.02);
  if (const auto r = f.object("rope_scaling")) {
    const std::string type = r->optional("rope_type", r->optional("type", "none"));
    c.rope_scaling.type = type == "default" ? "none" : type;
    c.rope_scaling.factor = r->optional("factor", 1.0);
    c.rope_scaling.low_freq_factor = r->optional("low_freq_factor", 1.0);
    c.rope_scaling.high_freq_factor = r->optional("high_freq_factor", 4.0);
    c.rope_scaling.original_max_position_embeddings = r->optional("original_max_position_embeddings", int64_t{8192});
  }
  if (const auto a = f.object("attention")) {
    c.attention.kind = parse_attention_kind(a->optional("kind", "softmax"));
    c.attention.phi = parse_alpha_fn(a->optional("phi", "linear_clip"));
    c.attention.rho = a->optional("rho", 0.9);
    c.attention.affine_n = parse_affine_n(a->optional("affine_n", "visible"));
  }
  c.validate(source);
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

// docs/models.md ("Configs and presets"), plus the tiny pair of the default recipe (byte vocabulary: 256 + end of document).
constexpr Preset kPresets[] = {
    {"tiny-teacher", "llama", 192, 4, 6, 2, 512, 257, 10000.0, "none", 1, 1e-5, false, false, 1024},
    {"tiny-student", "llama", 128, 2, 4, 2, 384, 257, 10000.0, "none", 1, 1e-5, false, false, 1024},
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
  if (fs::is_regular_file(path)) return ModelConfig::from_json(read_json_file(path.string()), path.string());
  if (name_or_path.find('/') != std::string::npos || name_or_path.ends_with(".json"))
    fail("config", name_or_path, ": no such file or directory");
  return preset(name_or_path);
}

}  // namespace cotan::nn
