// cotan generate --model DIR: text from a model directory (docs/generation.md). The prompt is
// --prompt TEXT, the lines of --prompt-file F (one prompt per line, empty lines skipped, all run
// as one batch), or else all of stdin as one prompt. Each prompt is printed followed by its
// completion and a newline; a single prompt's completion streams as it is generated. --json
// prints one object per prompt instead. The throughput goes to stderr.
#include <unistd.h>

#include <boost/program_options.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <limits>
#include <sstream>

#include "app/commands.hpp"
#include "app/options.hpp"
#include "app/prompt_codec.hpp"
#include "nn/generate.hpp"
#include "nn/model.hpp"
#include "nn/model_dir.hpp"
#include "util/json.hpp"

namespace po = boost::program_options;

namespace cotan::app {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr int64_t kMaxNewTokens = int64_t(1) << 24;
const std::string kReplacementCharacter = "\xEF\xBF\xBD";  // U+FFFD: HF's decoding of an unfinished character

// The prompts of --prompt, --prompt-file or stdin.
std::vector<std::string> read_prompts(const po::variables_map& vm) {
  if (vm.count("prompt") && vm.count("prompt-file")) fail("generate", "--prompt and --prompt-file exclude each other");
  if (vm.count("prompt")) return {vm["prompt"].as<std::string>()};
  if (vm.count("prompt-file")) {
    const std::string path = vm["prompt-file"].as<std::string>();
    if (std::error_code ec; std::filesystem::is_directory(path, ec))
      fail("generate", "--prompt-file ", path, ": a directory, not a file of prompts");
    std::ifstream in(path);
    if (!in) fail("generate", "--prompt-file ", path, ": cannot open");
    std::vector<std::string> prompts;
    for (std::string line; std::getline(in, line);) {
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (!line.empty()) prompts.push_back(line);
    }
    if (prompts.empty()) fail("generate", "--prompt-file ", path, ": no prompts (every line is empty)");
    return prompts;
  }
  std::string all{std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>()};
  while (!all.empty() && (all.back() == '\n' || all.back() == '\r')) all.pop_back();
  return {all};
}

// One row's completion as text, decoded again as each token arrives. `text` is everything
// decoded, cut before the stop text once it appears; `shown` is the prefix already printed, which
// holds back a tail that may still change: an unfinished character, or the start of the stop text.
struct Completion {
  std::vector<int32_t> ids;
  std::string text, shown;
  bool stopped = false;

  // Adds a token and returns the text that became printable.
  std::string add(int32_t id, const PromptCodec& codec, const std::string& stop) {
    ids.push_back(id);
    text = codec.decode(ids);
    const size_t at = stop.empty() ? std::string::npos : text.find(stop);
    if (at != std::string::npos) {
      text.resize(at);
      stopped = true;
      return advance(text);
    }
    size_t keep = text.size();
    while (keep >= 3 && text.compare(keep - 3, 3, kReplacementCharacter) == 0) keep -= 3;
    for (size_t k = std::min(stop.size() - (stop.empty() ? 0 : 1), keep); k > 0; --k)
      if (text.compare(keep - k, k, stop, 0, k) == 0) {
        keep -= k;
        break;
      }
    return advance(text.substr(0, keep));
  }
  // The rest of the text, once the row has ended.
  std::string finish() { return advance(text); }

