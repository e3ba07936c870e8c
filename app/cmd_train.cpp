// cotan pretrain and cotan distill. Ctrl-C stops either after writing a checkpoint, prints the
// command that continues the run (`--resume DIR`) and exits with status 130.
#include <unistd.h>

#include <algorithm>
#include <boost/program_options.hpp>
#include <filesystem>
#include <iostream>
#include <limits>
#include <optional>
#include <set>

#include "app/commands.hpp"
#include "app/distill_options.hpp"
#include "app/options.hpp"
#include "app/recipe_args.hpp"
#include "cotan_config.h"
#include "nn/model_dir.hpp"
#include "tensor/op_table.hpp"
#include "text/tokenizer.hpp"
#include "text/tokenizer_files.hpp"
#include "study/study.hpp"
#include "train/run_dir.hpp"
#include "train/tokenize_corpus.hpp"

namespace po = boost::program_options;
namespace fs = std::filesystem;

namespace cotan::app {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Options shared by both commands, written into `c`.
void add_training_options(po::options_description& opts, train::TrainConfig& c, std::string& loss_spec,
                          std::string& device, std::string& dtype, std::string& seed) {
  opts.add_options()("device", po::value(&device)->default_value("cpu"), "cpu | cuda | cuda:N")(
      "dtype", po::value(&dtype)->default_value("f32"),
      "compute dtype: f32, or bf16 (bf16 activations and GEMMs, f32 master weights and AdamW state)")(
      "tf32", po::bool_switch(&c.tf32), "f32 matmuls on TF32 tensor cores (CUDA devices)")("batch-size", po::value(&c.batch_size)->default_value(c.batch_size), "sequences per micro-batch")(
      "grad-accum", po::value(&c.grad_accum)->default_value(c.grad_accum), "micro-batches per optimizer step")(
      "seq-len", po::value(&c.seq_len)->default_value(c.seq_len), "tokens per sequence")(
      "seed", po::value(&seed)->default_value(std::to_string(c.seed)), "data order and initialisation seed, in [0, 2^64)")(
      "lr", po::value(&c.schedule.lr)->default_value(c.schedule.lr, shown(c.schedule.lr)), "peak learning rate")(
      "warmup", po::value(&c.schedule.warmup_steps)->default_value(c.schedule.warmup_steps), "warmup steps")(
      "decay-fraction", po::value(&c.schedule.decay_fraction)->default_value(c.schedule.decay_fraction, shown(c.schedule.decay_fraction)),
      "fraction of steps in the final decay")(
      "weight-decay", po::value(&c.adamw.weight_decay)->default_value(c.adamw.weight_decay, shown(c.adamw.weight_decay)), "AdamW weight decay")(
      "clip", po::value(&c.clip)->default_value(c.clip, shown(c.clip)), "global gradient-norm clipping (0: off)")(
      "loss", po::value(&loss_spec)->default_value("fkl"), "fkl | rkl | jsd[:beta]")(
      "temperature", po::value(&c.loss.temperature)->default_value(c.loss.temperature, shown(c.loss.temperature)), "KD temperature")(
      "kd-ratio", po::value(&c.loss.kd_ratio)->default_value(c.loss.kd_ratio, shown(c.loss.kd_ratio)), "weight of KD against cross-entropy")(
      "slice-teacher-vocab", po::bool_switch(&c.loss.slice_teacher_vocab), "drop a larger teacher vocabulary's extra rows")(
      "no-fused-head", "compute both models' whole logits before the loss, instead of the heads inside the loss in "
                       "chunks of rows")(
      "eval-every", po::value(&c.eval_every)->default_value(c.eval_every), "evaluate every N steps (0: at the end)")(
      "checkpoint-every", po::value(&c.checkpoint_every)->default_value(c.checkpoint_every),
      "checkpoint every N steps (0: at the end)")(
      "keep-checkpoints", po::value(&c.keep_checkpoints)->default_value(c.keep_checkpoints),
      "checkpoints kept: checkpoint/ and the newest checkpoint-<step>/ before it")(
      "allow-longer-context", po::bool_switch(&c.allow_longer_context),
      "allow --seq-len above the models' max_position_embeddings")(
      "overwrite", "start anew in a run directory that holds a run, moving the old one aside (DIR.old-N); pretrain: "
                   "likewise for a model in --out");
}

// The range of every numeric training option, checked after parsing; sets c.seed from --seed.
void check_training_options(train::TrainConfig& c, const std::string& seed_text) {
  check_integer("batch-size", c.batch_size, 1, 1 << 20);
  check_integer("grad-accum", c.grad_accum, 1, 1 << 20);
  check_integer("seq-len", c.seq_len, 1, int64_t(1) << 24);
  c.seed = parse_u64_option("seed", seed_text);
  check_number("lr", c.schedule.lr, 0, kInf, true);
  check_integer("warmup", c.schedule.warmup_steps, 0);
  check_number("decay-fraction", c.schedule.decay_fraction, 0, 1);
  check_number("weight-decay", c.adamw.weight_decay, 0, kInf);
  check_number("clip", c.clip, 0, kInf, false, "0: off");
  check_number("temperature", c.loss.temperature, 0, kInf, true);
  check_number("kd-ratio", c.loss.kd_ratio, 0, 1);
  check_integer("eval-every", c.eval_every, 0, kNoLimit, "0: at the end");
  check_integer("checkpoint-every", c.checkpoint_every, 0, kNoLimit, "0: at the end");
  check_integer("keep-checkpoints", c.keep_checkpoints, 1, 1000);
}

constexpr int kInterruptedStatus = 130;  // 128 + SIGINT, as a shell reports a Ctrl-C

// A word the shell reads back unchanged.
std::string shell_quote(const std::string& word) {
  if (!word.empty() && word.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.,:/=+@%") ==
                           std::string::npos)
    return word;
  std::string quoted = "'";
  for (char c : word) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

// "cotan <command> ARGS...", each argument quoted for the shell.
std::string command_line(const std::string& command, const Args& args) {
  std::string line = "cotan ";
  line += command;
  for (const std::string& a : args) {
    line += ' ';
    line += shell_quote(a);
  }
  return line;
}

// The command line that continues a run in `dir`: `args` without --run-dir and --resume, then
// --resume DIR.
std::string resume_command(const std::string& command, const Args& args, const std::string& dir) {
  Args kept;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--run-dir" || a == "--resume") {
      ++i;  // and its value
    } else if (!a.starts_with("--run-dir=") && !a.starts_with("--resume=")) {
      kept.push_back(a);
    }
  }
  kept.push_back("--resume");
  kept.push_back(dir);
  return command_line(command, kept);
}

