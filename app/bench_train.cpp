// `cotan bench train`: training tokens/s of the tiny student's distillation step, the step of
// `cotan distill` (train::train_step, the body of train::fit's loop; app/bench_step.hpp): the
// frozen tiny teacher's logits under no_grad, the student's forward and backward passes on the
// fused KD loss (fkl, tau 1, kd_ratio 1), global-norm clipping at 1.0 and the AdamW update, f32 on
// the CPU, one fixed random batch, constant lr.
//
// With PyTorch (on by default when the reference's interpreter imports torch; see
// app/torch_reference.hpp for which one), the same step is timed in PyTorch
// (bench/torch_train_reference.py, through torch_reference.py's `serve` mode) with the same
// threads, eager and under torch.compile. Both sides start from cotan's initial weights and batch,
// so their losses must agree step by step: the agreement is printed as a check that they do the
// same work. torch.compile compiles on its first step: --torch-compile-warmup untimed compiled
// steps (3 by default) warm its cache before any is timed. After warm-up, cotan, eager PyTorch
// and compiled PyTorch take turns in blocks of --block steps, with a settling pause (kSettle)
// before each turn; each turn starts with --turn-warmup untimed steps (1 by default), so that
// every timed step follows a step of its own side, back to back as a training loop runs them.
// Timing a turn's first step instead measures a cold start after the other side's step: on a
// 2-core Xeon cotan's steps then took 36-50 ms against 29-31 ms back to back, compiled PyTorch's
// 33-34 against 30. Each side reports the median step time, and the ratios are cotan tokens/s over
// PyTorch's. The median CPU time of a step (the process's, all threads) is printed next to it:
// where the machine has more runnable threads than cores, wall time is mostly time spent
// waiting for one.
//
// PyTorch's OpenMP workers spin while they wait for work. On a shared machine with more runnable
// threads than cores that spinning costs it most of its time (seen here at load 14 on 2 cores:
// 6.6 s a step instead of 0.88 s with OMP_WAIT_POLICY=PASSIVE), while on an idle machine it
// saves a little. With --torch-omp-wait auto (the default) PyTorch runs both ways, in two
// processes: after their warm-up (at least one step), kProbeSteps eager steps each, alternated
// step by step, and the process with the lower median is kept for everything timed after (the
// compiled steps included): the reference at its best on this machine. One step, the first
// especially, is too noisy to decide from; the probe's medians are printed.
#include <algorithm>
#include <boost/program_options.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include "app/bench_step.hpp"
#include "app/bench_util.hpp"
#include "app/commands.hpp"
#include "app/options.hpp"
#include "app/torch_reference.hpp"
#include "nn/model.hpp"
#include "nn/safetensors.hpp"
#include "tensor/error.hpp"
#include "tensor/ops.hpp"
#include "train/trainer.hpp"
#include "util/json.hpp"

