#include "train/study.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>

#include "nn/checkpoint.hpp"
#include "nn/safetensors.hpp"
#include "tensor/ops.hpp"
#include "train/plot.hpp"
#include "train/stats.hpp"

namespace cotan::train {

namespace fs = std::filesystem;

std::vector<StudyVariant> default_variants() {
  using nn::AttentionKind;
  auto make = [](const char* name, AttentionKind kind, nn::AlphaFn phi = nn::AlphaFn::linear_clip) {
    StudyVariant v{name, {}};
    v.attention.kind = kind;
    v.attention.phi = phi;
    return v;
  };
  return {make("softmax", AttentionKind::softmax),
          make("sink", AttentionKind::sink),
          make("affine(linear_clip)", AttentionKind::affine),
          make("affine(sigmoid)", AttentionKind::affine, nn::AlphaFn::sigmoid),
          make("gated", AttentionKind::gated),
          make("affine_gated", AttentionKind::affine_gated)};
}

StudyConfig default_study() {
  StudyConfig c;
  c.train.batch_size = 8;
  c.train.seq_len = 128;
  c.train.schedule.lr = 3e-3;
  c.train.schedule.warmup_steps = 20;
  c.train.schedule.decay_fraction = 0.2;
  c.train.eval_every = 100;
  c.train.eval_batches = 4;
  c.train.log_every = 50;
  return c;
}

StudyConfig quick_study() {
  StudyConfig c = default_study();
  c.quick = true;
  c.teacher_steps = 40;
  c.student_steps = 20;
  c.train.batch_size = 4;
  c.train.seq_len = 64;
  c.train.eval_every = 0;
  c.train.eval_batches = 2;
  c.train.log_every = 10;
  c.analysis_batches = 1;
  return c;
}

namespace {

std::string default_cache_dir() {
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return (fs::path(x) / "cotan").string();
  if (const char* h = std::getenv("HOME"); h && *h) return (fs::path(h) / ".cache" / "cotan").string();
  return (fs::temp_directory_path() / "cotan-cache").string();
}

std::string hex_hash(const std::string& text) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (unsigned char c : text) h = (h ^ c) * 1099511628211ull;
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", (unsigned long long)h);
  return buf;
}

struct RunOutcome {
  std::string variant;
  int64_t overhead = 0;
  TrainResult result;
  std::vector<nn::LayerAnalysis> layers;
  std::vector<double> weight_sums;  // per query, averaged over heads, over the analysis batches
};

double final_kd(const TrainResult& r) {
  size_t n = std::min<size_t>(10, r.steps.size());
  double s = 0;
  for (size_t i = r.steps.size() - n; i < r.steps.size(); ++i) s += r.steps[i].kd / double(n);
  return s;
}

}  // namespace

