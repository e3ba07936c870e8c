// HF model directories: round trips, tied embeddings, sharding and bad input.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "nn/model_dir.hpp"
#include "nn/model.hpp"
#include "nn/safetensors.hpp"
#include "tensor/ops.hpp"
#include "util/json.hpp"

using namespace cotan;
using namespace cotan::nn;
namespace fs = std::filesystem;

namespace {

ModelConfig small(AttentionKind kind, bool tied) {
  ModelConfig c;
  c.vocab_size = 13;
  c.hidden_size = 8;
  c.num_layers = 2;
  c.num_heads = 2;
  c.num_kv_heads = 1;
  c.intermediate_size = 12;
  c.tie_word_embeddings = tied;
  c.attention.kind = kind;
  return c;
}

std::string fresh_dir(const std::string& name) {
  fs::path p = fs::temp_directory_path() / ("cotan_ckpt_" + name);
  fs::remove_all(p);
  return p.string();
}

bool same_bits(const Tensor& a, const Tensor& b) {
  Tensor x = contiguous(a), y = contiguous(b);
  return x.shape() == y.shape() && x.dtype() == y.dtype() && std::memcmp(x.data_ptr(), y.data_ptr(), x.nbytes()) == 0;
}

}  // namespace

TEST_CASE("a saved model loads back bit for bit, for every kind, tied or not") {
  for (const AttentionKindInfo& info : attention_kinds()) {
    const AttentionKind kind = info.kind;
    for (bool tied : {false, true}) {
      CAPTURE(name_of(kind));
      ModelConfig c = small(kind, tied);
      Generator gen(1);
      auto [ps, st] = CausalLM(c).init(gen);
      std::string dir = fresh_dir("roundtrip");
      save_model_dir(dir, c, ps, st);
      CHECK(fs::exists(fs::path(dir) / "config.json"));
      SafetensorsFile file((fs::path(dir) / "model.safetensors").string());
      CHECK(file.contains("lm_head.weight") == !tied);
      CHECK(file.contains("model.layers.1.self_attn.q_proj.weight"));
      LoadedModel back = load_model_dir(dir);
      CHECK(back.config.to_json() == c.to_json());
      REQUIRE(back.params.size() == ps.size());
      for (const auto& [name, t] : ps) CHECK(same_bits(t, back.params.at(name)));
      REQUIRE(back.state.buffers.size() == st.buffers.size());
      for (const auto& [name, t] : st.buffers) CHECK(same_bits(t, back.state.buffers.at(name)));
    }
  }
}

TEST_CASE("a model directory carries the buffers the forward pass reads: alpha_ma comes back, and must") {
  ModelConfig c = small(AttentionKind::affine, false);
  Generator gen(3);
  auto [ps, st] = CausalLM(c).init(gen);
  for (auto& [name, t] : st.buffers) t = rand(t.shape(), gen) * 0.7 + 0.2;  // as training leaves them
  std::string dir = fresh_dir("buffers");
  save_model_dir(dir, c, ps, st);
  const LoadedModel back = load_model_dir(dir);
  Tensor ids = from_vector(std::vector<int64_t>{1, 2, 3, 4}, {1, 4});
  State eval = st;
  eval.training = false;
  // The reloaded model computes what the saved one did, alpha_ma included.
  CHECK(same_bits(CausalLM(c).apply(ids, ps, eval).first, CausalLM(back.config).apply(ids, back.params, back.state).first));
  // A State without the buffer is refused on save; a file without it on load.
  CHECK_THROWS_WITH_AS(save_model_dir(fresh_dir("buffers2"), c, ps, State{}),
                       ("[checkpoint] " + fresh_dir("buffers2") + ": the State has no buffer 'model.layers.0.self_attn.alpha_ma' to save").c_str(),
                       Error);
  std::string file = (fs::path(dir) / "model.safetensors").string();
  auto tensors = load_safetensors(file);
  tensors.erase("model.layers.1.self_attn.alpha_ma");
  save_safetensors(file, tensors);
  fs::remove(fs::path(dir) / kChecksumsName);
  CHECK_THROWS_WITH_AS(load_model_dir(dir),
                       ("[checkpoint] " + file + ": missing buffer 'model.layers.1.self_attn.alpha_ma' (the affine kind's "
                        "running average of alpha; the forward pass reads it)").c_str(),
                       Error);
}