 private:
  std::string advance(const std::string& printable) {
    if (!printable.starts_with(shown)) return "";  // the decoder changed printed text: print no more of it
    std::string delta = printable.substr(shown.size());
    shown = printable;
    return delta;
  }
};

// A JSON string of text that may not be valid UTF-8 (byte-level models can produce any bytes).
std::string json_line(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

}  // namespace

int cmd_generate(const Args& args) {
  std::string model_dir, device_name, dtype_name, seed_text, stop;
  nn::GenerateConfig c;
  po::options_description opts("cotan generate --model DIR [options]: text from a model");
  opts.add_options()("help,h", "show this help")("model", po::value(&model_dir)->value_name("DIR"),
                                                  "an HF model directory (config.json and model.safetensors)")(
      "prompt", po::value<std::string>()->value_name("TEXT"), "the prompt (default: all of stdin)")(
      "prompt-file", po::value<std::string>()->value_name("F"), "one prompt per line, run as one batch")(
      "max-new-tokens", po::value(&c.max_new_tokens)->default_value(64), "tokens to generate per prompt, at most")(
      "temperature", po::value(&c.sampling.temperature)->default_value(1.0, "1"), "sampling temperature, > 0")(
      "top-k", po::value(&c.sampling.top_k)->default_value(0), "sample among the k most likely tokens (0: off)")(
      "top-p", po::value(&c.sampling.top_p)->default_value(1.0, "1"),
      "sample among the fewest most likely tokens whose probability reaches p (1: off)")(
      "greedy", po::bool_switch(&c.sampling.greedy), "always the most likely token (no sampling)")(
      "seed", po::value(&seed_text)->default_value("0"), "sampling seed, in [0, 2^64)")(
      "stop", po::value(&stop)->value_name("TEXT"), "end a completion where this text appears (it is left out)")(
      "device", po::value(&device_name)->default_value("cpu"), "cpu | cuda | cuda:N")(
      "dtype", po::value(&dtype_name)->default_value("f32"), "f32, bf16 or f64")("json", "one JSON object per prompt");
  add_threads_option(opts);
  po::options_description hidden;
  hidden.add_options()("no-cache", "recompute the whole sequence every step (the KV cache's oracle)");
  po::options_description all;
  all.add(opts).add(hidden);
  po::variables_map vm;
  po::store(po::command_line_parser(args).options(all).run(), vm);
  po::notify(vm);
  apply_threads_option(vm);
  if (vm.count("help")) {
    std::cout << opts;
    return 0;
  }
  check_integer("max-new-tokens", c.max_new_tokens, 1, kMaxNewTokens);
  check_number("temperature", c.sampling.temperature, 0, kInf, true);
  check_integer("top-k", c.sampling.top_k, 0, kNoLimit, "0: off");
  check_number("top-p", c.sampling.top_p, 0, 1, true, "1: off");
  const uint64_t seed = parse_u64_option("seed", seed_text);
  // Greedy decoding reads no sampling option: one given beside it would be ignored.
  if (c.sampling.greedy)
    for (const char* option : {"temperature", "top-k", "top-p", "seed"})
      if (!vm[option].defaulted())
        fail("option", "--greedy and --", option, " exclude each other: greedy decoding takes the most likely token, ",
             "and would ignore --", option);
  if (model_dir.empty()) fail("generate", "--model DIR is required (a model directory, such as pretrain --out writes)");
  const DType dtype = dtype_option(dtype_name, "generate");
  const Device device = device_option(device_name);
  c.use_cache = vm.count("no-cache") == 0;
  const bool json = vm.count("json") > 0;

  nn::LoadedModel loaded = load_inference_model(model_dir, dtype, "generate");
  const nn::CausalLM model(loaded.config);
  // Inference only: each joint product's weights side by side, read in place on every step.
  const nn::Params ps = nn::adjoin(nn::to(loaded.params, device), model.joint_weight_groups());
  const nn::State st = nn::to(loaded.state, device);
  const std::unique_ptr<PromptCodec> codec = model_codec(model_dir, loaded.config.vocab_size);
  c.eos = codec->eos();

  const std::vector<std::string> prompts = read_prompts(vm);
  std::vector<std::vector<int32_t>> ids;
  for (size_t i = 0; i < prompts.size(); ++i) {
    ids.push_back(codec->encode(prompts[i]));
    if (ids.back().empty())
      fail("generate", "prompt ", i + 1, " tokenizes to nothing with ", codec->name(),
           prompts[i].empty() ? " (it is empty)" : "");
  }

  // A single prompt streams: the prompt, then each token's text as it becomes printable.
  const bool stream = !json && prompts.size() == 1;
  if (stream) std::cout << prompts[0] << std::flush;
  std::vector<Completion> completions(prompts.size());
  auto on_token = [&](size_t row, int32_t id) {
    std::string delta = completions[row].add(id, *codec, stop);
    if (stream && !delta.empty()) std::cout << delta << std::flush;
    return !completions[row].stopped;
  };
  Generator gen(seed);
  const auto start = std::chrono::steady_clock::now();
  const nn::Generation g = nn::generate(model, ps, st, ids, c, gen, on_token);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double rate = seconds > 0 ? double(g.new_tokens) / seconds : 0.0;

  for (size_t r = 0; r < prompts.size(); ++r) {
    Completion& done = completions[r];
    const std::string rest = done.finish();
    if (stream) {
      std::cout << rest << "\n";
    } else if (!json) {
      std::cout << prompts[r] << done.text << "\n";
    } else {
      Json j = Json::object();
      j["prompt"] = prompts[r];
      j["completion"] = done.text;
      j["prompt_tokens"] = ids[r].size();
      j["tokens"] = g.tokens[r];
      j["finish"] = std::string(nn::name_of(g.finish[r]));
      j["tokens_per_s"] = seconds > 0 ? double(g.tokens[r].size()) / seconds : 0.0;
      std::cout << json_line(j) << "\n";
    }
  }
  std::cout << std::flush;
  std::ostringstream summary;
  summary.precision(3);
  auto count = [](int64_t n, const char* what) { return cat(n, " ", what, n == 1 ? "" : "s"); };
  summary << "generate: " << count(g.new_tokens, "token") << " for " << count(int64_t(prompts.size()), "prompt") << " ("
          << count(g.prompt_tokens, "prompt token") << ") in " << std::fixed << seconds << " s: " << rate
          << " tokens/s on " << to_string(device) << (c.use_cache ? "" : ", without the KV cache") << "\n";
  std::cerr << summary.str();
  return 0;
}

}  // namespace cotan::app
