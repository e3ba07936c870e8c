#include "train/trainer.hpp"
#include "train/teacher_topk.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <unistd.h>

#include "autograd/autograd.hpp"
#include "cotan_config.h"
#include "nn/safetensors.hpp"
#include "tensor/op_table.hpp"
#include "tensor/ops.hpp"
#include "train/run_dir.hpp"
#include "util/append_file.hpp"
#include "util/atomic_file.hpp"
#include "util/checksum.hpp"
#include "util/json.hpp"
#include "util/progress.hpp"

namespace cotan::train {

namespace fs = std::filesystem;

std::atomic<bool>& stop_requested() {
  static std::atomic<bool> flag{false};
  return flag;
}

void install_interrupt_handler() {
  stop_requested().store(false);
  std::signal(SIGINT, [](int) {
    stop_requested().store(true);
    std::signal(SIGINT, SIG_DFL);
  });
}

namespace {

// Whether the loss reads the teacher's forward pass: a teacher model (not offline targets) and a
// KD part (at kd_ratio 0 the losses read no teacher).
bool reads_teacher(const Teacher& teacher, const LossConfig& loss) { return teacher.model && loss.kd_ratio > 0; }

// The teacher's State in evaluation mode (its buffers, or fresh ones when it has none).
nn::State teacher_state(const Teacher& teacher) {
  nn::State st = teacher.state ? *teacher.state : teacher.model->init_state();
  st.training = false;
  return st;
}

// One line of metrics.jsonl; errors name the file and the line.
MetricsRecord read_metrics_line(const std::string& line, const fs::path& path, int64_t number) {
  const std::string source = cat(path.string(), " line ", number);
  Json row;
  try {
    row = parse_json(line);
  } catch (const JsonParseError& e) {
    fail("train", source, ": column ", e.column(), ": ", e.reason());
  }
  return MetricsRecord::from_json(row, source);
}

struct CheckpointContents {
  int64_t step = 0;
  LoaderState loader;
  nn::Params params, optimizer;
  nn::State state;
};

constexpr const char* kCheckpointFiles[] = {"model.safetensors", "optimizer.safetensors", "state.safetensors"};

void rename_or_fail(const fs::path& from, const fs::path& to) {
  std::error_code ec;
  fs::rename(from, to, ec);
  if (ec) fail("checkpoint", "cannot rename ", from.string(), " to ", to.string(), ": ", ec.message());
}

void remove_or_fail(const fs::path& path) {
  std::error_code ec;
  fs::remove_all(path, ec);
  if (ec) fail("checkpoint", "cannot remove ", path.string(), ": ", ec.message());
}

// The step of a checkpoint-<step> directory name, or -1 for another name.
int64_t numbered_step(const std::string& name) {
  constexpr std::string_view prefix = "checkpoint-";
  if (!name.starts_with(prefix) || name.size() == prefix.size() || name.size() > prefix.size() + 18) return -1;
  int64_t step = 0;
  for (char c : name.substr(prefix.size())) {
    if (c < '0' || c > '9') return -1;
    step = step * 10 + (c - '0');
  }
  return step;
}

// Why dir, named checkpoint-<step>, is not a checkpoint this run wrote for that step; empty when
// it is: its trainer.json records that step and the checksums of its files, whose sizes match (an
// older checkpoint records no checksums, and is recognised by its step). A copy made by hand under
// another step's name, a cut-short copy or a directory of anything else is not recognised.
std::string unrecorded_reason(const fs::path& dir, int64_t step) {
  const fs::path meta_path = dir / "trainer.json";
  std::error_code ec;
  if (!fs::is_regular_file(meta_path, ec)) return "it has no trainer.json";
  Json meta;
  try {
    meta = read_json_file(meta_path.string());
  } catch (const Error&) {
    return "its trainer.json does not parse";
  }
  const Json* recorded = find_member(meta, "step");
  if (!recorded || !recorded->is_number_integer()) return "its trainer.json records no step";
  if (recorded->get<int64_t>() != step) return cat("its trainer.json records step ", recorded->get<int64_t>());
  if (const Json* checksums = find_member(meta, "checksums")) {
    for (const char* name : kCheckpointFiles) {
      const Json* entry = find_member(*checksums, name);
      const Json* bytes = entry ? find_member(*entry, "bytes") : nullptr;
      if (!bytes || !bytes->is_number_unsigned()) return cat("its trainer.json records no checksum of ", name);
      const uintmax_t size = fs::file_size(dir / name, ec);
      if (ec || size != bytes->get<uintmax_t>()) return cat(name, " is not the file its trainer.json records");
    }
  }
  return "";
}

// The checkpoint-<step> directories of run_dir that this run wrote (unrecorded_reason), newest
// first; the other directories of such names go to `others` when given, with the reason.
std::vector<fs::path> numbered_checkpoints(const fs::path& run_dir,
                                           std::vector<std::pair<fs::path, std::string>>* others = nullptr) {
  std::vector<std::pair<int64_t, fs::path>> found;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(run_dir, ec)) {
    const int64_t step = numbered_step(entry.path().filename().string());
    if (step < 0 || !entry.is_directory(ec)) continue;
    if (std::string reason = unrecorded_reason(entry.path(), step); reason.empty())
      found.emplace_back(step, entry.path());
    else if (others)
      others->emplace_back(entry.path(), std::move(reason));
  }
  std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<fs::path> out;
  for (auto& item : found) out.push_back(std::move(item.second));
  return out;
}

// Says which checkpoint-<step> directories of run_dir are not this run's: they are neither
// resumed from nor pruned.
void report_unrecorded_checkpoints(const fs::path& run_dir) {
  std::vector<std::pair<fs::path, std::string>> others;
  numbered_checkpoints(run_dir, &others);
  std::sort(others.begin(), others.end());
  for (const auto& [dir, reason] : others)
    std::cerr << "note: " << dir.string() << " is not a checkpoint this run wrote (" << reason
              << "): it is left alone, never resumed from nor removed\n";
}

// Frees the name `path` for a checkpoint: a checkpoint this run wrote for that step (left by an
// interrupted write) is removed; anything else there is moved to the first free PATH.old-N.
void clear_checkpoint_name(const fs::path& path, int64_t step) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return;
  if (unrecorded_reason(path, step).empty()) {
    remove_or_fail(path);
    return;
  }
  fs::path aside;
  for (int k = 1; fs::exists(aside = cat(path.string(), ".old-", k), ec); ++k) {
  }
  std::cerr << "moving " << path.string() << " to " << aside.string() << ": it is not a checkpoint this run wrote\n";
  rename_or_fail(path, aside);
}

