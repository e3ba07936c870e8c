// A model family written in user code (not nn::CausalLM) through everything that takes
// nn::LanguageModel: fit (pretraining and distillation, both ways), checkpoints and resume, model
// directories through the family registry, generation without a KV cache, evaluation.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>

#include "nn/generate.hpp"
#include "nn/layers.hpp"
#include "nn/model.hpp"
#include "nn/model_dir.hpp"
#include "tensor/ops.hpp"
#include "tests/support.hpp"
#include "tests/train/trainer_fixtures.hpp"
#include "eval/evaluate.hpp"
#include "train/trainer.hpp"
#include "util/json.hpp"

using namespace cotan;
using namespace cotan::train;
using namespace cotan::eval;
using testing::corpus;
namespace fs = std::filesystem;

namespace {

constexpr const char* kFamily = "test_mixer";

// An attention-free causal language model: each layer mixes a position with the mean of the
// values before it, x <- x + out(causal_mean(value(norm(x)))) * (1 + m_l), where m_l [1] is a
// buffer (State) holding a running mean of the values, updated by training passes only.
class MixerLM final : public nn::LanguageModel {
 public:
  MixerLM(int64_t vocab, int64_t dim, int64_t layers, int64_t max_positions)
      : vocab_(vocab), dim_(dim), layers_(layers), max_positions_(max_positions) {
    nn::Embedding{vocab_, dim_}.specs(specs_, "embed");
    for (int64_t l = 0; l < layers_; ++l) {
      const std::string p = layer(l);
      nn::RMSNorm{dim_}.specs(specs_, p + ".norm");
      nn::Linear{dim_, dim_}.specs(specs_, p + ".value");
      nn::Linear{dim_, dim_}.specs(specs_, p + ".out");
    }
    nn::RMSNorm{dim_}.specs(specs_, "norm");
    nn::Linear{dim_, vocab_}.specs(specs_, "head");
  }
  static std::unique_ptr<nn::LanguageModel> from_json(const Json& j, std::string_view source) {
    const JsonFields f(j, "model", source);
    return std::make_unique<MixerLM>(f.required<int64_t>("vocab_size"), f.required<int64_t>("hidden_size"),
                                     f.required<int64_t>("num_layers"), f.required<int64_t>("max_position_embeddings"));
  }

  std::string family() const override { return kFamily; }
  Json config_json() const override {
    return {{"model_type", kFamily}, {"vocab_size", vocab_}, {"hidden_size", dim_}, {"num_layers", layers_},
            {"max_position_embeddings", max_positions_}};
  }
  int64_t vocab_size() const override { return vocab_; }
  int64_t max_positions() const override { return max_positions_; }
  const std::vector<nn::ParamSpec>& param_specs() const override { return specs_; }
  nn::State init_state(DType dtype) const override {
    nn::State st;
    for (int64_t l = 0; l < layers_; ++l) st.buffers[layer(l) + ".mean"] = zeros({1}, dtype);
    return st;
  }
  std::pair<Tensor, nn::State> hidden(const Tensor& ids, const nn::Params& ps, const nn::State& st) const override {
    nn::ParamView view(ps);
    nn::State next = st;
    Tensor x = nn::Embedding{vocab_, dim_}.apply(ids, view.sub("embed"));
    const int64_t t = ids.size(1);
    const Tensor counts = reshape(arange(1, t + 1, 1, x.dtype(), x.device()), {1, t, 1});
    for (int64_t l = 0; l < layers_; ++l) {
      const nn::ParamView lp = view.sub(layer(l));
      const Tensor v = nn::Linear{dim_, dim_}.apply(nn::RMSNorm{dim_}.apply(x, lp.sub("norm")), lp.sub("value"));
      Tensor m = st.buffers.at(layer(l) + ".mean");
      if (st.training) m = 0.9 * m + 0.1 * reshape(mean(v.detach()), {1});
      next.buffers[layer(l) + ".mean"] = m;
      x = x + nn::Linear{dim_, dim_}.apply(cumsum(v, 1) / counts, lp.sub("out")) * (1.0 + m);
    }
    return {nn::RMSNorm{dim_}.apply(x, view.sub("norm")), std::move(next)};
  }
  const Tensor& head_weight(const nn::Params& ps) const override { return ps.at("head.weight"); }

