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
#include "tensor/op_table.hpp"
#include "tensor/ops.hpp"
#include "train/plot.hpp"
#include "train/stats.hpp"

namespace cotan::train {

namespace fs = std::filesystem;

std::vector<StudyVariant> default_variants() {
  // One student per row of nn::attention_kinds(), or one per phi ("affine(sigmoid)") where the
  // row asks for it.
  std::vector<StudyVariant> out;
  for (const nn::AttentionKindInfo& k : nn::attention_kinds()) {
    if (!k.study_each_phi) {
      out.push_back({std::string(k.name), {.kind = k.kind}});
      continue;
    }
    for (nn::AlphaFn phi : {nn::AlphaFn::linear_clip, nn::AlphaFn::sigmoid})
      out.push_back({cat(k.name, "(", nn::name_of(phi), ")"), {.kind = k.kind, .phi = phi}});
  }
  return out;
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

// Everything in the config that determines the study's results (not run_dir, cache_dir or the
// logging settings); resuming needs it unchanged.
Json study_json(const StudyConfig& config, const std::string& data_path, const TokenData& data,
                const nn::ModelConfig& teacher, const nn::ModelConfig& student) {
  Json j = Json::object();
  j["quick"] = config.quick;
  j["data"] = fs::absolute(data_path).string();
  j["train_tokens"] = data.train.size();
  j["teacher"] = teacher.to_json();
  j["student"] = student.to_json();
  j["teacher_steps"] = config.teacher_steps;
  j["student_steps"] = config.student_steps;
  j["seeds"] = config.seeds;
  j["stats_window"] = config.stats_window;
  j["analysis_batches"] = config.analysis_batches;
  Json variants = Json::array();
  for (const StudyVariant& v : config.variants) {
    Json row = Json::object();
    row["name"] = v.name;
    row["kind"] = nn::name_of(v.attention.kind);
    row["phi"] = nn::name_of(v.attention.phi);
    row["rho"] = v.attention.rho;
    row["affine_n"] = nn::name_of(v.attention.affine_n);
    variants.push_back(row);
  }
  j["variants"] = variants;
  const Json settings = train_settings(config.train, true);
  Json train = Json::object();
  for (const auto& [key, value] : settings.as_object())
    if (key != "steps" && key != "mode") train[key] = value;
  train["slice_teacher_vocab"] = config.train.loss.slice_teacher_vocab;
  train["eval_every"] = config.train.eval_every;
  train["eval_batches"] = config.train.eval_batches;
  train["attention_impl"] = config.train.attention_impl == nn::AttentionImpl::composed ? "composed" : "fused";
  j["train"] = train;
  return j;
}

}  // namespace

StudyResult run_study(StudyConfig config) {
  auto t0 = std::chrono::steady_clock::now();
  if (config.variants.empty()) config.variants = default_variants();
  if (config.seeds < 1) fail("distill", "--seeds must be at least 1, got ", config.seeds);
  if (config.run_dir.empty()) {
    if (config.resume) fail("distill", "resuming needs the study's run directory");
    std::time_t now = std::time(nullptr);
    char stamp[32];
    std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", std::localtime(&now));
    config.run_dir = (fs::path("runs") / (std::string("distill-") + stamp)).string();
  }
  const fs::path run_dir(config.run_dir);

  // ---- every input is checked before the first write ----
  backend(config.train.device);  // "[cuda] no CUDA device: ..."
  nn::ModelConfig teacher_config = nn::load_config(config.teacher);
  nn::ModelConfig student_base = nn::load_config(config.student);
  student_base.attention = nn::AttentionConfig{};
  if (teacher_config.vocab_size != student_base.vocab_size && !config.train.loss.slice_teacher_vocab)
    fail("distill", "teacher vocabulary ", teacher_config.vocab_size, " (", config.teacher,
         ") differs from the student's ", student_base.vocab_size, " (", config.student,
         "); pass --slice-teacher-vocab to drop the teacher's extra rows");
  std::string data_path = config.data.empty() ? default_corpus_path() : config.data;
  TokenData data = load_tokens(data_path, 0.05, 0);
  (void)WindowLoader(data.train, config.train.seq_len, config.train.batch_size, config.train.seed);  // seq_len fits

  const Json recorded = study_json(config, data_path, data, teacher_config, student_base);
  const fs::path study_file = run_dir / "study.json";
  std::error_code ec;
  if (config.resume) {
    if (!fs::is_regular_file(study_file, ec))
      fail("distill", "cannot resume ", run_dir.string(), ": ", study_file.string(), " is missing (not a study's run directory)");
    const Json saved = read_json_file(study_file.string());
    if (!(saved.at("config") == recorded))
      fail("distill", "cannot resume ", run_dir.string(), ": it was started with another config (",
           describe_differences(saved.at("config"), recorded, "in study.json"), "); it was started as: ",
           saved.at("command").as_string());
  } else if (fs::exists(study_file, ec)) {
    fail("distill", run_dir.string(), " already holds a study (study.json): continue it with --resume ",
         run_dir.string(), " or choose another --run-dir");
  }
  fs::create_directories(run_dir, ec);
  if (ec || !fs::is_directory(run_dir, ec))
    fail("distill", "cannot create run directory ", run_dir.string(), ": ",
         ec ? ec.message() : std::string("a file of that name is in the way"));
  if (!config.resume) {
    Json study = Json::object();
    study["command"] = config.command;
    study["config"] = recorded;
    write_file_atomically(study_file.string(), {study.dump(2) + "\n"}, "distill");
  }
  std::cout << "data: " << data_path << " (" << data.train.size() << " training and " << data.val.size()
            << " validation tokens)\n" << std::flush;

  // ---- the teacher: cached by everything that determines its weights ----
  TrainConfig tc = config.train;
  tc.steps = config.teacher_steps;
  tc.loss.kd_ratio = 0;
  Json key = Json::object();
  key["config"] = teacher_config.to_json();
  key["data"] = fs::absolute(data_path).string();
  key["tokens"] = data.train.size();
  key["train"] = train_settings(tc, false);
  std::string cache = config.cache_dir.empty() ? default_cache_dir() : config.cache_dir;
  fs::path teacher_dir = fs::path(cache) / "teachers" / hex_hash(key.dump());
  nn::CausalLM teacher(teacher_config);
  nn::Params teacher_params;
  if (fs::exists(teacher_dir / "config.json")) {
    std::cout << "teacher: reusing " << teacher_dir.string() << "\n" << std::flush;
    teacher_params = nn::load_model_dir(teacher_dir.string()).params;
  } else {
    tc.run_dir = (run_dir / "teacher").string();
    const bool resume = config.resume && has_checkpoint(tc.run_dir);
    std::cout << "teacher: " << (resume ? "resuming" : "pretraining") << " " << config.teacher << " for " << tc.steps
              << " steps\n" << std::flush;
    Generator gen(tc.seed);
    auto [ps, st] = teacher.init(gen);
    TrainResult r = fit(teacher, ps, st, Teacher{}, data, tc, resume);
    if (r.interrupted) return {run_dir.string(), true};
    teacher_params = r.params;
    nn::save_model_dir(teacher_dir.string(), teacher_config, teacher_params);
    write_file_atomically((teacher_dir / "key.json").string(), {key.dump(2) + "\n"}, "distill");
    if (stop_requested().load()) return {run_dir.string(), true};
  }
  // The frozen teacher runs in the students' compute dtype on their device.
  teacher_params = nn::cast(nn::to(teacher_params, config.train.device), config.train.compute_dtype);
  nn::State teacher_state = nn::cast(nn::to(teacher.init_state(), config.train.device), config.train.compute_dtype);
  Teacher t{&teacher, &teacher_params, &teacher_state};

  // ---- one student per variant and seed, same data order ----
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
      const bool resume = config.resume && has_checkpoint(c.run_dir);
      std::cout << "student: " << variant.name << " (seed " << c.seed << ")" << (resume ? ", resuming" : "") << "\n"
                << std::flush;
      Generator gen(1000 + uint64_t(seed));
      auto [ps, st] = student.init(gen);
      RunOutcome out;
      out.variant = variant.name;
      out.overhead = student.num_params() - softmax_params;
      out.result = fit(student, ps, st, t, data, c, resume);
      if (out.result.interrupted) return {run_dir.string(), true};
      if (resume) {
        // The steps before the checkpoint come from metrics.jsonl, so the table sees the whole run.
        TrainResult history = read_metrics(c.run_dir);
        out.result.steps = std::move(history.steps);
        out.result.evals = std::move(history.evals);
      }
      // The attention statistics run on the CPU (nn::attention_stats), whatever trained the model.
      const nn::Params cpu_params = nn::to(out.result.params, Device::cpu());
      const nn::State cpu_state = nn::to(out.result.state, Device::cpu());
      for (const Batch& b : analysis) {
        auto layers = student.analyze(b.inputs, cpu_params, cpu_state);
        if (out.layers.empty()) out.layers = layers;
        for (const auto& l : layers) {
          auto w = l.attention.weight_sums.to_vector<double>();
          out.weight_sums.insert(out.weight_sums.end(), w.begin(), w.end());
        }
      }
      nn::save_model_dir((fs::path(c.run_dir) / "model").string(), sc, out.result.params);
      outcomes[v].push_back(std::move(out));
      if (stop_requested().load()) return {run_dir.string(), true};
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
  return {run_dir.string(), false};
}

}  // namespace cotan::train
