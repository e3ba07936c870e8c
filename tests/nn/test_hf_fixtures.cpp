// cotan against HF transformers itself: tiny random models that transformers made and saved
// (tests/hf/make_fixtures.py), loaded from their directories in both config spellings, give the
// logits transformers computed for the same ids, and greedy generation gives the tokens of
// transformers' greedy generate (tests/hf/make_generate_fixtures.py).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "nn/generate.hpp"
#include "nn/model.hpp"
#include "nn/model_dir.hpp"
#include "tensor/ops.hpp"
#include "text/tokenizer.hpp"
#include "tests/support.hpp"
#include "util/atomic_file.hpp"
#include "util/json.hpp"

using namespace cotan;
using namespace cotan::nn;
namespace fs = std::filesystem;

namespace {

const fs::path kFixtures = fs::path(COTAN_SOURCE_DIR) / "tests" / "hf" / "fixtures";

// The fixture's directory as it is (transformers 5's config.json), or a copy whose config.json is
// the transformers 4 spelling of the same config.
fs::path with_spelling(const std::string& name, bool v4) {
  const fs::path dir = kFixtures / name;
  if (!v4) return dir;
  const fs::path copy = fs::temp_directory_path() / ("cotan-hf-v4-" + name);
  fs::remove_all(copy);
  fs::copy(dir, copy);
  fs::copy_file(dir / "config_v4.json", copy / "config.json", fs::copy_options::overwrite_existing);
  return copy;
}

double max_abs_diff(const std::vector<double>& a, const std::vector<double>& b) {
  REQUIRE(a.size() == b.size());
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(a[i] - b[i]));
  return m;
}

}  // namespace

TEST_CASE("HF fixtures: logits equal transformers' in f32 and f64, for both config spellings") {
  const char* cases[] = {"llama_gqa",  "llama_tied_llama3", "llama_linear_bias", "llama_head_dim",
                         "qwen2_tied", "mistral",           "llama_bf16",        "llama_sharded",
                         "llama_gelu_mlp_bias"};
  for (const char* name : cases) {
    const Json expected = read_json_file((kFixtures / name / "logits.json").string());
    const Json& ids_json = member(expected, "ids");
    std::vector<int64_t> ids;
    for (const Json& row : ids_json)
      for (const Json& id : row) ids.push_back(as_int(id));
    const Shape ids_shape{int64_t(ids_json.size()), int64_t(ids_json[0].size())};
    std::vector<double> hf32, hf64;
    for (const Json& v : member(expected, "f32")) hf32.push_back(as_double(v));
    for (const Json& v : member(expected, "f64")) hf64.push_back(as_double(v));
    for (bool v4 : {false, true}) {
      CAPTURE(name);
      CAPTURE(v4);
      const fs::path dir = with_spelling(name, v4);
      for (DType dtype : {DType::f32, DType::f64}) {
        CAPTURE(dtype_name(dtype));
        const LoadedModel m = load_model_dir(dir.string(), dtype);
        const CausalLM model(m.config);
        const Tensor logits = model.apply(from_vector(ids, ids_shape), m.params, m.state).first;
        Shape shape;
        for (const Json& d : member(expected, "shape")) shape.push_back(as_int(d));
        CHECK(logits.shape() == shape);
        const std::vector<double> ours = logits.to_vector<double>();
        // f32: within 2e-6 of the exact logits per unit of logit scale (they reach 1.2 to 1.8
        // here), or within twice the error of HF's own f32 pass, whichever is larger (measured:
        // 0.7e-6 to 6.6e-6, HF's own 0.7e-6 to 3.6e-6); f64: the same numbers up to rounding
        // (measured: at most 4.2e-15).
        double scale = 1;
        for (double v : hf64) scale = std::max(scale, std::abs(v));
        if (dtype == DType::f32) {
          CHECK(max_abs_diff(ours, hf64) <= std::max(2e-6 * scale, 2 * max_abs_diff(hf32, hf64)));
        } else {
          CHECK(max_abs_diff(ours, hf64) <= 1e-12 * scale);
        }
      }
      if (v4) fs::remove_all(dir);
    }
  }
}

TEST_CASE("HF fixtures: greedy generation with the KV cache gives transformers' greedy generate, token for token") {
  int cases = 0;
  for (const auto& entry : fs::directory_iterator(kFixtures)) {
    if (!fs::exists(entry.path() / "generate.json")) continue;
    const std::string name = entry.path().filename().string();
    CAPTURE(name);
    const Json expected = read_json_file((entry.path() / "generate.json").string());
    // The script keeps only prompts whose every step has a clear winner, so f32 must agree.
    CHECK(expected["min_margin"].get<double>() >= 1e-3);
    const LoadedModel m = load_model_dir(entry.path().string(), DType::f32);
    const CausalLM lm(m.config);
    GenerateConfig c;
    c.max_new_tokens = expected["new_tokens"].get<int64_t>();
    c.sampling.greedy = true;  // no eos: every prompt runs to max_new_tokens, as in the script
    std::vector<std::vector<int32_t>> prompts;
    for (const Json& p : expected["prompts"]) prompts.push_back(p.get<std::vector<int32_t>>());
    Generator gen(0);
    const Generation g = generate(lm, m.params, m.state, prompts, c, gen);
    for (size_t i = 0; i < prompts.size(); ++i) {
      CAPTURE(i);
      CHECK(g.tokens[i] == expected["tokens"][i].get<std::vector<int32_t>>());
    }
    ++cases;
  }
  CHECK(cases >= 8);
}

