// `cotan bench kd-loss`: the fused distillation loss (train::distill_loss) against its composed
// fallback (train::distill_loss_composed), f32 on the CPU. Each variant is timed as the loss plus
// its gradient with respect to the student logits; the variants are run alternately, after a
// warm-up, and the median of each is reported with the ratio composed / fused.
//
// Variants: "fused" donates the student logits (std::move, as the trainer does with the model's
// logits): the gradient is written over them. "fused-kept" is the same kernel with the logits
// kept by the caller: the gradient is one new [N, V] buffer. "composed" is the engine's
// differentiation of primitive ops. Every run gets a fresh copy of the same logits, made before
// it is timed or measured (in training the LM head makes them).
//
// Peak extra memory: the highest resident set size (VmHWM) reached while one loss + gradient
// runs, minus the resident set size just before it. Before each measurement the allocator's block
// cache is emptied and malloc trimmed, so memory freed earlier is not resident, and the kernel's
// high-water mark is reset (writing 5 to /proc/self/clear_refs). Inputs exist before and are not
// counted; the gradient, which the caller keeps, is. This counts what the process really holds,
// cached blocks included: the footprint a training step would see.
#include <malloc.h>

#include <algorithm>
#include <limits>
#include <boost/program_options.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "app/bench_util.hpp"
#include "app/commands.hpp"
#include "app/options.hpp"
#include "autograd/autograd.hpp"
#include "cotan_config.h"
#include "tensor/cpu/memory_cache.hpp"
#include "tensor/error.hpp"
#include "tensor/ops.hpp"
#include "train/losses.hpp"
#include "train/teacher_topk.hpp"

#ifdef COTAN_HAVE_CUDA
#include "cuda/allocator.hpp"
#endif

namespace cotan::app {

int bench_kd_loss(const Args& args);

namespace {

namespace po = boost::program_options;

constexpr double kMiB = 1024.0 * 1024.0;

// A field of /proc/self/status in bytes ("VmRSS", "VmHWM"), or nothing when it cannot be read.
std::optional<double> status_bytes(const std::string& field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(field + ":", 0) == 0) return std::stod(line.substr(field.size() + 1)) * 1024.0;
  return std::nullopt;
}

// Resets the resident set's high-water mark to the current resident set size.
bool reset_peak_rss() {
  std::ofstream out("/proc/self/clear_refs");
  out << "5";
  out.flush();
  return bool(out);
}

// The peak resident memory `run` adds, in bytes; nothing where the peak cannot be measured.
std::optional<double> peak_extra_bytes(const std::function<void()>& run) {
  cpu::release_cached_memory();
  malloc_trim(0);
  const auto before = status_bytes("VmRSS");
  if (!before || !reset_peak_rss()) return std::nullopt;
  run();
  const auto peak = status_bytes("VmHWM");
  if (!peak) return std::nullopt;
  return std::max(0.0, *peak - *before);
}

// The peak memory `run` adds on `device`: the caching allocator's peak on a GPU, the resident set
// on the CPU (and for the emulator, whose device memory is host memory).
std::optional<double> peak_extra_bytes_on(Device device, const std::function<void()>& run) {
#ifdef COTAN_HAVE_CUDA
  if (device.is_cuda() && backend(device).name() == "cuda") {  // not the emulator
    backend(device).synchronize();
    cuda::reset_peak(device.index);
    const double before = double(cuda::allocator_stats(device.index).in_use_bytes);
    run();
    backend(device).synchronize();
    return std::max(0.0, double(cuda::allocator_stats(device.index).peak_in_use_bytes) - before);
  }
#endif
  (void)device;
  return peak_extra_bytes(run);
}

enum class Form { donated, kept, composed };

struct Variant {
  const char* name;
  Form form;
  std::vector<double> seconds;
  std::optional<double> peak_bytes;
  Tensor value, grad;  // of the last run
};

std::string json_optional(const std::optional<double>& v, double scale) {
  return v ? json_number(*v / scale) : "null";
}

}  // namespace

