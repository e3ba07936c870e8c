// A model of your own, distilled with everything cotan ships: an attention kind and a model family
// written here, against the nn API, touching no library file. The student is trained by
// train::fit from an HF teacher directory (argv[1]: a Llama with its tokenizer.json), interrupted
// and resumed bit for bit, saved as a model directory and reloaded with identical logits, scored
// with the evaluation API and sampled with generation.
#include <filesystem>
#include <iostream>

#include "eval/evaluate.hpp"
#include "nn/generate.hpp"
#include "nn/layers.hpp"
#include "nn/model_dir.hpp"
#include "tensor/ops.hpp"
#include "text/tokenizer.hpp"
#include "train/trainer.hpp"
#include "util/json.hpp"

using namespace cotan;

// ---- an attention kind: softmax with a learned temperature per head ----
// Head h's scores q k^T / sqrt(d) are multiplied by t_h, a parameter [H] that starts at 1 (plain
// softmax) and takes no weight decay. Written with ops: autograd differentiates it.
nn::AttentionKindInfo temperature_kind() {
  nn::AttentionKindInfo row;
  row.name = "temperature";
  row.help = "softmax attention with a learned temperature per head";
  row.params = {{"temperature", nn::LayerDim::heads, nn::LayerDim::none, nn::Init::ones, false, "scales head h's scores"}};
  row.composed = [](const nn::CoreInputs& in) {
    nn::AttentionCore core;  // causal softmax attention on queries scaled per head
    core.q = in.q * reshape(in.ps["temperature"], {1, -1, 1, 1});  // [B, H, T, d] * [1, H, 1, 1]
    core.k = in.k;
    core.v = in.v;
    return nn::CoreResult{nn::attention_composed(core), {}};
  };
  return row;
}
const nn::AttentionKind kTemperature = nn::register_attention_kind(temperature_kind());

// ---- a model family: parallel blocks ----
// x <- x + attention(norm(x)) + mlp(norm(x)): attention and MLP read one normed input side by
// side (GPT-J, PaLM), with the library's layers; the head is tied to the embedding.
class ParallelLM final : public nn::LanguageModel {
 public:
  struct Config {
    int64_t vocab = 0, dim = 32, layers = 2, heads = 4, kv_heads = 2, mlp = 64, max_positions = 64;
    nn::AttentionKind kind = kTemperature;
  };
  explicit ParallelLM(Config c) : c_(c) {
    nn::Embedding{c_.vocab, c_.dim}.specs(specs_, "embed");
    for (int64_t l = 0; l < c_.layers; ++l) {
      norm().specs(specs_, layer(l) + ".norm");
      attention().specs(specs_, layer(l) + ".attn");
      mlp().specs(specs_, layer(l) + ".mlp");
    }
    norm().specs(specs_, "norm");
  }
  static std::unique_ptr<nn::LanguageModel> from_json(const Json& j, std::string_view source) {
    const JsonFields f(j, "parallel_lm", source);
    const auto kind = nn::find_attention_kind(f.required<std::string>("attention"));
    if (!kind) f.error("unknown attention kind");
    return std::make_unique<ParallelLM>(Config{f.required<int64_t>("vocab_size"), f.required<int64_t>("hidden_size"),
                                               f.required<int64_t>("num_layers"), f.required<int64_t>("num_heads"),
                                               f.required<int64_t>("num_kv_heads"), f.required<int64_t>("intermediate_size"),
                                               f.required<int64_t>("max_position_embeddings"), *kind});
  }

  std::string family() const override { return "parallel_lm"; }
  Json config_json() const override {
    return {{"model_type", family()}, {"vocab_size", c_.vocab},         {"hidden_size", c_.dim},
            {"num_layers", c_.layers}, {"num_heads", c_.heads},          {"num_kv_heads", c_.kv_heads},
            {"intermediate_size", c_.mlp}, {"max_position_embeddings", c_.max_positions},
            {"attention", nn::name_of(c_.kind)}};
  }
  int64_t vocab_size() const override { return c_.vocab; }
  int64_t max_positions() const override { return c_.max_positions; }
  const std::vector<nn::ParamSpec>& param_specs() const override { return specs_; }
  nn::State init_state(DType dtype) const override {
    nn::State st;
    for (int64_t l = 0; l < c_.layers; ++l) attention().buffers(st, layer(l) + ".attn", dtype);
    return st;
  }
  std::pair<Tensor, nn::State> hidden(const Tensor& ids, const nn::Params& ps, const nn::State& st) const override {
    const nn::ParamView view(ps);
    Tensor x = nn::Embedding{c_.vocab, c_.dim}.apply(ids, view.sub("embed"));
    nn::State next = st;
    for (int64_t l = 0; l < c_.layers; ++l) {
      const Tensor h = norm().apply(x, view.sub(layer(l) + ".norm"));
      auto [a, after] = attention().apply(h, view.sub(layer(l) + ".attn"), next, layer(l) + ".attn");
      x = x + a + mlp().apply(h, view.sub(layer(l) + ".mlp"));
      next = std::move(after);
    }
    return {norm().apply(x, view.sub("norm")), std::move(next)};
  }
  const Tensor& head_weight(const nn::Params& ps) const override { return ps.at("embed.weight"); }

