// `cotan bench matmul`: GFLOP/s (2 M N K / t) of the CPU backend's matmul kernel by size and dtype,
// each also as a fraction of the fp32 FMA peak measured at the start of the run on as many
// threads (app/bench_peak.hpp; fp64 against half of it, bf16 against all of it), and with
// --torch the same products timed by PyTorch in the same run. PyTorch runs in a child process,
// bench/torch_reference.py in its `serve` mode (app/torch_reference.hpp: which interpreter, which
// environment); cotan and PyTorch then take turns with a settling pause (kSettle) between them,
// so both see the same machine load, and the ratio of their medians is printed (> 1: cotan
// faster). Each turn makes untimed calls for about kTurnWarmup before the timed one, the same
// number on both sides: just after the pause, products of a training step's sizes (1-3 ms)
// measured 1.3-3x slower than back to back, as a step runs them, and the calls of a turn recover
// from it. About 10 ms of them was not enough on a 2-vCPU Zen 3: the first call after the pause
// took 2x, the tenth still 1.1x, and the timed one, after a turn of PyTorch or BLIS, 1.4-1.7x
// (cotan's 384x128x1024 and 1024x320x192 products at 0.55-0.73 of MKL's speed, at 0.92-1.15
// after about 50 ms, as back to back). --layouts also times products with a transposed operand,
// as a layer's forward (x W^T: "nt") and its weight gradient (X^T G: "tn") run them. --blis (a
// build that found Debian's libblis-dev) takes turns with BLIS's bli_sgemm / bli_dgemm on the same
// operands, strides and thread count, the same way: the other well-kept CPU GEMM a user could pick
// (README, "Benchmarks"). --step times a training step's own products instead of --sizes: those of
// `cotan bench train`'s step (app/bench_step.hpp), recorded by a ProductLog (tensor/product_log.hpp)
// over one step after a first, each distinct product once, and the step's whole GEMM time and
// GFLOP/s from them, each product weighted by how often the step runs it.
#include <algorithm>
#include <boost/program_options.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "app/bench_peak.hpp"
#include "app/bench_step.hpp"
#include "app/bench_util.hpp"
#include "app/commands.hpp"
#include "app/options.hpp"
#include "app/torch_reference.hpp"
#include "tensor/error.hpp"
#include "tensor/op_table.hpp"
#include "tensor/ops.hpp"
#include "tensor/product_log.hpp"
#include "util/json.hpp"

#ifdef COTAN_HAVE_BLIS
#include <blis.h>
#endif