TEST_CASE("a large model is sharded with an index") {
  ModelConfig c = small(AttentionKind::affine, false);
  Generator gen(2);
  auto [ps, st] = CausalLM(c).init(gen);
  std::string dir = fresh_dir("sharded");
  save_model_dir(dir, c, ps, st, 1024);
  CHECK(fs::exists(fs::path(dir) / "model.safetensors.index.json"));
  CHECK_FALSE(fs::exists(fs::path(dir) / "model.safetensors"));
  LoadedModel back = load_model_dir(dir);
  for (const auto& [name, t] : ps) CHECK(same_bits(t, back.params.at(name)));
}

TEST_CASE("an HF-style directory written by hand loads, and its attention kind can be chosen") {
  std::string dir = fresh_dir("hf");
  fs::create_directories(dir);
  std::ofstream(fs::path(dir) / "config.json") << R"({
    "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "vocab_size": 13, "hidden_size": 8,
    "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 2, "intermediate_size": 12,
    "rope_theta": 1000000.0, "rms_norm_eps": 1e-06, "tie_word_embeddings": true, "torch_dtype": "bfloat16"})";
  std::map<std::string, Tensor> tensors;
  Generator gen(3);
  auto add = [&](const std::string& name, Shape shape) { tensors[name] = cast(randn(shape, gen), DType::bf16); };
  add("model.embed_tokens.weight", {13, 8});
  add("model.norm.weight", {8});
  add("model.layers.0.input_layernorm.weight", {8});
  add("model.layers.0.post_attention_layernorm.weight", {8});
  for (const char* p : {"q", "k", "v"}) {
    add(std::string("model.layers.0.self_attn.") + p + "_proj.weight", {8, 8});
    add(std::string("model.layers.0.self_attn.") + p + "_proj.bias", {8});
  }
  add("model.layers.0.self_attn.o_proj.weight", {8, 8});
  add("model.layers.0.mlp.gate_proj.weight", {12, 8});
  add("model.layers.0.mlp.up_proj.weight", {12, 8});
  add("model.layers.0.mlp.down_proj.weight", {8, 12});
  save_safetensors((fs::path(dir) / "model.safetensors").string(), tensors);
  LoadedModel m = load_model_dir(dir);
  CHECK(m.config.qkv_bias);
  CHECK(m.params.size() == tensors.size());
  CHECK(m.params.at("model.norm.weight").dtype() == DType::f32);
  CHECK(same_bits(cast(m.params.at("model.norm.weight"), DType::bf16), tensors.at("model.norm.weight")));
  // As an affine model, the same directory lacks the alpha projections.
  AttentionConfig affine;
  affine.kind = AttentionKind::affine;
  CHECK_THROWS_WITH_AS(load_model_dir(dir, DType::f32, affine),
                       ("[checkpoint] " + (fs::path(dir) / "model.safetensors").string() +
                        ": missing tensor 'model.layers.0.self_attn.alpha_proj.weight' (it holds 14 tensors: "
                        "'model.embed_tokens.weight', 'model.layers.0.input_layernorm.weight', "
                        "'model.layers.0.mlp.down_proj.weight', 'model.layers.0.mlp.gate_proj.weight', "
                        "'model.layers.0.mlp.up_proj.weight', ...)").c_str(),
                       Error);
  // Running the loaded model works.
  Tensor ids = from_vector(std::vector<int64_t>{1, 2, 3}, {1, 3});
  CHECK(CausalLM(m.config).apply(ids, m.params, CausalLM(m.config).init_state()).first.shape() == Shape{1, 3, 13});
}

