// cotan plan: the memory per GPU and the time of a distillation recipe, before it runs
// (study/plan.hpp has the model; docs/recipes.md#planning).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <iostream>
#include <optional>

#include "app/commands.hpp"
#include "app/distill_options.hpp"
#include "app/options.hpp"
#include "nn/model.hpp"
#include "study/plan.hpp"
#include "util/json.hpp"

namespace cotan::app {

namespace {

namespace fs = std::filesystem;

constexpr double kGiB = 1024.0 * 1024 * 1024;
// The most memory --gpu-memory may give one GPU: 1 PiB, a thousand times today's largest.
constexpr double kMaxGpuMemory = kGiB * 1024 * 1024;

// "80GiB", "80GB", "81920MiB", "1.5TiB" or a number of bytes.
double parse_size(const std::string& option, const std::string& text) {
  size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  std::string unit = text.substr(used);
  for (char& ch : unit) ch = char(std::tolower(static_cast<unsigned char>(ch)));
  const std::pair<const char*, double> units[] = {{"", 1},       {"b", 1},           {"kib", 1024.0},
                                                  {"mib", 1024.0 * 1024}, {"gib", kGiB}, {"tib", kGiB * 1024},
                                                  {"kb", 1e3},   {"mb", 1e6},         {"gb", 1e9},
                                                  {"tb", 1e12}};
  for (const auto& [name, scale] : units) {
    if (used == 0 || unit != name || !std::isfinite(value) || value <= 0) continue;
    if (value * scale > kMaxGpuMemory)
      fail("option", "--", option, " ", text, ": above 1 PiB, more than any GPU holds");
    return value * scale;
  }
  fail("option", "--", option, " ", text, ": expected a size such as 80GiB, 80GB or 81920MiB");
}

// a * b, or an error naming what overflows int64.
int64_t checked_product(int64_t a, int64_t b, const std::string& what) {
  int64_t product = 0;
  if (__builtin_mul_overflow(a, b, &product)) fail("plan", what, " (", a, " x ", b, ") is too large to plan");
  return product;
}

// The largest divisor of n (> 0) that is at most `limit`, 0 when limit < 1: the divisors come in
// pairs (d, n / d) with d <= sqrt(n), so sqrt(n) trials at most.
int64_t largest_divisor_at_most(int64_t n, int64_t limit) {
  int64_t best = 0;
  for (int64_t d = 1; d <= n / d; ++d) {
    if (n % d != 0) continue;
    if (d <= limit) best = std::max(best, d);
    if (n / d <= limit) best = std::max(best, n / d);
  }
  return best;
}

// In GiB, or MiB and KiB for what is below one.
std::string gib(double bytes) {
  char text[32];
  if (bytes >= kGiB || bytes == 0) std::snprintf(text, sizeof text, "%.2f GiB", bytes / kGiB);
  else if (bytes >= 1024 * 1024) std::snprintf(text, sizeof text, "%.2f MiB", bytes / (1024 * 1024));
  else std::snprintf(text, sizeof text, "%.2f KiB", bytes / 1024);
  return text;
}

std::string grouped(double v) {
  std::string digits = cat(int64_t(std::llround(v))), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

std::string hours(double seconds) {
  char text[32];
  if (seconds < 120) std::snprintf(text, sizeof text, "%.1f s", seconds);
  else if (seconds < 7200) std::snprintf(text, sizeof text, "%.1f min", seconds / 60);
  else std::snprintf(text, sizeof text, "%.1f h", seconds / 3600);
  return text;
}

struct PlanOptions {
  int64_t gpus = 1, zero = 0, top_k = 64;
  std::string gpu_memory = "80GiB";
  double mfu = 0.4, peak_tflops = 0, headroom = 0.1;
};

// The largest micro-batch b in [1, limit] whose plan, inputs(b), fits `usable` (0: none).
int64_t largest_fitting(const std::function<study::PlanInputs(int64_t)>& inputs, double usable, int64_t limit) {
  int64_t lo = 0, hi = limit;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo + 1) / 2;
    if (study::plan_memory(inputs(mid)).peak <= usable) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

}  // namespace

int cmd_plan(const Args& args) {
  PlanOptions p;
  const auto more = [&p](po::options_description& opts) {
    po::options_description plan("cotan plan --recipe FILE [options]: the memory per GPU and the time of a distillation");
    plan.add_options()("gpus", po::value(&p.gpus)->default_value(p.gpus), "data-parallel GPUs")(
        "gpu-memory", po::value(&p.gpu_memory)->default_value(p.gpu_memory), "memory of one GPU: 80GiB, 141GB, ...")(
        "zero", po::value(&p.zero)->default_value(p.zero), "0: every GPU holds the AdamW moments; 1: sharded over the GPUs")(
        "checkpoint-layers", "recompute each layer in the backward pass instead of keeping its values")(
        "headroom", po::value(&p.headroom)->default_value(p.headroom, shown(p.headroom)),
        "fraction of each GPU's memory kept free (CUDA context, fragmentation)")(
        "mfu", po::value(&p.mfu)->default_value(p.mfu, shown(p.mfu)), "model FLOPs utilisation for the time estimate")(
        "peak-tflops", po::value(&p.peak_tflops)->value_name("F"),
        "one GPU's peak (default: H100/H200 dense, 989 for bf16, 495 for f32 with --tf32, 67 for f32)")(
        "top-k", po::value(&p.top_k)->default_value(p.top_k), "with --teacher-logits: the targets' k")(
        "json", "print JSON");
    opts.add(plan);
  };
  DistilledOptions d = parse_distill_options(args, "plan", more, false);
  if (d.vm.count("help")) {
    std::cout << *d.opts << "\nThe recipe's keys (or the same options on the command line) are those of cotan distill.\n";
    return 0;
  }
  const study::StudyConfig& s = *d.study;
  const po::variables_map& vm = d.vm;
  try {
    check_integer("gpus", p.gpus, 1, 1 << 20);
    check_integer("zero", p.zero, 0, 1);
    check_integer("top-k", p.top_k, 1, int64_t(1) << 24);
    check_number("headroom", p.headroom, 0, 1);
    if (p.headroom == 1) fail("option", "--headroom 1 leaves no memory");
    check_number("mfu", p.mfu, 0, 1, true);
    if (vm.count("peak-tflops")) check_number("peak-tflops", p.peak_tflops, 0, 1e9, true);
  } catch (const std::exception& e) {
    d.expanded.rethrow(e);
  }
  const double gpu_memory = parse_size("gpu-memory", p.gpu_memory);
  const double usable = gpu_memory * (1 - p.headroom);
  const DType compute = s.train.compute_dtype;
  if (!vm.count("peak-tflops")) p.peak_tflops = compute == DType::bf16 ? 989 : s.train.tf32 ? 495 : 67;

  // The models: the student's config, the teacher's from its directory when it is there, else
  // from --teacher-config (a recipe names the model its download should hold).
  const nn::ModelConfig student = nn::load_config(s.student);
  std::optional<nn::ModelConfig> teacher;
  std::string teacher_source;
  const bool offline = !s.teacher_logits.empty();
  if (!offline) {
    std::error_code ec;
    const bool present = fs::exists(s.teacher, ec);
    if (present || !s.teacher_config) {
      try {
        teacher = nn::load_config(s.teacher);
      } catch (const Error& e) {
        fail("plan", "--teacher ", s.teacher, ": ", e.what(),
             "; give --teacher-config (a preset or config.json) to plan without the teacher's files");
      }
      teacher_source = s.teacher;
    } else {
      teacher = *s.teacher_config;
      teacher_source = cat(s.teacher, " (not there: its --teacher-config)");
    }
  }
  // The configs' contexts bound seq_len, as in a run (train::check_inputs).
  using Context = std::pair<const char*, const nn::ModelConfig*>;
  for (const auto& [who, config] : {Context{"student", &student}, Context{"teacher", teacher ? &*teacher : nullptr}}) {
    if (!config || s.train.allow_longer_context || s.train.seq_len <= config->max_position_embeddings) continue;
    fail("plan", "--seq-len ", s.train.seq_len, " is above the ", who, "'s max_position_embeddings ",
         config->max_position_embeddings, " (pass --allow-longer-context to plan longer sequences anyway)");
  }
  const int64_t global_batch = checked_product(s.train.batch_size, s.train.grad_accum, "--batch-size x --grad-accum");
  checked_product(global_batch, s.train.seq_len, "the tokens of a step, global batch x --seq-len");
  const bool checkpointing = vm.count("checkpoint-layers") > 0;

  auto inputs = [&](const study::StudyVariant& v, int64_t micro, bool ckpt) {
    study::PlanInputs in;
    in.student = student;
    in.student.attention = v.attention;
    in.teacher = teacher;
    in.top_k = offline ? p.top_k : 0;
    in.seq_len = s.train.seq_len;
    in.micro_batch = micro;
    const int64_t per_step = checked_product(micro, p.gpus, "micro-batch x --gpus");
    in.grad_accum = global_batch / per_step + (global_batch % per_step != 0);
    in.compute = compute;
    in.fused_head = s.train.fused_head;
    in.checkpoint_layers = ckpt;
    in.devices = p.gpus;
    in.zero = int(p.zero);
    return in;
  };
  // The student with the largest footprint sets the numbers; the others are listed.
  const int64_t micro = s.train.batch_size;
  size_t worst = 0;
  std::vector<study::MemoryPlan> by_variant;
  for (size_t i = 0; i < s.variants.size(); ++i) {
    by_variant.push_back(study::plan_memory(inputs(s.variants[i], micro, checkpointing)));
    if (by_variant[i].peak > by_variant[worst].peak) worst = i;
  }
  const study::StudyVariant& w = s.variants[worst];
  const study::PlanInputs in = inputs(w, micro, checkpointing);
  const study::MemoryPlan& m = by_variant[worst];
  const study::MemoryPlan other_ckpt = study::plan_memory(inputs(w, micro, !checkpointing));
  const int64_t per_gpu_batch = std::max<int64_t>(1, (global_batch + p.gpus - 1) / p.gpus);
  // Each candidate with its own accumulation steps (a micro-batch that covers the per-GPU batch
  // needs no running sum of the gradients).
  const int64_t fits = largest_fitting([&](int64_t b) { return inputs(w, b, checkpointing); }, usable, per_gpu_batch);
  const int64_t fits_ckpt = largest_fitting([&](int64_t b) { return inputs(w, b, true); }, usable, per_gpu_batch);
  // The largest fitting micro-batch that divides the per-GPU batch: the global batch exactly.
  const int64_t exact = global_batch % p.gpus == 0 ? largest_divisor_at_most(per_gpu_batch, fits) : 0;
  const study::StepPlan step = study::plan_step(in, global_batch);
  const double step_s = step.flops / (double(p.gpus) * p.peak_tflops * 1e12 * p.mfu);
  const double student_params = double(nn::CausalLM(in.student).num_params());
  const double teacher_params = teacher ? double(nn::CausalLM(*teacher).num_params()) : 0;

  if (vm.count("json")) {
    Json j = Json::object();
    j["recipe"] = d.expanded.recipe ? d.expanded.recipe->source : "";
    j["student"] = {{"config", s.student}, {"parameters", student_params}, {"variant", w.name}};
    if (teacher) j["teacher"] = {{"config", teacher_source}, {"parameters", teacher_params}};
    else j["teacher"] = nullptr;
    j["gpus"] = p.gpus;
    j["gpu_memory_bytes"] = gpu_memory;
    j["usable_bytes"] = usable;
    j["zero"] = p.zero;
    j["checkpoint_layers"] = checkpointing;
    j["global_batch"] = global_batch;
    j["seq_len"] = s.train.seq_len;
    j["micro_batch"] = micro;
    j["grad_accum"] = in.grad_accum;
    j["memory"] = {{"weights", m.weights},         {"compute_weights", m.compute_weights},
                   {"gradients", m.gradients},     {"optimizer", m.optimizer},
                   {"teacher", m.teacher},         {"targets", m.targets},
                   {"activations", m.activations}, {"loss", m.loss},
                   {"transient", m.transient},     {"peak_moment", m.peak_moment},
                   {"peak", m.peak},               {"fits", m.peak <= usable}};
    j[checkpointing ? "activations_without_checkpointing" : "activations_with_checkpointing"] = other_ckpt.activations;
    Json peaks = Json::object();
    for (size_t i = 0; i < s.variants.size(); ++i) peaks[s.variants[i].name] = by_variant[i].peak;
    j["peak_by_student"] = peaks;
    j["largest_micro_batch"] = fits;
    j["largest_micro_batch_with_checkpointing"] = fits_ckpt;
    j["largest_exact_micro_batch"] = exact;
    j["flops_per_step"] = step.flops;
    j["tokens_per_step"] = step.tokens;
    j["mfu"] = p.mfu;
    j["peak_tflops"] = p.peak_tflops;
    j["seconds_per_step"] = step_s;
    j["seconds_per_student"] = step_s * double(s.student_steps);
    std::cout << dump_json(j, 2) << "\n";
    return 0;
  }

  std::cout << "plan: " << (d.expanded.recipe ? d.expanded.recipe->source : "the command line's study") << "\n"
            << "  student " << s.student << ": " << grouped(student_params) << " parameters (" << w.name
            << (s.variants.size() > 1 ? cat(", the largest of ", s.variants.size(), " students") : std::string()) << ")\n";
  if (teacher) std::cout << "  teacher " << teacher_source << ": " << grouped(teacher_params) << " parameters\n";
  else std::cout << "  teacher: none (offline top-" << p.top_k << " targets from " << s.teacher_logits << ")\n";
  std::cout << "  global batch " << global_batch << " sequences x " << s.train.seq_len << " tokens = "
            << grouped(step.tokens) << " tokens per step; " << dtype_name(compute) << " compute, "
            << dtype_name(in.master) << " master weights\n"
            << "  " << p.gpus << " GPU" << (p.gpus > 1 ? "s" : "") << " x " << gib(gpu_memory) << " (" << gib(usable)
            << " usable, " << shown(p.headroom * 100) << "% headroom), ZeRO-" << p.zero
            << (checkpointing ? ", activation checkpointing" : "") << "\n\n"
            << "per GPU at micro-batch " << micro << " (" << in.grad_accum << " accumulation step"
            << (in.grad_accum > 1 ? "s" : "") << "):\n";
  auto row = [](const std::string& what, double bytes, const std::string& note = "") {
    std::printf("  %-40s %12s%s\n", what.c_str(), gib(bytes).c_str(), note.c_str());
  };
  row(cat("weights (", dtype_name(in.master), ")"), m.weights);
  if (m.compute_weights > 0) row(cat("weights (", dtype_name(compute), " copy in a step)"), m.compute_weights);
  row(in.grad_accum > 1 ? "gradients (and their running sum)" : "gradients", m.gradients);
  row(p.zero ? cat("AdamW moments (1/", p.gpus, ", ZeRO-1)") : std::string("AdamW moments"), m.optimizer);
  if (teacher) row(cat("teacher weights (", dtype_name(compute), ")"), m.teacher);
  if (m.targets > 0) row("offline targets", m.targets);
  row("activations", m.activations,
      cat("  (", checkpointing ? "without" : "with", " --checkpoint-layers: ", gib(other_ckpt.activations), ")"));
  row("loss chunks", m.loss);
  row(cat("transient at the peak (", m.peak_moment, ")"), m.transient);
  row("peak", m.peak, m.peak <= usable ? "  fits" : cat("  does not fit in ", gib(usable)));
  std::cout << "\npeak by student:";
  for (size_t i = 0; i < s.variants.size(); ++i)
    std::cout << (i ? ", " : " ") << s.variants[i].name << " " << gib(by_variant[i].peak);
  std::cout << "\n";
  const double fixed = m.weights + m.compute_weights + m.gradients + m.optimizer + m.teacher;
  if (fits == 0) {
    std::cout << "no micro-batch fits" << (checkpointing ? "" : " without activation checkpointing");
    if (!checkpointing && fits_ckpt > 0) std::cout << "; with --checkpoint-layers up to " << fits_ckpt << " fit";
    if (fixed > usable)
      std::cout << ": the weights, gradients, moments and teacher alone take " << gib(fixed)
                << (p.zero ? "; more GPUs shard the moments further" : "; --zero 1 shards the moments over the GPUs");
    std::cout << "\n";
  } else {
    const int64_t per_step = fits * p.gpus;  // at most global_batch + p.gpus: no overflow
    const int64_t accum = global_batch / per_step + (global_batch % per_step != 0);
    std::cout << "largest micro-batch that fits: " << fits << " sequences per GPU, " << accum << " accumulation step"
              << (accum > 1 ? "s" : "") << " (" << fits * p.gpus * accum << " sequences per step)";
    if (exact && exact != fits)
      std::cout << "; for exactly " << global_batch << ": " << exact << " per GPU, " << per_gpu_batch / exact << " steps";
    if (!checkpointing && fits_ckpt > fits) std::cout << "; with --checkpoint-layers: " << fits_ckpt;
    std::cout << "\n";
  }
  char flops[32];
  std::snprintf(flops, sizeof flops, "%.3g", step.flops);
  std::cout << "FLOPs per step: " << flops << " (student forward and backward"
            << (checkpointing ? " with recomputation, 4x" : ", 3x") << " its forward pass"
            << (teacher ? ", teacher forward 1x" : "") << ")\n"
            << "time at " << shown(p.mfu * 100) << "% MFU of " << shown(p.peak_tflops) << " TFLOP/s per GPU: "
            << hours(step_s) << " per step, " << hours(step_s * double(s.student_steps)) << " per student ("
            << s.student_steps << " steps), " << hours(step_s * double(s.student_steps * s.seeds) * double(s.variants.size()))
            << " for the " << s.variants.size() * size_t(s.seeds) << " runs\n";
  return 0;
}

}  // namespace cotan::app