 private:
  static std::string layer(int64_t l) { return "layers." + std::to_string(l); }
  int64_t vocab_, dim_, layers_, max_positions_;
  std::vector<nn::ParamSpec> specs_;
};

void register_family() {
  if (!nn::has_model_family(kFamily)) nn::register_model_family(kFamily, MixerLM::from_json);
}

// The trainer tests' run configuration, with a short warmup and an evaluation every 4 steps.
TrainConfig run_config(const std::string& dir, int64_t steps, bool keep = false) {
  TrainConfig c = testing::config(dir, steps, keep);
  c.seed = 5;
  c.schedule.warmup_steps = 2;
  c.eval_every = 4;
  return c;
}

bool same_bits(const nn::Params& a, const nn::Params& b) {
  if (a.size() != b.size()) return false;
  for (const auto& [name, t] : a) {
    auto it = b.find(name);
    if (it == b.end() || t.to_vector<float>() != it->second.to_vector<float>()) return false;
  }
  return true;
}

// log softmax of one row of logits, in double, computed here from the logits' values.
std::vector<double> log_softmax_row(const std::vector<float>& row) {
  double top = -std::numeric_limits<double>::infinity();
  for (float v : row) top = std::max(top, double(v));
  double sum = 0;
  for (float v : row) sum += std::exp(double(v) - top);
  std::vector<double> out;
  for (float v : row) out.push_back(double(v) - top - std::log(sum));
  return out;
}

}  // namespace

TEST_CASE("a model family of user code trains with fit and resumes bit for bit") {
  register_family();
  const MixerLM model(kByteVocab, 16, 2, 64);
  Generator gen(11);
  auto [ps, st] = model.init(gen);
  const TokenData data = corpus();

  const TrainResult whole = fit(model, ps, st, Teacher{}, data, run_config("any_model_whole", 8));
  REQUIRE(whole.steps.size() == 8);
  CHECK(whole.steps.back().loss < whole.steps.front().loss);
  // The buffers moved (training passes update them) and the checkpoint recorded the family's config.
  CHECK(whole.state.buffers.at("layers.0.mean").item<double>() != 0.0);
  const Json meta = read_json_file((fs::path(run_config("any_model_whole", 8, true).run_dir) / "checkpoint" / "trainer.json").string());
  CHECK(json_equal(meta.at("model_config"), model.config_json()));

  TrainConfig first = run_config("any_model_resumed", 8);
  first.stop_after = 3;
  const TrainResult part = fit(model, ps, st, Teacher{}, data, first);
  CHECK(part.steps.size() == 3);
  const TrainResult rest = fit(model, ps, st, Teacher{}, data, run_config("any_model_resumed", 8, true), true);
  CHECK(rest.start_step == 3);
  REQUIRE(rest.steps.size() == 5);
  for (size_t i = 0; i < 5; ++i) CHECK(rest.steps[i].loss == whole.steps[i + 3].loss);
  CHECK(same_bits(rest.params, whole.params));
  CHECK(rest.state.buffers.at("layers.1.mean").item<double>() == whole.state.buffers.at("layers.1.mean").item<double>());

  // A checkpoint of another family's config is refused by name.
  const MixerLM wider(kByteVocab, 24, 2, 64);
  Generator gen2(11);
  auto [wps, wst] = wider.init(gen2);
  CHECK_THROWS_WITH_AS(fit(wider, wps, wst, Teacher{}, data, run_config("any_model_resumed", 8, true), true),
                       doctest::Contains("hidden_size is 16 in the checkpoint but 24 now"), Error);
}

