// `cotan bench generate`: greedy generation's tokens/s, prefill included and decode alone, of a
// model directory or of a preset with random weights, side by side with HF transformers'
// `generate` on the same weights and prompts (bench/torch_reference.py's "generate" request, in
// the reference environment of app/torch_reference.hpp), what a user would otherwise run: as it
// is (eager), and with a static cache whose decoding steps transformers gives to torch.compile
// (compiled, unless --no-torch-compile), its fastest generate. Compiling happens in the untimed
// first runs (the first one's time is reported); a graph compiled during a timed run is counted
// and reported, since that run's time then includes compiling.
//
// Both sides generate exactly --new-tokens tokens for each of --batch random prompts of
// --prompt-len tokens (no end-of-sequence token), greedily, with the KV cache, on --threads
// threads (cotan may run on --device cuda, alone). Each also generates a single token from the
// same prompts (the prompt's prefill and one choice): decode tokens/s is the (new tokens - 1) x
// batch over the difference of the medians.
// After one untimed run of each length (compiled: two of --new-tokens), the sides take turns
// --repeats times, with a settling pause (kSettle) before each turn; the medians are reported. The tokens chosen are compared: the
// work is the same whatever they are (every row runs all its steps), but with random weights
// the logits of many tokens are close, so an f32 rounding apart may pick another one; the count
// of agreeing tokens, up to each row's first difference, is printed, not checked.
#include <boost/program_options.hpp>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "app/bench_util.hpp"
#include "app/commands.hpp"
#include "app/options.hpp"
#include "app/prompt_codec.hpp"
#include "app/torch_reference.hpp"
#include "nn/generate.hpp"
#include "nn/model.hpp"
#include "nn/model_dir.hpp"
#include "tensor/error.hpp"
#include "tensor/ops.hpp"
#include "tensor/random.hpp"
#include "util/json.hpp"