// Rethrows `e`, an error about an option's value, as "[tag] --option value: message".
[[noreturn]] void fail_for_option(const std::string& option, const std::string& value, const Error& e) {
  const std::string what = e.what();
  const size_t close = what.starts_with("[") ? what.find("] ") : std::string::npos;
  const std::string tag = close == std::string::npos ? "cotan" : what.substr(1, close - 1);
  fail(tag, option, " ", value, ": ", close == std::string::npos ? what : what.substr(close + 2));
}

// The study's students: default_variants(), only those of `kinds` when given, the affine ones
// with --phi and --affine-n applied. --phi keeps one student of a kind run once per phi, and
// a variant whose settings the options chose names them: "affine(sigmoid, affine_n=full)".
std::vector<study::StudyVariant> study_variants(const std::vector<nn::AttentionKind>& kinds, const AffineOptions& affine) {
  nn::AttentionConfig chosen;
  apply_affine_options(affine, chosen);  // checks the names before anything else
  const bool renamed = !affine.phi.empty() || !affine.affine_n.empty();
  std::vector<study::StudyVariant> out;
  for (study::StudyVariant v : study::default_variants()) {
    if (!kinds.empty() && std::find(kinds.begin(), kinds.end(), v.attention.kind) == kinds.end()) continue;
    const nn::AttentionKindInfo& info = nn::attention_kind(v.attention.kind);
    if (nn::is_affine(v.attention.kind)) {
      if (info.study_each_phi && !affine.phi.empty() && v.attention.phi != chosen.phi) continue;
      apply_affine_options(affine, v.attention);
      if (renamed)
        v.name = cat(info.name, "(", nn::name_of(v.attention.phi),
                     v.attention.affine_n == nn::AffineN::full ? ", affine_n=full" : "", ")");
    }
    out.push_back(std::move(v));
  }
  return out;
}