namespace cotan::app {
namespace {

constexpr int kWarmup = 2;
constexpr double kTurnWarmup = 0.050;  // seconds

struct Size {
  int64_t m, n, k;
};

// "1024" is 1024 x 1024 x 1024; "MxNxK" is [M, K] x [K, N].
std::vector<Size> parse_sizes(const std::string& text) {
  std::vector<Size> sizes;
  std::stringstream items(text);
  for (std::string item; std::getline(items, item, ',');) {
    std::vector<int64_t> parts;
    std::stringstream dims(item);
    for (std::string d; std::getline(dims, d, 'x');) {
      char* end = nullptr;
      long long v = std::strtoll(d.c_str(), &end, 10);
      if (d.empty() || *end != '\0' || v <= 0) fail("bench", "size '", item, "' is neither N nor MxNxK");
      parts.push_back(v);
    }
    if (parts.size() == 1) sizes.push_back({parts[0], parts[0], parts[0]});
    else if (parts.size() == 3) sizes.push_back({parts[0], parts[1], parts[2]});
    else fail("bench", "size '", item, "' is neither N nor MxNxK");
  }
  if (sizes.empty()) fail("bench", "--sizes is empty");
  return sizes;
}

std::vector<DType> parse_dtypes(const std::string& text) {
  std::vector<DType> dtypes;
  std::stringstream items(text);
  for (std::string item; std::getline(items, item, ',');) {
    if (item == "f32" || item == "float32") dtypes.push_back(DType::f32);
    else if (item == "f64" || item == "float64") dtypes.push_back(DType::f64);
    else if (item == "bf16" || item == "bfloat16") dtypes.push_back(DType::bf16);
    else fail("bench", "matmul takes f32, f64 or bf16, not '", item, "'");
  }
  if (dtypes.empty()) fail("bench", "--dtypes is empty");
  return dtypes;
}

// How the operands lie: "nn" both row-major; "nt" B is the transpose of a row-major [N, K]
// (x W^T); "tn" A is the transpose of a row-major [K, M] (X^T G); "tt" both transposed.
std::vector<std::string> parse_layouts(const std::string& text) {
  std::vector<std::string> layouts;
  std::stringstream items(text);
  for (std::string item; std::getline(items, item, ',');) {
    if (item != "nn" && item != "nt" && item != "tn" && item != "tt")
      fail("bench", "--layouts takes nn, nt, tn or tt, not '", item, "'");
    layouts.push_back(item);
  }
  if (layouts.empty()) fail("bench", "--layouts is empty");
  return layouts;
}

// One product to time: its shape, layout and dtype, and how often the step runs it (--step;
// otherwise 1), `accumulating` of those adding into their output (timed as plain products).
struct Case {
  Size size;
  std::string layout;
  DType dtype;
  int64_t count = 1, accumulating = 0;
};

// The products of one `cotan bench train` step on `device` with that bench's defaults (the tiny
// affine student, batch 8 x 128, f32), recorded on the step after a first one (which also runs the
// teacher's pass for the micro-batch it starts with), grouped by shape, layout and dtype.
std::vector<Case> step_products(Device device) {
  nn::ModelConfig student = nn::preset(BenchStep::kStudent);
  student.attention.kind = BenchStep::kAttention;
  BenchStep step(student, BenchStep::kBatchSize, BenchStep::kSeqLen, device, DType::f32);
  step.run();
  std::vector<ProductShape> products;
  {
    ProductLog log;
    step.run();
    products = log.products();
  }
  std::vector<Case> cases;
  for (const ProductShape& p : products) {
    const std::string layout{p.a_layout, p.b_layout};
    if (p.batch != 1 || layout.find('g') != std::string::npos)
      fail("bench", "--step: the step ran a product this bench cannot time: ", p.batch, " x [", p.m, ", ", p.k,
           "] x [", p.k, ", ", p.n, "], layout ", layout, " (it times single products of nn, nt, tn or tt operands)");
    auto same = [&](const Case& c) {
      return c.size.m == p.m && c.size.n == p.n && c.size.k == p.k && c.layout == layout && c.dtype == p.dtype;
    };
    auto found = std::find_if(cases.begin(), cases.end(), same);
    if (found == cases.end()) found = cases.insert(cases.end(), Case{{p.m, p.n, p.k}, layout, p.dtype, 0, 0});
    ++found->count;
    if (p.accumulate) ++found->accumulating;
  }
  if (cases.empty()) fail("bench", "--step: the step ran no matrix product");
  // In a fixed order (with two threads the teacher's products interleave with the student's):
  // layers' forward products (nt), then their input gradients (nn), weight gradients (tn).
  auto rank = [](const Case& c) {
    const std::string order[] = {"nt", "nn", "tn", "tt"};
    return std::tuple(std::find(std::begin(order), std::end(order), c.layout) - std::begin(order), c.size.m,
                      c.size.n, c.size.k, c.dtype);
  };
  std::sort(cases.begin(), cases.end(), [&](const Case& x, const Case& y) { return rank(x) < rank(y); });
  return cases;
}

struct Result {
  Size size;
  DType dtype;
  std::string layout;
  int64_t count, accumulating;
  double seconds;
  std::optional<double> torch_seconds;
  std::optional<double> blis_seconds;
  double flops() const { return 2.0 * double(size.m) * double(size.n) * double(size.k); }
  double gflops_at(double s) const { return flops() / s / 1e9; }
  double gflops() const { return gflops_at(seconds); }
  double torch_gflops() const { return gflops_at(*torch_seconds); }
  double blis_gflops() const { return gflops_at(*blis_seconds); }
};

// --step: the step's products together, each weighted by its count: their FLOPs, and the
// seconds they take on each side (a side that timed not every product has none).
struct StepTotal {
  int64_t products = 0;  // the counts summed
  double flops = 0, seconds = 0;
  std::optional<double> torch_seconds, blis_seconds;
  double gflops() const { return flops / seconds / 1e9; }
};
StepTotal step_total(const std::vector<Result>& results) {
  StepTotal total;
  bool torch = true, blis = true;
  double torch_seconds = 0, blis_seconds = 0;
  for (const Result& r : results) {
    const double count = double(r.count);
    total.products += r.count;
    total.flops += count * r.flops();
    total.seconds += count * r.seconds;
    torch = torch && r.torch_seconds;
    blis = blis && r.blis_seconds;
    if (torch) torch_seconds += count * *r.torch_seconds;
    if (blis) blis_seconds += count * *r.blis_seconds;
  }
  if (torch) total.torch_seconds = torch_seconds;
  if (blis) total.blis_seconds = blis_seconds;
  return total;
}

// The FMA peak of `dtype`'s products: fp64 vectors hold half the lanes of fp32 ones; bf16 is
// multiplied in fp32.
double peak_of(const FmaPeak& fp32, DType dtype) { return dtype == DType::f64 ? fp32.gflops / 2 : fp32.gflops; }

// Seconds of each of `runs` torch.matmul calls on [m, k] x [k, n] operands of `dtype`.
std::vector<double> torch_matmul(TorchReference& torch, const Size& s, DType dtype, const std::string& layout,
                                 int runs) {
  Json request = Json::object();
  request["op"] = "matmul";
  request["layout"] = layout;
  request["m"] = s.m;
  request["n"] = s.n;
  request["k"] = s.k;
  request["dtype"] = std::string(dtype_name(dtype));
  request["runs"] = runs;
  const Json reply = torch.request(request);
  const Json& seconds = member(reply, "seconds");
  if (!seconds.is_array() || int(seconds.size()) != runs)
    fail("bench", "--torch: unexpected reply from the PyTorch reference: ", dump_json(reply));
  std::vector<double> out;
  for (const Json& v : seconds) out.push_back(as_double(v));
  return out;
}

double time_once(const Tensor& a, const Tensor& b) {
  return seconds_on(a.device(), [&] { Tensor c = backend(a.device()).matmul(a, b); });
}

// BLIS on `threads` threads: its version, the kernels it chose for this CPU, and one timed product.
class Blis {
 public:
  explicit Blis(int threads) : threads_(threads) {
#ifdef COTAN_HAVE_BLIS
    bli_thread_set_num_threads(threads);
    version_ = bli_info_get_version_str();
    arch_ = bli_arch_string(bli_arch_query_id());
#else
    fail("bench", "--blis: this cotan was built without BLIS; install libblis-dev (apt-get install libblis-dev) and "
                  "run ./build.sh again (meson finds it: -Dblis=auto)");
#endif
  }
  std::string describe() const {
    return "BLIS " + version_ + " (kernels: " + arch_ + "), " + std::to_string(threads_) + " threads";
  }
  std::string json_field() const {
    return "\"blis\":{\"version\":\"" + version_ + "\",\"arch\":\"" + arch_ +
           "\",\"threads\":" + std::to_string(threads_) + "}";
  }
  // BLIS multiplies f32 and f64 (bf16 has no BLIS product).
  static bool handles(DType dtype) { return dtype == DType::f32 || dtype == DType::f64; }
  // Seconds of one C = A B into `c` ([m, n], row-major), A and B read through their strides.
  double time_once(const Tensor& a, const Tensor& b, const Tensor& c) const {
    const auto start = std::chrono::steady_clock::now();
#ifdef COTAN_HAVE_BLIS
    const dim_t m = a.size(0), k = a.size(1), n = b.size(1);
    const inc_t rsa = a.strides()[0], csa = a.strides()[1], rsb = b.strides()[0], csb = b.strides()[1];
    if (a.dtype() == DType::f32) {
      float one = 1, zero = 0;
      bli_sgemm(BLIS_NO_TRANSPOSE, BLIS_NO_TRANSPOSE, m, n, k, &one, const_cast<float*>(a.data<float>()), rsa, csa,
                const_cast<float*>(b.data<float>()), rsb, csb, &zero, c.data<float>(), n, 1);
    } else {
      double one = 1, zero = 0;
      bli_dgemm(BLIS_NO_TRANSPOSE, BLIS_NO_TRANSPOSE, m, n, k, &one, const_cast<double*>(a.data<double>()), rsa, csa,
                const_cast<double*>(b.data<double>()), rsb, csb, &zero, c.data<double>(), n, 1);
    }
#else
    (void)a, (void)b, (void)c;
#endif
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }

