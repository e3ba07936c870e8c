#include "study/study.hpp"
#include "train/teacher_topk.hpp"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <optional>

#include "nn/model_dir.hpp"
#include "nn/safetensors.hpp"
#include "tensor/op_table.hpp"
#include "tensor/ops.hpp"
#include "study/figures.hpp"
#include "train/run_dir.hpp"
#include "study/stats.hpp"
#include "study/teacher_cache.hpp"
#include "text/tokenizer_files.hpp"
#include "train/tokenize_corpus.hpp"
#include "util/atomic_file.hpp"
#include "util/hash.hpp"
#include "util/json.hpp"

namespace cotan::study {

// The trainer's and evaluation's names, which this file uses throughout.
using namespace cotan::train;
using namespace cotan::eval;

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

std::string default_cache_dir() {
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return (fs::path(x) / "cotan").string();
  if (const char* h = std::getenv("HOME"); h && *h) return (fs::path(h) / ".cache" / "cotan").string();
  return (fs::temp_directory_path() / "cotan-cache").string();
}

namespace {

// The most bytes of teacher outputs a study keeps for its students (TeacherCache): the default
// tiny study needs about 130 MB (150 steps of [8, 128, 192] f32 hidden states, and validation).
constexpr size_t kTeacherCacheBytes = size_t(1) << 30;

std::string hex_hash(const std::string& text) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", (unsigned long long)fnv1a(text));
  return buf;
}

struct RunOutcome {
  std::string variant;
  int64_t overhead = 0;
  TrainResult result;
  std::vector<nn::LayerAnalysis> layers;
  std::vector<double> weight_sums;  // per query, averaged over heads, over the analysis batches
  std::vector<double> row_sums;     // sum_j A_ij per query, head and layer, over the analysis batches
  std::vector<std::vector<double>> attention;  // [T][T]: the last layer's A, mean over heads, sequence 0
  EvalScores eval;                  // with StudyConfig::eval
};

// outcomes[v][seed]: the runs of config.variants[v].
using Outcomes = std::vector<std::vector<RunOutcome>>;

double final_kd(const TrainResult& r) {
  size_t n = std::min<size_t>(10, r.steps.size());
  double s = 0;
  for (size_t i = r.steps.size() - n; i < r.steps.size(); ++i) s += r.steps[i].kd.value_or(NAN) / double(n);
  return s;
}

// The configs and the data, read and checked before anything is written.
struct StudyInputs {
  nn::ModelConfig teacher;
  std::optional<nn::LoadedModel> teacher_dir;  // --teacher named a model directory: its weights and State
  std::optional<nn::Params> student_weights;  // --student named one: the students start from them
  nn::ModelConfig student;  // softmax attention; each variant sets its own
  std::string data_path;
  std::optional<text::Tokenizer> tokenizer;  // none: the byte tokenizer
  TokenData data;
  StudyEvalData eval;  // with StudyConfig::eval
  std::optional<TopkData> topk;  // StudyConfig::teacher_logits
};

// The tokenizer files every model directory of the study holds (the study's tokenizer's).
nn::ModelDirExtras model_dir_files(const StudyInputs& in) {
  return CorpusTokenizer(in.tokenizer ? &*in.tokenizer : nullptr).model_dir_files();
}

// Everything in the config that determines the study's results (not run_dir, cache_dir or the
// logging settings); resuming needs it unchanged.
Json study_json(const StudyConfig& config, const StudyInputs& in) {
  Json j = Json::object();
  j["quick"] = config.quick;
  j["data"] = fs::absolute(in.data_path).string();
  if (in.tokenizer) j["tokenizer"] = describe(ShardTokenizer{in.tokenizer->hash(), uint32_t(in.tokenizer->vocab_size())});
  j["train_tokens"] = in.data.train.size();
  if (in.topk) {
    j["teacher_logits"] = fs::absolute(config.teacher_logits).string();
    j["teacher_id"] = cat(in.topk->first.teacher_id);
    j["top_k"] = in.topk->first.k;
  } else {
    j["teacher"] = in.teacher.to_json();
  }
  if (in.teacher_dir) j["teacher_weights"] = fs::absolute(config.teacher).string();
  if (in.student_weights) j["student_weights"] = fs::absolute(config.student).string();
  j["student"] = in.student.to_json();
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
  if (config.eval.enabled()) j["eval"] = eval_json(config.eval, in.eval);
  const Json settings = train_settings(config.train, true);
  Json train = Json::object();
  for (const auto& [key, value] : settings.items())
    if (key != "steps" && key != "mode") train[key] = value;
  train["slice_teacher_vocab"] = config.train.loss.slice_teacher_vocab;
  train["eval_every"] = config.train.eval_every;
  train["eval_batches"] = config.train.eval_batches;
  train["attention_impl"] = config.attention_impl == nn::AttentionImpl::composed ? "composed" : "fused";
  j["train"] = train;
  return j;
}

// The variants (default_variants() unless given) and the run directory (runs/distill-<time>
// unless given).
void fill_defaults(StudyConfig& config) {
  if (config.variants.empty()) config.variants = default_variants();
  if (config.seeds < 1) fail("distill", "--seeds must be at least 1, got ", config.seeds);
  if (config.run_dir.empty()) {
    if (config.resume) fail("distill", "resuming needs the study's run directory");
    std::time_t now = std::time(nullptr);
    char stamp[32];
    std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", std::localtime(&now));
    config.run_dir = (fs::path("runs") / (std::string("distill-") + stamp)).string();
  }
}

// The teacher --teacher names against the architecture --teacher-config expects: the fields that
// shape the model (not the attention options, the context length or the initialisation).
void check_teacher_config(const nn::ModelConfig& expected, const nn::ModelConfig& found, const std::string& teacher) {
  auto shape = [](const nn::ModelConfig& c) {
    Json j = Json::object();
    j["model_type"] = c.model_type == "mistral" ? "llama" : c.model_type;
    j["vocab_size"] = c.vocab_size;
    j["hidden_size"] = c.hidden_size;
    j["num_hidden_layers"] = c.num_layers;
    j["num_attention_heads"] = c.num_heads;
    j["num_key_value_heads"] = c.num_kv_heads;
    j["intermediate_size"] = c.intermediate_size;
    j["head_dim"] = c.dim_per_head();
    j["tie_word_embeddings"] = c.tie_word_embeddings;
    j["qkv_bias"] = c.qkv_bias;
    j["rope_theta"] = c.rope_theta;
    j["rope_scaling"] = c.rope_scaling.type;
    return j;
  };
  const Json want = shape(expected), got = shape(found);
  if (!json_equal(want, got))
    fail("distill", "--teacher ", teacher, " is not the model --teacher-config expects (",
         describe_differences(want, got, "expected"), ")");
}

StudyInputs read_inputs(const StudyConfig& config) {
  backend(config.train.device);  // "[cuda] no CUDA device: ..."
  StudyInputs in;
  const bool offline = !config.teacher_logits.empty();
  // Offline targets (--teacher-logits): no teacher is read; the student's config stands in for it below.
  if (!offline) in.teacher = nn::load_config(config.teacher);
  if (!offline && fs::is_directory(config.teacher)) {  // a model directory: without weights it is an error
    // Loaded (and verified) before anything is written, in the dtype it will run in.
    in.teacher_dir = nn::load_model_dir(config.teacher, config.train.compute_dtype);
    in.teacher = in.teacher_dir->config;
  } else if (!offline && config.teacher_steps < 1) {
    fail("distill", "--teacher ", config.teacher, " has no weights to load, so it is pretrained first: --teacher-steps ",
         config.teacher_steps, " must be at least 1");
  }
  if (config.teacher_config && !offline) check_teacher_config(*config.teacher_config, in.teacher, config.teacher);
  if (fs::is_directory(config.student)) {
    nn::LoadedModel loaded = nn::load_model_dir(config.student);
    in.student = loaded.config;
    in.student_weights = std::move(loaded.params);
  } else {
    in.student = nn::load_config(config.student);
  }
  in.student.attention = nn::AttentionConfig{};
  // A preset student (tiny-student, ...) follows a teacher directory's vocabulary: its size here,
  // its tokenizer and special token ids in the study's tokenizer files (the teacher's
  // tokenizer.json by default). A config.json or model directory keeps its own, checked below.
  std::error_code ec;
  const bool preset_student = !fs::exists(config.student, ec);
  const bool teacher_tokenizer = in.teacher_dir && config.tokenizer.empty() &&
                                 fs::exists(fs::path(config.teacher) / "tokenizer.json", ec) &&
                                 !text::is_byte_tokenizer_json(config.teacher);
  if (in.teacher_dir && preset_student && (in.student.vocab_size != in.teacher.vocab_size || teacher_tokenizer)) {
    in.student.vocab_size = in.teacher.vocab_size;
    std::cout << "student: " << config.student << " takes the teacher's vocabulary (" << in.teacher.vocab_size << " ids)"
              << (teacher_tokenizer ? cat(", tokenizer and special tokens (", (fs::path(config.teacher) / "tokenizer.json").string(), ")")
                                    : std::string())
              << "\n" << std::flush;
  }
  if (offline) in.teacher = in.student;  // stands in for the checks below; never run
  if (in.teacher.vocab_size != in.student.vocab_size && !config.train.loss.slice_teacher_vocab)
    fail("distill", "teacher vocabulary ", in.teacher.vocab_size, " (", config.teacher, ") differs from the student's ",
         in.student.vocab_size, " (", config.student, "); pass --slice-teacher-vocab to drop the teacher's extra rows");
  in.data_path = config.data.empty() ? default_corpus_path() : config.data;
  std::string tokenizer_path = config.tokenizer;
  if (tokenizer_path.empty() && !offline && fs::exists(fs::path(config.teacher) / "tokenizer.json"))
    tokenizer_path = config.teacher;
  if (offline && !is_token_data(in.data_path))
    fail("distill", "--teacher-logits needs --data to be the token shards the targets were made from, got ", in.data_path);
  if (!tokenizer_path.empty()) in.tokenizer = text::load_tokenizer(tokenizer_path);  // none: the bytes
  if (in.tokenizer) {
    if (in.tokenizer->vocab_size() > in.student.vocab_size)
      fail("distill", in.tokenizer->path(), " has ", in.tokenizer->vocab_size(), " ids, more than the student's vocab_size ",
           in.student.vocab_size, " (", config.student, ")");
  }
  const CorpusTokenizer tokenizer(in.tokenizer ? &*in.tokenizer : nullptr);
  text::CorpusOptions corpus;
  corpus.text_field = config.text_field;
  in.data = load_corpus_tokens(in.data_path, tokenizer, 0.05, 0,
                               config.cache_dir.empty() ? default_cache_dir() : config.cache_dir, corpus, &std::cerr);
  // Every check fit() makes of its settings, for the teacher's run and the students' runs, now:
  // a failure after study.json is written would leave a run directory that blocks a rerun.
  TrainConfig teacher_run = config.train, student_run = config.train;
  teacher_run.steps = std::max<int64_t>(config.teacher_steps, 1);  // 0: loaded, checked above
  teacher_run.loss.kd_ratio = 0;
  student_run.steps = config.student_steps;
  const nn::CausalLM teacher_model(in.teacher), student_model(in.student);
  check_inputs(teacher_model, nullptr, in.data, teacher_run);
  check_inputs(student_model, &teacher_model, in.data, student_run);
  if (offline) {
    in.topk = load_topk(config.teacher_logits, in.data_path, config.train.loss.temperature);
    check_topk(student_model, *in.topk, in.data, student_run);
  }
  (void)WindowLoader(in.data.train, config.train.seq_len, config.train.batch_size, config.train.seed);  // seq_len fits
  if (config.eval.enabled())
    in.eval = read_eval_data(config.eval, config.text_field, in.tokenizer ? &*in.tokenizer : nullptr,
                             std::min(in.teacher.max_position_embeddings, in.student.max_position_embeddings));
  return in;
}

// Locks the run directory (creating it) for the study's length. Resuming: study.json must hold the
// same config. Otherwise the directory must hold nothing but, at most, the study.json of a start
// that trained nothing (or, with overwrite, what it holds is moved aside); study.json is written.
RunDirLock open_run_dir(const StudyConfig& config, const fs::path& run_dir, const Json& recorded) {
  const fs::path study_file = run_dir / "study.json";
  std::error_code ec;
  if (config.resume && !fs::is_regular_file(study_file, ec))
    fail("distill", "cannot resume ", run_dir.string(), ": ", study_file.string(), " is missing (not a study's run directory)");
  RunDirLock lock(run_dir.string(), "distill");
  if (config.resume) {
    const Json saved = read_json_file(study_file.string());
    const JsonFields f(saved, "distill", study_file.string());
    if (!json_equal(member(saved, "config"), recorded))
      fail("distill", "cannot resume ", run_dir.string(), ": it was started with another config (",
           describe_differences(member(saved, "config"), recorded, "in study.json"), "); it was started as: ",
           f.required<std::string>("command"));
    return lock;
  }
  // Only study.json: a start that failed before anything trained (an input only a run could
  // check, a full disk); nothing is lost in starting over.
  const auto found = run_dir_entries(run_dir.string());
  const bool untrained = found == std::vector<std::string>{"study.json"} ||
                         found == std::vector<std::string>{"recipe.toml", "study.json"};
  if (untrained && !config.overwrite) {
    std::cout << "starting over in " << run_dir.string() << ": it holds only the study.json of a study that trained nothing\n";
  } else if (!found.empty()) {
    if (!config.overwrite) {
      const bool study = fs::exists(study_file, ec);
      fail("distill", run_dir.string(), " already holds ", study ? "a study (study.json" : "files (" + describe_entries(run_dir.string(), found),
           "): continue it with --resume ", run_dir.string(), ", pass --overwrite to move it aside, or choose another --run-dir");
    }
    std::cout << "moved the earlier contents of " << run_dir.string() << " to " << move_run_aside(run_dir.string(), "distill")
              << "\n";
  }
  Json study = Json::object();
  study["command"] = config.command;
  study["config"] = recorded;
  write_file_atomically(study_file.string(), {dump_json(study, 2) + "\n"}, "distill");
  if (!config.recipe.empty()) write_file_atomically((run_dir / "recipe.toml").string(), {config.recipe}, "distill");
  return lock;
}

// The teacher's weights: loaded from the model directory --teacher names, else from the cache,
// where they are keyed by everything that determines them, or pretrained in run_dir/teacher
// (resumable) and then cached. nullopt when interrupted.
std::optional<nn::LoadedModel> teacher_weights(const StudyConfig& config, const StudyInputs& in,
                                               const nn::CausalLM& teacher, const fs::path& run_dir) {
  if (in.teacher_dir) {
    std::cout << "teacher: " << config.teacher << " (" << teacher.num_params() << " parameters, loaded)\n" << std::flush;
    return *in.teacher_dir;
  }
  TrainConfig tc = config.train;
  tc.steps = config.teacher_steps;
  tc.loss.kd_ratio = 0;
  Json key = Json::object();
  key["config"] = in.teacher.to_json();
  key["data"] = fs::absolute(in.data_path).string();
  key["tokens"] = in.data.train.size();
  key["train"] = train_settings(tc, false);
  const std::string cache = config.cache_dir.empty() ? default_cache_dir() : config.cache_dir;
  const fs::path teacher_dir = fs::path(cache) / "teachers" / hex_hash(dump_json(key));
  if (fs::exists(teacher_dir / "config.json")) {
    std::cout << "teacher: reusing " << teacher_dir.string() << "\n" << std::flush;
    return nn::load_model_dir(teacher_dir.string());
  }
  tc.run_dir = (run_dir / "teacher").string();
  tc.progress_label = "teacher";
  tc.steps_after = int64_t(config.variants.size()) * config.seeds * config.student_steps;
  const bool resume = config.resume && has_checkpoint(tc.run_dir);
  // A resumed study starts a run that had no checkpoint yet over again.
  tc.existing = config.resume ? ExistingRun::replace : ExistingRun::refuse;
  std::cout << "teacher: " << (resume ? "resuming" : "pretraining") << " " << config.teacher << " for " << tc.steps
            << " steps\n" << std::flush;
  Generator gen(tc.seed);
  auto [ps, st] = teacher.init(gen);
  TrainResult r = fit(teacher, ps, st, Teacher{}, in.data, tc, resume);
  if (r.interrupted) return std::nullopt;
  nn::save_model_dir(teacher_dir.string(), in.teacher, r.params, r.state, model_dir_files(in));
  write_file_atomically((teacher_dir / "key.json").string(), {dump_json(key, 2) + "\n"}, "distill");
  if (stop_requested().load()) return std::nullopt;
  return nn::LoadedModel{in.teacher, std::move(r.params), std::move(r.state)};
}

// The evaluation's scores of one model, in the students' compute dtype on their device; empty
// without StudyConfig::eval.
EvalScores evaluate_for_study(const StudyConfig& config, const StudyInputs& in, const nn::CausalLM& lm,
                              const nn::Params& ps, const nn::State& st) {
  if (!config.eval.enabled()) return {};
  const EvalScores s =
      evaluate_model(lm, nn::cast(nn::to(ps, config.train.device), config.train.compute_dtype),
                     nn::cast(nn::to(st, config.train.device), config.train.compute_dtype), in.eval,
                     in.tokenizer ? &*in.tokenizer : nullptr);
  std::cout << "  eval:";
  if (std::isfinite(s.ppl)) std::cout << " ppl " << format_number(s.ppl, 4);
  for (size_t i = 0; i < s.acc.size(); ++i)
    std::cout << (i == 0 && !std::isfinite(s.ppl) ? " " : ", ") << in.eval.task_names[i] << " acc "
              << format_number(s.acc[i], 3) << "%";
  std::cout << "\n" << std::flush;
  return s;
}

// The attention statistics of a trained student over the analysis batches, on the CPU
// (nn::attention_stats) whatever trained the model.
void analyze_attention(const nn::CausalLM& student, const std::vector<Batch>& analysis, RunOutcome& out) {
  const nn::Params cpu_params = nn::to(out.result.params, Device::cpu());
  const nn::State cpu_state = nn::to(out.result.state, Device::cpu());
  for (const Batch& b : analysis) {
    const bool first = out.layers.empty();
    auto layers = student.analyze(b.inputs, cpu_params, cpu_state, first);
    for (const auto& l : layers) {
      auto w = l.attention.weight_sums.to_vector<double>();
      out.weight_sums.insert(out.weight_sums.end(), w.begin(), w.end());
      auto r = l.attention.row_sums.to_vector<double>();
      out.row_sums.insert(out.row_sums.end(), r.begin(), r.end());
    }
    if (!first) continue;
    const Tensor& a = layers.back().attention.weights;
    const int64_t t = a.size(0);
    const std::vector<double> values = a.to_vector<double>();
    for (int64_t i = 0; i < t; ++i) out.attention.emplace_back(values.begin() + i * t, values.begin() + (i + 1) * t);
    out.layers = std::move(layers);
  }
}

// What each student shares: the inputs, the frozen teacher, the analysis batches and the
// parameter count of the softmax student.
struct StudentContext {
  const StudyConfig& config;
  const StudyInputs& in;
  const fs::path& run_dir;
  Teacher teacher;
  std::vector<Batch> analysis;
  int64_t softmax_params = 0;
};

// A variant's folder name, safe in a shell: "affine(linear_clip)" -> "affine-linear_clip" (every run
// of other characters than letters, digits, '.', '_' and '-' becomes one '-', none at the end).
std::string run_folder(const std::string& name) {
  std::string out;
  for (char ch : name) {
    const bool safe = std::isalnum(static_cast<unsigned char>(ch)) || ch == '.' || ch == '_' || ch == '-';
    if (safe) {
      out += ch;
    } else if (!out.empty() && out.back() != '-') {
      out += '-';
    }
  }
  while (!out.empty() && out.back() == '-') out.pop_back();
  return out;
}

// One student of one variant and seed, trained (or resumed) in run_dir/<variant>[-seedN] with
// the same data order as the others, then analysed and saved to its model/ folder. nullopt when
// interrupted.
std::optional<RunOutcome> distill_student(const StudentContext& ctx, const StudyVariant& variant, int64_t seed,
                                          int64_t index) {
  const StudyConfig& config = ctx.config;
  nn::ModelConfig sc = ctx.in.student;
  sc.attention = variant.attention;
  sc.attention.impl = config.attention_impl;
  nn::CausalLM student(sc);
  TrainConfig c = config.train;
  c.steps = config.student_steps;
  c.seed = config.train.seed + uint64_t(seed);
  c.run_dir = (ctx.run_dir / (run_folder(variant.name) + (config.seeds > 1 ? "-seed" + std::to_string(seed) : ""))).string();
  const bool resume = config.resume && has_checkpoint(c.run_dir);
  c.existing = config.resume ? ExistingRun::replace : ExistingRun::refuse;
  const int64_t runs = int64_t(config.variants.size()) * config.seeds;
  c.progress_label = cat("student ", index + 1, "/", runs, " ", variant.name);
  c.steps_after = (runs - index - 1) * config.student_steps;
  std::cout << "student: " << variant.name << " (seed " << c.seed << ")" << (resume ? ", resuming" : "") << "\n"
            << std::flush;
  Generator gen(1000 + uint64_t(seed));
  auto [ps, st] = student.init(gen);
  if (ctx.in.student_weights) {
    // The kind's own tensors keep their initialisation; another kind's are left out.
    const std::vector<std::string> unused = nn::take_weights(ps, *ctx.in.student_weights, config.student);
    std::cout << "  initialised from " << config.student;
    if (!unused.empty()) std::cout << " (" << unused.size() << " tensors of another attention kind left out)";
    std::cout << "\n" << std::flush;
  }
  RunOutcome out;
  out.variant = variant.name;
  out.overhead = student.num_params() - ctx.softmax_params;
  out.result = fit(student, ps, st, ctx.teacher, ctx.in.data, c, resume);
  if (out.result.interrupted) return std::nullopt;
  if (resume) {
    // The steps before the checkpoint come from metrics.jsonl, so the table sees the whole run.
    TrainResult history = read_metrics(c.run_dir);
    out.result.steps = std::move(history.steps);
    out.result.evals = std::move(history.evals);
  }
  analyze_attention(student, ctx.analysis, out);
  out.eval = evaluate_for_study(config, ctx.in, student, out.result.params, out.result.state);
  nn::save_model_dir((fs::path(c.run_dir) / "model").string(), sc, nn::to(out.result.params, Device::cpu()),
                     nn::to(out.result.state, Device::cpu()), model_dir_files(ctx.in));
  return out;
}

// Every variant and seed, in order; nullopt when interrupted.
std::optional<Outcomes> distill_students(const StudentContext& ctx) {
  Outcomes outcomes(ctx.config.variants.size());
  for (size_t v = 0; v < ctx.config.variants.size(); ++v) {
    for (int64_t seed = 0; seed < ctx.config.seeds; ++seed) {
      std::optional<RunOutcome> out =
          distill_student(ctx, ctx.config.variants[v], seed, int64_t(v) * ctx.config.seeds + seed);
      if (!out) return std::nullopt;
      outcomes[v].push_back(std::move(*out));
      if (stop_requested().load()) return std::nullopt;
    }
  }
  return outcomes;
}

// ---- the claims the study compares ----

std::vector<double> grad_norms(const RunOutcome& r) {
  std::vector<double> g;
  for (const auto& s : r.result.steps) g.push_back(s.grad_norm);
  return g;
}

double layer_mean(const RunOutcome& r, const std::function<double(const nn::LayerAnalysis&)>& f) {
  double s = 0;
  for (const auto& l : r.layers) s += f(l) / double(r.layers.size());
  return s;
}

// The warmup of a student's run (shrunk for short runs as fit() shrinks it), and the steps after it.
int64_t student_warmup(const StudyConfig& config) {
  ScheduleConfig schedule = config.train.schedule;
  schedule.total_steps = config.student_steps;
  return effective_warmup(schedule);
}

std::vector<double> after_warmup(const std::vector<double>& g, int64_t warmup) {
  return {g.begin() + std::min<std::ptrdiff_t>(warmup, std::ptrdiff_t(g.size())), g.end()};
}

// One column of the comparison: its name, what it measures on one run, whether it is a count,
// its definition for the legend, and whether it measures a model alone (the evaluation's
// columns, which the teacher's reference row has too) rather than a student's run.
struct Column {
  std::string name;
  std::function<double(const RunOutcome&)> measure;
  bool count;
  std::string meaning;
  bool of_model = false;
};

// The first-token weight of uniform causal attention: query i spreads its weight over i + 1 keys,
// so A_i0 = 1 / (i + 1), averaged over the queries i = 1 .. T - 1 the statistic counts.
double uniform_first_token_weight(int64_t t) {
  double sum = 0;
  for (int64_t i = 1; i < t; ++i) sum += 1.0 / double(i + 1);
  return t > 1 ? sum / double(t - 1) : 0.0;
}

std::vector<Column> comparison_columns(const StudyConfig& config) {
  const int64_t warmup = student_warmup(config);
  const int64_t window = config.stats_window;
  const auto stats = [window](const RunOutcome& r) { return grad_norm_stats(grad_norms(r), window); };
  std::vector<Column> columns = {
      {"KD loss", [](const RunOutcome& r) { return final_kd(r.result); }, false,
       "mean training KD loss of the last 10 steps"},
      {"val ppl", [](const RunOutcome& r) { return r.result.evals.empty() ? NAN : r.result.evals.back().ppl; }, false,
       "validation perplexity at the last evaluation"},
      {"grad-norm mean", [stats](const RunOutcome& r) { return stats(r).mean; }, false,
       cat("gradient norm before clipping, mean over steps [0, ", window, ")")},
      {"grad-norm std", [stats](const RunOutcome& r) { return stats(r).std; }, false, "its population std"},
      {"grad-norm CV", [stats](const RunOutcome& r) { return stats(r).cv; }, false, "std / mean"},
      {"spikes k=6", [](const RunOutcome& r) { return double(count_spikes(grad_norms(r), 6)); }, true,
       "steps whose norm exceeds median + 6 MAD of the run"},
      {"spikes k=9", [](const RunOutcome& r) { return double(count_spikes(grad_norms(r), 9)); }, true,
       "the same at 9 MAD"},
      {"CV after warmup",
       [warmup, &config](const RunOutcome& r) {
         const std::vector<double> g = after_warmup(grad_norms(r), warmup);  // empty: a run all warmup
         return g.empty() ? NAN : grad_norm_stats(g, config.student_steps).cv;
       },
       false, cat("grad-norm CV over the steps after the ", warmup, " warmup steps")},
      {"spikes k=6 after warmup",
       [warmup](const RunOutcome& r) { return double(count_spikes(after_warmup(grad_norms(r), warmup), 6)); }, true,
       "spikes at 6 MAD over the steps after the warmup"},
      {"first-token weight",
       [](const RunOutcome& r) { return layer_mean(r, [](const auto& l) { return l.attention.first_token_weight; }); },
       false,
       cat("attention weight on the first token, mean over queries i >= 1, heads and layers; uniform attention over "
           "the visible keys gives ", format_number(uniform_first_token_weight(config.train.seq_len), 4), " at T = ",
           config.train.seq_len, " (the mean of 1 / (i + 1); 1/T = ", format_number(1.0 / double(config.train.seq_len), 4),
           "), a sink far more")},
      {"entropy", [](const RunOutcome& r) { return layer_mean(r, [](const auto& l) { return l.attention.entropy; }); },
       false, "attention entropy in nats, mean over queries, heads and layers"},
      {"weight-sum mean",
       [](const RunOutcome& r) {
         double s = 0;
         for (double w : r.weight_sums) s += w / double(r.weight_sums.size());
         return s;
       },
       false, "sum of a query's attention weights (1 for softmax), mean over queries"},
      {"weight-sum median", [](const RunOutcome& r) { return median(r.weight_sums); }, false, "its median"},
  };
  // The evaluation's columns, in Table 1's layout: perplexity, each task's accuracy, their average.
  const StudyEvalConfig& eval = config.eval;
  if (!eval.ppl_data.empty())
    columns.push_back({"eval ppl", [](const RunOutcome& r) { return r.eval.ppl; }, false,
                       cat("token perplexity on ", eval.ppl_data, " (sliding window, as cotan eval)"), true});
  const std::string examples = eval.limit > 0 ? cat("the first ", eval.limit, " examples of ") : "";
  for (size_t i = 0; i < eval.tasks.size(); ++i)
    columns.push_back({eval.tasks[i].first + " acc", [i](const RunOutcome& r) { return r.eval.acc[i]; }, false,
                       cat("zero-shot accuracy (acc) in percent on ", examples, eval.tasks[i].second), true});
  if (!eval.tasks.empty())
    columns.push_back({"task avg", [](const RunOutcome& r) { return r.eval.average(); }, false,
                       "mean of the task accuracies", true});
  return columns;
}

// One claim of the paper, measured on one run: the verdicts compare it between a kind and softmax.
struct Claim {
  std::string name;
  std::function<double(const RunOutcome&)> measure;
  bool relative;                 // the difference in percent of softmax's value, else in the metric's units
  const char* lower = "lower";   // the word for "below softmax's"
  const char* higher = "higher";
};

std::vector<Claim> claims(const StudyConfig& config) {
  std::vector<Claim> out;
  for (const Column& c : comparison_columns(config)) {
    for (const char* name : {"KD loss", "val ppl", "grad-norm CV", "spikes k=6", "first-token weight", "entropy", "eval ppl",
                             "task avg"}) {
      if (c.name != name) continue;
      // Counts compare in units (a difference of spikes), the rest in percent of softmax's value.
      out.push_back(c.count ? Claim{c.name, c.measure, false, "fewer", "more"} : Claim{c.name, c.measure, true});
    }
  }
  return out;
}

// The paired verdicts: for every variant but softmax and every claim, the per-seed difference
// against softmax's run of the same seed (same data order), its mean and spread over seeds, and
// how many seeds agree in sign:
//   affine(linear_clip) vs softmax: KD loss -7.5% ± 2.1% (3/3 seeds lower)
// Empty when the study has no softmax variant.
std::vector<std::string> verdicts(const Outcomes& outcomes, const StudyConfig& config) {
  size_t base = outcomes.size();
  for (size_t v = 0; v < outcomes.size(); ++v)
    if (config.variants[v].attention.kind == nn::AttentionKind::softmax) base = v;
  std::vector<std::string> lines;
  if (base == outcomes.size()) return lines;
  for (size_t v = 0; v < outcomes.size(); ++v) {
    if (v == base) continue;
    std::string line = outcomes[v][0].variant + " vs " + outcomes[base][0].variant + ":";
    bool first = true;
    for (const Claim& claim : claims(config)) {
      std::vector<double> diffs;
      int64_t lower = 0, higher = 0;
      for (size_t s = 0; s < outcomes[v].size() && s < outcomes[base].size(); ++s) {
        const double ours = claim.measure(outcomes[v][s]), theirs = claim.measure(outcomes[base][s]);
        const double d = claim.relative ? 100 * (ours - theirs) / std::abs(theirs) : ours - theirs;
        if (!std::isfinite(d)) continue;
        diffs.push_back(d);
        lower += d < 0;
        higher += d > 0;
      }
      if (diffs.empty()) continue;
      const Summary sum = summarize(diffs);
      const char* unit = claim.relative ? "%" : "";
      const char* seeds = sum.n == 1 ? " seed " : " seeds ";
      std::string text;
      if (lower == 0 && higher == 0) {
        text = cat("0", unit, " (", sum.n, "/", sum.n, seeds, "equal)");
      } else {
        text = cat(sum.mean >= 0 ? "+" : "", format_number(sum.mean, 2), unit);
        if (sum.n > 1) text += cat(" ± ", format_number(sum.std, 2), unit);
        const bool below = sum.mean < 0;
        text += cat(" (", below ? lower : higher, "/", sum.n, seeds, below ? claim.lower : claim.higher, ")");
      }
      line += cat(first ? " " : "; ", claim.name, " ", text);
      first = false;
    }
    lines.push_back(line);
  }
  return lines;
}

// The values of one column over the seeds of one variant.
std::vector<double> column_values(const Column& c, const std::vector<RunOutcome>& runs) {
  std::vector<double> values;
  for (const RunOutcome& r : runs) values.push_back(c.measure(r));
  return values;
}

// One row per variant; with several seeds each cell is a mean and spread over them. `teacher`,
// when given, is a last reference row with the columns of_model (the evaluation's) only. A legend
// defining every column follows the table.
std::string comparison_markdown(const Outcomes& outcomes, const StudyConfig& config, const RunOutcome* teacher) {
  const std::vector<Column> columns = comparison_columns(config);
  std::vector<std::string> names{"attention", "delta params"};
  for (const Column& c : columns) names.push_back(c.name);
  Table table(names);
  bool unmeasured = false;
  for (const auto& runs : outcomes) {
    std::vector<std::string> cells{runs[0].variant, std::to_string(runs[0].overhead)};
    for (const Column& c : columns) {
      const std::vector<double> values = column_values(c, runs);
      if (std::all_of(values.begin(), values.end(), [](double v) { return std::isnan(v); })) {
        cells.push_back("n/a");  // not measured: val ppl without validation data, say
        unmeasured = true;
      } else if (config.seeds > 1) {
        cells.push_back(format_summary(summarize(values), 4));
      } else {
        cells.push_back(c.count ? std::to_string(std::llround(values[0])) : format_number(values[0], 4));
      }
    }
    table.add_row(cells);
  }
  if (teacher) {
    std::vector<std::string> cells{teacher->variant, ""};
    for (const Column& c : columns) cells.push_back(c.of_model ? format_number(c.measure(*teacher), 4) : "");
    table.add_row(cells);
  }
  std::string legend = cat("\n", config.seeds > 1 ? cat("Cells are mean ± std over ", config.seeds, " seeds.\n") : "",
                           "- attention: the variant; delta params: parameters over the softmax student's\n");
  if (teacher) legend += cat("- ", teacher->variant, ": the teacher, scored with the same evaluation\n");
  for (const Column& c : columns) legend += cat("- ", c.name, ": ", c.meaning, "\n");
  if (unmeasured) legend += "- n/a: not measured (val ppl: the data has no validation batches)\n";
  return table.markdown() + legend;
}

// The same numbers for programs: a mean and a std column per measure (std 0 for one seed),
// values in full precision, empty where undefined; the teacher's row (one model, seeds 1) has
// the columns of_model only.
std::string comparison_csv(const Outcomes& outcomes, const StudyConfig& config, const RunOutcome* teacher) {
  const std::vector<Column> columns = comparison_columns(config);
  std::vector<std::string> names{"attention", "delta params", "seeds"};
  for (const Column& c : columns) {
    names.push_back(c.name + " mean");
    names.push_back(c.name + " std");
  }
  Table table(names);
  const auto number = [](double v) { return std::isfinite(v) ? dump_json(Json(v)) : std::string(); };
  for (const auto& runs : outcomes) {
    std::vector<std::string> cells{runs[0].variant, std::to_string(runs[0].overhead), std::to_string(runs.size())};
    for (const Column& c : columns) {
      const Summary s = summarize(column_values(c, runs));
      cells.push_back(number(s.mean));
      cells.push_back(number(s.std));
    }
    table.add_row(cells);
  }
  if (teacher) {
    std::vector<std::string> cells{teacher->variant, "", "1"};
    for (const Column& c : columns) {
      cells.push_back(c.of_model ? number(c.measure(*teacher)) : "");
      cells.push_back(c.of_model ? number(0) : "");
    }
    table.add_row(cells);
  }
  return table.csv();
}

// The figures' data of every run (study/figures.hpp).
std::vector<std::vector<FigureRun>> figure_runs(const Outcomes& outcomes) {
  std::vector<std::vector<FigureRun>> out;
  for (const auto& runs : outcomes) {
    std::vector<FigureRun>& seeds = out.emplace_back();
    for (size_t seed = 0; seed < runs.size(); ++seed) {
      const RunOutcome& r = runs[seed];
      FigureRun f;
      f.variant = r.variant;
      f.seed = int64_t(seed);
      for (const auto& s : r.result.steps) {
        f.steps.push_back(double(s.step));
        f.kd.push_back(s.kd.value_or(NAN));
        f.grad_norm.push_back(s.grad_norm);
      }
      for (const nn::LayerAnalysis& l : r.layers) {
        f.first_token_weight.push_back(l.attention.first_token_weight);
        f.first_token_share.push_back(l.attention.first_token_share);
        f.entropy.push_back(l.attention.entropy);
        if (l.alpha_mean.defined()) f.alpha.push_back(l.alpha_mean.to_vector<double>());
      }
      f.weight_sums = r.row_sums;
      f.attention = r.attention;
      f.attention_layer = int64_t(r.layers.size()) - 1;
      seeds.push_back(std::move(f));
    }
  }
  return out;
}

}  // namespace

