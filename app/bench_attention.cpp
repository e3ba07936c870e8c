// `cotan bench attention`: forward + backward time of the attention core (nn/attention.hpp) for
// each kind, fused kernel and composed fallback side by side. One run is a vjp of the core with a
// fixed random cotangent (every input's gradient). Runs are interleaved (repeat r times each kind
// and implementation once) and the median is reported, with the ratio of each kind to softmax
// (fused) and the speedup of fused over composed; ratios are what to compare across machines.
//
// With --torch, PyTorch takes turns in the same rounds (app/torch_reference.hpp: which
// interpreter; a settling pause before each switch of side) on the same tensors: each kind
// composed from eager ops the way nn/attention_composed.cpp composes it (the fair reference for
// sink and affine, which PyTorch has no kernel for), and
// torch.nn.functional.scaled_dot_product_attention(is_causal) on the softmax shapes: PyTorch's
// fused kernel, the speed of light every kind is also compared with. PyTorch's results are
// checked against cotan's (the largest relative difference of the output and the gradients).
#include <algorithm>
#include <boost/program_options.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "app/bench_util.hpp"
#include "app/commands.hpp"
#include "app/options.hpp"
#include "app/torch_reference.hpp"
#include "autograd/autograd.hpp"
#include "nn/attention.hpp"
#include "nn/layers.hpp"
#include "nn/safetensors.hpp"
#include "tensor/error.hpp"
#include "tensor/ops.hpp"
#include "util/json.hpp"

namespace cotan::app {

namespace {

namespace po = boost::program_options;
using nn::AttentionCore;

struct Entry {
  std::string kind;
  std::string impl;  // "fused" or "composed"; PyTorch's: "composed" or "sdpa"
  std::function<std::pair<Tensor, std::vector<Tensor>>()> run;  // output and input gradients
  std::vector<double> seconds;
  bool torch = false;  // timed by the reference, through `request`
  Json request;