// --fused-head: the heads with the loss (see the header).
int bench_head_loss(const po::variables_map& vm, const train::LossConfig& config, Device device) {
  const bool json = vm.count("json") > 0;
  const int64_t tokens = vm["tokens"].defaulted() ? 8192 : vm["tokens"].as<int64_t>();
  const int64_t vocab = vm["vocab"].defaulted() ? 151936 : vm["vocab"].as<int64_t>();
  const int64_t dim = vm["hidden"].as<int64_t>(), chunk = vm["chunk-rows"].as<int64_t>();
  const int repeat = vm["repeat"].as<int>();
  const DType dtype = dtype_option(vm["dtype"].as<std::string>(), "bench kd-loss");
  check(dtype == DType::f32 || dtype == DType::bf16, "--dtype", "bench kd-loss --fused-head takes f32 or bf16, got ",
        dtype);
  Generator gen(0);
  const Tensor hidden = to(cast(randn({tokens, dim}, gen), dtype), device);
  const Tensor head = to(cast(randn({vocab, dim}, gen) * (1.0 / std::sqrt(double(dim))), dtype), device);
  const Tensor teacher_hidden = to(cast(randn({tokens, dim}, gen), dtype), device);
  const Tensor teacher_head = to(cast(randn({vocab, dim}, gen) * (1.0 / std::sqrt(double(dim))), dtype), device);
  const Tensor targets = to(randint({tokens}, 0, vocab, gen), device);

  struct Entry {
    const char* name;
    std::function<void()> run;
    std::vector<double> seconds;
    std::optional<double> peak_bytes;
  };
  Tensor value_fused, value_composed, grad_fused, grad_composed;
  auto with_grads = [&](auto&& loss, Tensor& value, Tensor& grad) {
    Tensor h = track(hidden), w = track(head);
    const train::LossParts parts = loss(h, w);
    const std::vector<Tensor> g = gradients(parts.total, ones({}, parts.total.dtype(), device), {h, w});
    value = parts.total.detach();
    grad = g[0];
  };
  std::vector<Entry> entries;
  entries.push_back({"fused-head", [&] {
                       with_grads([&](const Tensor& h, const Tensor& w) {
                         return train::head_loss(h, w, teacher_hidden, teacher_head, targets, config, chunk);
                       }, value_fused, grad_fused);
                     }, {}, {}});
  entries.push_back({"composed-head", [&] {
                       with_grads([&](const Tensor& h, const Tensor& w) {
                         Tensor teacher_logits;
                         {
                           NoGrad no_grad;
                           teacher_logits = matmul(teacher_hidden, transpose(teacher_head));
                         }
                         return train::distill_loss(matmul(h, transpose(w)), teacher_logits, targets, config);
                       }, value_composed, grad_composed);
                     }, {}, {}});
  // Offline targets: the sparse KL with the student's head inside the loss (train::sparse_head_loss).
  // Their values only need to be valid: per row K distinct ids and a distribution over them and
  // the tail, drawn at random.
  std::vector<train::TopkTargets> offline;
  std::vector<std::string> offline_names;
  const bool offline_ok = config.kind == train::KdLoss::fkl && device.is_cpu();
  for (const int64_t k : offline_ok ? vm["top-k"].as<std::vector<int64_t>>() : std::vector<int64_t>{}) {
    check(k >= 1 && k < vocab, "--top-k", "each K must be in [1, vocab), got ", k);
    std::vector<int32_t> ids(static_cast<size_t>(tokens * k));
    std::vector<float> logp(static_cast<size_t>(tokens * k)), tail(static_cast<size_t>(tokens));
    const std::vector<double> u = rand({tokens, k + 1}, gen, DType::f64).to_vector<double>();
    for (int64_t r = 0; r < tokens; ++r) {
      const int64_t start = int64_t(u[size_t(r * (k + 1))] * double(vocab)), step = vocab / k;
      double sum = 0;
      for (int64_t j = 0; j <= k; ++j) sum += u[size_t(r * (k + 1) + j)] + 1e-3;
      for (int64_t j = 0; j < k; ++j) {
        ids[size_t(r * k + j)] = int32_t((start + j * step) % vocab);
        logp[size_t(r * k + j)] = float(std::log((u[size_t(r * (k + 1) + j)] + 1e-3) / sum));
      }
      tail[size_t(r)] = float(std::log((u[size_t(r * (k + 1) + k)] + 1e-3) / sum));
    }
    offline.push_back({from_vector(ids, {tokens, k}), cast(from_vector(logp, {tokens, k}), dtype),
                       cast(from_vector(tail, {tokens}), dtype)});
    offline_names.push_back(cat("offline-top", k));
  }
  Tensor value_offline, grad_offline;
  for (size_t i = 0; i < offline.size(); ++i)
    entries.push_back({offline_names[i].c_str(), [&, i] {
                         with_grads([&](const Tensor& h, const Tensor& w) {
                           return train::sparse_head_loss(h, w, offline[i], targets, config, chunk);
                         }, value_offline, grad_offline);
                       }, {}, {}});
  entries.push_back({"gemms", [&] {
                       NoGrad no_grad;
                       const Tensor s = matmul(hidden, transpose(head));
                       const Tensor u = matmul(teacher_hidden, transpose(teacher_head));
                       const Tensor dh = matmul(s, head), dw = matmul(transpose(u), hidden);
                     }, {}, {}});
  for (Entry& e : entries) e.run();  // warm-up
  for (int r = 0; r < repeat; ++r)
    for (Entry& e : entries) {
      value_fused = value_composed = grad_fused = grad_composed = value_offline = grad_offline = Tensor();
      e.seconds.push_back(seconds_on(device, e.run));
    }
  entries[0].run();
  entries[1].run();
  const double value_diff = std::abs(value_fused.item<double>() - value_composed.item<double>());
  const double grad_diff = max(abs(cast(grad_fused, DType::f64) - cast(grad_composed, DType::f64))).item<double>();
  for (Entry& e : entries) {
    value_fused = value_composed = grad_fused = grad_composed = value_offline = grad_offline = Tensor();
    e.peak_bytes = peak_extra_bytes_on(device, e.run);
  }
  const double logits_mib = double(tokens) * double(vocab) * double(dtype_size(dtype)) / kMiB;
  const double gemm_ms = median(entries.back().seconds) * 1e3;
  if (json) {
    std::cout << "{\"mode\":\"fused-head\",\"tokens\":" << tokens << ",\"vocab\":" << vocab << ",\"hidden\":" << dim
              << ",\"chunk_rows\":" << chunk << ",\"kind\":\"" << train::kd_loss_spec(config) << "\",\"dtype\":\""
              << dtype_name(dtype) << "\",\"device\":\"" << to_string(device) << "\",\"threads\":" << num_threads()
              << ",\"repeat\":" << repeat << ",\"logits_mib\":" << json_number(logits_mib);
    for (const Entry& e : entries)
      std::cout << ",\"" << e.name << "\":{\"ms\":" << json_number(median(e.seconds) * 1e3)
                << ",\"over_gemms\":" << json_number(median(e.seconds) * 1e3 / gemm_ms)
                << ",\"peak_mib\":" << json_optional(e.peak_bytes, kMiB) << "}";
    std::cout << ",\"value_diff\":" << json_number(value_diff) << ",\"max_grad_diff\":" << json_number(grad_diff)
              << "}\n";
    return 0;
  }
  std::printf("LM heads + KD loss + gradients (hidden and head) on %s, %s, %lld tokens, vocab %lld, hidden %lld, %s, "
              "chunks of %lld rows, %d threads, median of %d\n",
              to_string(device).c_str(), std::string(dtype_name(dtype)).c_str(), static_cast<long long>(tokens),
              static_cast<long long>(vocab), static_cast<long long>(dim), train::kd_loss_spec(config).c_str(),
              static_cast<long long>(chunk), num_threads(), repeat);
  std::printf("one model's [N, V] logits are %.1f MiB; gemms = the four head GEMMs alone, the floor\n\n", logits_mib);
  std::printf("%-14s %12s %12s %18s\n", "variant", "ms", "/ gemms", "peak extra MiB");
  for (const Entry& e : entries) {
    std::printf("%-14s %12.2f %12.2f ", e.name, median(e.seconds) * 1e3, median(e.seconds) * 1e3 / gemm_ms);
    if (e.peak_bytes) std::printf("%18.1f\n", *e.peak_bytes / kMiB);
    else std::printf("%18s\n", "n/a");
  }
  std::printf("\nagreement with composed-head: |loss difference| %.3g, max |d hidden difference| %.3g\n", value_diff,
              grad_diff);
  return 0;
}