// nn::load_config, with errors that name the option and its value.
nn::ModelConfig load_model_config(const std::string& option, const std::string& value) {
  try {
    return nn::load_config(value);
  } catch (const Error& e) {
    if (std::string(e.what()).find(value) != std::string::npos) throw;  // already names the file
    fail_for_option(option, value, e);
  }
}

// train::set_kd_loss, with errors that name --loss.
void set_kd_loss(train::LossConfig& loss, const std::string& spec) {
  try {
    train::set_kd_loss(loss, spec);
  } catch (const Error& e) {
    fail_for_option("--loss", spec, e);
  }
}

// --dtype: the compute dtype.
// --resume DIR names the run directory; a different --run-dir beside it is a mistake.
void resume_into(const po::variables_map& vm, const std::string& resume_dir, std::string& run_dir) {
  if (vm.count("run-dir") && !vm["run-dir"].defaulted() && run_dir != resume_dir)
    fail("resume", "--resume ", resume_dir, " and --run-dir ", run_dir, " name different directories");
  run_dir = resume_dir;
}

// --warmup given and longer than fits before the decay of a run of `steps`: the schedule shrinks
// it (effective_warmup); "the students' 16" for the note that says so.
std::optional<std::string> shrunk_warmup(const train::TrainConfig& c, int64_t steps, const std::string& whose) {
  train::ScheduleConfig schedule = c.schedule;
  schedule.total_steps = steps;
  const int64_t warmup = train::effective_warmup(schedule);
  if (warmup >= c.schedule.warmup_steps) return std::nullopt;
  return cat(whose, " ", warmup);
}

// The note that says so, when --warmup was given; empty otherwise (the default shrinks without a word).
std::string shrunk_warmup_note(const po::variables_map& vm, const train::TrainConfig& c,
                               const std::vector<std::optional<std::string>>& runs) {
  if (!vm.count("warmup") || vm["warmup"].defaulted()) return "";
  std::string which;
  for (const auto& run : runs)
    if (run) which += (which.empty() ? "" : ", ") + *run;
  if (which.empty()) return "";
  return cat("--warmup ", c.schedule.warmup_steps, " is longer than the steps before the decay (--steps, --decay-fraction): ",
             "the warmup is ", which, " steps");
}

// --out DIR of pretrain: absent, empty, or with `overwrite` a directory whose contents are moved
// aside once the model is trained (move_aside), as a run directory's are. Checked before the run,
// so that a refused --out costs no training.
void check_model_out(const std::string& out, bool overwrite, bool resume) {
  std::error_code ec;
  if (fs::exists(out, ec) && !fs::is_directory(out, ec))
    fail("pretrain", "--out ", out, ": a file of that name is in the way (--out names a directory)");
  const std::vector<std::string> found = train::run_dir_entries(out);
  if (found.empty() || overwrite) return;
  bool model = false;
  for (const std::string& name : found)
    model |= name == "config.json" || name.ends_with(".safetensors") || name == "model.safetensors.index.json";
  const char* it = model ? "it" : "them";
  fail("pretrain", "--out ", out, " already holds ", model ? "a model (" : "files (", train::describe_entries(out, found),
       resume ? cat("): choose another --out (--overwrite, which moves ", it, " aside, does not go with --resume)")
              : cat("): pass --overwrite to move ", it, " aside, or choose another --out"));
}

}  // namespace

DType dtype_option(const std::string& value, const std::string& command) {
  DType dtype{};
  try {
    dtype = parse_dtype(value);
  } catch (const Error& e) {
    fail_for_option("--dtype", value, e);
  }
  if (dtype != DType::f32 && dtype != DType::bf16 && dtype != DType::f64)
    fail(command, "--dtype ", value, ": expected f32, bf16 or f64");
  return dtype;
}

Device device_option(const std::string& value) {
  Device device;
  try {
    device = parse_device(value);
  } catch (const Error& e) {
    fail_for_option("--device", value, e);
  }
  backend(device);
  return device;
}

void tf32_option(bool enabled, Device device) {
  if (!enabled) return;
  if (!device.is_cuda()) fail("--tf32", "TF32 is a mode of the CUDA matmuls; the device is ", to_string(device));
  backend(device).set_tf32(true);
}

constexpr const char* kDataHelp =
    "a text file, a JSONL file (*.jsonl; .gz or .zst too), a directory of them, or token shards (default: the "
    "fortunes corpus)";

