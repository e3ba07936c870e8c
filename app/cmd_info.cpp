// `cotan info [--json]`: what this binary was built with and what it can run on.
#include <boost/program_options.hpp>
#include <cstdio>
#include <iostream>
#include <oneapi/tbb/info.h>
#include <oneapi/tbb/version.h>
#include <string>

#include "app/bench_util.hpp"
#include "app/commands.hpp"
#include "app/options.hpp"
#include "cotan_config.h"
#include "cuda/runtime.hpp"
#include "tensor/cpu/gemm_info.hpp"
#include "tensor/error.hpp"
#include "tensor/op_table.hpp"
#include "tensor/ops.hpp"

// Only Eigen's version macros: the whole of <Eigen/Core> is not needed here.
#include <Eigen/src/Core/util/Macros.h>

namespace po = boost::program_options;

namespace cotan::app {
namespace {

#ifdef COTAN_NATIVE
constexpr bool native_build = true;
#else
constexpr bool native_build = false;
#endif

std::string compiler() {
#if defined(__clang__)
  return "clang " __clang_version__;
#elif defined(__GNUC__)
  return "gcc " __VERSION__;
#else
  return "unknown";
#endif
}

std::string eigen_version() {
  return cat(EIGEN_WORLD_VERSION, ".", EIGEN_MAJOR_VERSION, ".", EIGEN_MINOR_VERSION);
}

std::string tbb_version() {
  const std::string header = TBB_VERSION_STRING, runtime = TBB_runtime_version();
  return header == runtime ? header : cat(header, " (runtime ", runtime, ")");
}

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

std::string gib(size_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f GiB", double(bytes) / double(size_t(1) << 30));
  return buf;
}

// How the CPU GEMM multiplies bf16, and the choice COTAN_GEMM_BF16 offers where the build has one.
std::string bf16_phrase(const cpu::GemmInfo& g) {
  if (g.bf16 != "f32") return ", bf16 on " + g.bf16;
  if (g.bf16_kernels == "f32") return ", bf16 widened to f32";
  return ", bf16 widened to f32 (COTAN_GEMM_BF16=avx512_bf16: vdpbf16ps)";
}

// The CPU GEMM's kernel and blocking: "avx512 14x32 (f32), KC 512, MC 252, bf16 widened to f32; L2 1 MiB
// (sysfs), L3 32 MiB (sysfs)" (or "bf16 on avx512_bf16").
std::string gemm_line() {
  const cpu::GemmInfo g = cpu::gemm_info();
  if (g.kernel == "eigen") return "Eigen (no AVX2+FMA or AVX-512 at compile time)";
  auto mib = [](int64_t bytes) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g MiB", double(bytes) / double(1 << 20));
    return std::string(buf);
  };
  return g.kernel + " " + std::to_string(g.mr) + "x" + std::to_string(g.nr_f32) + " (f32), KC " +
         std::to_string(g.kc_f32) + ", MC " + std::to_string(g.mc_f32) + bf16_phrase(g) + "; L2 " + mib(g.l2_bytes) +
         " (" + g.l2_source + "), L3 " + mib(g.l3_bytes) + " (" + g.l3_source + ")";
}

}  // namespace

int cmd_info(const Args& args) {
  po::options_description options("cotan info [--json]");
  options.add_options()
      ("help,h", "print this help")
      ("json", "print one JSON object instead of text");
  // An empty positional description makes stray arguments an error instead of ignoring them.
  const po::positional_options_description none;
  po::variables_map vm = parse_options(args, options, &none);
  if (vm.count("help")) {
    std::cout << options << "\n";
    return 0;
  }

  const int threads = tbb::info::default_concurrency(), used = num_threads();
  const std::vector<CudaDevice> devices = cuda_devices();
  const std::string status = cuda_status();
  const bool emulator = cuda_emulator_requested();
  // Before anything is printed: a bad COTAN_GEMM_* variable is then the only line.
  const std::string gemm = vm.count("json") ? gemm_json() : gemm_line();

  if (vm.count("json")) {
    std::cout << "{\"version\": " << json_string(COTAN_VERSION)
              << ", \"build_type\": " << json_string(COTAN_BUILD_TYPE)
              << ", \"native\": " << (native_build ? "true" : "false")
              << ", \"compiler\": " << json_string(compiler())
              << ", \"cuda_compiled_in\": " << (cuda_compiled_in() ? "true" : "false")
              << ", \"cpu_threads\": " << threads << ", \"threads\": " << used
              << ", \"cpu_gemm\": " << gemm
              << ", \"eigen\": " << json_string(eigen_version())
              << ", \"tbb\": " << json_string(tbb_version())
              << ", \"cuda_status\": " << json_string(status)
              << ", \"cuda_emulator\": " << (emulator ? "true" : "false")
              << ", \"cuda_devices\": [";
    for (size_t i = 0; i < devices.size(); ++i) {
      const CudaDevice& d = devices[i];
      std::cout << (i ? ", " : "") << "{\"index\": " << d.index << ", \"name\": " << json_string(d.name)
                << ", \"total_memory\": " << d.total_memory << ", \"compute_capability\": \"" << d.major
                << "." << d.minor << "\", \"sm_count\": " << d.sm_count << "}";
    }
    std::cout << "]}\n";
    return 0;
  }

  std::cout << "cotan " << COTAN_VERSION << "\n"
            << "  build        " << COTAN_BUILD_TYPE << (native_build ? ", -march=native" : ", portable")
            << ", " << compiler() << "\n"
            << "  cuda         " << (cuda_compiled_in() ? "compiled in" : "not compiled in") << "\n"
            << "  cpu threads  " << threads << " (" << used << " used; --threads N bounds them)\n"
            << "  cpu gemm     " << gemm << "\n"
            << "  eigen        " << eigen_version() << "\n"
            << "  tbb          " << tbb_version() << "\n"
            << "  devices      cpu";
  if (devices.empty()) {
    std::cout << " (" << status << ")\n";
  } else {
    std::cout << "; " << status << "\n";
    for (const CudaDevice& d : devices) {
      std::cout << "    cuda:" << d.index << "  " << d.name << ", sm_" << d.major << d.minor << ", "
                << d.sm_count << " SMs, " << gib(d.total_memory) << "\n";
    }
  }
  if (emulator)
    std::cout << "  emulator     cuda:0 is the SIMT emulator on the CPU (" << kCudaEmulatorVariable << " is set)\n";
  return 0;
}

}  // namespace cotan::app