TEST_CASE("HF fixtures: configs whose math cotan does not implement are refused, naming the field") {
  auto error = [](const char* name) {
    const fs::path config = kFixtures / name / "config.json";
    return error_of([&] { load_config(config.string()); });
  };
  const std::string dir = kFixtures.string();
  CHECK(error("refused_gelu") ==
        "[config] " + dir + "/refused_gelu/config.json: hidden_act 'gelu' is not supported (supported: silu, "
                                              "gelu_pytorch_tanh, gelu_new)");
  CHECK(error("refused_sliding_window") == "[config] " + dir +
                                               "/refused_sliding_window/config.json: sliding_window 4 is not supported "
                                               "(sliding-window attention; max_position_embeddings is 64)");
  CHECK(error("refused_mixtral") == "[config] " + dir + "/refused_mixtral/config.json: unsupported model_type 'mixtral' "
                                                        "(supported: llama, qwen2, mistral)");
}

TEST_CASE("exported students of every study variant reload with identical logits; non-softmax kinds carry remote code") {
  // With COTAN_EXPORT_DIR set, the students and their logits stay there for tests/hf/check_remote_code.py.
  const char* keep = std::getenv("COTAN_EXPORT_DIR");
  const fs::path root = keep ? fs::path(keep) : fs::temp_directory_path() / "cotan-hf-export";
  fs::remove_all(root);
  const std::vector<int64_t> ids{3, 17, 42, 5, 60, 1, 9, 33, 12, 7, 50, 2};
  Json index = Json::object();
  struct Variant {
    const char* name;
    AttentionKind kind;
    AlphaFn phi;
  };
  const Variant variants[] = {{"softmax", AttentionKind::softmax, AlphaFn::linear_clip},
                              {"sink", AttentionKind::sink, AlphaFn::linear_clip},
                              {"affine_linear_clip", AttentionKind::affine, AlphaFn::linear_clip},
                              {"affine_sigmoid", AttentionKind::affine, AlphaFn::sigmoid},
                              {"gated", AttentionKind::gated, AlphaFn::linear_clip},
                              {"affine_gated", AttentionKind::affine_gated, AlphaFn::linear_clip}};
  for (const Variant& v : variants) {
    CAPTURE(v.name);
    ModelConfig c = load_config((kFixtures / "qwen2_tied").string());  // biases, tied embeddings
    c.attention.kind = v.kind;
    c.attention.phi = v.phi;
    const CausalLM model(c);
    Generator gen(77);
    auto [ps, st] = model.init(gen);
    // Weights and buffers far from their init, so that every term of the kind shows.
    for (auto& [name, t] : ps) t = randn(t.shape(), gen) * 0.4;
    for (auto& [name, t] : st.buffers) t = rand(t.shape(), gen) * 0.6 + 0.2;
    const fs::path dir = root / v.name;
    save_model_dir(dir.string(), c, ps, st);
    const Json config = read_json_file((dir / "config.json").string());
    const bool remote = v.kind != AttentionKind::softmax;
    CHECK(as_string(member(config, "model_type")) == (remote ? "cotan" : "qwen2"));
    CHECK(fs::exists(dir / "modeling_cotan.py") == remote);
    CHECK(fs::exists(dir / "configuration_cotan.py") == remote);
    const LoadedModel back = load_model_dir(dir.string());
    CHECK(back.config.to_json() == c.to_json());
    st.training = false;
    const Tensor input = from_vector(ids, {2, 6});
    const Tensor before = model.apply(input, ps, st).first, after = CausalLM(back.config).apply(input, back.params, back.state).first;
    CHECK(max(abs(before - after)).item<double>() == 0.0);
    std::vector<double> logits = before.to_vector<double>();
    index[v.name] = {{"shape", before.shape()}, {"logits", logits}};
  }
  index["ids"] = {std::vector<int64_t>(ids.begin(), ids.begin() + 6), std::vector<int64_t>(ids.begin() + 6, ids.end())};
  write_file_atomically((root / "cotan_logits.json").string(), {dump_json(index) + "\n"}, "test");
  if (!keep) fs::remove_all(root);
}

TEST_CASE("HF fixtures: the Llama with its tokenizer.json encodes as HF tokenizers does, and its ids fit the model") {
  const fs::path dir = kFixtures / "llama_with_tokenizer";
  const text::Tokenizer tok = text::Tokenizer::load((dir / "tokenizer.json").string());
  const LoadedModel m = load_model_dir(dir.string(), DType::f32);
  const Json expected = read_json_file((dir / "expected.json").string());
  int cases = 0;
  for (const Json& c : expected["cases"]) {
    const std::string text = c["text"].get<std::string>();
    CAPTURE(text);
    const std::vector<int32_t> with = tok.encode(text, true), without = tok.encode(text, false);
    CHECK(with == c["with_special"].get<std::vector<int32_t>>());
    CHECK(without == c["without_special"].get<std::vector<int32_t>>());
    for (int32_t id : with) CHECK(id < m.config.vocab_size);
    ++cases;
  }
  CHECK(cases == 5);
}