// Writes the checkpoint of `step`: into checkpoint.tmp, then the previous checkpoint/ (of step
// `previous`) becomes checkpoint-<previous>/ and checkpoint.tmp becomes checkpoint/; the oldest
// numbered ones beyond `keep` checkpoints in all are removed.
void write_checkpoint(const fs::path& run_dir, int64_t step, std::optional<int64_t> previous, int64_t keep,
                      const nn::LanguageModel& model, const nn::Params& ps, const nn::State& st, const AdamW& opt,
                      const LoaderState& loader, const Json& fields) {
  const fs::path tmp = run_dir / "checkpoint.tmp", final_dir = run_dir / "checkpoint";
  remove_or_fail(tmp);
  std::error_code ec;
  fs::create_directories(tmp, ec);
  if (ec) fail("checkpoint", tmp.string(), ": cannot create: ", ec.message());
  save_safetensors((tmp / kCheckpointFiles[0]).string(), std::map<std::string, Tensor>(ps.begin(), ps.end()));
  nn::Params moments = opt.state_tensors();
  save_safetensors((tmp / kCheckpointFiles[1]).string(), std::map<std::string, Tensor>(moments.begin(), moments.end()));
  save_safetensors((tmp / kCheckpointFiles[2]).string(), std::map<std::string, Tensor>(st.buffers.begin(), st.buffers.end()));
  Json meta = Json::object();
  meta["step"] = step;
  meta["optimizer_steps"] = opt.steps();
  meta["loader"] = loader.to_json();
  meta["model_config"] = model.config_json();
  meta["train"] = fields;
  meta["checksums"] = checksum_manifest(tmp.string(), {std::begin(kCheckpointFiles), std::end(kCheckpointFiles)}, "checkpoint");
  std::string text = dump_json(meta, 2) + "\n";
  write_file_atomically((tmp / "trainer.json").string(), {text}, "checkpoint");
  if (fs::exists(final_dir, ec)) {
    const fs::path numbered = run_dir / cat("checkpoint-", previous.value_or(0));
    clear_checkpoint_name(numbered, previous.value_or(0));
    rename_or_fail(final_dir, numbered);
  }
  rename_or_fail(tmp, final_dir);
  const std::vector<fs::path> older = numbered_checkpoints(run_dir);
  for (size_t i = size_t(std::max<int64_t>(keep - 1, 0)); i < older.size(); ++i) remove_or_fail(older[i]);
}

CheckpointContents read_checkpoint(const fs::path& dir, const nn::LanguageModel& model, const Json& fields, DType dtype) {
  const std::string meta_path = (dir / "trainer.json").string();
  const Json meta = read_json_file(meta_path);
  const JsonFields f(meta, "resume", meta_path);
  const Json config = model.config_json();
  // Both must be objects: the file may be damaged or hand-edited.
  const auto saved_config = f.object("model_config"), saved_train = f.object("train");
  if (!saved_config) f.error("missing field 'model_config'");
  if (!saved_train) f.error("missing field 'train'");
  if (!json_equal(saved_config->json(), config))
    fail("resume", dir.string(), ": the checkpoint was written for another model config (",
         describe_differences(saved_config->json(), config, "in the checkpoint"), ")");
  // Everything but the step count must match for a bit-for-bit continuation.
  Json saved = saved_train->json(), now = fields;
  saved["steps"] = now["steps"] = 0;
  if (!json_equal(saved, now))
    fail("resume", dir.string(), ": the checkpoint was written with other training settings (",
         describe_differences(saved, now, "in the checkpoint"), ")");
  if (const Json* checksums = f.find("checksums")) {
    for (const char* name : kCheckpointFiles)
      if (!find_member(*checksums, name)) f.error("field 'checksums' has no entry for ", name);
    verify_manifest(dir.string(), *checksums, "resume", meta_path);
  } else {
    std::cerr << "note: " << meta_path << " records no checksums (an older checkpoint): its files are not verified\n";
  }
  CheckpointContents c;
  c.step = f.required<int64_t>("step");
  c.loader = LoaderState::from_json(member(meta, "loader"));
  // Copies that own their memory: the files' mappings end here, so that pruning the checkpoint
  // later frees its disk space (a deleted file stays allocated while it is mapped).
  auto owned = [](const Tensor& t, DType want) { return t.dtype() == want ? clone(t) : cast(t, want); };
  for (auto& [name, t] : load_safetensors((dir / "model.safetensors").string())) c.params.emplace(name, owned(t, dtype));
  nn::check_params(model.param_specs(), c.params, (dir / "model.safetensors").string());
  for (auto& [name, t] : load_safetensors((dir / "optimizer.safetensors").string()))
    c.optimizer.emplace(name, owned(t, t.dtype()));
  for (auto& [name, t] : load_safetensors((dir / "state.safetensors").string()))
    c.state.buffers.emplace(name, owned(t, t.dtype()));
  if (f.required<int64_t>("optimizer_steps") != c.step) fail("resume", dir.string(), ": optimizer and trainer steps differ");
  return c;
}

