#include "study/study_eval.hpp"

#include <algorithm>
#include <filesystem>

#include "text/corpus.hpp"
#include "train/data.hpp"
#include "train/tokenize_corpus.hpp"
#include "util/error.hpp"

namespace cotan::study {

// The trainer's and evaluation's names, which this file uses throughout.
using namespace cotan::train;
using namespace cotan::eval;

namespace fs = std::filesystem;

namespace {

constexpr int64_t kLongestPplWindow = 1024;  // cotan eval's default window

}  // namespace

StudyEvalData read_eval_data(const StudyEvalConfig& c, const std::string& text_field, const text::Tokenizer* tokenizer,
                             int64_t max_positions) {
  StudyEvalData data;
  if (c.limit < 0) fail("distill", "--eval-limit must be at least 0 (0: all), got ", c.limit);
  const CorpusTokenizer corpus(tokenizer);
  data.eos = corpus.eos();
  if (!c.ppl_data.empty()) {
    std::error_code ec;
    if (!fs::exists(c.ppl_data, ec)) fail("distill", "--eval-ppl ", c.ppl_data, ": no such file or directory");
    const PerplexityText text = perplexity_text(c.ppl_data, c.ppl_mode, text_field, tokenizer, data.eos);
    data.ppl_ids = text.ids;
    data.ppl_bytes = text.bytes;
    if (data.ppl_ids.size() < 2)
      fail("distill", "--eval-ppl ", c.ppl_data, ": ", data.ppl_ids.size(), " tokens, perplexity needs at least 2");
    data.window.window = std::max<int64_t>(2, std::min(max_positions, kLongestPplWindow));
    data.window.stride = std::max<int64_t>(1, data.window.window / 2);
  }
  for (const auto& task : c.tasks) {
    data.task_names.push_back(task.first);
    data.tasks.push_back(read_task(task.first, task.second, c.limit));
  }
  return data;
}

Json eval_json(const StudyEvalConfig& c, const StudyEvalData& data) {
  Json j = Json::object();
  if (!c.ppl_data.empty()) {
    j["ppl_data"] = fs::absolute(c.ppl_data).string();
    j["ppl_mode"] = name_of(c.ppl_mode);
    j["ppl_window"] = data.window.window;
    j["ppl_stride"] = data.window.stride;
  }
  Json tasks = Json::object();
  for (const auto& task : c.tasks) tasks[task.first] = fs::absolute(task.second).string();
  if (!c.tasks.empty()) {
    j["tasks"] = tasks;
    j["limit"] = c.limit;
  }
  return j;
}

double EvalScores::average() const {
  if (acc.empty()) return NAN;
  double s = 0;
  for (double a : acc) s += a / double(acc.size());
  return s;
}

EvalScores evaluate_model(const nn::LanguageModel& lm, const nn::Params& ps, const nn::State& st, const StudyEvalData& data,
                          const text::Tokenizer* tokenizer) {
  EvalScores out;
  if (!data.ppl_ids.empty())
    out.ppl = perplexity(lm, ps, st, data.ppl_ids, data.ppl_bytes, data.window).perplexity();
  // As lm-evaluation-harness 0.4.13's HF backend encodes requests (the tokenizer's BOS, if any).
  const HarnessEncoding harness = harness_encoding(tokenizer, data.eos);
  for (const std::vector<McExample>& examples : data.tasks)
    out.acc.push_back(100 * score_task(lm, ps, st, examples, harness.encode, harness.config()).acc);
  return out;
}

}  // namespace cotan::study
