// The study's evaluation of its models (`cotan distill --eval-ppl FILE --eval-tasks piqa=FILE,...`):
// what `cotan eval` scores (eval/evaluate.hpp, docs/evaluation.md), for every student after its
// training and for the teacher, with the study's tokenizer and the same window and tasks for all.
//
//   StudyEvalData data = read_eval_data(config.eval, "text", tokenizer, max_positions);  // before any write
//   EvalScores s = evaluate_model(lm, ps, st, data, tokenizer);  // s.ppl, s.acc[i] for data.task_names[i]
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "nn/model.hpp"
#include "text/tokenizer.hpp"
#include "eval/tasks.hpp"
#include "eval/evaluate.hpp"
#include "util/json.hpp"

namespace cotan::study {

struct StudyEvalConfig {
  std::string ppl_data;  // a text or JSONL corpus (JSONL: the study's text field); empty: no perplexity
  eval::PerplexityMode ppl_mode = eval::PerplexityMode::stream;  // as cotan eval's default
  std::vector<std::pair<std::string, std::string>> tasks;  // (task, file) in Table 1's order (parse_task_list)
  int64_t limit = 0;                                       // the first N examples of each task; 0: all
  bool enabled() const { return !ppl_data.empty() || !tasks.empty(); }
};

// The evaluation's inputs, read and tokenized once.
struct StudyEvalData {
  std::vector<int32_t> ppl_ids;  // eval::perplexity_text's, in StudyEvalConfig::ppl_mode
  int64_t ppl_bytes = 0;         // UTF-8 bytes of the text
  eval::PerplexityConfig window;       // min(max_positions, 1024) tokens, stride half of it
  std::vector<std::string> task_names;
  std::vector<std::vector<eval::McExample>> tasks;  // per task_names[i]
  int32_t eos = 0;  // ends the perplexity documents (documents mode); the prefix of an empty context without a bos
};

// Reads and checks everything the evaluation needs, so that a bad file fails before the study
// writes anything: "[distill] --eval-ppl FILE: ...", the task readers' "[eval] FILE:LINE: ..."
// errors. `tokenizer` null: the byte tokenizer; `max_positions`: the smallest
// max_position_embeddings of the evaluated models.
StudyEvalData read_eval_data(const StudyEvalConfig& c, const std::string& text_field, const text::Tokenizer* tokenizer,
                             int64_t max_positions);

// What study.json records of the evaluation (a resumed study needs it unchanged): the files'
// absolute paths, the limit, the perplexity mode, the window and the stride.
Json eval_json(const StudyEvalConfig& c, const StudyEvalData& data);

struct EvalScores {
  double ppl = NAN;         // NaN without a perplexity corpus
  std::vector<double> acc;  // lm-eval-harness acc per task, in percent
  double average() const;   // of acc; NaN without tasks
};

// Scores one model (under NoGrad, in evaluation mode, on the device of its weights).
EvalScores evaluate_model(const nn::LanguageModel& lm, const nn::Params& ps, const nn::State& st, const StudyEvalData& data,
                          const text::Tokenizer* tokenizer);

}  // namespace cotan::study