bool is_complete(const fs::path& dir) {
  std::error_code ec;
  return fs::is_regular_file(dir / "trainer.json", ec);
}

// The checkpoint to resume from: checkpoint/, or after a crash inside write_checkpoint a complete
// checkpoint.tmp/ (trainer.json is written last), else the newest checkpoint-<step>/, else
// checkpoint.old/ (the name earlier versions used); empty if none.
fs::path find_checkpoint(const fs::path& run_dir) {
  std::vector<fs::path> candidates{run_dir / "checkpoint", run_dir / "checkpoint.tmp"};
  for (fs::path& p : numbered_checkpoints(run_dir)) candidates.push_back(std::move(p));
  candidates.push_back(run_dir / "checkpoint.old");
  for (const fs::path& dir : candidates)
    if (is_complete(dir)) return dir;
  return {};
}

// Whether run_dir holds a run that stopped before its first checkpoint (killed or failed early):
// no checkpoint to resume from, what a run writes and nothing else, and some trace of the run:
// its metrics.jsonl, or the .lock it left (`left_lock`: the lock file was there before this run
// took it). Starting it over loses nothing.
bool stopped_before_checkpoint(const fs::path& run_dir, bool left_lock) {
  if (!find_checkpoint(run_dir).empty()) return false;
  const std::vector<std::string> found = run_dir_entries(run_dir.string());
  if (found.empty() && !left_lock) return false;
  for (const std::string& name : found)
    if (name != "metrics.jsonl" && name != "checkpoint" && name != "checkpoint.tmp") return false;
  return true;
}

// After the checkpoint `chosen` was read and verified: puts it at checkpoint/ and removes what an
// interrupted write left (checkpoint.tmp/, checkpoint.old/), saying what it does.
void adopt_checkpoint(const fs::path& run_dir, const fs::path& chosen, int64_t step) {
  const fs::path final_dir = run_dir / "checkpoint";
  std::error_code ec;
  if (chosen != final_dir) {
    if (fs::exists(final_dir, ec)) {
      std::cerr << "removing " << final_dir.string() << ": an incomplete checkpoint (no trainer.json)\n";
      remove_or_fail(final_dir);
    }
    std::cerr << "recovered the checkpoint of step " << step << " from " << chosen.string()
              << ", left by an interrupted checkpoint write\n";
    rename_or_fail(chosen, final_dir);
  }
  for (const char* name : {"checkpoint.tmp", "checkpoint.old"}) {
    if (!fs::exists(run_dir / name, ec)) continue;
    std::cerr << "removing " << (run_dir / name).string() << ", left by an interrupted checkpoint write\n";
    remove_or_fail(run_dir / name);
  }
}

// Keeps the metrics of steps before `step`, so a resumed run's file equals an uninterrupted one.
// A last line that does not parse (torn by a crash or a full disk) is dropped, saying so; any
// other bad line is an error naming the file and the line.
// Returns the elapsed_s of the last row kept (0 when none), where the resumed run's clock goes on.
double truncate_metrics(const fs::path& path, int64_t step) {
  std::ifstream in(path);
  if (!in) return 0;
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(std::move(line));
  in.close();
  while (!lines.empty() && lines.back().empty()) lines.pop_back();
  std::string kept;
  double elapsed = 0;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].empty()) continue;
    StepRecord row;
    try {
      row = read_metrics_line(lines[i], path, int64_t(i + 1)).step;
    } catch (const Error& e) {
      if (i + 1 < lines.size()) throw;
      std::cerr << "dropping the torn last line " << i + 1 << " of " << path.string() << " (" << e.what() << ")\n";
      break;
    }
    if (row.step < step) {
      kept += lines[i] + "\n";
      elapsed = row.elapsed_s;
    }
  }
  write_file_atomically(path.string(), {kept}, "train");
  return elapsed;
}

std::vector<AlphaStat> alpha_stats(const nn::State& st) {
  std::vector<AlphaStat> layers;
  for (const auto& [name, t] : st.buffers) {
    if (!name.ends_with("alpha_ma")) continue;
    auto v = t.to_vector<double>();
    double m = 0, s = 0;
    for (double x : v) m += x / double(v.size());
    for (double x : v) s += (x - m) * (x - m) / double(v.size());
    layers.push_back({name, m, std::sqrt(s)});
  }
  return layers;
}

}  // namespace