namespace cotan::app {

int bench_generate(const Args& args);

namespace {

namespace po = boost::program_options;
namespace fs = std::filesystem;

constexpr const char* kDefaultModel = "qwen1.5-0.5b";

struct Side {
  std::vector<double> full, prefill;  // seconds of each timed run: --new-tokens, and one token
  double full_ms() const { return median(full) * 1e3; }
  double prefill_ms() const { return median(prefill) * 1e3; }
  double decode_seconds() const { return median(full) - median(prefill); }  // the steps after the first token
  // New tokens a second, prefill included; and of the decode steps alone.
  double tokens_per_s(int64_t tokens) const { return double(tokens) / median(full); }
  double decode_tokens_per_s(int64_t tokens) const { return double(tokens) / decode_seconds(); }
  std::string json(int64_t tokens, int64_t decode_tokens) const {
    std::string out = "\"ms\":" + json_number(full_ms()) + ",\"prefill_ms\":" + json_number(prefill_ms()) +
                      ",\"tokens_per_s\":" + json_number(tokens_per_s(tokens)) + ",\"decode_tokens_per_s\":" +
                      (decode_seconds() > 0 ? json_number(decode_tokens_per_s(decode_tokens)) : "null") +
                      ",\"run_ms\":[";
    for (size_t i = 0; i < full.size(); ++i) {
      if (i) out += ',';
      out += json_number(full[i] * 1e3);
    }
    return out + "]";
  }
};

// The reply's "tokens": the new ids of each row, or "[bench] --torch generate: ..." naming what
// is wrong.
std::vector<std::vector<int32_t>> reply_tokens(const Json& reply) {
  const Json& tokens = member(reply, "tokens");
  if (!tokens.is_array()) fail("bench", "--torch generate: the reply's 'tokens' is ", kind_name(tokens), ", not rows");
  std::vector<std::vector<int32_t>> out;
  for (const Json& row : tokens) {
    if (!row.is_array()) fail("bench", "--torch generate: 'tokens' holds ", kind_name(row), ", not rows of ids");
    out.emplace_back();
    for (const Json& id : row) out.back().push_back(int32_t(as_int(id)));
  }
  return out;
}

}  // namespace

int bench_generate(const Args& args) {
  po::options_description options("cotan bench generate");
  options.add_options()
      ("help,h", "this message")
      ("json", "print one JSON object instead of a table")
      ("model", po::value<std::string>()->default_value(kDefaultModel),
       "a model directory (config.json and weights), or a preset or config.json whose weights are drawn at random")
      ("batch", po::value<int64_t>()->default_value(1), "prompts generated together")
      ("prompt-len", po::value<int64_t>()->default_value(64), "tokens of each (random) prompt")
      ("new-tokens", po::value<int64_t>()->default_value(32), "tokens generated for each prompt")
      ("repeats", po::value<int>()->default_value(3), "timed runs of each side and length (the median is reported)")
      ("dtype", po::value<std::string>()->default_value("f32"), "f32 or bf16, on both sides")
      ("device", po::value<std::string>()->default_value("cpu"), "cpu | cuda | cuda:N (transformers: CPU only)")
      ("seed", po::value<uint64_t>()->default_value(0), "seed of the random weights and prompts")
      ("torch", "also time HF transformers (the default when it is installed); fail when it is not")
      ("no-torch", "time cotan alone")
      ("no-torch-compile", "time transformers eager only, not also with a static cache under torch.compile");
  add_torch_options(options);
  po::variables_map vm = parse_options(args, options);
  if (vm.count("help")) {
    std::cout << options << "\n";
    return 0;
  }
  check_integers(vm, {{"batch", 1, 4096}, {"prompt-len", 1, 1 << 20}, {"new-tokens", 2, 1 << 20}, {"repeats", 1, 1000}});
  check(!(vm.count("torch") && vm.count("no-torch")), "bench generate", "--torch and --no-torch exclude each other");
  const bool json = vm.count("json") > 0;
  const int64_t batch = vm["batch"].as<int64_t>(), prompt_len = vm["prompt-len"].as<int64_t>();
  const int64_t new_tokens = vm["new-tokens"].as<int64_t>();
  const int repeats = vm["repeats"].as<int>();
  const uint64_t seed = vm["seed"].as<uint64_t>();
  const DType dtype = dtype_option(vm["dtype"].as<std::string>(), "bench generate");
  check(dtype == DType::f32 || dtype == DType::bf16, "bench generate", "--dtype takes f32 or bf16, got ", dtype);
  const int threads = num_threads();
  const Device device = device_option(vm["device"].as<std::string>());
  check(!(vm.count("torch") && !device.is_cpu()), "bench generate",
        "--torch times transformers on the CPU; it compares with --device cpu only");

  // The model: a directory's weights, or random ones for a preset or config, written to a
  // temporary directory for transformers to load.
  const std::string model_name = vm["model"].as<std::string>();
  const bool from_dir = fs::is_directory(model_name) &&
                        (fs::exists(fs::path(model_name) / "model.safetensors") ||
                         fs::exists(fs::path(model_name) / "model.safetensors.index.json"));
  nn::LoadedModel loaded;
  std::optional<TempDir> random_dir;
  std::string model_dir = model_name;
  if (from_dir) {
    loaded = load_inference_model(model_name, dtype, "bench generate");
  } else {
    loaded.config = nn::load_config(model_name);
    const nn::CausalLM init(loaded.config);
    Generator gen(seed);
    std::tie(loaded.params, loaded.state) = init.init(gen, dtype);
    loaded.state.training = false;
  }
  const nn::ModelConfig& config = loaded.config;
  check(prompt_len + new_tokens - 1 <= config.max_position_embeddings, "bench generate", "--prompt-len ", prompt_len,
        " + --new-tokens ", new_tokens, " - 1 exceeds the model's ", config.max_position_embeddings, " positions");
  const nn::CausalLM model(config);
  // As `cotan generate` runs it: each joint product's weights side by side, on the device.
  const nn::Params ps = nn::adjoin(nn::to(loaded.params, device), model.joint_weight_groups());
  const nn::State st = nn::to(loaded.state, device);
  const int64_t params = model.num_params();

  Generator prompt_gen(seed + 1);
  std::vector<std::vector<int32_t>> prompts;
  for (int64_t r = 0; r < batch; ++r)
    prompts.push_back(randint({prompt_len}, 0, config.vocab_size, prompt_gen, DType::i32).to_vector<int32_t>());

  std::unique_ptr<TorchReference> torch;
  std::string torch_note, compiled_note;
  Json request = Json::object();
  if (!device.is_cpu()) {
    torch_note = "transformers is timed with --device cpu only";
  } else if (!vm.count("no-torch")) {
    try {
      auto script = find_torch_script(vm["torch-script"].as<std::string>());
      if (!script) fail("bench", "--torch: cannot find bench/torch_reference.py; pass --torch-script PATH");
      torch = std::make_unique<TorchReference>(*script, find_torch_python(vm["torch-python"].as<std::string>()), threads);
      if (!from_dir) {
        random_dir.emplace("cotan-bench-generate");
        model_dir = random_dir->path.string();
        nn::save_model_dir(model_dir, config, loaded.params, loaded.state);
      }
      request["op"] = "generate";
      request["model"] = fs::absolute(model_dir).string();
      request["dtype"] = std::string(dtype_name(dtype));
      request["prompts"] = prompts;
      request["runs"] = 1;
      request["new_tokens"] = 1;
      request["mode"] = "eager";
      torch->request(request);  // loads the model; its reply names transformers' version
    } catch (const Error& e) {
      if (vm.count("torch")) throw;
      torch.reset();
      torch_note = e.what();
    }
  }

  nn::GenerateConfig c;
  c.sampling.greedy = true;  // no eos: every row runs all its steps
  std::vector<std::vector<int32_t>> ours_tokens, theirs_tokens, compiled_tokens;
  auto run_cotan = [&](int64_t n) {
    c.max_new_tokens = n;
    Generator gen(seed);
    nn::Generation g;
    const double seconds = seconds_on(device, [&] { g = nn::generate(model, ps, st, prompts, c, gen); });
    for (const auto& row : g.tokens)
      check(int64_t(row.size()) == n, "bench generate", "cotan generated ", row.size(), " tokens for a row, not ", n);
    if (n == new_tokens) ours_tokens = g.tokens;
    return seconds;
  };
  std::string transformers_version;
  int64_t graphs_compiled = 0;  // by torch.compile, during the runs counted here
  // One run of transformers (mode "eager" or "compiled") generating n tokens; its seconds.
  auto run_torch = [&](int64_t n, const char* mode) {
    std::this_thread::sleep_for(kSettle);
    request["new_tokens"] = n;
    request["mode"] = mode;
    const Json reply = torch->request(request);
    const JsonFields fields(reply, "bench", "--torch generate");
    graphs_compiled += fields.optional<int64_t>("graphs_compiled", 0);
    transformers_version = fields.required<std::string>("transformers");
    const std::vector<double> seconds = TorchReference::numbers(reply, "seconds");
    const std::vector<std::vector<int32_t>> tokens = reply_tokens(reply);
    check(seconds.size() == 1 && tokens.size() == size_t(batch), "bench generate", "transformers' reply has ",
          seconds.size(), " times and ", tokens.size(), " rows for 1 run of ", batch);
    for (const auto& row : tokens)
      check(int64_t(row.size()) == n, "bench generate", "transformers generated ", row.size(), " tokens for a row, not ", n);
    if (n == new_tokens) (std::string_view(mode) == "eager" ? theirs_tokens : compiled_tokens) = tokens;
    return seconds[0];
  };

  // Untimed first runs (caches, thread pools, first-touch of the weights; compiling), then turns.
  Side ours, theirs, compiled;
  run_cotan(new_tokens);
  run_cotan(1);
  std::optional<double> compile_seconds;  // the first compiled run's, compiling included
  if (torch) {
    run_torch(new_tokens, "eager");
    run_torch(1, "eager");
    if (vm.count("no-torch-compile")) {
      compiled_note = "--no-torch-compile";
    } else {
      try {
        compile_seconds = run_torch(new_tokens, "compiled");
        run_torch(new_tokens, "compiled");
        run_torch(1, "compiled");
      } catch (const Error& e) {
        // An error reply leaves the reference serving eager runs; a reference that ended does not.
        if (torch->exited()) fail("bench generate", "transformers compiled: ", e.what());
        compile_seconds.reset();
        compiled_note = e.what();
      }
    }
  }
  graphs_compiled = 0;  // from here on, only while timed
  for (int i = 0; i < repeats; ++i)
    for (int64_t n : {new_tokens, int64_t(1)}) {
      if (torch) std::this_thread::sleep_for(kSettle);
      (n == 1 ? ours.prefill : ours.full).push_back(run_cotan(n));
      if (torch) (n == 1 ? theirs.prefill : theirs.full).push_back(run_torch(n, "eager"));
      if (compile_seconds) (n == 1 ? compiled.prefill : compiled.full).push_back(run_torch(n, "compiled"));
    }

  const int64_t tokens = batch * new_tokens, decode_tokens = batch * (new_tokens - 1);
  // cotan's tokens that agree with `others`, each row up to its first difference.
  auto agreeing = [&](const std::vector<std::vector<int32_t>>& others) {
    int64_t agree = 0;
    for (int64_t r = 0; r < batch; ++r)
      for (int64_t i = 0; i < new_tokens && ours_tokens[size_t(r)][size_t(i)] == others[size_t(r)][size_t(i)]; ++i)
        ++agree;
    return agree;
  };
  const int64_t agree = torch ? agreeing(theirs_tokens) : 0;
  // Decode time of `ref` over cotan's; none when either side's run of one token took as long as
  // its whole run (noise swamps a decode too short to time).
  auto decode_ratio = [&](const Side& ref) -> std::optional<double> {
    if (ref.decode_seconds() <= 0 || ours.decode_seconds() <= 0) return std::nullopt;
    return ref.decode_seconds() / ours.decode_seconds();
  };
  auto ratio_json = [](std::optional<double> ratio) { return ratio ? json_number(*ratio) : std::string("null"); };
  auto ratio_text = [](std::optional<double> ratio) {
    char text[32] = "n/a";
    if (ratio) std::snprintf(text, sizeof text, "%.2fx", *ratio);
    return std::string(text);
  };
  const int64_t agree_compiled = compile_seconds ? agreeing(compiled_tokens) : 0;
  const std::string source = from_dir ? model_name : model_name + " (random weights)";

  if (json) {
    std::cout << "{\"model\":\"" << json_escape(source) << "\",\"model_type\":\"" << config.model_type
              << "\",\"params\":" << params << ",\"batch\":" << batch << ",\"prompt_len\":" << prompt_len
              << ",\"new_tokens\":" << new_tokens << ",\"dtype\":\"" << dtype_name(dtype) << "\",\"device\":\""
              << to_string(device) << "\",\"threads\":" << threads
              << ",\"repeats\":" << repeats << "," << host_json(threads) << ",\"cotan\":{"
              << ours.json(tokens, decode_tokens) << "}";
    if (torch) {
      Json t = torch->description();
      t["transformers"] = transformers_version;
      const std::string described = dump_json(t);
      std::cout << ",\"torch\":" << described.substr(0, described.size() - 1) << "," << theirs.json(tokens, decode_tokens)
                << ",\"compiled\":";
      if (compile_seconds)
        std::cout << "{" << compiled.json(tokens, decode_tokens) << ",\"first_run_s\":" << json_number(*compile_seconds)
                  << ",\"graphs_compiled_while_timed\":" << graphs_compiled << ",\"tokens_agree\":" << agree_compiled
                  << "}";
      else
        std::cout << "null,\"compiled_note\":\"" << json_escape(compiled_note) << "\"";
      std::cout << "},\"ratio\":" << json_number(ours.tokens_per_s(tokens) / theirs.tokens_per_s(tokens))
                << ",\"ratio_decode\":" << ratio_json(decode_ratio(theirs))
                << ",\"ratio_compiled\":"
                << (compile_seconds ? json_number(ours.tokens_per_s(tokens) / compiled.tokens_per_s(tokens)) : "null")
                << ",\"ratio_decode_compiled\":"
                << (compile_seconds ? ratio_json(decode_ratio(compiled)) : "null")
                << ",\"tokens_agree\":" << agree << ",\"tokens_compared\":" << tokens;
    } else {
      std::cout << ",\"torch\":null,\"ratio\":null,\"ratio_decode\":null,\"ratio_compiled\":null,"
                   "\"ratio_decode_compiled\":null";
      if (!torch_note.empty()) std::cout << ",\"note\":\"" << json_escape(torch_note) << "\"";
    }
    std::cout << "}\n";
    return 0;
  }

  std::printf("greedy generation: %s, %s, %lld params, %s on %s; batch %lld x prompt %lld tokens, %lld new tokens "
              "each\n",
              source.c_str(), config.model_type.c_str(), static_cast<long long>(params),
              std::string(dtype_name(dtype)).c_str(), to_string(device).c_str(), static_cast<long long>(batch),
              static_cast<long long>(prompt_len), static_cast<long long>(new_tokens));
  std::printf("%s\n", host_line(threads).c_str());
  std::printf("median of %d runs of each length after one untimed (compiled: two of %lld tokens)", repeats,
              static_cast<long long>(new_tokens));
  if (torch) {
    std::printf(", taking turns %lld ms apart\n%s, transformers %s", static_cast<long long>(kSettle.count()),
                torch->describe().c_str(), transformers_version.c_str());
    if (compile_seconds)
      std::printf("\ncompiled: a static cache, decoding steps under torch.compile; its first run %.1f s (compiling)",
                  *compile_seconds);
    else
      std::printf("\ntransformers compiled not timed: %s", compiled_note.c_str());
  }
  std::printf("\n\n%-22s %12s %14s %10s %12s\n", "", "tokens/s", "decode tok/s", "run ms", "prefill ms");
  auto row = [&](const char* name, const Side& side) {
    char decode[32] = "n/a";
    if (side.decode_seconds() > 0) std::snprintf(decode, sizeof decode, "%.1f", side.decode_tokens_per_s(decode_tokens));
    std::printf("%-22s %12.1f %14s %10.1f %12.1f\n", name, side.tokens_per_s(tokens), decode, side.full_ms(),
                side.prefill_ms());
  };
  row("cotan", ours);
  if (torch) {
    row("transformers eager", theirs);
    if (compile_seconds) row("transformers compiled", compiled);
    std::printf("\nratio (cotan / transformers): eager %.2fx tokens/s, %s decode",
                ours.tokens_per_s(tokens) / theirs.tokens_per_s(tokens), ratio_text(decode_ratio(theirs)).c_str());
    if (compile_seconds)
      std::printf("; compiled %.2fx tokens/s, %s decode", ours.tokens_per_s(tokens) / compiled.tokens_per_s(tokens),
                  ratio_text(decode_ratio(compiled)).c_str());
    std::printf("\nsame weights and prompts: %lld of %lld greedy tokens agree with eager", static_cast<long long>(agree),
                static_cast<long long>(tokens));
    if (compile_seconds) std::printf(", %lld with compiled", static_cast<long long>(agree_compiled));
    std::printf(" (each row up to its first difference)\n");
    if (graphs_compiled > 0)
      std::printf("note: torch.compile compiled %lld graphs during timed runs, whose times include compiling\n",
                  static_cast<long long>(graphs_compiled));
  } else {
    std::printf("\ntransformers not timed%s%s\n", torch_note.empty() ? " (--no-torch)" : ": ", torch_note.c_str());
  }
  return 0;
}

}  // namespace cotan::app
