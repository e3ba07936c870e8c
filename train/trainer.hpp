// The training loop: `cotan pretrain` (cross-entropy, for teachers) and `cotan distill` (a frozen
// teacher under no_grad, the student trained on the KD loss), with gradient accumulation, AdamW,
// clipping, the warmup-stable-decay schedule, evaluation, metrics and checkpoints.
//
// Run directory:
//   metrics.jsonl      one JSON object per step: step (from 0), lr, loss, kd, ce, teacher_entropy
//                      (each only when the step computed it), grad_norm (before clipping),
//                      tokens_per_s, elapsed_s, alpha (mean and std per layer); evaluation rows
//                      add "eval": {kd (when distilling), ce, ppl}; a run without validation
//                      batches has none (and says so). Everything but tokens_per_s and elapsed_s
//                      is a deterministic function of the seed.
//   .lock              flock'ed while a run uses the directory; holds its pid and command line;
//                      removed when the run ends
//   checkpoint/        model.safetensors, optimizer.safetensors, state.safetensors (alpha_ma)
//                      and trainer.json (step, loader state, configs, the XXH3-64 checksum of
//                      each file); written to checkpoint.tmp (trainer.json last), then the
//                      previous checkpoint/ becomes checkpoint-<step>/ and checkpoint.tmp takes
//                      its place; keep_checkpoints bounds how many are kept. A crash never leaves
//                      half a checkpoint: resuming takes checkpoint/, else a complete
//                      checkpoint.tmp/, else the newest checkpoint-<step>/, verifies the
//                      checksums, and cleans up what a crash left, saying so. Only the
//                      checkpoint-<step>/ whose trainer.json records that step (and checksums
//                      that fit its files) are the run's: others are reported, never resumed
//                      from nor pruned. The resumed tensors are copies, the files unmapped.
// A run stopped before its first checkpoint (only metrics.jsonl, a cut-short checkpoint.tmp or a
// stale .lock) is started over in place, saying so, whether fit() is asked to resume or not.
// Resuming from checkpoint/ continues bit for bit: the losses of 20 + 20 resumed steps equal
// those of 40 uninterrupted steps, and metrics.jsonl equals the uninterrupted run's.
//
// fit() checks its inputs (data long enough for seq_len, seq_len within the models' context, the
// data's ids within the vocabulary, the checkpoint's configs and checksums, a writable run
// directory that no other run uses and, for a new run, that holds no run) before it writes
// anything, so a bad input changes no file. Metrics appends are checked: a failed one (disk full)
// stops the run with an error naming the file, the last checkpoint intact.
#pragma once

#include <atomic>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "nn/language_model.hpp"
#include "train/data.hpp"
#include "train/losses.hpp"
#include "train/optim.hpp"
#include "util/json_fwd.hpp"