int cmd_pretrain(const Args& args) {
  train::TrainConfig c = study::default_study().train;
  c.steps = 300;
  c.loss.kd_ratio = 0;
  std::string config = "tiny-teacher", data, out, loss_spec, resume_dir, device, dtype, seed, tokenizer_path, cache_dir;
  std::string text_field = "text";
  po::options_description opts("cotan pretrain [options]: train a model (a teacher) with cross-entropy");
  opts.add_options()("help,h", "show this help")("config", po::value(&config)->default_value(config),
                                                  "preset, config.json or model directory")(
      "data", po::value(&data), kDataHelp)(
      "tokenizer", po::value(&tokenizer_path),
      "tokenize a text corpus with this tokenizer.json (or a model directory holding one); default: the bytes")(
      "text-field", po::value(&text_field)->default_value(text_field), "the field of a JSONL corpus holding each document")(
      "cache-dir", po::value(&cache_dir), "where tokenized corpora are kept (default: ~/.cache/cotan)")(
      "run-dir", po::value(&c.run_dir)->default_value("runs/pretrain"), "where metrics and checkpoints go")(
      "out", po::value(&out), "also save the trained model as an HF directory here")(
      "steps", po::value(&c.steps)->default_value(c.steps), "optimizer steps")(
      "stop-after", po::value(&c.stop_after)->default_value(0), "stop after N steps with a checkpoint (resume later)")(
      "resume", po::value(&resume_dir)->value_name("DIR"), "continue the run in DIR from DIR/checkpoint (same options otherwise)");
  add_training_options(opts, c, loss_spec, device, dtype, seed);
  po::variables_map vm = parse_options(args, opts);
  if (vm.count("help")) {
    std::cout << opts;
    return 0;
  }
  check_training_options(c, seed);
  c.fused_head = vm.count("no-fused-head") == 0;
  check_integer("steps", c.steps, 1);
  check_integer("stop-after", c.stop_after, 0, kNoLimit, "0: run to the end");
  if (c.stop_after > c.steps)
    fail("option", "--stop-after ", c.stop_after, " is above --steps ", c.steps, ": the run ends at step ", c.steps,
         " anyway (leave --stop-after out to run to the end)");
  if (vm.count("overwrite")) c.existing = train::ExistingRun::move_aside;
  const bool resume = vm.count("resume") > 0;
  if (resume && vm.count("overwrite")) fail("option", "--resume and --overwrite exclude each other");
  if (resume) resume_into(vm, resume_dir, c.run_dir);
  if (!out.empty()) check_model_out(out, vm.count("overwrite") > 0, resume);
  if (!cache_dir.empty()) check_output_dir("pretrain", "--cache-dir", cache_dir);
  if (const std::string note = shrunk_warmup_note(vm, c, {shrunk_warmup(c, c.steps, "the run's")}); !note.empty())
    std::cerr << "note: " << note << "\n";
  set_kd_loss(c.loss, loss_spec);
  c.device = device_option(device);
  c.compute_dtype = dtype_option(dtype);
  c.progress = isatty(STDERR_FILENO);
  nn::CausalLM model(load_model_config("--config", config));
  if (tokenizer_path.empty() && fs::exists(fs::path(config) / "tokenizer.json")) tokenizer_path = config;
  std::optional<text::Tokenizer> hf;  // none: the byte tokenizer (its tokenizer.json, too)
  if (!tokenizer_path.empty()) hf = text::load_tokenizer(tokenizer_path);
  if (hf) {
    if (hf->vocab_size() > model.config().vocab_size)
      fail("pretrain", hf->path(), " has ", hf->vocab_size(), " ids, more than the model's vocab_size ",
           model.config().vocab_size, " (", config, ")");
  }
  text::CorpusOptions corpus;
  corpus.text_field = text_field;
  const std::string data_path = data.empty() ? train::default_corpus_path() : data;
  const train::CorpusTokenizer corpus_tokenizer(hf ? &*hf : nullptr);
  train::TokenData tokens = train::load_corpus_tokens(data_path, corpus_tokenizer, 0.05, 0,
                                                      cache_dir.empty() ? study::default_cache_dir() : cache_dir, corpus,
                                                      &std::cerr);
  Generator gen(c.seed);
  auto [ps, st] = model.init(gen);
  train::install_interrupt_handler();
  train::TrainResult r = train::fit(model, ps, st, train::Teacher{}, tokens, c, resume);
  if (r.interrupted) {
    std::cerr << "continue with: " << resume_command("pretrain", args, c.run_dir) << "\n";
    return kInterruptedStatus;
  }
  if (!out.empty()) {
    // Again: --out may have been filled while the model trained. With --overwrite, what it holds
    // is moved aside now that there is a model to take its place.
    check_model_out(out, vm.count("overwrite") > 0, resume);
    if (!train::run_dir_entries(out).empty())
      std::cerr << "moved the earlier contents of --out " << out << " to " << train::move_run_aside(out, "pretrain")
                << "\n";
    // The tokenizer goes with the model, as in an HF model directory: the HF tokenizer's files, or
    // the byte tokenizer's.
    nn::save_model_dir(out, model.config(), r.params, r.state, corpus_tokenizer.model_dir_files());
  }
  if (!r.evals.empty()) std::cout << "validation perplexity " << r.evals.back().ppl << "\n";
  std::cout << "run directory: " << c.run_dir << "\n";
  return 0;
}