StudyResult run_study(StudyConfig config) {
  auto t0 = std::chrono::steady_clock::now();
  fill_defaults(config);
  const fs::path run_dir(config.run_dir);
  const StudyResult interrupted{run_dir.string(), true};

  // Every input is checked before the first write.
  const StudyInputs in = read_inputs(config);
  const RunDirLock lock = open_run_dir(config, run_dir, study_json(config, in));
  for (const std::string& note : config.notes) std::cerr << "note: " << note << "\n";
  std::cout << "data: " << in.data_path << " (" << in.data.train.size() << " training and " << in.data.val.size()
            << " validation tokens)\n" << std::flush;

  nn::CausalLM teacher(in.teacher);
  std::optional<nn::LoadedModel> loaded;
  if (in.topk) {
    std::cout << "teacher: offline top-" << in.topk->first.k << " targets from " << config.teacher_logits << "\n"
              << std::flush;
    loaded.emplace();
  } else {
    loaded = teacher_weights(config, in, teacher, run_dir);
  }
  if (!loaded) return interrupted;
  // The frozen teacher runs in the students' compute dtype on their device, with its own buffers,
  // the weights of each joint product side by side in one buffer (read in place, not stacked anew
  // on every step).
  const nn::Params teacher_params =
      in.topk ? nn::Params{}
              : nn::adjoin(nn::cast(nn::to(loaded->params, config.train.device), config.train.compute_dtype),
                           teacher.joint_weight_groups());
  nn::State teacher_state =
      in.topk ? nn::State{} : nn::cast(nn::to(loaded->state, config.train.device), config.train.compute_dtype);
  teacher_state.training = false;
  std::optional<RunOutcome> teacher_scores;  // the table's reference row
  if (config.eval.enabled() && !in.topk) {
    std::cout << "evaluating the teacher\n" << std::flush;
    teacher_scores.emplace();
    teacher_scores->variant = "teacher";
    teacher_scores->eval = evaluate_for_study(config, in, teacher, teacher_params, teacher_state);
  }
  const RunOutcome* reference = teacher_scores ? &*teacher_scores : nullptr;

  // The students of one seed draw the same batches: on the CPU the teacher runs once per batch
  // for all of them, and once per validation batch for the whole study, its outputs kept up to
  // kTeacherCacheBytes. Only with two variants or more (else no training batch comes twice), and
  // not on a GPU, whose memory the plan (study/plan.hpp) accounts for.
  TeacherCache teacher_cache(kTeacherCacheBytes);
  const bool share_teacher = config.train.device.is_cpu() && config.variants.size() > 1;
  const StudentContext students{
      config, in, run_dir,
      in.topk ? Teacher{nullptr, nullptr, nullptr, &*in.topk}
              : Teacher{&teacher, &teacher_params, &teacher_state, nullptr, share_teacher ? &teacher_cache : nullptr},
      validation_batches(in.data.val.empty() ? in.data.train : in.data.val, config.train.seq_len,
                         config.train.batch_size, config.analysis_batches),
      nn::CausalLM(in.student).num_params()};
  const std::optional<Outcomes> outcomes = distill_students(students);
  if (!outcomes) return interrupted;

  const std::string markdown = comparison_markdown(*outcomes, config, reference);
  write_file_atomically((run_dir / "table.md").string(), {markdown}, "distill");
  write_file_atomically((run_dir / "table.csv").string(), {comparison_csv(*outcomes, config, reference)}, "distill");
  write_figures(run_dir, figure_runs(*outcomes));
  std::cout << std::flush;  // before the plotting script's own line
  const FigureRendering figures = render_figures(run_dir);

  if (config.stats_window > config.student_steps)
    std::cout << "\nnote: the grad-norm window (" << config.stats_window << " steps) is longer than the runs ("
              << config.student_steps << " steps): its statistics cover every step, warmup ("
              << student_warmup(config) << " steps) included; the \"after warmup\" columns leave the warmup out\n";
  const std::vector<std::string> verdict_lines = verdicts(*outcomes, config);
  std::string verdict_text;
  for (const std::string& line : verdict_lines) verdict_text += line + "\n";
  if (!verdict_lines.empty()) write_file_atomically((run_dir / "verdicts.txt").string(), {verdict_text}, "distill");

  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::cout << "\n" << markdown << "\n";
  if (!verdict_lines.empty()) std::cout << "paired verdicts (per-seed differences against softmax):\n" << verdict_text << "\n";
  if (!figures.drawn) std::cout << "figures: " << figures.message << "\n";
  std::cout << "finished in " << format_number(seconds, 3) << " s; results in " << run_dir.string() << "\n";
  return {run_dir.string(), false};
}

}  // namespace cotan::study