 private:
  int threads_;
  std::string version_, arch_;  // bli_info_get_version_str(), and the kernels chosen for this CPU
};

}  // namespace

int bench_matmul(const Args& args) {
  po::options_description options("cotan bench matmul");
  options.add_options()
      ("help,h", "this message")
      ("json", "print one JSON object instead of a table")
      ("sizes", po::value<std::string>()->default_value("256,512,1024,2048"),
       "comma-separated sizes: N (square) or MxNxK ([M, K] x [K, N])")
      ("dtypes", po::value<std::string>()->default_value("f32,f64"), "comma-separated: f32, f64, bf16")
      ("layouts", po::value<std::string>()->default_value("nn"),
       "comma-separated: nn (row-major operands), nt (B transposed: x W^T), tn (A transposed: X^T G), tt")
      ("step", "time the products of one `cotan bench train` step (tiny teacher and affine student, batch 8 x "
               "128, f32) instead of --sizes, --layouts and --dtypes: each distinct product once, and the "
               "step's total with each weighted by how often the step runs it")
      ("repeat", po::value<int>()->default_value(10), "timed runs per product (the median is reported)")
      ("device", po::value<std::string>()->default_value("cpu"), "cpu | cuda | cuda:N (cuda: cuBLAS)")
      ("tf32", "f32 products on TF32 tensor cores (cuBLAS; --device cuda)")
      ("torch", "also time PyTorch (torch.matmul) in the same run, alternating call by call")
      ("blis", "also time BLIS (bli_sgemm, bli_dgemm) in the same run, alternating call by call (a build "
               "with libblis-dev installed)");
  add_torch_options(options);
  po::variables_map vm = parse_options(args, options);
  if (vm.count("help")) {
    std::cout << options << "\n";
    return 0;
  }
  check_integers(vm, {{"repeat", 1, 100000}});
  const bool json = vm.count("json") > 0;
  const bool step = vm.count("step") > 0;
  for (const char* name : {"sizes", "layouts", "dtypes"})
    if (step && !vm[name].defaulted()) fail("bench", "--step times the step's own products; it takes no --", name);
  const std::vector<Size> sizes = parse_sizes(vm["sizes"].as<std::string>());
  const std::vector<DType> dtypes = parse_dtypes(vm["dtypes"].as<std::string>());
  const std::vector<std::string> layouts = parse_layouts(vm["layouts"].as<std::string>());
  const int repeat = vm["repeat"].as<int>();
  if (repeat < 1) fail("bench", "--repeat must be at least 1, got ", repeat);
  const int threads = num_threads();
  const Device device = device_option(vm["device"].as<std::string>());
  tf32_option(vm.count("tf32") > 0, device);
  if (vm.count("torch") && !device.is_cpu())
    fail("bench", "--torch times PyTorch on the CPU; it compares with --device cpu only");

  if (vm.count("blis") && !device.is_cpu()) fail("bench", "--blis times BLIS on the CPU; it compares with --device cpu only");
  // What to time: the step's products, or every size x layout x dtype.
  std::vector<Case> cases;
  if (step) {
    cases = step_products(device);
  } else {
    for (const Size& size : sizes)
      for (const std::string& layout : layouts)
        for (DType dtype : dtypes) cases.push_back({size, layout, dtype});
  }
  std::optional<Blis> blis;
  if (vm.count("blis")) blis.emplace(threads);
  std::optional<TorchReference> torch;
  if (vm.count("torch")) torch.emplace(vm, threads);
  // The peak on the CPU only: a GPU's figures have other limits.
  std::optional<FmaPeak> peak_1, peak;
  if (device.is_cpu()) {
    peak_1 = measure_fma_peak(1);
    peak = threads == 1 ? *peak_1 : measure_fma_peak(threads);
  }

  if (!json) {
    std::printf("cotan bench matmul on %s: %d CPU threads, median of %d runs after %d warm-up runs\n",
                to_string(device).c_str(), threads, repeat, kWarmup);
    std::printf("%s\n", host_line(threads).c_str());
    if (peak)
      std::printf("fp32 FMA peak (%s, %d accumulators): %.1f GFLOP/s on 1 thread, %.1f on %d; %%peak is of the "
                  "%d-thread peak (f64: half of it)\n",
                  peak->isa.c_str(), kFmaAccumulators, peak_1->gflops, peak->gflops, threads, threads);
    if (torch)
      std::printf("%s; taking turns with cotan, %lld ms apart, each turn timing its last call after "
                  "about %.0f ms of untimed ones\n",
                  torch->describe().c_str(),
                  static_cast<long long>(kSettle.count()), kTurnWarmup * 1e3);
    if (blis)
      std::printf("%s; taking turns with cotan as PyTorch does; b.ratio: cotan GFLOP/s over BLIS's\n",
                  blis->describe().c_str());
    if (step)
      std::printf("the products of one step of `cotan bench train` (%s -> %s, attention %s, batch %lld x %lld, "
                  "f32), recorded after a first step: %zu distinct; count: how often the step runs each (+N: N of "
                  "them add into their output, timed as plain products)\n",
                  BenchStep::kTeacher, BenchStep::kStudent, std::string(nn::name_of(BenchStep::kAttention)).c_str(),
                  static_cast<long long>(BenchStep::kBatchSize), static_cast<long long>(BenchStep::kSeqLen),
                  cases.size());
    std::printf("%6s %6s %6s  %-6s %-5s", "m", "n", "k", "layout", "dtype");
    if (step) std::printf(" %7s", "count");
    std::printf(" %10s %9s", "ms", "GFLOP/s");
    if (peak) std::printf(" %6s", "%peak");
    if (torch) std::printf(" %10s %11s", "torch ms", "torch GF/s");
    if (torch && peak) std::printf(" %6s", "%peak");
    if (torch) std::printf(" %7s", "ratio");
    if (blis) std::printf(" %10s %10s", "blis ms", "blis GF/s");
    if (blis && peak) std::printf(" %6s", "%peak");
    if (blis) std::printf(" %7s", "b.ratio");
    std::printf("\n");
  }
  std::vector<Result> results;
  Generator gen(0);
  for (const Case& product : cases) {
    const Size& size = product.size;
    const std::string& layout = product.layout;
    const DType dtype = product.dtype;
    // Transposed after the move to the device, which copies into a contiguous tensor.
    const Tensor a = layout[0] == 't' ? transpose(to(randn({size.k, size.m}, gen, dtype), device))
                                      : to(randn({size.m, size.k}, gen, dtype), device);
    const Tensor b = layout[1] == 't' ? transpose(to(randn({size.n, size.k}, gen, dtype), device))
                                      : to(randn({size.k, size.n}, gen, dtype), device);
    double warm = 1e30;
    for (int i = 0; i < kWarmup; ++i) warm = std::min(warm, time_once(a, b));
    if (torch) torch_matmul(*torch, size, dtype, layout, kWarmup);
    const int turn_warmup = int(std::clamp(std::ceil(kTurnWarmup / warm), 1.0, 1000.0));
    const bool with_blis = blis && Blis::handles(dtype);
    const Tensor blis_out = with_blis ? Tensor::empty({size.m, size.n}, dtype) : Tensor();
    if (with_blis)
      for (int i = 0; i < kWarmup; ++i) blis->time_once(a, b, blis_out);
    std::vector<double> ours, theirs, blis_times;
    for (int r = 0; r < repeat; ++r) {
      if (torch || with_blis) {
        std::this_thread::sleep_for(kSettle);
        for (int i = 0; i < turn_warmup; ++i) time_once(a, b);
      }
      ours.push_back(time_once(a, b));
      if (with_blis) {
        std::this_thread::sleep_for(kSettle);
        for (int i = 0; i < turn_warmup; ++i) blis->time_once(a, b, blis_out);
        blis_times.push_back(blis->time_once(a, b, blis_out));
      }
      if (!torch) continue;
      std::this_thread::sleep_for(kSettle);
      theirs.push_back(torch_matmul(*torch, size, dtype, layout, turn_warmup + 1).back());
    }
    Result result{size, dtype, layout, product.count, product.accumulating, median(ours), std::nullopt, std::nullopt};
    if (torch) result.torch_seconds = median(theirs);
    if (with_blis) {
      result.blis_seconds = median(blis_times);
      // The same product: a BLIS that computed something else would make the ratio meaningless.
      const Tensor ours_out = backend(a.device()).matmul(a, b);
      const double scale = max(abs(cast(blis_out, DType::f64))).item<double>();
      const double diff = max(abs(cast(ours_out, DType::f64) - cast(blis_out, DType::f64))).item<double>();
      const double tolerance = (dtype == DType::f32 ? 1e-4 : 1e-12) * std::max(scale, 1.0);
      check(diff <= tolerance, "bench", "--blis: BLIS's product of ", size.m, "x", size.n, "x", size.k, " (",
            layout, ") differs from cotan's by ", diff, " (largest |C| ", scale, ")");
    }
    results.push_back(result);
    if (!json) {
      std::printf("%6lld %6lld %6lld  %-6s %-5s", static_cast<long long>(size.m), static_cast<long long>(size.n),
                  static_cast<long long>(size.k), layout.c_str(), std::string(dtype_name(dtype)).c_str());
      if (step) {
        char count[32];
        if (product.accumulating)
          std::snprintf(count, sizeof count, "%lld+%lld", static_cast<long long>(product.count),
                        static_cast<long long>(product.accumulating));
        else
          std::snprintf(count, sizeof count, "%lld", static_cast<long long>(product.count));
        std::printf(" %7s", count);
      }
      std::printf(" %10.3f %9.1f", result.seconds * 1e3, result.gflops());
      if (peak) std::printf(" %5.1f%%", 100 * result.gflops() / peak_of(*peak, dtype));
      if (torch) std::printf(" %10.3f %11.1f", *result.torch_seconds * 1e3, result.torch_gflops());
      if (torch && peak) std::printf(" %5.1f%%", 100 * result.torch_gflops() / peak_of(*peak, dtype));
      if (torch) std::printf(" %7.2f", result.gflops() / result.torch_gflops());
      if (blis && result.blis_seconds) {
        std::printf(" %10.3f %10.1f", *result.blis_seconds * 1e3, result.blis_gflops());
        if (peak) std::printf(" %5.1f%%", 100 * result.blis_gflops() / peak_of(*peak, dtype));
        std::printf(" %7.2f", result.gflops() / result.blis_gflops());
      } else if (blis) {
        std::printf(" %10s %10s%s %7s", "-", "-", peak ? "      -" : "", "-");
      }
      std::printf("\n");
      std::fflush(stdout);
    }
  }

  // The peak again, after the products: on a shared host the capacity can change during a run
  // (on a 2-vCPU cloud machine, two concurrent FMA loops measured 47 GFLOP/s each one minute and
  // 91 the next), and a %peak is only as good as the peak it divides by.
  std::optional<FmaPeak> peak_end;
  if (peak) peak_end = measure_fma_peak(threads);
  if (!json && peak) {
    std::printf("fp32 FMA peak again after the products: %.1f GFLOP/s on %d thread%s (before: %.1f)\n",
                peak_end->gflops, threads, threads == 1 ? "" : "s", peak->gflops);
    std::printf("%s", host_capacity_notes(*peak_1, *peak, *peak_end).c_str());
  }
  const StepTotal total = step ? step_total(results) : StepTotal{};
  if (!json && step) {
    // The step's products are f32 (BenchStep), so the f32 peak is theirs.
    auto line = [&](const char* who, double seconds) {
      const double gflops = total.flops / seconds / 1e9;
      std::printf("  %-8s %8.2f ms %9.1f GFLOP/s", who, seconds * 1e3, gflops);
      if (peak) std::printf(" %5.1f%% of peak", 100 * gflops / peak->gflops);
      std::printf("\n");
    };
    std::printf("\nthe step's %lld products (%.3f GFLOP), each timed alone, weighted by its count:\n",
                static_cast<long long>(total.products), total.flops / 1e9);
    line("cotan", total.seconds);
    if (total.torch_seconds) line("PyTorch", *total.torch_seconds);
    if (total.blis_seconds) line("BLIS", *total.blis_seconds);
    if (total.torch_seconds) std::printf("  ratio (cotan GFLOP/s over PyTorch's) %.2f\n", *total.torch_seconds / total.seconds);
    if (total.blis_seconds) std::printf("  b.ratio (over BLIS's) %.2f\n", *total.blis_seconds / total.seconds);
  }

  if (json) {
    std::cout << "{\"device\":\"" << to_string(device) << "\",\"threads\":" << threads << ",\"repeat\":" << repeat
              << "," << host_json(threads);
    if (peak)
      std::cout << ",\"fma_peak\":{\"isa\":\"" << peak->isa << "\",\"accumulators\":" << kFmaAccumulators
                << ",\"dtype\":\"f32\",\"gflops_1_thread\":" << json_number(peak_1->gflops)
                << ",\"gflops\":" << json_number(peak->gflops)
                << ",\"gflops_after\":" << json_number(peak_end->gflops) << ",\"threads\":" << threads << "}";
    else
      std::cout << ",\"fma_peak\":null";
    std::cout << "," << (torch ? torch->json_field() : "\"torch\":null");
    std::cout << "," << (blis ? blis->json_field() : "\"blis\":null");
    if (step) {
      std::cout << ",\"step\":{\"teacher\":\"" << BenchStep::kTeacher << "\",\"student\":\"" << BenchStep::kStudent
                << "\",\"attention\":\"" << nn::name_of(BenchStep::kAttention) << "\",\"batch\":" << BenchStep::kBatchSize
                << ",\"seq_len\":" << BenchStep::kSeqLen << ",\"products\":" << total.products
                << ",\"distinct\":" << results.size() << ",\"gflop\":" << json_number(total.flops / 1e9)
                << ",\"ms\":" << json_number(total.seconds * 1e3) << ",\"gflops\":" << json_number(total.gflops());
      if (peak) std::cout << ",\"fraction_of_peak\":" << json_number(total.gflops() / peak->gflops);
      // The other side's figures, under its prefix; `ratio` is cotan's speed over its speed.
      auto other = [&](const std::string& prefix, const char* ratio, std::optional<double> seconds) {
        if (!seconds) return;
        const double gflops = total.flops / *seconds / 1e9;
        std::cout << ",\"" << prefix << "_ms\":" << json_number(*seconds * 1e3) << ",\"" << prefix
                  << "_gflops\":" << json_number(gflops);
        if (peak) std::cout << ",\"" << prefix << "_fraction_of_peak\":" << json_number(gflops / peak->gflops);
        std::cout << ",\"" << ratio << "\":" << json_number(*seconds / total.seconds);
      };
      other("torch", "ratio", total.torch_seconds);
      other("blis", "blis_ratio", total.blis_seconds);
      std::cout << "}";
    } else {
      std::cout << ",\"step\":null";
    }
    std::cout << ",\"results\":[";
    for (size_t i = 0; i < results.size(); ++i) {
      const Result& r = results[i];
      std::cout << (i ? "," : "") << "{\"m\":" << r.size.m << ",\"n\":" << r.size.n << ",\"k\":" << r.size.k
                << ",\"layout\":\"" << r.layout << "\",\"dtype\":\"" << dtype_name(r.dtype) << "\",\"count\":" << r.count
                << ",\"accumulating\":" << r.accumulating << ",\"ms\":" << json_number(r.seconds * 1e3)
                << ",\"gflops\":" << json_number(r.gflops());
      if (peak) std::cout << ",\"fraction_of_peak\":" << json_number(r.gflops() / peak_of(*peak, r.dtype));
      if (r.torch_seconds)
        std::cout << ",\"torch_ms\":" << json_number(*r.torch_seconds * 1e3)
                  << ",\"torch_gflops\":" << json_number(r.torch_gflops())
                  << (peak ? ",\"torch_fraction_of_peak\":" + json_number(r.torch_gflops() / peak_of(*peak, r.dtype)) : "")
                  << ",\"ratio\":" << json_number(r.gflops() / r.torch_gflops());
      if (r.blis_seconds)
        std::cout << ",\"blis_ms\":" << json_number(*r.blis_seconds * 1e3)
                  << ",\"blis_gflops\":" << json_number(r.blis_gflops())
                  << (peak ? ",\"blis_fraction_of_peak\":" + json_number(r.blis_gflops() / peak_of(*peak, r.dtype)) : "")
                  << ",\"blis_ratio\":" << json_number(r.gflops() / r.blis_gflops());
      std::cout << "}";
    }
    std::cout << "]}\n";
  }
  return 0;
}

}  // namespace cotan::app
