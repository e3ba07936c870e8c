// cotan eval --model DIR: the paper's Table 1 for one model (docs/evaluation.md): perplexity on a
// text or JSONL corpus (--ppl-data) and zero-shot multiple-choice accuracy on the tasks' JSONL
// files (--tasks piqa=FILE,...), printed as a Markdown table, or one JSON object with --json.
// Details (bits per byte, acc_norm, acc_bytes, examples/s) go to stderr.
#include <boost/program_options.hpp>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "app/commands.hpp"
#include "app/options.hpp"
#include "app/prompt_codec.hpp"
#include "nn/model.hpp"
#include "nn/model_dir.hpp"
#include "text/corpus.hpp"
#include "eval/evaluate.hpp"
#include "util/json.hpp"

namespace po = boost::program_options;
namespace fs = std::filesystem;

namespace cotan::app {

namespace {

constexpr int64_t kDefaultPplWindow = 1024;

double metric_of(const eval::TaskScore& s, const std::string& metric) {
  return metric == "acc_norm" ? s.acc_norm : metric == "acc_bytes" ? s.acc_bytes : s.acc;
}

std::string fixed(double value, int digits) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(digits) << value;
  return out.str();
}

}  // namespace

int cmd_eval(const Args& args) {
  std::string model_dir, ppl_data, text_field, tasks_spec, metric, device_name, dtype_name, ppl_mode_name;
  int64_t ppl_window = 0, ppl_stride = 0, limit = 0;
  po::options_description opts("cotan eval --model DIR [options]: perplexity and zero-shot accuracy (Table 1)");
  opts.add_options()("help,h", "show this help")("model", po::value(&model_dir)->value_name("DIR"),
                                                  "an HF model directory (config.json and model.safetensors)")(
      "ppl-data", po::value(&ppl_data)->value_name("FILE"), "a text or JSONL corpus for perplexity")(
      "text-field", po::value(&text_field)->default_value("text"), "the JSONL field holding a document")(
      "ppl-window", po::value(&ppl_window)->default_value(0),
      "tokens per window (0: min(max_position_embeddings, 1024))")(
      "ppl-stride", po::value(&ppl_stride)->default_value(0), "tokens between windows (0: window / 2)")(
      "ppl-mode", po::value(&ppl_mode_name)->default_value("stream"),
      "stream: the file as one token stream, as HF's perplexity guide scores it; documents: each document with "
      "the tokenizer's special tokens and an end-of-sequence token, as cotan tokenize joins them")(
      "tasks", po::value(&tasks_spec)->value_name("NAME=FILE,..."),
      "zero-shot tasks: winogrande, piqa, hellaswag, arc_challenge, arc_easy, boolq")(
      "limit", po::value(&limit)->default_value(0), "the first N examples of each task (0: all)")(
      "metric", po::value(&metric)->default_value("acc"), "the table's accuracy: acc, acc_norm or acc_bytes")(
      "device", po::value(&device_name)->default_value("cpu"), "cpu | cuda | cuda:N")(
      "dtype", po::value(&dtype_name)->default_value("f32"), "f32, bf16 or f64")("json", "one JSON object");
  add_threads_option(opts);
  po::variables_map vm;
  po::store(po::command_line_parser(args).options(opts).run(), vm);
  po::notify(vm);
  apply_threads_option(vm);
  if (vm.count("help")) {
    std::cout << opts;
    return 0;
  }
  check_integer("limit", limit, 0, kNoLimit, "0: all");
  check_integer("ppl-window", ppl_window, 0, kNoLimit, "0: the default");
  check_integer("ppl-stride", ppl_stride, 0, kNoLimit, "0: the default");
  if (metric != "acc" && metric != "acc_norm" && metric != "acc_bytes")
    fail("eval", "--metric ", metric, ": expected acc, acc_norm or acc_bytes");
  if (model_dir.empty()) fail("eval", "--model DIR is required (a model directory, such as pretrain --out writes)");
  if (ppl_data.empty() && tasks_spec.empty()) fail("eval", "nothing to evaluate: give --ppl-data FILE or --tasks NAME=FILE,...");
  const eval::PerplexityMode ppl_mode = eval::parse_perplexity_mode(ppl_mode_name);
  const DType dtype = dtype_option(dtype_name, "eval");
  const Device device = device_option(device_name);
  const auto tasks = eval::parse_task_list(tasks_spec, "eval", "--tasks");
  const bool json = vm.count("json") > 0;

  nn::LoadedModel loaded = load_inference_model(model_dir, dtype, "eval");
  const nn::CausalLM model(loaded.config);
  // Inference only: each joint product's weights side by side, read in place on every step.
  const nn::Params ps = nn::adjoin(nn::to(loaded.params, device), model.joint_weight_groups());
  const nn::State st = nn::to(loaded.state, device);
  const std::unique_ptr<PromptCodec> codec = model_codec(model_dir, loaded.config.vocab_size, "eval");
  if (!codec->eos()) fail("eval", codec->name(), " has no end-of-sequence token to join documents and begin empty contexts");
  const int32_t eos = *codec->eos();

  // Task files are read before any scoring, so that a bad line fails at once.
  std::vector<std::vector<eval::McExample>> examples;
  for (const auto& task : tasks) examples.push_back(eval::read_task(task.first, task.second, limit));

  Json out = Json::object();
  out["model"] = model_dir;
  std::ostringstream details;
  std::optional<eval::PerplexityResult> ppl;
  if (!ppl_data.empty()) {
    const eval::PerplexityText text = eval::perplexity_text(ppl_data, ppl_mode, text_field, codec->hf(), eos);
    const int64_t window = ppl_window > 0 ? ppl_window : std::min(loaded.config.max_position_embeddings, kDefaultPplWindow);
    const int64_t stride = ppl_stride > 0 ? ppl_stride : std::max<int64_t>(1, window / 2);
    ppl = eval::perplexity(model, ps, st, text.ids, text.bytes, {.window = window, .stride = stride});
    out["perplexity"] = {{"file", ppl_data},
                         {"mode", eval::name_of(ppl_mode)},
                         {"ppl", ppl->perplexity()},
                         {"token_ppl", ppl->token_perplexity()},
                         {"bits_per_byte", ppl->bits_per_byte()},
                         {"nll", ppl->nll},
                         {"tokens", ppl->tokens},
                         {"bytes", ppl->bytes},
                         {"documents", text.documents},
                         {"window", window},
                         {"stride", stride},
                         {"windows", ppl->windows}};
    details << "eval: perplexity " << fixed(ppl->perplexity(), 4) << ", " << fixed(ppl->bits_per_byte(), 4)
            << " bits per byte over " << ppl->tokens << " tokens (" << ppl->bytes << " bytes) of " << ppl_data << " as "
            << (ppl_mode == eval::PerplexityMode::stream ? "one token stream (HF's perplexity guide)"
                                                          : cat(text.documents, " documents, each ending in the end-of-sequence token"))
            << ", window " << window << ", stride " << stride << "\n";
  }

  // Requests encoded as lm-evaluation-harness 0.4.13's HF backend encodes them.
  const eval::HarnessEncoding harness = eval::harness_encoding(codec->hf(), eos);
  Json task_json = Json::object();
  std::vector<double> columns;
  for (size_t i = 0; i < tasks.size(); ++i) {
    const eval::TaskScore s = eval::score_task(model, ps, st, examples[i], harness.encode, harness.config());
    columns.push_back(metric_of(s, metric));
    task_json[tasks[i].first] = {{"file", tasks[i].second}, {"examples", s.examples}, {"acc", s.acc},
                                 {"acc_norm", s.acc_norm},   {"acc_bytes", s.acc_bytes},
                                 {"examples_per_s", s.examples_per_second()}};
    details << "eval: " << tasks[i].first << ": " << s.examples << " examples, acc " << fixed(s.acc, 4) << ", acc_norm "
            << fixed(s.acc_norm, 4) << ", acc_bytes " << fixed(s.acc_bytes, 4) << ", "
            << fixed(s.examples_per_second(), 1) << " examples/s\n";
  }
  double average = 0;
  for (double v : columns) average += v / double(columns.size());
  if (!tasks.empty()) {
    out["tasks"] = task_json;
    out["metric"] = metric;
    out["average"] = average;
  }

  if (json) {
    std::cout << dump_json(out) << "\n";
  } else {
    // Table 1: ppl, then each task's accuracy in percent, then their average.
    std::string head = "| model |", rule = "|---|", row = cat("| ", fs::path(model_dir).filename().string(), " |");
    if (ppl) {
      head += " ppl |";
      rule += "---:|";
      row += cat(" ", fixed(ppl->perplexity(), 2), " |");
    }
    for (size_t i = 0; i < tasks.size(); ++i) {
      head += cat(" ", tasks[i].first, " |");
      rule += "---:|";
      row += cat(" ", fixed(100 * columns[i], 1), " |");
    }
    if (!tasks.empty()) {
      head += " avg |";
      rule += "---:|";
      row += cat(" ", fixed(100 * average, 1), " |");
    }
    std::cout << head << "\n" << rule << "\n" << row << "\n";
  }
  std::cout << std::flush;
  std::cerr << details.str();
  return 0;
}

}  // namespace cotan::app