int bench_kd_loss(const Args& args) {
  po::options_description options("cotan bench kd-loss");
  options.add_options()
      ("help,h", "this message")
      ("json", "print one JSON object instead of a table")
      ("tokens", po::value<int64_t>()->default_value(2048), "tokens N (rows of the logits)")
      ("vocab", po::value<int64_t>()->default_value(32768), "vocabulary V (columns)")
      ("loss", po::value<std::string>()->default_value("fkl"), "KD loss: fkl, rkl, jsd or jsd:<beta>")
      ("temperature", po::value<double>()->default_value(1.0), "temperature tau")
      ("kd-ratio", po::value<double>()->default_value(1.0), "weight of KD against CE")
      ("repeat", po::value<int>()->default_value(5), "timed runs of each variant (the median is reported)")
      ("device", po::value<std::string>()->default_value("cpu"), "cpu | cuda | cuda:N")
      ("fused-head", "time the LM heads with the loss from hidden states (train::head_loss) against the composed "
                     "heads; --tokens and --vocab then default to 8192 and 151936")
      ("hidden", po::value<int64_t>()->default_value(1024), "--fused-head: hidden size D of both models")
      ("chunk-rows", po::value<int64_t>()->default_value(train::kHeadChunkRows), "--fused-head: rows per chunk")
      ("dtype", po::value<std::string>()->default_value("f32"), "--fused-head: f32 or bf16")
      ("top-k", po::value<std::vector<int64_t>>()->multitoken()->default_value({64, 256}, "64 256"),
       "--fused-head: also the sparse KL against offline top-K targets, for each K (fkl, on the CPU)");
  po::variables_map vm = parse_options(args, options);
  if (vm.count("help")) {
    std::cout << options << "\n";
    return 0;
  }
  check_integers(vm, {{"tokens", 1, int64_t(1) << 24}, {"vocab", 2, int64_t(1) << 24}, {"repeat", 1, 100000}});
  check_number("temperature", vm["temperature"].as<double>(), 0, std::numeric_limits<double>::infinity(), true);
  check_number("kd-ratio", vm["kd-ratio"].as<double>(), 0, 1);
  const bool json = vm.count("json") > 0;
  const int64_t tokens = vm["tokens"].as<int64_t>(), vocab = vm["vocab"].as<int64_t>();
  const int repeat = vm["repeat"].as<int>();
  check(tokens >= 1 && vocab >= 1, "bench kd-loss", "--tokens and --vocab must be positive, got ", tokens, " and ",
        vocab);
  check(repeat >= 1, "bench kd-loss", "--repeat must be positive, got ", repeat);
  train::LossConfig config;
  train::set_kd_loss(config, vm["loss"].as<std::string>());
  config.temperature = vm["temperature"].as<double>();
  config.kd_ratio = vm["kd-ratio"].as<double>();
  const Device device = device_option(vm["device"].as<std::string>());
  if (vm.count("fused-head")) {
    check_integers(vm, {{"hidden", 1, int64_t(1) << 16}, {"chunk-rows", 1, int64_t(1) << 24}});
    return bench_head_loss(vm, config, device);
  }

  Generator gen(0);
  const Tensor student = to(randn({tokens, vocab}, gen, DType::f32) * 2.0, device);
  const Tensor teacher = to(randn({tokens, vocab}, gen, DType::f32) * 2.0, device);
  const Tensor targets = to(randint({tokens}, 0, vocab, gen), device);

  std::vector<Variant> variants = {{"fused", Form::donated, {}, {}, {}, {}},
                                   {"fused-kept", Form::kept, {}, {}, {}, {}},
                                   {"composed", Form::composed, {}, {}, {}, {}}};
  // Loss and gradient of one variant on `input`, a fresh copy of the student logits.
  auto run = [&](Variant& v, Tensor input) {
    Tensor leaf = track(input);
    input = Tensor();
    // What gradients() is asked about: a handle carrying the leaf's node but not its data, so the
    // donated logits have no other owner.
    Tensor wrt = Tensor::empty({});
    wrt.set_node(leaf.node());
    train::LossParts parts;
    if (v.form == Form::donated) {
      parts = train::distill_loss(std::move(leaf), teacher, targets, config);
      check(parts.gradient_in_logits, "bench kd-loss", "the donated logits were not used for the gradient");
    } else if (v.form == Form::kept) {
      parts = train::distill_loss(leaf, teacher, targets, config);
    } else {
      parts = train::distill_loss_composed(leaf, teacher, targets, config);
    }
    v.grad = gradients(parts.total, ones({}, parts.total.dtype(), device), {wrt})[0];
    v.value = parts.total.detach();
  };
  auto time_once = [&](Variant& v) {
    v.value = v.grad = Tensor();  // the previous result is not held while timing
    Tensor input = clone(student);
    v.seconds.push_back(seconds_on(device, [&] { run(v, std::move(input)); }));
  };

  for (Variant& v : variants) run(v, clone(student));  // warm-up: threads, page cache of the allocator
  for (int r = 0; r < repeat; ++r)
    for (Variant& v : variants) time_once(v);
  // Agreement with the composed loss, as a sanity figure.
  double value_diff = 0, grad_diff = 0;
  for (int i = 0; i < 2; ++i) {
    value_diff = std::max(value_diff, std::abs(variants[i].value.item<double>() - variants[2].value.item<double>()));
    grad_diff = std::max(grad_diff, max(abs(variants[i].grad - variants[2].grad)).item<double>());
  }
  for (Variant& v : variants) {
    v.value = v.grad = Tensor();
    Tensor input = clone(student);
    v.peak_bytes = peak_extra_bytes_on(device, [&] { run(v, std::move(input)); });
    v.value = v.grad = Tensor();
  }

  const Variant& fused = variants[0];
  const Variant& kept = variants[1];
  const Variant& composed = variants[2];
  const double fused_ms = median(fused.seconds) * 1e3, composed_ms = median(composed.seconds) * 1e3;
  const double speedup = composed_ms / fused_ms;
  std::optional<double> memory_ratio;
  if (fused.peak_bytes && composed.peak_bytes)  // a 1 MiB floor: the donated loss may add almost nothing
    memory_ratio = *composed.peak_bytes / std::max(*fused.peak_bytes, 1.0 * kMiB);
  const std::string kind = train::kd_loss_spec(config);
  const int threads = num_threads();
  const double logits_mib = double(tokens) * double(vocab) * sizeof(float) / kMiB;
  // Scratch: the peak beyond the [N, V] gradient the variant returns (none of its own when donated).
  auto scratch = [&](const Variant& v) -> std::optional<double> {
    if (!v.peak_bytes) return std::nullopt;
    return std::max(0.0, *v.peak_bytes - (v.form == Form::donated ? 0.0 : logits_mib * kMiB));
  };
  std::optional<double> scratch_ratio;
  if (scratch(fused) && scratch(composed))
    scratch_ratio = *scratch(composed) / std::max(*scratch(fused), 1.0 * kMiB);  // a 1 MiB floor

  if (json) {
    std::cout << "{\"tokens\":" << tokens << ",\"vocab\":" << vocab << ",\"kind\":\"" << kind << "\""
              << ",\"temperature\":" << json_number(config.temperature)
              << ",\"kd_ratio\":" << json_number(config.kd_ratio) << ",\"dtype\":\"f32\",\"device\":\"" << to_string(device)
              << "\",\"threads\":" << threads
              << ",\"repeat\":" << repeat << ",\"logits_mib\":" << json_number(logits_mib);
    for (const Variant* v : {&fused, &kept, &composed})
      std::cout << ",\"" << v->name << "\":{\"ms\":" << json_number(median(v->seconds) * 1e3)
                << ",\"peak_mib\":" << json_optional(v->peak_bytes, kMiB)
                << ",\"scratch_mib\":" << json_optional(scratch(*v), kMiB) << "}";
    std::cout << ",\"speedup\":" << json_number(speedup) << ",\"memory_ratio\":" << json_optional(memory_ratio, 1.0)
              << ",\"scratch_ratio\":" << json_optional(scratch_ratio, 1.0)
              << ",\"max_grad_diff\":" << json_number(grad_diff) << ",\"value_diff\":" << json_number(value_diff)
              << "}\n";
    return 0;
  }

  std::printf("KD loss + gradient on %s, f32, %lld tokens x %lld vocab, %s, tau %g, kd_ratio %g, %d threads, median "
              "of %d\n",
              to_string(device).c_str(), static_cast<long long>(tokens), static_cast<long long>(vocab), kind.c_str(),
              config.temperature, config.kd_ratio, threads, repeat);
  std::printf("one [N, V] f32 tensor is %.1f MiB; peak extra = the most memory held during the run beyond what was\n"
              "held before; scratch = peak extra minus a new [N, V] gradient (fused writes it over the donated\n"
              "logits, fused-kept and composed return a new one)\n\n",
              logits_mib);
  std::printf("%-12s %12s %18s %14s\n", "variant", "ms", "peak extra MiB", "scratch MiB");
  for (const Variant* v : {&fused, &kept, &composed}) {
    std::printf("%-12s %12.2f ", v->name, median(v->seconds) * 1e3);
    if (v->peak_bytes) std::printf("%18.1f %14.1f\n", *v->peak_bytes / kMiB, *scratch(*v) / kMiB);
    else std::printf("%18s %14s\n", "n/a", "n/a");
  }
  std::printf("\ncomposed / fused: time %.2fx", speedup);
  if (memory_ratio) std::printf(", peak extra %.0fx, scratch %.0fx (1 MiB floors)", *memory_ratio, *scratch_ratio);
  else std::printf(", memory n/a (cannot reset the peak resident set through /proc/self/clear_refs)");
  if (kept.peak_bytes && composed.peak_bytes && *kept.peak_bytes > 0)
    std::printf("\ncomposed / fused-kept: time %.2fx, peak extra %.2fx", median(composed.seconds) / median(kept.seconds),
                *composed.peak_bytes / *kept.peak_bytes);
  std::printf("\nagreement with composed: |loss difference| %.3g, max |gradient difference| %.3g\n", value_diff,
              grad_diff);
  return 0;
}

}  // namespace cotan::app