Json train_settings(const TrainConfig& c, bool distill) {
  Json j = Json::object();
  j["mode"] = distill ? "distill" : "pretrain";
  j["steps"] = c.steps;
  j["batch_size"] = c.batch_size;
  j["grad_accum"] = c.grad_accum;
  j["seq_len"] = c.seq_len;
  j["seed"] = c.seed;
  j["clip"] = c.clip;
  j["lr"] = c.schedule.lr;
  j["warmup_steps"] = c.schedule.warmup_steps;
  j["decay_fraction"] = c.schedule.decay_fraction;
  j["decay"] = decay_name(c.schedule.decay);
  j["weight_decay"] = c.adamw.weight_decay;
  j["loss"] = kd_loss_spec(c.loss);
  j["temperature"] = c.loss.temperature;
  j["kd_ratio"] = c.loss.kd_ratio;
  j["device"] = to_string(c.device);
  j["dtype"] = std::string(dtype_name(c.compute_dtype));
  if (c.tf32) j["tf32"] = true;  // only when set: the settings of earlier runs stay valid
  if (!c.fused_head) j["fused_head"] = false;  // likewise: the default is the fused head
  if (c.aligned_windows) j["aligned_windows"] = true;
  return j;
}

bool has_checkpoint(const std::string& run_dir) { return !find_checkpoint(run_dir).empty(); }

TrainResult read_metrics(const std::string& run_dir) {
  const fs::path path = fs::path(run_dir) / "metrics.jsonl";
  std::ifstream in(path);
  if (!in) fail("train", path.string(), ": cannot read");
  TrainResult r;
  std::string line;
  for (int64_t number = 1; std::getline(in, line); ++number) {
    if (line.empty()) continue;
    MetricsRecord row = read_metrics_line(line, path, number);
    r.steps.push_back(row.step);
    if (row.eval) r.evals.push_back(*row.eval);
  }
  return r;
}

namespace {

// TF32 for the f32 matmuls of one run, switched back when the run ends (the setting is
// process-wide).
class Tf32Scope {
 public:
  Tf32Scope(Backend& backend, bool enabled) : backend_(backend), previous_(backend.tf32()) {
    if (enabled) backend_.set_tf32(true);
  }
  ~Tf32Scope() { backend_.set_tf32(previous_); }
  Tf32Scope(const Tf32Scope&) = delete;
  Tf32Scope& operator=(const Tf32Scope&) = delete;

 private:
  Backend& backend_;
  bool previous_ = false;
};

void collect_differences(const Json& saved, const Json& now, const std::string& path, const std::string& where,
                         std::vector<std::string>& out) {
  auto name = [&](const std::string& key) { return path.empty() ? key : path + "." + key; };
  if (saved.is_object() && now.is_object()) {
    for (const auto& [key, value] : saved.items()) {
      if (const Json* other = find_member(now, key)) {
        collect_differences(value, *other, name(key), where, out);
      } else {
        out.push_back(name(key) + " is " + value.dump() + " " + where + " but absent now");
      }
    }
    for (const auto& [key, value] : now.items())
      if (!saved.contains(key)) out.push_back(name(key) + " is absent " + where + " but " + value.dump() + " now");
  } else if (saved.is_array() && now.is_array() && saved.size() == now.size()) {
    for (size_t i = 0; i < saved.size(); ++i)
      collect_differences(saved[i], now[i], cat(path, "[", i, "]"), where, out);
  } else if (!json_equal(saved, now)) {
    out.push_back((path.empty() ? std::string("the value") : path) + " is " + saved.dump() + " " + where + " but " +
                  now.dump() + " now");
  }
}

}  // namespace

std::string describe_differences(const Json& saved, const Json& now, const std::string& saved_where) {
  std::vector<std::string> found;
  collect_differences(saved, now, "", saved_where, found);
  constexpr size_t kShown = 4;
  std::string text;
  for (size_t i = 0; i < std::min(found.size(), kShown); ++i) text += (i ? "; " : "") + found[i];
  if (found.size() > kShown) text += cat("; and ", found.size() - kShown, " more");
  return text;
}

Tensor teacher_output(const Teacher& teacher, const Batch& batch, const LossConfig& loss, bool fused_head) {
  if (!reads_teacher(teacher, loss)) return Tensor();
  if (teacher.cache)
    if (Tensor kept = teacher.cache->find(teacher.params, batch.inputs, fused_head); kept.defined()) return kept;
  NoGrad no_grad;
  const nn::State st = teacher_state(teacher);
  Tensor out = fused_head ? teacher.model->hidden(batch.inputs, *teacher.params, st).first
                          : teacher.model->apply(batch.inputs, *teacher.params, st).first;
  if (teacher.cache) teacher.cache->keep(teacher.params, batch.inputs, fused_head, out);
  return out;
}