 private:
  static std::string layer(int64_t l) { return "layers." + std::to_string(l); }
  nn::RMSNorm norm() const { return {c_.dim, 1e-5}; }
  nn::SwiGLU mlp() const { return {c_.dim, c_.mlp}; }
  nn::Attention attention() const {
    nn::AttentionConfig options;
    options.kind = c_.kind;
    nn::Rope rope;
    rope.head_dim = c_.dim / c_.heads;
    return {c_.dim, c_.heads, c_.kv_heads, rope.head_dim, false, options, rope};
  }
  Config c_;
  std::vector<nn::ParamSpec> specs_;
};

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: custom_model TEACHER_DIR (an HF model directory with tokenizer.json)\n";
    return 2;
  }
  const std::string teacher_dir = argv[1], work = "custom_model_run";
  std::filesystem::remove_all(work);  // the runs of an earlier time
  nn::register_model_family("parallel_lm", ParallelLM::from_json);

  // The teacher, its tokenizer, and text encoded with it.
  const nn::LoadedLanguageModel teacher = nn::load_model(teacher_dir);
  const text::Tokenizer tokenizer = text::Tokenizer::load(teacher_dir + "/tokenizer.json");
  std::vector<int32_t> train_ids, val_ids;
  for (int i = 0; i < 60; ++i)
    for (int32_t id : tokenizer.encode("the cat sat on the mat and the dog sat on the log. ", true))
      (i % 10 ? train_ids : val_ids).push_back(id);
  const train::TokenData data{train::TokenSequence(train_ids), train::TokenSequence(val_ids), {}};

  // The student, distilled for 12 steps; then again, stopped after 5 and resumed.
  const ParallelLM student({.vocab = teacher.model->vocab_size()});
  Generator gen(0);
  const auto [ps, st] = student.init(gen);
  const train::Teacher view{teacher.model.get(), &teacher.params, &teacher.state};
  train::TrainConfig c;
  c.steps = 12, c.batch_size = 4, c.seq_len = 32, c.eval_every = 6, c.log_every = 6;
  c.schedule.lr = 1e-2, c.schedule.warmup_steps = 2;
  c.run_dir = work + "/whole";
  const train::TrainResult whole = train::fit(student, ps, st, view, data, c);
  c.run_dir = work + "/resumed", c.stop_after = 5;
  train::fit(student, ps, st, view, data, c);
  c.stop_after = 0;
  const train::TrainResult resumed = train::fit(student, ps, st, view, data, c, /*resume=*/true);
  bool same = resumed.steps.size() == 7;
  for (size_t i = 0; same && i < 7; ++i) same = resumed.steps[i].loss == whole.steps[i + 5].loss;
  std::cout << "KD loss " << *whole.steps.front().kd << " -> " << *whole.steps.back().kd << "; resumed run "
            << (same ? "equal bit for bit" : "DIFFERENT") << "\n";

  // Saved as a model directory, reloaded through the family registry: the same logits.
  nn::save_model_dir(work + "/model", student, resumed.params, resumed.state);
  const nn::LoadedLanguageModel reloaded = nn::load_model(work + "/model");
  const std::vector<int32_t> prompt = tokenizer.encode("the dog sat", true);
  const Tensor ids = from_vector(prompt, {1, int64_t(prompt.size())});
  nn::State eval = resumed.state;
  eval.training = false;
  const bool identical = reloaded.model->apply(ids, reloaded.params, reloaded.state).first.to_vector<float>() ==
                         student.apply(ids, resumed.params, eval).first.to_vector<float>();

  // Scored with the evaluation API, and sampled.
  const eval::Encode encode = [&](std::string_view s) { return tokenizer.encode(s, false); };
  const eval::McExample example{{{"the cat sat on the", " mat"}, {"the cat sat on the", " dog"}}, {"mat", "dog"}};
  const eval::TaskScore score = eval::score_task(*reloaded.model, reloaded.params, reloaded.state, {example}, encode, {});
  const eval::PerplexityResult ppl =
      eval::perplexity(*reloaded.model, reloaded.params, reloaded.state, val_ids, 0, {.window = 32, .stride = 16});
  nn::GenerateConfig g;
  g.max_new_tokens = 8;
  Generator sampling(1);
  const nn::Generation out =
      nn::generate(*reloaded.model, reloaded.params, reloaded.state, {tokenizer.encode("the cat", true)}, g, sampling);
  std::cout << "reloaded logits " << (identical ? "identical" : "DIFFERENT") << "; acc " << score.acc << ", val ppl "
            << ppl.perplexity() << "; sample: the cat" << tokenizer.decode(out.tokens[0], true) << "\n";
  const bool learned = *whole.steps.back().kd < *whole.steps.front().kd;
  return same && identical && learned && out.tokens[0].size() == 8 ? 0 : 1;
}