namespace cotan::train {

// What a new run (not a resumed one) does in a directory that already holds a run.
enum class ExistingRun {
  refuse,      // fail, with the hint --resume or --overwrite
  move_aside,  // --overwrite: move the old run into DIR.old-N first (train/run_dir.hpp)
  replace,     // delete it: for a run without any checkpoint that a resumed study starts over
};

struct TrainConfig {
  std::string run_dir;
  ExistingRun existing = ExistingRun::refuse;
  int64_t keep_checkpoints = 2;  // checkpoint/ and the newest checkpoint-<step>/ before it
  bool allow_longer_context = false;  // seq_len above the models' max_position_embeddings
  int64_t steps = 100;      // the run's length: the schedule spans these steps
  int64_t stop_after = 0;   // > 0: stop (with a checkpoint) after this many steps; resume later
  int64_t batch_size = 8;   // sequences per micro-batch
  int64_t grad_accum = 1;   // micro-batches per optimizer step
  int64_t seq_len = 128;
  uint64_t seed = 0;
  double clip = 1.0;        // global-norm clipping; 0 disables
  ScheduleConfig schedule;  // total_steps is set from `steps`
  AdamWConfig adamw;
  LossConfig loss;
  int64_t eval_every = 50;  // 0: only at the end
  int64_t eval_batches = 4;
  int64_t checkpoint_every = 0;  // 0: only at the end
  bool progress = false;         // a live progress bar (on a terminal) instead of plain log lines
  std::string progress_label;    // before the bar and the log lines, e.g. "student 2/6 sink"
  int64_t steps_after = 0;       // steps of the job's later runs (a study's), for the job's ETA
  int64_t log_every = 10;        // plain log lines every N steps
  Device device = Device::cpu();  // where the model, the optimizer state and the batches live
  // The dtype of the forward and backward passes. The parameters (the master weights) and the
  // optimizer state keep theirs; with bf16 each step casts the weights down and the gradients
  // come back in the master dtype through the casts. A teacher must already be in this dtype.
  DType compute_dtype = DType::f32;
  // f32 matmuls round their operands to TF32 on tensor cores (cuBLAS; CUDA devices only): for the
  // length of fit(). The emulator's matmul stays exact f32.
  bool tf32 = false;
  // The LM heads run inside the loss, in chunks of rows (train::head_loss): no [N, V] logits of
  // either model exist. false: the models' whole logits, then distill_loss (--no-fused-head).
  bool fused_head = true;
  // Every epoch's windows start at offset 0 (WindowLoader's `aligned`): implied by offline
  // teacher targets, whose teacher ran in those windows; on its own, the dense run to compare with.
  bool aligned_windows = false;
};

// A teacher model, or its offline top-k targets (train/teacher_topk.hpp; `cotan distill
// --teacher-logits`): then no teacher runs, the loss is the sparse KL (sparse_head_loss, the head
// inside the loss, with fused_head; else sparse_distill_loss on the student's whole logits), the
// windows are aligned (TrainConfig::aligned_windows),
// seq_len must be the one the targets were made with, and only the fkl loss is available.
struct TopkData;

// The frozen teacher's outputs on batches seen before, kept for runs that see the same batches
// (study/teacher_cache.hpp keeps them in memory for a study's students). teacher_output looks a
// batch up by its ids before running the teacher, and offers what it computes.
class TeacherOutputs {
 public:
  virtual ~TeacherOutputs() = default;
  // The output kept for these ids and kind (the final hidden states with fused heads, else the
  // logits), or an undefined tensor. `teacher` identifies the teacher asking (its parameters).
  virtual Tensor find(const void* teacher, const Tensor& ids, bool fused_head) = 0;
  // Offers `output` for these ids and kind; the implementation may keep it or not.
  virtual void keep(const void* teacher, const Tensor& ids, bool fused_head, const Tensor& output) = 0;
};

struct Teacher {
  const nn::LanguageModel* model = nullptr;  // any model with the student's vocabulary
  const nn::Params* params = nullptr;
  const nn::State* state = nullptr;  // run in evaluation mode: never updated
  const TopkData* topk = nullptr;    // offline targets, aligned with the data's train and val splits
  // The model's outputs on batches seen before, shared by the runs that see the same batches;
  // none: every batch runs the model.
  TeacherOutputs* cache = nullptr;
  bool distills() const { return model || topk; }
};

// step counts from 0 (the console's "step 1/N" is step 0 here). A loss part the step did not
// compute is empty, never 0: kd and teacher_entropy when pretraining (no teacher) or at
// kd_ratio 0, ce at kd_ratio 1.
struct StepRecord {
  int64_t step = 0;
  double lr = 0, loss = 0;
  std::optional<double> kd, ce, teacher_entropy;
  double grad_norm = 0, tokens_per_s = 0;
  double elapsed_s = 0;  // wall time of the run up to the end of this step, resumed parts included
};

// kd is empty when pretraining (no teacher); ce and ppl are always computed.
struct EvalRecord {
  int64_t step = 0;
  std::optional<double> kd;
  double ce = 0, ppl = 0;
};

// The mean and standard deviation over heads of one alpha_ma buffer, e.g.
// "model.layers.0.self_attn.alpha_ma".
struct AlphaStat {
  std::string name;
  double mean = 0, std = 0;
};

// One line of metrics.jsonl:
//   {"step": 3, "lr": ..., "loss": ..., "kd": ..., "ce": ..., "teacher_entropy": ..., "grad_norm": ...,
//    "alpha": [{"name": ..., "mean": ..., "std": ...}, ...], "eval": {"kd": ..., "ce": ..., "ppl": ...},
//    "tokens_per_s": ..., "elapsed_s": ...}  (elapsed_s is optional on reading: earlier files lack it)
// "eval" only on evaluation steps (its step is the row's). kd, ce, teacher_entropy and eval.kd
// are left out when not computed (see StepRecord) and read back empty. JSON has no NaN or
// Infinity: a non-finite number is written as null and reads back as NaN.
struct MetricsRecord {
  StepRecord step;
  std::vector<AlphaStat> alpha;
  std::optional<EvalRecord> eval;