namespace {

// Options a recipe cannot set (they say where a run goes, not what it is), and those a resolved
// recipe leaves out (they do not change the results).
const std::set<std::string> kNotInRecipes = {"run-dir", "resume", "overwrite", "print-recipe"};
const std::set<std::string> kNotResolved = {"run-dir", "resume", "overwrite", "print-recipe", "threads", "cache-dir"};

po::options_description distill_options(study::StudyConfig& s, DistillValues& v) {
  const std::string attention_help =
      "only these kinds, comma-separated (" + nn::attention_kind_names() + "; default: every kind)";
  po::options_description opts(
      "cotan distill [options]: pretrain (or reuse) a teacher, distill one student per attention kind and compare");
  opts.add_options()("help,h", "show this help")("quick", "a version of the study of a few seconds")(
      "print-recipe", "print the resolved recipe (every option's value) and exit")(
      "data", po::value(&s.data), kDataHelp)(
      "tokenizer", po::value(&s.tokenizer),
      "tokenize a text corpus with this tokenizer.json or model directory (default: the teacher's tokenizer.json "
      "when --teacher is a model directory with one, else the bytes)")(
      "text-field", po::value(&s.text_field)->default_value(s.text_field), "the field of a JSONL corpus holding each document")(
      "run-dir", po::value(&s.run_dir), "where results go (default: runs/distill-<time>)")(
      "resume", po::value(&v.resume_dir)->value_name("DIR"), "continue the interrupted study in DIR (with the options it was started with)")(
      "cache-dir", po::value(&s.cache_dir), "where pretrained teachers and tokenized corpora are kept (default: ~/.cache/cotan)")(
      "teacher", po::value(&s.teacher)->default_value(s.teacher),
      "an HF model directory (its weights are loaded and frozen), or a preset or config.json (pretrained here first)")(
      "teacher-config", po::value(&v.teacher_config)->value_name("CONFIG"),
      "the architecture --teacher's directory must hold (a preset or config.json): a different model is an error")(
      "student", po::value(&s.student)->default_value(s.student),
      "a preset, a config.json, or an HF model directory whose weights start every student")(
      "teacher-steps", po::value(&s.teacher_steps)->default_value(s.teacher_steps),
      "pretraining steps of a teacher without weights")(
      "teacher-logits", po::value(&s.teacher_logits)->value_name("DIR"),
      "train on the offline top-k targets `cotan teacher-logits` wrote for --data's shards: no teacher is loaded "
      "(fkl only, aligned windows, --seq-len and --temperature as the targets were made)")(
      "aligned-windows", po::bool_switch(&s.train.aligned_windows),
      "every epoch's windows start at offset 0 (as with --teacher-logits): the dense run to compare with")(
      "steps", po::value(&s.student_steps)->default_value(s.student_steps), "distillation steps per student")(
      "seeds", po::value(&s.seeds)->default_value(s.seeds), "repeat each run with N seeds (mean ± std)")(
      "attention", po::value(&v.attention), attention_help.c_str())(
      "rho", po::value(&v.rho)->default_value(v.rho, shown(v.rho)),
      "affine kinds: the momentum of alpha_ma, alpha_ma <- rho alpha_ma + (1 - rho) mean(alpha)")(
      "composed", "use the composed attention instead of the fused kernels")(
      "eval-ppl", po::value(&s.eval.ppl_data)->value_name("FILE"),
      "score every student and the teacher: perplexity on a text or JSONL corpus (a table column)")(
      "eval-tasks", po::value(&v.eval_tasks)->value_name("NAME=FILE,..."),
      "and zero-shot accuracy on these tasks (winogrande, piqa, hellaswag, arc_challenge, arc_easy, boolq)")(
      "eval-limit", po::value(&s.eval.limit)->default_value(0), "the first N examples of each task (0: all)");
  add_affine_options(opts, v.affine);
  add_training_options(opts, s.train, v.loss_spec, v.device, v.dtype, v.seed);
  add_recipe_options(opts);
  add_threads_option(opts);
  return opts;
}

// --attention: a comma-separated list of kinds, each named once.
std::vector<nn::AttentionKind> attention_kinds_option(const std::string& text) {
  std::vector<nn::AttentionKind> kinds;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    const std::string name = text.substr(start, comma - start);
    nn::AttentionKind kind{};
    try {
      kind = nn::parse_attention_kind(name);
    } catch (const Error& e) {
      fail_for_option("--attention", text, e);
    }
    if (std::find(kinds.begin(), kinds.end(), kind) != kinds.end())
      fail("option", "--attention ", text, ": ", name, " is named twice");
    kinds.push_back(kind);
    start = comma + 1;
  }
  return kinds;
}

}  // namespace