std::pair<LossParts, nn::State> objective(const nn::LanguageModel& student, const Teacher& teacher, const nn::Params& ps,
                                          const nn::State& st, const Batch& batch, const LossConfig& loss,
                                          bool fused_head, Tensor teacher_out) {
  if (teacher.topk && fused_head) {
    auto [hidden, next] = student.hidden(batch.inputs, ps, st);
    return {sparse_head_loss(hidden, student.head_weight(ps), batch.topk, batch.targets, loss), std::move(next)};
  }
  if (teacher.topk) {
    auto [logits, next] = student.apply(batch.inputs, ps, st);
    return {sparse_distill_loss(logits, batch.topk, batch.targets, loss), std::move(next)};
  }
  // Without the teacher's output at hand, its forward pass and the student's run side by side
  // (concurrently, whose second function records nothing): neither needs the other before the
  // loss, and two passes keep the threads busy where the small products of one pass each leave
  // threads waiting at their ends.
  Tensor student_out;
  nn::State next;
  auto student_pass = [&] {
    std::tie(student_out, next) = fused_head ? student.hidden(batch.inputs, ps, st) : student.apply(batch.inputs, ps, st);
  };
  if (!teacher_out.defined() && reads_teacher(teacher, loss))
    concurrently(batch.inputs.device(), student_pass,
                 [&] { teacher_out = teacher_output(teacher, batch, loss, fused_head); });
  else
    student_pass();
  if (fused_head) {
    if (!teacher.model) {
      LossConfig ce = loss;
      ce.kd_ratio = 0;
      LossParts parts;  // only the total and the CE, as the unfused path
      parts.total = head_loss(student_out, student.head_weight(ps), Tensor(), Tensor(), batch.targets, ce).total;
      parts.ce = parts.total.detach();
      return {std::move(parts), std::move(next)};
    }
    LossParts parts = head_loss(student_out, student.head_weight(ps), teacher_out,
                                loss.kd_ratio > 0 ? teacher.model->head_weight(*teacher.params) : Tensor(),
                                batch.targets, loss);
    return {std::move(parts), std::move(next)};
  }
  LossParts parts;
  if (teacher.model) {
    parts = distill_loss(std::move(student_out), teacher_out, batch.targets, loss);
  } else {
    parts.total = cross_entropy(std::move(student_out), batch.targets);
    parts.ce = parts.total.detach();
  }
  return {std::move(parts), std::move(next)};
}

EvalRecord evaluate(const nn::LanguageModel& student, const nn::Params& params, const nn::State& state,
                    const Teacher& teacher, const std::vector<Batch>& batches, const LossConfig& loss,
                    bool fused_head) {
  NoGrad no_grad;
  nn::State st = state;
  st.training = false;
  // Both parts whatever the training mix: kd_ratio only weighs the total, which evaluation does
  // not report, and any ratio inside (0, 1) computes the KD loss and the CE.
  LossConfig both = loss;
  both.kd_ratio = 0.5;
  if (batches.empty()) fail("eval", "no validation batches: nothing to evaluate (a loss of 0 would be a lie)");
  EvalRecord r;
  if (teacher.distills()) r.kd = 0.0;
  for (const Batch& b : batches) {
    const LossParts parts = objective(student, teacher, params, st, b, both, fused_head).first;
    r.ce += parts.ce.item<double>() / double(batches.size());
    if (teacher.distills()) *r.kd += parts.kd.item<double>() / double(batches.size());
  }
  r.ppl = std::exp(r.ce);
  return r;
}

StepRecord train_step(const nn::LanguageModel& student, nn::Params& params, nn::State& state, AdamW& opt,
                      const Teacher& teacher, const std::function<Batch()>& next_batch, const TrainConfig& config,
                      double lr, Lookahead* ahead, bool draw_after) {
  nn::Params grads;
  StepRecord rec;
  // The parts the loss computes (LossParts holds 0 for the others): KD and the teacher's entropy
  // with a teacher and kd_ratio > 0, the cross-entropy without one or at kd_ratio < 1.
  const bool has_kd = teacher.distills() && config.loss.kd_ratio > 0;
  const bool has_ce = !teacher.distills() || config.loss.kd_ratio < 1;
  if (has_kd) rec.kd = rec.teacher_entropy = 0.0;
  if (has_ce) rec.ce = 0.0;
  // Whether the next micro-batch's teacher pass runs beside this one's passes (see the header).
  const bool look_ahead = ahead && reads_teacher(teacher, config.loss) && runs_side_by_side(config.device);
  for (int64_t micro = 0; micro < config.grad_accum; ++micro) {
    Batch batch;
    Tensor teacher_out;
    if (ahead && ahead->batch) {
      batch = std::move(*ahead->batch);
      // An output of another kind than this config reads (a caller that switched the fused heads
      // or the loss between steps) is dropped: the objective computes its own.
      if (ahead->fused_head == config.fused_head && reads_teacher(teacher, config.loss))
        teacher_out = std::move(ahead->teacher_out);
      *ahead = Lookahead();
    } else {
      batch = next_batch();
    }
    LossParts parts;
    nn::State next;
    Tensor value;
    nn::Params g;
    auto passes = [&] {
      std::tie(value, g) = nn::value_and_grad([&](const nn::Params& p) {
        const DType master = p.begin()->second.dtype();
        if (config.compute_dtype == master) {
          std::tie(parts, next) =
              objective(student, teacher, p, state, batch, config.loss, config.fused_head, std::move(teacher_out));
        } else {
          // Mixed precision: buffers (moving averages) stay in the master dtype between steps.
          nn::State st2;
          std::tie(parts, st2) = objective(student, teacher, nn::cast(p, config.compute_dtype),
                                           nn::cast(state, config.compute_dtype), batch, config.loss,
                                           config.fused_head, std::move(teacher_out));
          next = nn::cast(st2, master);
        }
        return parts.total;
      }, params);
    };
    if (look_ahead && (micro + 1 < config.grad_accum || draw_after)) {
      Lookahead upcoming{next_batch(), Tensor(), config.fused_head};
      concurrently(config.device, passes, [&] {
        upcoming.teacher_out = teacher_output(teacher, *upcoming.batch, config.loss, config.fused_head);
      });
      *ahead = std::move(upcoming);
    } else {
      passes();
    }
    state = next;
    double scale = 1.0 / double(config.grad_accum);
    accumulate(grads, g, scale);
    rec.loss += value.item<double>() * scale;
    if (has_kd) *rec.kd += parts.kd.item<double>() * scale;
    if (has_ce) *rec.ce += parts.ce.item<double>() * scale;
    if (has_kd) *rec.teacher_entropy += parts.teacher_entropy.item<double>() * scale;
  }
  // Clipping is folded into the update: the gradients are used scaled, never written scaled.
  rec.grad_norm = global_norm(grads);
  rec.lr = lr;
  if (std::isfinite(rec.loss) && std::isfinite(rec.grad_norm))
    opt.step(params, grads, lr, config.clip > 0 ? clip_scale(rec.grad_norm, config.clip) : 1.0);
  return rec;
}

