// The paper's comparison as one job (`cotan distill` with no arguments): pretrain a teacher (or
// reuse a cached one with the same config, data and settings), distill one student per attention
// kind with the same data order and seed, and report a Table-1-style comparison with figures.
//
// Run directory:
//   study.json           the command line and the config: everything that determines the results
//   recipe.toml          every option as the study ran it (`--recipe <run dir>` replays it)
//   teacher/             the teacher's run (trainer.hpp), when it was pretrained here
//   <variant>[-seedN]/   one student's run, and model/ with its final weights; the folder is the
//                        variant's name made shell-safe: affine-linear_clip for affine(linear_clip)
//   table.md, table.csv, the figures and their tidy CSVs (study/figures.hpp)
// With an evaluation (StudyConfig::eval, study/study_eval.hpp) each student is scored after its
// training, and the teacher as a reference row: perplexity and task-accuracy columns.
// Ctrl-C ends the study once the current run has written its checkpoint. Resuming (`resume`,
// `cotan distill --resume DIR`) needs the config of study.json: finished runs are read back from
// their final checkpoints and metrics, the interrupted one continues bit for bit, and the table
// equals an uninterrupted study's. Inputs (configs, vocabularies, data, seq_len, the evaluation's
// files and tasks, the run directory, study.json, and every setting fit() checks for the
// teacher's and the students' runs) are checked before anything is written; a directory holding
// only study.json (a start that trained nothing) is started over.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "nn/config.hpp"
#include "study/study_eval.hpp"
#include "train/trainer.hpp"

namespace cotan::study {

struct StudyVariant {
  std::string name;  // "softmax", "affine(linear_clip)", ...
  nn::AttentionConfig attention;
};

struct StudyConfig {
  std::string data;              // empty: the default corpus
  // The tokenizer of text corpora: a tokenizer.json or a directory holding one. Empty: the
  // teacher's own when --teacher is a model directory with a tokenizer.json, else the bytes.
  std::string tokenizer;
  std::string text_field = "text";  // of JSONL corpora
  std::string run_dir;           // empty: runs/distill-<timestamp>
  std::string cache_dir;         // empty: $XDG_CACHE_HOME/cotan or ~/.cache/cotan
  std::string teacher = "tiny-teacher";
  // A directory of `cotan teacher-logits` files for the shards of `data`: no teacher is loaded or
  // pretrained, the students train on the sparse KL against these targets, and the table has no
  // teacher row (`teacher` and `teacher_steps` are not used).
  std::string teacher_logits;
  // The architecture a teacher directory must hold (`--teacher-config`, a recipe's way of saying
  // which model it expects): a directory holding another model is an error naming the fields.
  std::optional<nn::ModelConfig> teacher_config;
  std::string student = "tiny-student";
  int64_t teacher_steps = 200;
  int64_t student_steps = 150;
  int64_t seeds = 1;
  int64_t stats_window = 500;    // grad-norm statistics over steps [0, window)
  int64_t analysis_batches = 2;  // evaluation batches for the attention statistics
  train::TrainConfig train;             // batch, seq_len, lr, loss... (steps and run_dir are set per run)
  // The students' attention path: the fused kernels, or the composed ops (--composed).
  nn::AttentionImpl attention_impl = nn::AttentionImpl::fused;
  std::vector<StudyVariant> variants;  // empty: the six of the paper's comparison
  StudyEvalConfig eval;          // perplexity and zero-shot tasks scored on every model; none by default
  bool quick = false;
  bool resume = false;   // continue the study in run_dir (which must then be given)
  bool overwrite = false;  // a new study in a run_dir that holds files moves them aside (DIR.old-N)
  std::string command;   // the command line, kept in study.json to show how the study was started
  // The resolved recipe (app/recipe_args.hpp): written to recipe.toml beside study.json, so that
  // `cotan distill --recipe <run dir>/recipe.toml` replays the study. Empty: none is written.
  std::string recipe;
  // Lines that say which of two given options wins ("note: ..."), printed to stderr once the inputs
  // are checked and the run directory is taken.
  std::vector<std::string> notes;
};

struct StudyResult {
  std::string run_dir;       // table.md, table.csv, the figures (CSV, PNG, PDF), one folder per run
  bool interrupted = false;  // stopped by Ctrl-C; resume to finish
};

std::vector<StudyVariant> default_variants();
// Where pretrained teachers and tokenized corpora are kept: $XDG_CACHE_HOME/cotan, else
// ~/.cache/cotan.
std::string default_cache_dir();
// A config sized to finish in about a minute on 2 cores.
StudyConfig quick_study();
StudyConfig default_study();

// Runs (or resumes) the study. Progress and the table go to stdout, the trainer's step lines to
// stderr.
StudyResult run_study(StudyConfig config);

}  // namespace cotan::study