DistilledOptions parse_distill_options(const Args& raw_args, const std::string& command,
                                       const std::function<void(po::options_description&)>& more, bool check_files) {
  DistilledOptions d;
  // The recipe's options first, with the option list of a scratch config (the defaults depend on
  // --quick, which the recipe may set).
  {
    study::StudyConfig scratch = study::default_study();
    DistillValues scratch_values;
    po::options_description scratch_opts = distill_options(scratch, scratch_values);
    if (more) more(scratch_opts);
    d.expanded = expand_recipe(raw_args, scratch_opts, kNotInRecipes, command);
  }
  const Args& args = d.expanded.args;
  const bool quick = std::find(args.begin(), args.end(), "--quick") != args.end();
  d.study = std::make_unique<study::StudyConfig>(quick ? study::quick_study() : study::default_study());
  d.values = std::make_unique<DistillValues>();
  study::StudyConfig& s = *d.study;
  DistillValues& v = *d.values;
  d.opts = std::make_unique<po::options_description>(distill_options(s, v));
  if (more) more(*d.opts);
  po::variables_map& vm = d.vm;
  try {
    po::store(po::command_line_parser(args).options(*d.opts).run(), vm);
    po::notify(vm);
    if (vm.count("help")) return d;
    apply_threads_option(vm);
    check_training_options(s.train, v.seed);
    s.train.fused_head = vm.count("no-fused-head") == 0;
    check_integer("teacher-steps", s.teacher_steps, 0);
    check_integer("steps", s.student_steps, 1);
    check_integer("seeds", s.seeds, 1, 1000);
    check_integer("eval-limit", s.eval.limit, 0, kNoLimit, "0: all");
    check_number("rho", v.rho, 0, 1);
    if (v.rho == 1) fail("option", "--rho 1: expected a number in [0, 1) (1 would freeze alpha_ma at its start)");
    s.eval.tasks = eval::parse_task_list(v.eval_tasks, "distill", "--eval-tasks");
    if (s.eval.limit > 0 && s.eval.tasks.empty()) fail("option", "--eval-limit needs --eval-tasks");
    s.overwrite = vm.count("overwrite") > 0;
    if (vm.count("resume") && s.overwrite) fail("option", "--resume and --overwrite exclude each other");
    if (vm.count("resume")) {
      resume_into(vm, v.resume_dir, s.run_dir);
      s.resume = true;
    }
    set_kd_loss(s.train.loss, v.loss_spec);
    // Without check_files the values are checked but not that the files and the device are
    // there: a recipe for a GPU and a downloaded teacher prints (and plans) anywhere.
    if (!check_files) {
      try {
        s.train.device = parse_device(v.device);
      } catch (const Error& e) {
        fail_for_option("--device", v.device, e);
      }
    } else {
      s.train.device = device_option(v.device);
    }
    s.train.compute_dtype = dtype_option(v.dtype);
    if (vm.count("composed")) s.attention_impl = nn::AttentionImpl::composed;
    std::vector<nn::AttentionKind> kinds;
    if (!v.attention.empty()) {
      kinds = attention_kinds_option(v.attention);
      bool any_affine = false;
      for (nn::AttentionKind k : kinds) any_affine |= nn::is_affine(k);
      check_affine_options_apply(v.affine, any_affine, v.attention);
    }
    s.variants = study_variants(kinds, v.affine);
    if (s.variants.empty()) fail("option", "--attention ", v.attention, " with --phi ", v.affine.phi, " leaves no student");
    for (study::StudyVariant& variant : s.variants) variant.attention.rho = v.rho;
    if (!v.teacher_config.empty()) s.teacher_config = load_model_config("--teacher-config", v.teacher_config);
    // Offline targets replace the teacher: its options, given, are not used; one line says so.
    if (!s.teacher_logits.empty()) {
      std::string unused;
      for (const char* option : {"teacher", "teacher-steps", "teacher-config"})
        if (vm.count(option) && !vm[option].defaulted()) unused += cat(unused.empty() ? "" : ", ", "--", option);
      if (!unused.empty())
        s.notes.push_back(cat("--teacher-logits ", s.teacher_logits, " stands in for the teacher: ", unused,
                              unused.find(',') == std::string::npos ? " is" : " are", " not used"));
    }
    if (check_files) {
      // Before the teacher trains: its weights and the tokenized corpora are kept there.
      if (!s.cache_dir.empty()) check_output_dir(command, "--cache-dir", s.cache_dir);
      if (s.teacher_logits.empty()) load_model_config("--teacher", s.teacher);
      load_model_config("--student", s.student);
    }
  } catch (const std::exception& e) {
    d.expanded.rethrow(e);
  }
  s.command = command_line(command, raw_args);
  s.recipe = resolved_recipe(vm, *d.opts, kNotResolved,
                             cat("The resolved recipe of: ", s.command,
                                 "\nEvery option as the study ran it; replay it with\n"
                                 "  cotan distill --recipe <this file> --run-dir <another directory>"));
  return d;
}