void check_inputs(const nn::LanguageModel& student, const nn::LanguageModel* teacher, const TokenData& data,
                  const TrainConfig& config) {
  if (config.steps <= 0) fail("train", "steps must be positive, got ", config.steps);
  if (config.batch_size <= 0 || config.grad_accum <= 0) fail("train", "batch_size and grad_accum must be positive");
  backend(config.device);  // "[cuda] no CUDA device: ..."
  if (!is_floating(config.compute_dtype))
    fail("train", "the compute dtype must be floating (f32, bf16, f64), got ", config.compute_dtype);
  if (config.tf32 && !config.device.is_cuda())
    fail("train", "--tf32 is a mode of the CUDA matmuls; this run is on ", to_string(config.device));
  if (teacher && teacher->vocab_size() != student.vocab_size() && !config.loss.slice_teacher_vocab)
    fail("distill", "teacher vocabulary ", teacher->vocab_size(), " differs from the student's ", student.vocab_size(),
         " (pass --slice-teacher-vocab to drop the teacher's extra rows)");
  if (config.keep_checkpoints < 1) fail("train", "keep_checkpoints must be at least 1, got ", config.keep_checkpoints);
  if (config.seq_len < 1) fail("train", "seq_len must be positive, got ", config.seq_len);
  for (const nn::LanguageModel* m : {&student, teacher}) {
    if (!m || config.allow_longer_context || config.seq_len <= m->max_positions()) continue;
    fail("train", "seq_len ", config.seq_len, " is above the ", m == &student ? "student" : "teacher",
         "'s max_position_embeddings ", m->max_positions(),
         " (pass --allow-longer-context to train on longer sequences anyway)");
  }
  // Once, before any batch: an id the embedding does not have would fail mid-run.
  for (const TokenSequence* split : {&data.train, &data.val}) {
    if (!split->empty() && split->max_id() >= student.vocab_size())
      fail("train", "the ", split == &data.train ? "training" : "validation", " data holds token id ", split->max_id(),
           ", outside the model's vocabulary of ", student.vocab_size(), " (vocab_size)");
  }
}

void check_topk(const nn::LanguageModel& student, const TopkData& topk, const TokenData& data, const TrainConfig& config) {
  const TopkHeader& h = topk.first;
  if (int64_t(h.vocab_size) != student.vocab_size())
    fail("distill", "the teacher's top-k was made over a vocabulary of ", h.vocab_size, " but the student's is ",
         student.vocab_size());
  if (int64_t(h.seq_len) != config.seq_len)
    fail("distill", "the teacher's top-k was made in windows of seq_len ", h.seq_len, " but the run uses seq_len ",
         config.seq_len, " (pass --seq-len ", h.seq_len, ")");
  if (h.temperature != config.loss.temperature)
    fail("distill", "the teacher's top-k was made with temperature ", h.temperature, " but the run uses ",
         config.loss.temperature);
  if (config.loss.kd_ratio > 0 && config.loss.kind != KdLoss::fkl)
    fail("distill", "offline teacher top-k supports only the fkl loss, got ", kd_loss_spec(config.loss));
  if (topk.train.size() != data.train.size())
    fail("distill", "the teacher's top-k holds ", topk.train.size(), " training positions but the data has ",
         data.train.size(), " tokens");
  if (!data.val.empty() && topk.val.size() != data.val.size())
    fail("distill", "the teacher's top-k holds ", topk.val.size(), " validation positions but the data has ",
         data.val.size(), " tokens");
}