namespace cotan::app {

int bench_train(const Args& args);

namespace {

namespace po = boost::program_options;
namespace fs = std::filesystem;

// Eager steps of each OMP_WAIT_POLICY timed to choose between them (--torch-omp-wait auto).
constexpr int kProbeSteps = 5;

// Process CPU seconds, all threads together.
double process_cpu_seconds() {
  timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return double(t.tv_sec) + double(t.tv_nsec) * 1e-9;
}

struct Side {
  std::vector<double> seconds, cpu_seconds, losses;  // per timed step; losses of every step
  double ms() const { return median(seconds) * 1e3; }
  double cpu_ms() const { return median(cpu_seconds) * 1e3; }
  // ,"step_ms":[...] with every timed step, for a look at the spread.
  std::string json_steps() const {
    std::string out = ",\"step_ms\":[";
    for (size_t i = 0; i < seconds.size(); ++i) {
      if (i) out += ',';
      out += json_number(seconds[i] * 1e3);
    }
    return out + "]";
  }
};

}  // namespace

int bench_train(const Args& args) {
  const std::string kind_help = "the student's attention kind: " + nn::attention_kind_names();
  po::options_description options("cotan bench train");
  options.add_options()
      ("help,h", "this message")
      ("json", "print one JSON object instead of a table")
      ("batch-size", po::value<int64_t>()->default_value(BenchStep::kBatchSize), "sequences per step")
      ("seq-len", po::value<int64_t>()->default_value(BenchStep::kSeqLen), "tokens per sequence")
      ("steps", po::value<int>()->default_value(10), "timed steps of each side (the median is reported)")
      ("warmup", po::value<int>()->default_value(2), "untimed steps of each side first")
      ("block", po::value<int>()->default_value(1), "timed steps per turn when cotan and PyTorch alternate")
      ("turn-warmup", po::value<int>()->default_value(1),
       "untimed steps at the start of each turn, so that timed steps run back to back (0: time each turn's "
       "first step, a cold start after the other side's turn)")
      ("attention", po::value<std::string>()->default_value(std::string(nn::name_of(BenchStep::kAttention))),
       kind_help.c_str())
      ("device", po::value<std::string>()->default_value("cpu"), "cpu | cuda | cuda:N (PyTorch: CPU only)")
      ("dtype", po::value<std::string>()->default_value("f32"), "compute dtype: f32 or bf16 (f32 master weights)")
      ("torch", "also time PyTorch (the default when it is installed); fail when it is not")
      ("no-torch", "time cotan alone")
      ("torch-omp-wait", po::value<std::string>()->default_value("auto"),
       "PyTorch's OMP_WAIT_POLICY: inherit (this environment's), passive, or auto (the one with the lower "
       "median over 5 eager steps each, after the warm-up)")
      ("no-torch-compile", "time eager PyTorch only, not torch.compile")
      ("torch-compile-warmup", po::value<int>()->default_value(3),
       "untimed torch.compile steps before timing (the first compiles)");
  add_torch_options(options);
  AffineOptions affine;
  add_affine_options(options, affine);
  po::variables_map vm = parse_options(args, options);
  if (vm.count("help")) {
    std::cout << options << "\n";
    return 0;
  }
  check_integers(vm, {{"batch-size", 1, 1 << 16}, {"seq-len", 1, 1 << 20}, {"steps", 1, 100000},
                      {"warmup", 0, 100000}, {"block", 1, 100000}, {"turn-warmup", 0, 1000},
                      {"torch-compile-warmup", 1, 1000}});
  const bool json = vm.count("json") > 0;
  const int64_t batch = vm["batch-size"].as<int64_t>(), seq_len = vm["seq-len"].as<int64_t>();
  const int steps = vm["steps"].as<int>(), warmup = vm["warmup"].as<int>(), block = vm["block"].as<int>();
  const int turn_warmup = vm["turn-warmup"].as<int>();
  check(batch >= 1 && seq_len >= 1, "bench train", "--batch-size and --seq-len must be positive, got ", batch, " and ",
        seq_len);
  check(steps >= 1 && warmup >= 0 && block >= 1, "bench train",
        "--steps and --block must be positive and --warmup not negative");
  check(!(vm.count("torch") && vm.count("no-torch")), "bench train", "--torch and --no-torch exclude each other");
  const std::string omp_wait = vm["torch-omp-wait"].as<std::string>();
  check(omp_wait == "auto" || omp_wait == "inherit" || omp_wait == "passive", "bench train",
        "--torch-omp-wait is auto, inherit or passive, not '", omp_wait, "'");
  const int threads = num_threads();
  const Device device = device_option(vm["device"].as<std::string>());
  check(!(vm.count("torch") && !device.is_cpu()), "bench train",
        "--torch times PyTorch on the CPU; it compares with --device cpu only");
  const DType compute = parse_dtype(vm["dtype"].as<std::string>());
  check(compute == DType::f32 || compute == DType::bf16, "bench train", "--dtype takes f32 or bf16, got ", compute);
  check(!(vm.count("torch") && compute != DType::f32), "bench train", "--torch compares with --dtype f32 only");

  nn::ModelConfig student_config = nn::preset(BenchStep::kStudent);
  try {
    student_config.attention.kind = nn::parse_attention_kind(vm["attention"].as<std::string>());
  } catch (const Error& e) {
    fail("option", "--attention ", vm["attention"].as<std::string>(), ": ",
         std::string_view(e.what()).substr(std::string_view(e.what()).find("] ") + 2));
  }
  apply_affine_options(affine, student_config.attention);
  check_affine_options_apply(affine, student_config.attention.kind);
  const bool full_n = nn::is_affine(student_config.attention.kind) && student_config.attention.affine_n == nn::AffineN::full;
  check(!(vm.count("torch") && full_n), "bench train", "--torch compares with --affine-n visible only");
  check(seq_len <= student_config.max_position_embeddings, "bench train", "--seq-len ", seq_len, " exceeds the ",
        student_config.max_position_embeddings, " positions of ", BenchStep::kStudent);
  const std::string kind(nn::name_of(student_config.attention.kind));
  const std::string phi(nn::name_of(student_config.attention.phi));

  // The distillation step exactly as `cotan distill` runs it, on one fixed batch.
  BenchStep step(student_config, batch, seq_len, device, compute);

  // PyTorch, from the same weights and batch (written before cotan's first step changes them).
  // One PyTorch process per OMP_WAIT_POLICY tried; after the probe only the faster is kept.
  struct Candidate {
    std::string omp_wait;
    std::unique_ptr<TorchReference> process;
    std::vector<double> probe_seconds;
  };
  std::vector<Candidate> candidates;
  std::string torch_note, compiled_note;
  std::optional<TempDir> weights_dir;
  Json torch_request = Json::object();
  const bool compile = vm.count("no-torch-compile") == 0;
  const int compile_warmup = vm["torch-compile-warmup"].as<int>();
  if (!device.is_cpu() || compute != DType::f32) {
    torch_note = "PyTorch is timed with --device cpu --dtype f32 only";
  } else if (full_n) {
    torch_note = "PyTorch's reference computes --affine-n visible only";
  } else if (!vm.count("no-torch")) {
    try {
      auto script = find_torch_script(vm["torch-script"].as<std::string>());
      if (!script) fail("bench", "--torch: cannot find bench/torch_reference.py; pass --torch-script PATH");
      const TorchPython python = find_torch_python(vm["torch-python"].as<std::string>());
      if (omp_wait == "inherit" || omp_wait == "auto")
        candidates.push_back({"inherit", std::make_unique<TorchReference>(*script, python, threads), {}});
      if (omp_wait == "passive" || omp_wait == "auto")
        candidates.push_back({"passive",
                              std::make_unique<TorchReference>(*script, python, threads, Args{"OMP_WAIT_POLICY=PASSIVE"}),
                              {}});
      weights_dir.emplace("cotan-bench-train");
      const fs::path dir = weights_dir->path;
      save_safetensors((dir / "teacher.safetensors").string(), step.teacher_params);
      save_safetensors((dir / "student.safetensors").string(), step.params);
      save_safetensors((dir / "batch.safetensors").string(), {{"inputs", step.batch.inputs}});
      Json weights = Json::object();
      weights["teacher"] = (dir / "teacher.safetensors").string();
      weights["student"] = (dir / "student.safetensors").string();
      weights["batch"] = (dir / "batch.safetensors").string();
      torch_request["op"] = "train";
      torch_request["kind"] = kind;
      torch_request["phi"] = phi;
      torch_request["batch"] = batch;
      torch_request["seq_len"] = seq_len;
      torch_request["weights"] = weights;
    } catch (const Error& e) {
      if (vm.count("torch")) throw;
      candidates.clear();
      torch_note = e.what();
    }
  }

  Side ours, theirs, compiled;
  auto run_cotan = [&](int n, bool timed) {
    for (int i = 0; i < n; ++i) {
      train::StepRecord record;
      const double cpu_start = process_cpu_seconds();
      const double seconds = seconds_on(device, [&] { record = step.run(); });
      const double cpu = process_cpu_seconds() - cpu_start;
      ours.losses.push_back(record.loss);
      if (timed) {
        ours.seconds.push_back(seconds);
        ours.cpu_seconds.push_back(cpu);
      }
    }
  };
  // n steps of `process` in `mode` (eager or compiled), after the settling pause; their record
  // goes to `side` (losses always, times when `timed`, except those of the first `untimed`
  // steps, which run back to back with the rest in the same request). Returns the reply.
  auto run_torch = [&](TorchReference& process, const char* mode, int n, bool timed, Side& side, int untimed = 0) {
    std::this_thread::sleep_for(kSettle);
    torch_request["steps"] = untimed + n;
    torch_request["mode"] = mode;
    const Json reply = process.request(torch_request);
    for (double loss : TorchReference::numbers(reply, "losses")) side.losses.push_back(loss);
    if (timed) {
      const std::vector<double> seconds = TorchReference::numbers(reply, "seconds"), cpu_seconds = TorchReference::numbers(reply, "cpu_seconds");
      check(seconds.size() == size_t(untimed + n) && cpu_seconds.size() == size_t(untimed + n), "bench train",
            "PyTorch's reply has ", seconds.size(), " step times for ", untimed + n, " steps");
      side.seconds.insert(side.seconds.end(), seconds.begin() + untimed, seconds.end());
      side.cpu_seconds.insert(side.cpu_seconds.end(), cpu_seconds.begin() + untimed, cpu_seconds.end());
    }
    return reply;
  };

  if (warmup > 0) run_cotan(warmup, false);
  TorchReference* torch = nullptr;  // the candidate timed
  std::string torch_omp_wait;
  std::vector<std::pair<std::string, double>> probe;  // policy, median probe step
  if (!candidates.empty()) {
    const bool probing = candidates.size() > 1;
    std::vector<Side> sides(candidates.size());
    for (size_t c = 0; c < candidates.size(); ++c) {
      const int n = probing ? std::max(warmup, 1) : warmup;
      if (n > 0) run_torch(*candidates[c].process, "eager", n, false, sides[c]);
    }
    if (probing) {
      for (int step = 0; step < kProbeSteps; ++step)
        for (size_t c = 0; c < candidates.size(); ++c) {
          Side probe_side;
          run_torch(*candidates[c].process, "eager", 1, true, probe_side);
          sides[c].losses.push_back(probe_side.losses[0]);
          candidates[c].probe_seconds.push_back(probe_side.seconds[0]);
        }
      for (const Candidate& c : candidates) probe.emplace_back(c.omp_wait, median(c.probe_seconds));
    }
    size_t best = 0;
    for (size_t c = 1; c < probe.size(); ++c)
      if (probe[c].second < probe[best].second) best = c;
    theirs.losses = sides[best].losses;
    std::rotate(candidates.begin(), candidates.begin() + long(best), candidates.begin() + long(best) + 1);
    candidates.resize(1);  // the other process ends now
    torch = candidates[0].process.get();
    torch_omp_wait = candidates[0].omp_wait;
  }
  // torch.compile's warm-up: the first step compiles (and is reported), the rest fill the
  // caches, so that no timed step compiles.
  std::optional<double> compile_seconds;
  bool timing_compiled = false;
  if (torch && compile) {
    try {
      const Json reply = run_torch(*torch, "compiled", compile_warmup, false, compiled);
      compile_seconds = TorchReference::numbers(reply, "seconds").front();
      timing_compiled = true;
    } catch (const Error& e) {
      compiled_note = e.what();
    }
  } else if (torch) {
    compiled_note = "--no-torch-compile";
  }
  for (int done = 0; done < steps; done += block) {
    const int n = std::min(block, steps - done);
    // Alone, cotan's steps run back to back anyway.
    const int untimed = torch ? turn_warmup : 0;
    if (torch) std::this_thread::sleep_for(kSettle);
    run_cotan(untimed, false);
    run_cotan(n, true);
    if (torch) run_torch(*torch, "eager", n, true, theirs, untimed);
    if (timing_compiled) run_torch(*torch, "compiled", n, true, compiled, untimed);
  }

  const double tokens_per_step = double(batch * seq_len);
  const double cotan_ms = ours.ms(), cotan_tps = tokens_per_step / (cotan_ms * 1e-3);
  auto tokens_per_s = [&](const Side& side) { return tokens_per_step / (side.ms() * 1e-3); };
  // The largest relative difference of cotan's losses and PyTorch's (eager and compiled) over
  // all steps, warm-up included: each side's steps run in order from the same weights.
  double loss_diff = 0;
  size_t compared = 0;
  auto compare = [&](const Side& side) {
    const size_t n = std::min(ours.losses.size(), side.losses.size());
    for (size_t i = 0; i < n; ++i)
      loss_diff = std::max(loss_diff, std::abs(ours.losses[i] - side.losses[i]) / std::abs(side.losses[i]));
    compared = std::max(compared, n);
  };
  if (torch) compare(theirs);
  if (timing_compiled) compare(compiled);
  const int64_t student_params = step.student.num_params(), teacher_params_count = step.teacher.num_params();

  if (json) {
    std::cout << "{\"kind\":\"" << kind << "\"";
    if (nn::is_affine(student_config.attention.kind))
      std::cout << ",\"phi\":\"" << phi << "\",\"affine_n\":\"" << nn::name_of(student_config.attention.affine_n) << "\"";
    std::cout << ",\"teacher\":\"" << BenchStep::kTeacher << "\",\"student\":\"" << BenchStep::kStudent
              << "\",\"teacher_params\":" << teacher_params_count << ",\"student_params\":" << student_params << ",\"batch\":" << batch
              << ",\"seq_len\":" << seq_len << ",\"dtype\":\"" << dtype_name(compute) << "\",\"device\":\"" << to_string(device)
              << "\",\"threads\":" << threads << ",\"steps\":" << steps
              << ",\"warmup\":" << warmup << ",\"block\":" << block
              << ",\"turn_warmup\":" << (torch ? turn_warmup : 0) << "," << host_json(threads)
              << ",\"cotan\":{\"ms\":" << json_number(cotan_ms)
              << ",\"cpu_ms\":" << json_number(ours.cpu_ms()) << ",\"tokens_per_s\":" << json_number(cotan_tps)
              << ",\"first_loss\":" << json_number(ours.losses[0]) << ours.json_steps()
              << "}";
    if (torch) {
      Json t = torch->description();
      t["omp_wait_policy"] = torch_omp_wait;
      if (!probe.empty()) {
        Json medians = Json::object();
        for (const auto& [policy, seconds] : probe) medians[policy] = std::stod(json_number(seconds * 1e3));
        t["probe_steps"] = kProbeSteps;
        t["probe_median_ms"] = medians;
      }
      std::cout << ",\"torch\":" << dump_json(t).substr(0, dump_json(t).size() - 1) << ",\"ms\":" << json_number(theirs.ms())
                << ",\"cpu_ms\":" << json_number(theirs.cpu_ms()) << ",\"tokens_per_s\":" << json_number(tokens_per_s(theirs))
                << ",\"first_loss\":" << json_number(theirs.losses[0]) << theirs.json_steps() << ",\"compiled\":";
      if (timing_compiled)
        std::cout << "{\"ms\":" << json_number(compiled.ms()) << ",\"cpu_ms\":" << json_number(compiled.cpu_ms())
                  << ",\"tokens_per_s\":" << json_number(tokens_per_s(compiled))
                  << ",\"first_loss\":" << json_number(compiled.losses[0]) << ",\"warmup\":" << compile_warmup
                  << ",\"first_step_s\":" << json_number(*compile_seconds) << compiled.json_steps() << "}";
      else
        std::cout << "null,\"compiled_note\":\"" << json_escape(compiled_note) << "\"";
      std::cout << "},\"ratio\":" << json_number(cotan_tps / tokens_per_s(theirs)) << ",\"ratio_compiled\":"
                << (timing_compiled ? json_number(cotan_tps / tokens_per_s(compiled)) : "null")
                << ",\"max_rel_loss_diff\":" << json_number(loss_diff);
    } else {
      std::cout << ",\"torch\":null,\"ratio\":null,\"ratio_compiled\":null";
      if (!torch_note.empty()) std::cout << ",\"note\":\"" << json_escape(torch_note) << "\"";
    }
    std::cout << "}\n";
    return 0;
  }

  std::printf("distillation step: %s (%lld params, frozen, no_grad) -> %s (%lld params, attention %s%s)\n",
              BenchStep::kTeacher, static_cast<long long>(teacher_params_count), BenchStep::kStudent, static_cast<long long>(student_params),
              kind.c_str(),
              nn::is_affine(student_config.attention.kind)
                  ? (", " + phi + (full_n ? ", affine_n full" : "")).c_str()
                  : "");
  std::printf("fkl tau 1, clip 1.0, AdamW lr %g; batch %lld x seq %lld = %.0f tokens/step, %s, on %s, %d threads\n",
              BenchStep::kLearningRate, static_cast<long long>(batch), static_cast<long long>(seq_len), tokens_per_step,
              std::string(dtype_name(compute)).c_str(), to_string(device).c_str(), threads);
  std::printf("%s\n", host_line(threads).c_str());
  std::printf("median of %d steps after %d warm-up steps", steps, warmup);
  if (torch) {
    std::printf("; taking turns in blocks of %d timed steps after %d untimed, %lld ms apart\n%s", block, turn_warmup,
                static_cast<long long>(kSettle.count()), torch->describe().c_str());
    std::printf("\nPyTorch's OMP_WAIT_POLICY: %s", torch_omp_wait.c_str());
    if (!probe.empty()) {
      std::printf(" (the lower median over %d eager steps each:", kProbeSteps);
      for (const auto& [policy, seconds] : probe) std::printf(" %s %.1f ms", policy.c_str(), seconds * 1e3);
      std::printf(")");
    }
    if (timing_compiled)
      std::printf("\ntorch.compile: first step %.1f s (compiling), %d untimed steps before timing", *compile_seconds,
                  compile_warmup);
    else
      std::printf("\ntorch.compile not timed: %s", compiled_note.c_str());
  }
  std::printf("\n\n%-15s %12s %10s %12s\n", "", "tokens/s", "step ms", "step cpu ms");
  std::printf("%-15s %12.0f %10.1f %12.1f\n", "cotan", cotan_tps, cotan_ms, ours.cpu_ms());
  if (torch) {
    std::printf("%-15s %12.0f %10.1f %12.1f\n", "torch eager", tokens_per_s(theirs), theirs.ms(), theirs.cpu_ms());
    if (timing_compiled)
      std::printf("%-15s %12.0f %10.1f %12.1f\n", "torch compiled", tokens_per_s(compiled), compiled.ms(),
                  compiled.cpu_ms());
    std::printf("\nratio (cotan / torch tokens/s): %.2fx eager", cotan_tps / tokens_per_s(theirs));
    if (timing_compiled) std::printf(", %.2fx compiled", cotan_tps / tokens_per_s(compiled));
    std::printf("\nsame weights and batch: first loss %.6f (cotan) and %.6f (torch), largest relative loss difference "
                "over %zu steps %.2g\n",
                ours.losses[0], theirs.losses[0], compared, loss_diff);
  } else {
    std::printf("\nPyTorch not timed%s%s\n", torch_note.empty() ? " (--no-torch)" : ": ", torch_note.c_str());
  }
  return 0;
}

}  // namespace cotan::app