  double median_ms() const { return 1e3 * median(seconds); }
};

// ||a - b|| / ||b|| in f64 on the CPU (0 when both are 0).
double relative_difference(const Tensor& a, const Tensor& b) {
  const Tensor x = to(cast(a, DType::f64), Device::cpu()), y = to(cast(b, DType::f64), Device::cpu());
  const double diff = std::sqrt(sum(square(x - y)).item<double>()), norm = std::sqrt(sum(square(y)).item<double>());
  return norm > 0 ? diff / norm : diff;
}

// The largest relative difference of the output and the gradients of two runs (of any dtypes).
double largest_difference(const std::pair<Tensor, std::vector<Tensor>>& a,
                          const std::pair<Tensor, std::vector<Tensor>>& b) {
  double worst = relative_difference(a.first, b.first);
  for (size_t i = 0; i < a.second.size(); ++i) worst = std::max(worst, relative_difference(a.second[i], b.second[i]));
  return worst;
}

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

}  // namespace

int bench_attention(const Args& args) {
  po::options_description options("cotan bench attention");
  options.add_options()
      ("help,h", "this message")
      ("json", "print one JSON object instead of a table")
      ("batch-size", po::value<int64_t>()->default_value(4), "batch rows B")
      ("seq-len", po::value<int64_t>()->default_value(512), "sequence length T")
      ("heads", po::value<int64_t>()->default_value(8), "query heads H")
      ("kv-heads", po::value<int64_t>()->default_value(0), "kv heads (0: as many as query heads)")
      ("dim", po::value<int64_t>()->default_value(64), "head dim d")
      ("non-causal", "attend to every key (default: causal)")
      ("repeat", po::value<int>()->default_value(5), "timed runs of each kind and implementation (median)")
      ("attention", po::value<std::string>()->default_value("softmax,sink,affine"), "comma-separated attention kinds")
      ("impls", po::value<std::string>()->default_value("fused,composed"), "comma-separated implementations")
      ("dtype", po::value<std::string>()->default_value("f32"), "f32 | bf16")
      ("device", po::value<std::string>()->default_value("cpu"), "cpu | cuda | cuda:N")
      ("torch", "also time PyTorch in the same rounds: each kind composed from eager ops, and softmax through "
                "scaled_dot_product_attention (--device cpu --dtype f32)");
  add_torch_options(options);
  AffineOptions affine;
  add_affine_options(options, affine);
  po::variables_map vm = parse_options(args, options);
  if (vm.count("help")) {
    std::cout << options << "\n";
    return 0;
  }
  nn::AttentionConfig affine_config;
  apply_affine_options(affine, affine_config);
  check_integers(vm, {{"batch-size", 1, 1 << 16}, {"seq-len", 1, 1 << 20}, {"heads", 1, 4096},
                      {"kv-heads", 0, 4096, "0: as many as query heads"}, {"dim", 2, 1024}, {"repeat", 1, 100000}});
  const bool json = vm.count("json") > 0, causal = vm.count("non-causal") == 0;
  const int64_t batch = vm["batch-size"].as<int64_t>(), seq = vm["seq-len"].as<int64_t>(), heads = vm["heads"].as<int64_t>(),
                dim = vm["dim"].as<int64_t>();
  const int64_t kv_heads = vm["kv-heads"].as<int64_t>() == 0 ? heads : vm["kv-heads"].as<int64_t>();
  const int repeat = vm["repeat"].as<int>();
  check(batch >= 1 && seq >= 1 && heads >= 1 && dim >= 1, "bench attention", "sizes must be positive");
  check(kv_heads >= 1 && heads % kv_heads == 0, "bench attention", "--heads ", heads,
        " must be a multiple of --kv-heads ", kv_heads);
  check(repeat >= 1, "bench attention", "--repeat must be positive, got ", repeat);
  const std::vector<std::string> kinds = split_list(vm["attention"].as<std::string>());
  const std::vector<std::string> impls = split_list(vm["impls"].as<std::string>());
  for (const std::string& k : kinds)
    check(k == "softmax" || k == "sink" || k == "affine", "option", "--attention ", vm["attention"].as<std::string>(),
          ": unknown kind '", k, "' (expected softmax, sink, affine)");
  std::string chosen;
  for (const std::string& k : kinds) chosen += (chosen.empty() ? "" : ", ") + k;
  check_affine_options_apply(affine, std::find(kinds.begin(), kinds.end(), "affine") != kinds.end(), chosen);
  for (const std::string& i : impls)
    check(i == "fused" || i == "composed", "bench attention", "unknown implementation '", i,
          "' (expected fused, composed)");
  const Device device = device_option(vm["device"].as<std::string>());
  const DType dt = parse_dtype(vm["dtype"].as<std::string>());
  check(dt == DType::f32 || dt == DType::bf16, "bench attention", "--dtype takes f32 or bf16, got ", dt);
  const bool with_torch = vm.count("torch") > 0;
  check(!with_torch || (device.is_cpu() && dt == DType::f32), "bench attention",
        "--torch compares with --device cpu --dtype f32 only");
  const int threads = num_threads();
  std::optional<TorchReference> torch;
  if (with_torch) torch.emplace(vm, threads);

  Generator gen(0);
  auto draw = [&](Tensor t) { return to(cast(t, dt), device); };
  AttentionCore base;
  base.causal = causal;
  base.q = draw(randn({batch, heads, seq, dim}, gen));
  base.k = draw(randn({batch, kv_heads, seq, dim}, gen));
  base.v = draw(randn({batch, kv_heads, seq, dim}, gen));
  // alpha = phi(z) for z ~ N(0, 1), as the affine layer computes it from x W_alpha^T.
  const Tensor alpha = draw(nn::phi(randn({batch, heads, seq}, gen), affine_config.phi));
  const Tensor alpha_ma = draw(rand({heads}, gen));
  const Tensor sigma = draw(randn({heads}, gen));
  const Tensor cotangent = draw(randn(base.q.shape(), gen));

  auto core_of = [&](const std::string& kind) {
    AttentionCore core = base;
    if (kind == "affine") {
      core.alpha = alpha;
      core.alpha_ma = alpha_ma;
      core.affine_n = affine_config.affine_n;
    }
    if (kind == "sink") core.sigma = sigma;
    return core;
  };

  std::vector<Entry> entries;
  for (const std::string& kind : kinds)
    for (const std::string& impl : impls) {
      const AttentionCore core = core_of(kind);
      Tensor (*attention)(const AttentionCore&) = impl == "fused" ? nn::attention_fused : nn::attention_composed;
      auto f = [core, attention](const std::vector<Tensor>& xs) {
        return attention(nn::with_differentiable_inputs(core, xs));
      };
      const std::vector<Tensor> xs = nn::differentiable_inputs(core);
      entries.push_back({kind, impl, [f, xs, cotangent] { return vjp(f, xs, cotangent); }, {}, false, Json::object()});
    }

  // Warm-up (thread pool, allocator cache, scratch buffers), and the fused results against the
  // composed attention in f32 on the same values (the same bf16 values, widened): a check of the
  // kernels on the device.
  std::map<std::string, double> agreement;  // kind -> largest relative difference
  std::map<std::string, Tensor> shared;       // the tensors and cotan's results, for PyTorch
  for (Entry& e : entries) {
    const auto result = e.run();
    if (torch && (e.impl == "fused" || !shared.count(e.kind + ".out"))) {
      shared[e.kind + ".out"] = result.first;
      for (size_t i = 0; i < result.second.size(); ++i) shared[e.kind + ".grad." + std::to_string(i)] = result.second[i];
    }
    if (e.impl != "fused") continue;
    const AttentionCore core = nn::cast(core_of(e.kind), DType::f32);
    auto composed = [core](const std::vector<Tensor>& xs) {
      return nn::attention_composed(nn::with_differentiable_inputs(core, xs));
    };
    agreement[e.kind] =
        largest_difference(result, vjp(composed, nn::differentiable_inputs(core), cast(cotangent, DType::f32)));
  }
  // PyTorch's entries, on the same tensors: every kind composed, and SDPA's softmax.
  std::optional<TempDir> torch_dir;
  std::map<std::string, double> torch_agreement;  // "kind impl" -> largest relative difference
  if (torch) {
    torch_dir.emplace("cotan-bench-attention");
    shared["q"] = base.q, shared["k"] = base.k, shared["v"] = base.v, shared["cotangent"] = cotangent;
    shared["alpha"] = alpha, shared["alpha_ma"] = alpha_ma, shared["sigma"] = sigma;
    const std::string inputs = (torch_dir->path / "attention.safetensors").string();
    save_safetensors(inputs, shared);
    auto add = [&](const std::string& kind, const std::string& impl) {
      Entry e{kind, impl, {}, {}, true, Json::object()};
      e.request["op"] = "attention";
      e.request["impl"] = impl;
      e.request["kind"] = kind;
      e.request["causal"] = causal;
      e.request["affine_n"] = std::string(nn::name_of(affine_config.affine_n));
      e.request["inputs"] = inputs;
      e.request["runs"] = 2;  // the warm-up; the first run is checked against cotan's results
      const Json reply = torch->request(e.request);
      if (const Json* diff = find_member(reply, "max_relative_difference"); diff && diff->is_number())
        torch_agreement[kind + " " + impl] = as_double(*diff);
      e.request["runs"] = 1;
      entries.push_back(std::move(e));
    };
    for (const std::string& kind : kinds) add(kind, "composed");
    add("softmax", "sdpa");
  }
  bool last_torch = false;
  for (int r = 0; r < repeat; ++r)
    for (Entry& e : entries) {
      if (torch && e.torch != last_torch) std::this_thread::sleep_for(kSettle);
      last_torch = e.torch;
      if (e.torch) e.seconds.push_back(as_double(member(torch->request(e.request), "seconds")[0]));
      else e.seconds.push_back(seconds_on(device, [&e] { e.run(); }));
    }

  std::map<std::string, std::map<std::string, double>> ms, torch_ms;  // kind -> impl -> median ms
  for (const Entry& e : entries) (e.torch ? torch_ms : ms)[e.kind][e.impl] = e.median_ms();
  auto find = [&](const std::string& kind, const std::string& impl) -> double {
    auto k = ms.find(kind);
    if (k == ms.end()) return 0;
    auto i = k->second.find(impl);
    return i == k->second.end() ? 0 : i->second;
  };
  auto torch_find = [&](const std::string& kind, const std::string& impl) -> double {
    auto k = torch_ms.find(kind);
    if (k == torch_ms.end()) return 0;
    auto i = k->second.find(impl);
    return i == k->second.end() ? 0 : i->second;
  };
  const double sdpa = torch_find("softmax", "sdpa");
  // cotan's best implementation of a kind (fused where timed, else composed).
  auto best_of = [&](const std::string& kind) {
    const double fused = find(kind, "fused");
    return fused > 0 ? fused : find(kind, "composed");
  };
  const char* kSdpaNote =
      "scaled_dot_product_attention has softmax only (no affine or sink kind): affine and sink are compared with "
      "PyTorch's eager composed core, and every kind with SDPA's softmax as the speed of light";
  const double softmax_fused = find("softmax", "fused");
  const double affine_fused = find("affine", "fused");

  if (json) {
    std::cout << "{\"config\":{\"batch\":" << batch << ",\"seq\":" << seq << ",\"heads\":" << heads
              << ",\"kv_heads\":" << kv_heads << ",\"dim\":" << dim << ",\"causal\":" << (causal ? "true" : "false")
              << ",\"phi\":\"" << nn::name_of(affine_config.phi) << "\",\"affine_n\":\""
              << nn::name_of(affine_config.affine_n) << "\""
              << ",\"dtype\":\"" << dtype_name(dt) << "\",\"device\":\"" << to_string(device) << "\",\"threads\":" << threads << ",\"repeat\":" << repeat << "}," << host_json(threads) << ",\"results\":[";
    auto results = [&](bool of_torch) {
      bool first_result = true;
      for (const Entry& e : entries) {
        if (e.torch != of_torch) continue;
        std::cout << (first_result ? "" : ",") << "{\"kind\":\"" << e.kind << "\",\"impl\":\"" << e.impl
                  << "\",\"ms\":" << json_number(e.median_ms()) << "}";
        first_result = false;
      }
    };
    results(false);
    std::cout << "]";
    if (torch) {
      std::cout << "," << torch->json_field() << ",\"torch_results\":[";
      results(true);
      std::cout << "],\"sdpa_note\":\"" << kSdpaNote << "\",\"vs_torch\":{";
      bool first_kind = true;
      for (const std::string& kind : kinds) {
        const double ours = best_of(kind), composed = torch_find(kind, "composed");
        std::cout << (first_kind ? "" : ",") << "\"" << kind << "\":{\"composed\":"
                  << (ours > 0 && composed > 0 ? json_number(composed / ours) : "null")
                  << ",\"sdpa_softmax\":" << (ours > 0 && sdpa > 0 ? json_number(sdpa / ours) : "null") << "}";
        first_kind = false;
      }
      std::cout << "},\"torch_max_relative_difference\":{";
      first_kind = true;
      for (const auto& [name, diff] : torch_agreement) {
        std::cout << (first_kind ? "" : ",") << "\"" << name << "\":" << json_number(diff);
        first_kind = false;
      }
      std::cout << "}";
    } else {
      std::cout << ",\"torch\":null";
    }
    std::cout << ",\"affine_over_softmax\":"
              << (softmax_fused > 0 && affine_fused > 0 ? json_number(affine_fused / softmax_fused) : "null")
              << ",\"fused_speedup\":{";
    bool first = true;
    for (const std::string& kind : kinds) {
      const double fused = find(kind, "fused"), composed = find(kind, "composed");
      std::cout << (first ? "" : ",") << "\"" << kind
                << "\":" << (fused > 0 && composed > 0 ? json_number(composed / fused) : "null");
      first = false;
    }
    std::cout << "},\"max_relative_difference\":{";
    first = true;
    for (const auto& [kind, diff] : agreement) {
      std::cout << (first ? "" : ",") << "\"" << kind << "\":" << json_number(diff);
      first = false;
    }
    std::cout << "}}\n";
    return 0;
  }

  std::printf("cotan bench attention on %s: B=%lld T=%lld H=%lld Hkv=%lld d=%lld %s %s, %d threads, forward + "
              "backward, median of %d\n",
              to_string(device).c_str(), static_cast<long long>(batch), static_cast<long long>(seq),
              static_cast<long long>(heads), static_cast<long long>(kv_heads), static_cast<long long>(dim),
              std::string(dtype_name(dt)).c_str(), causal ? "causal" : "non-causal", threads, repeat);
  std::printf("%s\n", host_line(threads).c_str());
  if (std::find(kinds.begin(), kinds.end(), "affine") != kinds.end())
    std::printf("affine: alpha = %s(z), z ~ N(0, 1); affine_n %s\n", std::string(nn::name_of(affine_config.phi)).c_str(),
                std::string(nn::name_of(affine_config.affine_n)).c_str());
  std::printf("%-10s %12s %12s %14s %18s %14s\n", "kind", "fused ms", "composed ms", "fused speedup", "vs softmax fused",
              "fused vs comp");
  auto cell = [](double v, const char* format) {
    char buffer[32];
    if (v > 0)
      std::snprintf(buffer, sizeof buffer, format, v);
    else
      std::snprintf(buffer, sizeof buffer, "n/a");
    return std::string(buffer);
  };
  for (const std::string& kind : kinds) {
    const double fused = find(kind, "fused"), composed = find(kind, "composed");
    const auto diff = agreement.find(kind);
    std::printf("%-10s %12s %12s %14s %18s %14s\n", kind.c_str(), cell(fused, "%.2f").c_str(),
                cell(composed, "%.2f").c_str(), cell(fused > 0 && composed > 0 ? composed / fused : 0, "%.2fx").c_str(),
                cell(fused > 0 && softmax_fused > 0 ? fused / softmax_fused : 0, "%.3f").c_str(),
                diff == agreement.end() ? "n/a" : cell(diff->second, "%.1e").c_str());
  }
  std::printf("fused vs comp: the largest ||fused - composed|| / ||composed|| over the output and the gradients, the\n"
              "composed attention in f32 on the same values\n");
  if (torch) {
    std::printf("\n%s; taking turns with cotan, %lld ms apart\n", torch->describe().c_str(),
                static_cast<long long>(kSettle.count()));
    std::printf("%-10s %12s %12s %16s %16s %14s\n", "kind", "cotan ms", "torch ms", "torch / cotan", "sdpa / cotan",
                "torch vs cotan");
    for (const std::string& kind : kinds) {
      const double ours = best_of(kind), composed = torch_find(kind, "composed");
      const auto diff = torch_agreement.find(kind + " composed");
      std::printf("%-10s %12s %12s %16s %16s %14s\n", kind.c_str(), cell(ours, "%.2f").c_str(),
                  cell(composed, "%.2f").c_str(), cell(ours > 0 && composed > 0 ? composed / ours : 0, "%.2fx").c_str(),
                  cell(ours > 0 && sdpa > 0 ? sdpa / ours : 0, "%.2fx").c_str(),
                  diff == torch_agreement.end() ? "n/a" : cell(diff->second, "%.1e").c_str());
    }
    const auto sdpa_diff = torch_agreement.find("softmax sdpa");
    std::printf("%-10s %12s %12s %16s %16s %14s\n", "sdpa", "", cell(sdpa, "%.2f").c_str(), "", "",
                sdpa_diff == torch_agreement.end() ? "n/a" : cell(sdpa_diff->second, "%.1e").c_str());
    std::printf("cotan ms: fused where timed, else composed; torch ms: PyTorch's eager composed core; > 1x: cotan "
                "faster.\n%s.\n",
                kSdpaNote);
  }
  return 0;
}

}  // namespace cotan::app