TEST_CASE("bad model directories give one clear error naming the file and tensor") {
  ModelConfig c = small(AttentionKind::softmax, false);
  Generator gen(4);
  auto [ps, st] = CausalLM(c).init(gen);
  std::string dir = fresh_dir("bad");
  save_model_dir(dir, c, ps, st);
  std::string file = (fs::path(dir) / "model.safetensors").string();
  // Weights rewritten by another tool: without checksums.json, as HF writes directories.
  fs::remove(fs::path(dir) / kChecksumsName);

  auto tensors = load_safetensors(file);
  auto wrong = tensors;
  wrong["model.norm.weight"] = zeros({9});
  save_safetensors(file, wrong);
  CHECK_THROWS_WITH_AS(load_model_dir(dir),
                       ("[checkpoint] " + file + ": tensor 'model.norm.weight' has shape [9] but the config needs [8]").c_str(),
                       Error);
  auto integers = tensors;
  integers["model.norm.weight"] = zeros({8}, DType::i32);
  save_safetensors(file, integers);
  CHECK_THROWS_WITH_AS(load_model_dir(dir),
                       ("[checkpoint] " + file + ": tensor 'model.norm.weight' has dtype i32, expected a floating dtype").c_str(),
                       Error);
  auto extra = tensors;
  extra["model.layers.0.self_attn.sinks"] = zeros({2});
  save_safetensors(file, extra);
  CHECK_THROWS_WITH_AS(load_model_dir(dir),
                       ("[checkpoint] " + file +
                        ": unexpected tensor 'model.layers.0.self_attn.sinks' for a softmax model of this config").c_str(),
                       Error);
  CHECK_THROWS_WITH_AS(load_model_dir(dir + "/nowhere"), ("[checkpoint] " + dir + "/nowhere: not a directory").c_str(), Error);
  // A params map that does not fit the config is refused before anything is written.
  Params missing = ps;
  missing.erase("model.norm.weight");
  CHECK_THROWS_WITH_AS(save_model_dir(fresh_dir("bad2"), c, missing, st),
                       ("[params] " + fresh_dir("bad2") + ": missing tensor 'model.norm.weight'").c_str(), Error);
  // An unknown attention kind in config.json.
  std::string dir3 = fresh_dir("bad3");
  save_model_dir(dir3, c, ps, st);
  std::string cfg = (fs::path(dir3) / "config.json").string();
  Json j = read_json_file(cfg);
  j["attention"]["kind"] = "flash";
  std::ofstream(cfg) << j.dump();
  CHECK_THROWS_WITH_AS(load_model_dir(dir3),
                       ("[config] unknown attention kind 'flash' (known: " + attention_kind_names() + ")").c_str(), Error);
}

TEST_CASE("model directories record checksums of their weights: a flipped bit is an error naming the file") {
  ModelConfig c = small(AttentionKind::softmax, false);
  Generator gen(4);
  auto [ps, st] = CausalLM(c).init(gen);
  for (uint64_t shard_bytes : {uint64_t(4) << 30, uint64_t(2000)}) {
    std::string dir = fresh_dir("checksums");
    save_model_dir(dir, c, ps, st, shard_bytes);
    const Json manifest = read_json_file((fs::path(dir) / kChecksumsName).string());
    const bool sharded = shard_bytes < (uint64_t(1) << 20);
    std::vector<std::string> weights;
    for (const auto& e : fs::directory_iterator(dir))
      if (e.path().extension() == ".safetensors" || e.path().filename() == "model.safetensors.index.json")
        weights.push_back(e.path().filename().string());
    std::sort(weights.begin(), weights.end());
    REQUIRE(weights.size() == (sharded ? 4u : 1u));  // three shards and the index, or one file
    CHECK(manifest.size() == weights.size());
    for (const std::string& name : weights) CHECK(manifest.contains(name));
    CHECK(load_model_dir(dir).params.size() == ps.size());
    const fs::path victim = fs::path(dir) / weights.front();
    std::string bytes;
    {
      std::ifstream in(victim, std::ios::binary);
      bytes.assign(std::istreambuf_iterator<char>(in), {});
    }
    bytes[bytes.size() / 2 + 1] = char(bytes[bytes.size() / 2 + 1] ^ 0x10);
    std::ofstream(victim, std::ios::binary | std::ios::trunc) << bytes;
    CHECK_THROWS_WITH_AS(load_model_dir(dir), doctest::Contains(("[checkpoint] " + victim.string() + ": checksum mismatch").c_str()),
                         Error);
  }
}