TEST_CASE("a user model distills from a CausalLM, and teaches one") {
  register_family();
  const TokenData data = corpus();
  const nn::CausalLM causal(testing::micro(nn::AttentionKind::softmax));
  const MixerLM mixer(kByteVocab, 16, 2, 64);
  Generator gen(3);
  auto [cps, cst] = causal.init(gen);
  auto [mps, mst] = mixer.init(gen);

  for (bool fused : {true, false}) {
    TrainConfig c = run_config(fused ? "any_model_student" : "any_model_student_unfused", 6);
    c.fused_head = fused;
    const TrainResult r = fit(mixer, mps, mst, Teacher{&causal, &cps, &cst}, data, c);
    REQUIRE(r.steps.size() == 6);
    for (const StepRecord& s : r.steps) {
      REQUIRE(s.kd);
      CHECK(std::isfinite(*s.kd));
      CHECK(*s.kd > 0);
    }
    REQUIRE(!r.evals.empty());
    CHECK(r.evals.back().kd);
  }
  // The fused head loss and the whole logits give the same losses, to f32 rounding.
  const TrainResult a = read_metrics(run_config("any_model_student", 6, true).run_dir);
  const TrainResult b = read_metrics(run_config("any_model_student_unfused", 6, true).run_dir);
  for (size_t i = 0; i < a.steps.size(); ++i) CHECK(a.steps[i].loss == doctest::Approx(b.steps[i].loss).epsilon(1e-4));

  // The other way round: the user model is the frozen teacher.
  const TrainResult r = fit(causal, cps, cst, Teacher{&mixer, &mps, &mst}, data, run_config("any_model_teacher", 4));
  REQUIRE(r.steps.size() == 4);
  CHECK(r.steps.front().kd);
  CHECK(std::isfinite(r.steps.back().loss));

  // A teacher whose vocabulary differs is refused before anything is written.
  const MixerLM wide(kByteVocab + 3, 16, 2, 64);
  Generator gen3(1);
  auto [wps, wst] = wide.init(gen3);
  const TrainConfig refused = run_config("any_model_refused", 4);
  CHECK_THROWS_WITH_AS(fit(causal, cps, cst, Teacher{&wide, &wps, &wst}, data, refused),
                       doctest::Contains("teacher vocabulary 260 differs from the student's 257"), Error);
  CHECK(!fs::exists(refused.run_dir));
}

TEST_CASE("model directories of a user family load through the registry") {
  register_family();
  const MixerLM model(kByteVocab, 16, 2, 64);
  Generator gen(21);
  auto [ps, st] = model.init(gen);
  st.buffers["layers.0.mean"] = full({1}, 0.25);
  const std::string dir = (fs::temp_directory_path() / "any_model_dir").string();
  fs::remove_all(dir);
  nn::save_model_dir(dir, model, ps, st);
  const Json written = read_json_file(dir + "/config.json");
  CHECK(as_string(written.at("model_type")) == kFamily);
  CHECK(fs::exists(dir + "/checksums.json"));

  const nn::LoadedLanguageModel loaded = nn::load_model(dir);
  REQUIRE(loaded.model);
  CHECK(loaded.model->family() == kFamily);
  CHECK(json_equal(loaded.model->config_json(), model.config_json()));
  CHECK(same_bits(loaded.params, ps));
  CHECK(loaded.state.buffers.at("layers.0.mean").item<double>() == 0.25);
  const Tensor ids = from_vector(std::vector<int32_t>{5, 9, 100, 3, 77, 2}, {2, 3});
  nn::State eval = st;
  eval.training = false;
  CHECK(loaded.model->apply(ids, loaded.params, loaded.state).first.to_vector<float>() ==
        model.apply(ids, ps, eval).first.to_vector<float>());

  // The built-in families come back as CausalLM.
  const nn::CausalLM causal(testing::micro(nn::AttentionKind::softmax));
  auto [cps, cst] = causal.init(gen);
  const std::string cdir = (fs::temp_directory_path() / "any_model_causal_dir").string();
  fs::remove_all(cdir);
  nn::save_model_dir(cdir, causal, cps, cst);
  const nn::LoadedLanguageModel lc = nn::load_model(cdir);
  REQUIRE(dynamic_cast<const nn::CausalLM*>(lc.model.get()));
  CHECK(lc.model->family() == "llama");
  CHECK(same_bits(lc.params, cps));

  // Errors name the family and the file.
  CHECK_THROWS_WITH_AS(nn::register_model_family(kFamily, MixerLM::from_json),
                       "[model] model family 'test_mixer' is already registered", Error);
  Json other = written;
  other["model_type"] = "nobody_registered_this";
  { std::ofstream(dir + "/config.json") << other.dump(); }
  CHECK_THROWS_WITH_AS(nn::load_model(dir), doctest::Contains("unknown model_type 'nobody_registered_this'"), Error);
  { std::ofstream(dir + "/config.json") << written.dump(); }
  fs::remove(dir + "/checksums.json");
  nn::Params missing = ps;
  missing.erase("layers.1.out.weight");
  CHECK_THROWS_WITH_AS(nn::save_model_dir(dir, model, missing, st), doctest::Contains("layers.1.out.weight"), Error);
}