TrainResult fit(const nn::LanguageModel& student, nn::Params params, nn::State state, const Teacher& teacher,
                  const TokenData& data, const TrainConfig& config, bool resume) {
  bool distill = teacher.distills();
  const Device device = config.device;
  // Before anything is written: the settings and the data (check_inputs), then the teacher's
  // weights, which only a running job has.
  check_inputs(student, teacher.model, data, config);
  if (teacher.topk) check_topk(student, *teacher.topk, data, config);
  if (teacher.model && teacher.params->begin()->second.device() != device)
    fail("distill", "the teacher's parameters are on ", to_string(teacher.params->begin()->second.device()),
         ", the student trains on ", to_string(device));
  if (teacher.model && teacher.params->begin()->second.dtype() != config.compute_dtype)
    fail("distill", "the teacher's parameters are ", teacher.params->begin()->second.dtype(),
         ", the student computes in ", config.compute_dtype, " (cast the teacher first)");
  const Tf32Scope tf32(backend(device), config.tf32);

  ScheduleConfig schedule = config.schedule;
  schedule.total_steps = config.steps;
  // Short runs shrink the warmup to what fits before the decay.
  schedule.warmup_steps = effective_warmup(schedule);
  validate(schedule);
  AdamW opt(config.adamw, student.param_specs());
  WindowLoader loader(data.train, config.seq_len, config.batch_size, config.seed,
                      config.aligned_windows || teacher.topk);
  if (teacher.topk) loader.attach_topk(&teacher.topk->train);
  std::vector<Batch> val = data.val.empty() ? std::vector<Batch>{}
                                            : validation_batches(data.val, config.seq_len, config.batch_size, config.eval_batches,
                                                                 teacher.topk ? &teacher.topk->val : nullptr);
  for (Batch& b : val) b = to(b, device);
  Json fields = train_settings(config, distill);
  DType dtype = params.begin()->second.dtype();

  // Every check above and the checkpoint's below come before the first write. The lock comes
  // first of all that touches the directory: it creates it, and nothing else.
  const fs::path run_dir(config.run_dir);
  auto no_checkpoint = [&] {
    fail("resume", (run_dir / "checkpoint").string(), ": no checkpoint to resume from");
  };
  std::error_code ec;
  const bool left_lock = fs::exists(run_dir / kLockFileName, ec);  // before this run takes it
  if (resume && find_checkpoint(run_dir).empty() && !stopped_before_checkpoint(run_dir, left_lock)) no_checkpoint();
  const RunDirLock lock(run_dir.string(), resume ? "resume" : "train");
  int64_t start = 0;
  fs::path saved_dir;
  if (resume) {
    saved_dir = find_checkpoint(run_dir);  // again: another run may have changed it before the lock
    if (saved_dir.empty() && !stopped_before_checkpoint(run_dir, left_lock)) no_checkpoint();
  }
  // Resuming a run that stopped before its first checkpoint, or a new run over one, starts it over.
  if (saved_dir.empty() && config.existing != ExistingRun::move_aside && stopped_before_checkpoint(run_dir, left_lock)) {
    const std::vector<std::string> found = run_dir_entries(run_dir.string());
    std::cerr << "starting over in " << run_dir.string() << ": the run there stopped before its first checkpoint"
              << (found.empty() ? std::string() : " (removing " + describe_entries(run_dir.string(), found) + ")")
              << "\n";
    for (const std::string& name : found) remove_or_fail(run_dir / name);
  }
  if (!saved_dir.empty()) {
    report_unrecorded_checkpoints(run_dir);
    CheckpointContents saved = read_checkpoint(saved_dir, student, fields, dtype);
    loader.restore(saved.loader);
    opt.load_state(saved.optimizer, saved.step);
    start = saved.step;
    params = std::move(saved.params);
    state.buffers = std::move(saved.state.buffers);
  } else if (const auto found = run_dir_entries(run_dir.string()); !found.empty()) {
    switch (config.existing) {
      case ExistingRun::refuse:
        if (!has_checkpoint(run_dir.string()))
          fail("train", run_dir.string(), " already holds files (", describe_entries(run_dir.string(), found),
               "): pass --overwrite to move them aside, or choose another --run-dir");
        fail("train", run_dir.string(), " already holds a run (", describe_entries(run_dir.string(), found),
             "): continue it with --resume ", run_dir.string(), ", or pass --overwrite to move it aside");
      case ExistingRun::move_aside:
        std::cerr << "moved the earlier run in " << run_dir.string() << " to " << move_run_aside(run_dir.string(), "train")
                  << "\n";
        break;
      case ExistingRun::replace:
        for (const std::string& name : found) remove_or_fail(run_dir / name);
        break;
    }
  }
  const bool resuming = !saved_dir.empty();
  // An empty validation split is reported as absent, never as a loss of 0.
  if (val.empty())
    std::cerr << "note: no validation batches (the validation split holds " << data.val.size()
              << " tokens; a window takes seq_len + 1 = " << config.seq_len + 1
              << "): the run reports no validation loss\n";
  // Initialised and loaded on the CPU, trained on the device (the same starting bits anywhere).
  params = nn::to(params, device);
  state = nn::to(state, device);

  const fs::path metrics_path = run_dir / "metrics.jsonl";
  double elapsed_before = 0;  // the run's wall time before this process resumed it
  if (resuming) {
    adopt_checkpoint(run_dir, saved_dir, start);
    elapsed_before = truncate_metrics(metrics_path, start);
  }
  AppendFile metrics(metrics_path.string(), "train");
  state.training = true;

  TrainResult result;
  result.start_step = start;
  const int64_t end = config.stop_after > 0 ? std::min(config.steps, config.stop_after) : config.steps;
  // A live bar on a terminal (util/progress.hpp); plain lines every log_every steps otherwise.
  std::optional<Progress> bar;
  if (config.progress && isatty(fileno(stderr)))
    bar.emplace(config.progress_label.empty() ? std::string("train") : config.progress_label,
                uint64_t(std::max<int64_t>(end - start, 1)), true, std::cerr);
  auto t0 = std::chrono::steady_clock::now();
  // A checkpoint of this run: the one resumed from, then each one written.
  std::optional<int64_t> last_good;
  if (resuming) last_good = start;
  auto last_good_text = [&] {
    return last_good ? cat((run_dir / "checkpoint").string(), " at step ", *last_good)
                     : cat("none written yet in ", run_dir.string());
  };
  // The micro-batch train_step draws ahead, and where the loader was before it: a checkpoint
  // holds that position, so a resumed run draws the waiting batch again.
  Lookahead ahead;
  LoaderState before_last_draw = loader.state();
  auto next_batch = [&] {
    before_last_draw = loader.state();
    return to(loader.next(), device);
  };
  auto position = [&] { return ahead.batch ? before_last_draw : loader.state(); };
  double step_seconds = 0;  // the steps' own time in this process (no evaluation or checkpoints)
  for (int64_t step = start; step < end; ++step) {
    if (stop_requested().load()) {
      metrics.sync();
      write_checkpoint(run_dir, step, last_good, config.keep_checkpoints, student, params, state, opt, position(),
                       fields);
      result.interrupted = true;
      if (bar) std::cerr << "\n";
      std::cerr << "interrupted at step " << step << ": checkpoint written to " << (run_dir / "checkpoint").string()
                << "\n";
      break;
    }
    auto ts = std::chrono::steady_clock::now();
    StepRecord rec =
        train_step(student, params, state, opt, teacher, next_batch, config, lr_at(schedule, step), &ahead, step + 1 < end);
    rec.step = step;
    if (!std::isfinite(rec.loss) || !std::isfinite(rec.grad_norm)) {
      if (bar) std::cerr << "\n";
      const double bad = std::isfinite(rec.loss) ? rec.grad_norm : rec.loss;
      fail("train", "step ", step, ": the ", std::isfinite(rec.loss) ? "gradient norm" : "loss", " is ",
           std::isnan(bad) ? "nan" : bad > 0 ? "inf" : "-inf", " (last good checkpoint: ", last_good_text(), ")");
    }
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - ts).count();
    const double step_tokens = double(config.batch_size * config.grad_accum * config.seq_len);
    rec.tokens_per_s = step_tokens / std::max(seconds, 1e-9);
    step_seconds += seconds;
    rec.elapsed_s = elapsed_before + std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    result.steps.push_back(rec);

    MetricsRecord row{rec, alpha_stats(state), std::nullopt};
    bool last = step + 1 == config.steps;
    if (!val.empty() && ((config.eval_every > 0 && (step + 1) % config.eval_every == 0) || last)) {
      EvalRecord e = evaluate(student, nn::cast(params, config.compute_dtype), nn::cast(state, config.compute_dtype),
                              teacher, val, config.loss, config.fused_head);
      e.step = step;
      result.evals.push_back(e);
      row.eval = e;
    }
    try {
      metrics.append(dump_json(row.to_json()) + "\n");
    } catch (const Error& e) {
      if (bar) std::cerr << "\n";
      std::string_view what = e.what();
      if (what.starts_with("[train] ")) what.remove_prefix(8);
      fail("train", "step ", step, ": ", what, " (last good checkpoint: ", last_good_text(), ")");
    }

    if ((config.checkpoint_every > 0 && (step + 1) % config.checkpoint_every == 0) || last || step + 1 == end) {
      metrics.sync();
      write_checkpoint(run_dir, step + 1, last_good, config.keep_checkpoints, student, params, state, opt, position(),
                       fields);
      last_good = step + 1;
    }
    double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    int64_t done = step + 1 - start, left = config.steps - step - 1;
    double eta = elapsed / double(done) * double(left);
    // The console shows the steps' mean rate in this process, not the last step's: with the
    // lookahead a step also runs the next one's teacher pass, and the run's last step runs none.
    const double mean_tokens_per_s = step_tokens * double(done) / std::max(step_seconds, 1e-9);
    // The job's ETA counts its later runs at this run's pace.
    const std::string label = config.progress_label.empty() ? "" : config.progress_label + "  ";
    const std::string job_eta =
        config.steps_after > 0 ? "  all ETA " + format_duration(eta + elapsed / double(done) * double(config.steps_after)) : "";
    if (bar) {
      char detail[160];
      std::snprintf(detail, sizeof detail, "step %lld/%lld  loss %.4f  %.0f tok/s", (long long)(step + 1),
                    (long long)config.steps, rec.loss, mean_tokens_per_s);
      bar->update(uint64_t(step + 1 - start), detail, job_eta.empty() ? std::string_view() : std::string_view(job_eta).substr(2));
      if (step + 1 == end) bar->finish(cat("step ", step + 1, "/", config.steps, ", loss ", rec.loss));
    } else if (config.log_every > 0 && ((step + 1) % config.log_every == 0 || last)) {
      std::fprintf(stderr, "%sstep %lld/%lld  loss %.4f  grad_norm %.3f  lr %.2e  %.0f tok/s  ETA %s%s\n", label.c_str(),
                   (long long)(step + 1), (long long)config.steps, rec.loss, rec.grad_norm, rec.lr, mean_tokens_per_s,
                   format_duration(eta).c_str(), job_eta.c_str());
    }
  }
  result.params = std::move(params);
  result.state = std::move(state);
  return result;
}

}  // namespace cotan::train