  Json to_json() const;
  // Errors name `source`: "[train] run/metrics.jsonl line 3: missing field 'grad_norm'".
  static MetricsRecord from_json(const Json& json, std::string_view source);
};

struct TrainResult {
  std::vector<StepRecord> steps;
  std::vector<EvalRecord> evals;
  nn::Params params;
  nn::State state;
  int64_t start_step = 0;  // 0, or the checkpoint's step when resumed; `steps` holds the steps run
  bool interrupted = false;
};

// Set by SIGINT: the loop writes a checkpoint and returns with `interrupted`. The handler
// restores the default action, so a second Ctrl-C ends the process at once.
std::atomic<bool>& stop_requested();
void install_interrupt_handler();

// Trains `params` of `student` (pretraining when teacher.model is null). With resume = true the
// run continues from run_dir/checkpoint. Errors (NaN loss, a checkpoint of another config, an
// unwritable run directory) throw with the step and path named; the last good checkpoint stays.
TrainResult fit(const nn::LanguageModel& student, nn::Params params, nn::State state, const Teacher& teacher,
                  const TokenData& data, const TrainConfig& config, bool resume = false);

// The checks of fit() that need no run directory and no weights: steps, batch_size, grad_accum,
// keep_checkpoints and seq_len positive, the device present, a floating compute dtype, tf32 on a
// CUDA device only, the teacher's vocabulary the student's (unless slice_teacher_vocab), seq_len
// within max_position_embeddings of both models (unless allow_longer_context), every token id of
// the data inside the student's vocabulary. teacher may be null. A job that writes before it
// calls fit() (the study) calls this first, so a bad input leaves nothing behind.
void check_inputs(const nn::LanguageModel& student, const nn::LanguageModel* teacher, const TokenData& data,
                  const TrainConfig& config);

// Offline targets against the run: the vocabulary, seq_len, temperature, the fkl loss, and as
// many positions as the data's splits hold. Errors name both sides.
void check_topk(const nn::LanguageModel& student, const TopkData& topk, const TokenData& data, const TrainConfig& config);

// The training settings a checkpoint records (trainer.json "train"); resuming needs them equal,
// except for `steps`.
Json train_settings(const TrainConfig& config, bool distill);

// Whether run_dir holds a checkpoint to resume from (see the run directory above).
bool has_checkpoint(const std::string& run_dir);

// The step and evaluation records of run_dir/metrics.jsonl (`params` and `state` stay empty):
// after a resumed fit(), the whole run's history, as an uninterrupted run returns it.
TrainResult read_metrics(const std::string& run_dir);

// The members where two JSON objects differ, e.g. `seq_len is 16 in the checkpoint but 32 now;
// attention.kind is "sink" in the checkpoint but "softmax" now` (at most four, then a count).
std::string describe_differences(const Json& saved, const Json& now, const std::string& saved_where);

// The training objective, (student, teacher, ps, st, batch) -> (loss parts, st'): the student's
// forward pass on batch.inputs from (ps, st), then the KD loss against the teacher's logits
// (the teacher in evaluation mode under no_grad) or, when teacher.model is null, the
// cross-entropy. parts.total carries the gradient to ps; st' is the student's new State (training
// mode updates its buffers, evaluation mode returns them unchanged). With fused_head the heads
// run inside the loss (train::head_loss) on both models' final hidden states; otherwise the
// student's logits are donated to distill_loss. The training step and evaluate() both call it.
// teacher_out, when defined, is teacher_output(teacher, batch, loss, fused_head) computed
// beforehand (train_step's lookahead), else the teacher's pass runs here; either way it is
// released when the loss has been computed, before the backward pass.
std::pair<LossParts, nn::State> objective(const nn::LanguageModel& student, const Teacher& teacher, const nn::Params& ps,
                                          const nn::State& st, const Batch& batch, const LossConfig& loss,
                                          bool fused_head = true, Tensor teacher_out = Tensor());

// What objective() takes from the teacher's forward pass on batch.inputs (evaluation mode, no
// gradient): its final hidden states with fused heads, else its logits. Undefined where the loss
// reads no teacher: without a teacher model (pretraining, offline top-k targets) or at kd_ratio 0.
// With teacher.cache, a batch seen before is looked up instead, and a new one kept.
Tensor teacher_output(const Teacher& teacher, const Batch& batch, const LossConfig& loss, bool fused_head = true);

// The next micro-batch, drawn ahead of its turn, and the teacher's output on it (teacher_output
// with fused_head as recorded: hidden states or logits).
struct Lookahead {
  std::optional<Batch> batch;
  Tensor teacher_out;
  bool fused_head = true;
};

// One optimizer step, the body of fit's loop: for each of config.grad_accum micro-batches from
// next_batch, the objective's value and gradient (in config.compute_dtype); then the averaged
// gradients' global norm, clipping (config.clip > 0) and the AdamW update at `lr`. `params` and
// `state` (training mode) are replaced by their new values. A step whose loss or gradient norm is
// not finite is returned without the update, params unchanged, for the caller to report.
// Fills lr, loss, kd, ce, teacher_entropy and grad_norm of the record; step and tokens_per_s are
// the caller's.
// With `ahead`, where the teacher runs a forward pass and the two run side by side
// (runs_side_by_side: the CPU, two threads or more), the next micro-batch is drawn one ahead and
// the teacher's pass on it runs beside this micro-batch's forward and backward passes (the
// student's alone would leave threads waiting at the end of each of its small products); it waits
// in *ahead, which the next micro-batch, in this step or the next, takes instead of drawing. After
// the step's last micro-batch only when `draw_after` (another step follows). The batches come in
// the same order and every value has the same bits as without `ahead`; a caller that saves the
// data's position must count the batch waiting in *ahead as not drawn.
StepRecord train_step(const nn::LanguageModel& student, nn::Params& params, nn::State& state, AdamW& opt,
                      const Teacher& teacher, const std::function<Batch()>& next_batch, const TrainConfig& config,
                      double lr, Lookahead* ahead = nullptr, bool draw_after = false);

// Mean KD loss, CE and perplexity over the validation batches: the objective in evaluation mode,
// no gradients, whatever the training mix of KD and CE (kd_ratio).
EvalRecord evaluate(const nn::LanguageModel& student, const nn::Params& params, const nn::State& state,
                    const Teacher& teacher, const std::vector<Batch>& batches, const LossConfig& loss,
                    bool fused_head = true);

}  // namespace cotan::train