TEST_CASE("generation and evaluation of a model without a KV cache recompute the sequence") {
  register_family();
  const MixerLM model(kByteVocab, 16, 2, 64);
  Generator gen(8);
  auto [ps, st] = model.init(gen);
  CHECK(!model.has_kv_cache());
  nn::KVCache cache;
  CHECK_THROWS_WITH_AS(model.prefill({{1, 2}}, ps, st, cache), doctest::Contains("has no incremental decoding"), Error);
  CHECK_THROWS_WITH_AS(model.analyze(from_vector(std::vector<int32_t>{1, 2}, {1, 2}), ps, st),
                       "[analyze] the model family 'test_mixer' has no attention statistics", Error);

  // Greedy generation equals the argmax of the whole sequence's logits, step by step.
  const std::vector<int32_t> prompt{104, 101, 108};
  nn::GenerateConfig c;
  c.max_new_tokens = 5;
  c.sampling.greedy = true;
  Generator sampling(0);
  const nn::Generation g = nn::generate(model, ps, st, {prompt}, c, sampling);
  std::vector<int32_t> seq = prompt, expected;
  for (int i = 0; i < 5; ++i) {
    const int64_t t = int64_t(seq.size());
    const std::vector<float> logits = model.apply(from_vector(seq, {1, t}), ps, st).first.to_vector<float>();
    const auto last = logits.begin() + (t - 1) * kByteVocab;
    const int32_t next = int32_t(std::max_element(last, last + kByteVocab) - last);
    expected.push_back(next);
    seq.push_back(next);
  }
  REQUIRE(g.tokens.size() == 1);
  CHECK(g.tokens[0] == expected);

  // Multiple choice: each continuation's summed log-likelihood, against the logits read here.
  const Encode bytes = [](std::string_view s) { return text::encode_bytes(s); };
  const std::vector<McRequest> requests{{"the cat", " sat"}, {"the cat", " ran off"}};
  const std::vector<double> ll = choice_logliks(model, ps, st, requests, bytes, {.prefix_id = 0});
  REQUIRE(ll.size() == 2);
  for (size_t r = 0; r < 2; ++r) {
    std::vector<int32_t> all = text::encode_bytes(requests[r].context);
    const std::vector<int32_t> cont = text::encode_bytes(requests[r].continuation);
    const size_t context = all.size();
    all.insert(all.end(), cont.begin(), cont.end());
    const int64_t t = int64_t(all.size()) - 1;
    const std::vector<float> logits =
        model.apply(from_vector(std::vector<int32_t>(all.begin(), all.end() - 1), {1, t}), ps, st).first.to_vector<float>();
    double sum = 0;
    for (size_t i = context - 1; i < size_t(t); ++i) {
      const std::vector<float> row(logits.begin() + int64_t(i) * kByteVocab, logits.begin() + int64_t(i + 1) * kByteVocab);
      sum += log_softmax_row(row)[size_t(all[i + 1])];
    }
    CHECK(ll[r] == doctest::Approx(sum).epsilon(1e-6));
  }

  // Perplexity over one window: every token but the first, given those before it.
  const std::vector<int32_t> text = text::encode_bytes("a short text to score");
  const PerplexityResult p = perplexity(model, ps, st, text, int64_t(text.size()), {.window = 32, .stride = 16});
  const int64_t t = int64_t(text.size()) - 1;
  const std::vector<float> logits =
      model.apply(from_vector(std::vector<int32_t>(text.begin(), text.end() - 1), {1, t}), ps, st).first.to_vector<float>();
  double nll = 0;
  for (int64_t i = 0; i < t; ++i)
    nll -= log_softmax_row(std::vector<float>(logits.begin() + i * kByteVocab, logits.begin() + (i + 1) * kByteVocab))
        [size_t(text[size_t(i + 1)])];
  CHECK(p.tokens == t);
  CHECK(p.nll == doctest::Approx(nll).epsilon(1e-6));
}