int cmd_distill(const Args& raw_args) {
  // --print-recipe checks the values only (parse_distill_options' check_files).
  const bool printing = std::find(raw_args.begin(), raw_args.end(), "--print-recipe") != raw_args.end();
  DistilledOptions d = parse_distill_options(raw_args, "distill", nullptr, !printing);
  study::StudyConfig& s = *d.study;
  if (d.vm.count("help")) {
    std::cout << *d.opts << "\nattention kinds:\n" << nn::attention_kinds_help()
              << "\n--phi and --affine-n set the affine students' alpha function and N_i; --phi runs that phi only,\n"
                 "instead of one affine student per phi.\n"
                 "\nrecipes (--recipe NAME): ";
    const std::vector<std::string> names = study::builtin_recipe_names();
    for (size_t i = 0; i < names.size(); ++i) std::cout << (i ? ", " : "") << names[i];
    std::cout << "; a recipe's keys are these options without the dashes (docs/recipes.md).\n";
    return 0;
  }
  if (d.vm.count("print-recipe")) {
    std::cout << s.recipe;
    return 0;
  }
  std::error_code ec;
  const bool pretrains_teacher = s.teacher_logits.empty() && s.teacher_steps > 0 && !fs::is_directory(s.teacher, ec);
  if (std::string note = shrunk_warmup_note(
          d.vm, s.train,
          {shrunk_warmup(s.train, s.student_steps, "the students'"),
           pretrains_teacher ? shrunk_warmup(s.train, s.teacher_steps, "the teacher's") : std::nullopt});
      !note.empty())
    s.notes.push_back(std::move(note));
  s.train.progress = isatty(STDERR_FILENO);  // a live bar on a terminal, plain lines in logs
  train::install_interrupt_handler();
  study::StudyResult r = study::run_study(s);
  if (r.interrupted) {
    std::cerr << "continue with: " << resume_command("distill", raw_args, r.run_dir) << "\n";
    return kInterruptedStatus;
  }
  return 0;
}

}  // namespace cotan::app