std::string run_study(StudyConfig config) {
  auto t0 = std::chrono::steady_clock::now();
  if (config.variants.empty()) config.variants = default_variants();
  if (config.seeds < 1) fail("distill", "--seeds must be at least 1, got ", config.seeds);
  std::string data_path = config.data.empty() ? default_corpus_path() : config.data;
  if (config.run_dir.empty()) {
    std::time_t now = std::time(nullptr);
    char stamp[32];
    std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", std::localtime(&now));
    config.run_dir = (fs::path("runs") / (std::string("distill-") + stamp)).string();
  }
  fs::path run_dir(config.run_dir);
  std::error_code ec;
  fs::create_directories(run_dir, ec);
  if (ec || !fs::is_directory(run_dir)) fail("distill", "cannot create run directory ", run_dir.string(), ": ", ec.message());

  TokenData data = load_tokens(data_path, 0.05, 0);
  std::cerr << "data: " << data_path << " (" << data.train.size() << " training and " << data.val.size()
            << " validation tokens)\n";

  // ---- the teacher: cached by everything that determines its weights ----
  nn::ModelConfig teacher_config = nn::load_config(config.teacher);
  TrainConfig tc = config.train;
  tc.steps = config.teacher_steps;
  tc.loss.kd_ratio = 0;
  Json key = Json::object();
  key["config"] = teacher_config.to_json();
  key["data"] = fs::absolute(data_path).string();
  key["tokens"] = data.train.size();
  key["steps"] = tc.steps;
  key["batch"] = tc.batch_size;
  key["seq_len"] = tc.seq_len;
  key["lr"] = tc.schedule.lr;
  key["seed"] = tc.seed;
  std::string cache = config.cache_dir.empty() ? default_cache_dir() : config.cache_dir;
  fs::path teacher_dir = fs::path(cache) / "teachers" / hex_hash(key.dump());
  nn::CausalLM teacher(teacher_config);
  nn::Params teacher_params;
  if (fs::exists(teacher_dir / "config.json")) {
    std::cerr << "teacher: reusing " << teacher_dir.string() << "\n";
    teacher_params = nn::load_model_dir(teacher_dir.string()).params;
  } else {
    std::cerr << "teacher: pretraining " << config.teacher << " for " << tc.steps << " steps\n";
    tc.run_dir = (run_dir / "teacher").string();
    Generator gen(tc.seed);
    auto [ps, st] = teacher.init(gen);
    TrainResult r = fit(teacher, ps, st, Teacher{}, data, tc);
    teacher_params = r.params;
    nn::save_model_dir(teacher_dir.string(), teacher_config, teacher_params);
    write_file_atomically((teacher_dir / "key.json").string(), {key.dump(2) + "\n"}, "distill");
  }
  nn::State teacher_state = teacher.init_state();
  Teacher t{&teacher, &teacher_params, &teacher_state};

  // ---- one student per variant and seed, same data order ----
  nn::ModelConfig student_base = nn::load_config(config.student);
  student_base.attention = nn::AttentionConfig{};
  int64_t softmax_params = nn::CausalLM(student_base).num_params();
  std::vector<std::vector<RunOutcome>> outcomes(config.variants.size());
  std::vector<Batch> analysis = validation_batches(data.val.empty() ? data.train : data.val, config.train.seq_len,
                                                   config.train.batch_size, config.analysis_batches);
  for (size_t v = 0; v < config.variants.size(); ++v) {
    for (int64_t seed = 0; seed < config.seeds; ++seed) {
      const StudyVariant& variant = config.variants[v];
      nn::ModelConfig sc = student_base;
      sc.attention = variant.attention;
      sc.attention.impl = config.train.attention_impl;
      nn::CausalLM student(sc);
      TrainConfig c = config.train;
      c.steps = config.student_steps;
      c.seed = config.train.seed + uint64_t(seed);
      c.run_dir = (run_dir / (variant.name + (config.seeds > 1 ? "-seed" + std::to_string(seed) : ""))).string();
      std::cerr << "student: " << variant.name << " (seed " << c.seed << ")\n";
      Generator gen(1000 + uint64_t(seed));
      auto [ps, st] = student.init(gen);
      RunOutcome out;
      out.variant = variant.name;
      out.overhead = student.num_params() - softmax_params;
      out.result = fit(student, ps, st, t, data, c);
      for (const Batch& b : analysis) {
        auto layers = student.analyze(b.inputs, out.result.params, out.result.state);
        if (out.layers.empty()) out.layers = layers;
        for (const auto& l : layers) {
          auto w = l.attention.weight_sums.to_vector<double>();
          out.weight_sums.insert(out.weight_sums.end(), w.begin(), w.end());
        }
      }
      nn::save_model_dir((fs::path(c.run_dir) / "model").string(), sc, out.result.params);
      outcomes[v].push_back(std::move(out));
    }
  }

  // ---- the table ----
  Table table({"attention", "delta params", "KD loss", "val ppl", "grad-norm mean", "grad-norm std", "grad-norm CV",
               "spikes k=6", "spikes k=9", "first-token weight", "entropy", "weight-sum mean", "weight-sum median"});
  auto cell = [&](const std::vector<RunOutcome>& runs, const std::function<double(const RunOutcome&)>& f) {
    std::vector<double> values;
    for (const auto& r : runs) values.push_back(f(r));
    return config.seeds > 1 ? format_summary(summarize(values), 4) : format_number(values[0], 4);
  };
  auto layer_mean = [](const RunOutcome& r, const std::function<double(const nn::LayerAnalysis&)>& f) {
    double s = 0;
    for (const auto& l : r.layers) s += f(l) / double(r.layers.size());
    return s;
  };
  for (size_t v = 0; v < outcomes.size(); ++v) {
    const auto& runs = outcomes[v];
    auto norms = [&](const RunOutcome& r) {
      std::vector<double> g;
      for (const auto& s : r.result.steps) g.push_back(s.grad_norm);
      return g;
    };
    table.add_row({runs[0].variant, std::to_string(runs[0].overhead),
                   cell(runs, [](const RunOutcome& r) { return final_kd(r.result); }),
                   cell(runs, [](const RunOutcome& r) { return r.result.evals.empty() ? NAN : r.result.evals.back().ppl; }),
                   cell(runs, [&](const RunOutcome& r) { return grad_norm_stats(norms(r), config.stats_window).mean; }),
                   cell(runs, [&](const RunOutcome& r) { return grad_norm_stats(norms(r), config.stats_window).std; }),
                   cell(runs, [&](const RunOutcome& r) { return grad_norm_stats(norms(r), config.stats_window).cv; }),
                   cell(runs, [&](const RunOutcome& r) { return double(count_spikes(norms(r), 6)); }),
                   cell(runs, [&](const RunOutcome& r) { return double(count_spikes(norms(r), 9)); }),
                   cell(runs, [&](const RunOutcome& r) { return layer_mean(r, [](const auto& l) { return l.attention.first_token_weight; }); }),
                   cell(runs, [&](const RunOutcome& r) { return layer_mean(r, [](const auto& l) { return l.attention.entropy; }); }),
                   cell(runs, [](const RunOutcome& r) {
                     double s = 0;
                     for (double w : r.weight_sums) s += w / double(r.weight_sums.size());
                     return s;
                   }),
                   cell(runs, [](const RunOutcome& r) { return median(r.weight_sums); })});
  }
  write_file_atomically((run_dir / "table.md").string(), {table.markdown()}, "distill");
  write_file_atomically((run_dir / "table.csv").string(), {table.csv()}, "distill");

  // ---- plots (first seed of each variant) ----
  std::vector<Series> kd, norms, first, entropy;
  for (const auto& runs : outcomes) {
    const RunOutcome& r = runs[0];
    Series k{r.variant, {}, {}}, g{r.variant, {}, {}}, f{r.variant, {}, {}}, e{r.variant, {}, {}};
    for (const auto& s : r.result.steps) {
      k.x.push_back(double(s.step));
      k.y.push_back(s.kd);
      g.x.push_back(double(s.step));
      g.y.push_back(s.grad_norm);
    }
    for (size_t l = 0; l < r.layers.size(); ++l) {
      f.x.push_back(double(l));
      f.y.push_back(r.layers[l].attention.first_token_weight);
      e.x.push_back(double(l));
      e.y.push_back(r.layers[l].attention.entropy);
    }
    kd.push_back(k), norms.push_back(g), first.push_back(f), entropy.push_back(e);
  }
  line_plot((run_dir / "kd_loss.png").string(), "KD loss (training)", "step", "KD loss", kd, true);
  line_plot((run_dir / "grad_norm.png").string(), "Gradient norm before clipping", "step", "||g||", norms, true);
  line_plot((run_dir / "first_token_weight.png").string(), "First-token attention weight", "layer", "mean A_i0", first);
  line_plot((run_dir / "entropy.png").string(), "Attention entropy", "layer", "entropy (nats)", entropy);
  for (const auto& runs : outcomes) {
    const RunOutcome& r = runs[0];
    if (r.layers.empty() || !r.layers[0].alpha_mean.defined()) continue;
    std::vector<std::vector<double>> grid;
    for (const auto& l : r.layers) grid.push_back(l.alpha_mean.to_vector<double>());
    std::string file = "alpha_" + r.variant + ".png";
    std::replace(file.begin(), file.end(), '(', '_');
    file.erase(std::remove(file.begin(), file.end(), ')'), file.end());
    heatmap((run_dir / file).string(), "alpha per layer and head: " + r.variant, grid, "layer", "head");
  }

  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::cout << "\n" << table.markdown() << "\n";
  std::cout << "finished in " << format_number(seconds, 3) << " s; results in " << run_dir.string() << "\n";
  return run_dir.string();
}

}  // namespace cotan::train
