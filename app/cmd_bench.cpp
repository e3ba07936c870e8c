// `cotan bench <name> [args]`: picks a benchmark and hands it the remaining arguments.
#include <iostream>
#include <string_view>

#include "app/commands.hpp"
#include "tensor/error.hpp"

namespace cotan::app {

namespace {

struct Benchmark {
  std::string_view name;
  int (*run)(const Args&);
  std::string_view summary;
};

constexpr Benchmark benchmarks[] = {
    {"matmul", bench_matmul, "GEMM throughput by shape and dtype"},
    {"ops", bench_ops, "elementwise, reduction and indexing kernels"},
    {"attention", bench_attention, "fused and composed attention, every kind, forward + backward"},
    {"kd-loss", bench_kd_loss, "fused and composed distillation losses: time and peak memory"},
    {"train", bench_train, "the tiny student's distillation step: tokens/s, against eager and compiled PyTorch"},
    {"tokenize", bench_tokenize, "HF tokenizer.json encoding: MB/s on 1 and 2 threads, against HF tokenizers"},
    {"generate", bench_generate, "greedy generation with the KV cache: tokens/s, against HF transformers' generate"},
};

void print_help(std::ostream& out) {
  out << "usage: cotan bench <benchmark> [args]\n"
         "\n"
         "benchmarks:\n";
  for (const Benchmark& b : benchmarks) {
    out << "  " << b.name << std::string(10 - b.name.size(), ' ') << b.summary << "\n";
  }
  out << "\n'cotan bench <benchmark> --help' lists its options.\n";
}

}  // namespace

std::string bench_names() {
  std::string out;
  for (const Benchmark& b : benchmarks) out += (out.empty() ? "" : ", ") + std::string(b.name);
  return out;
}

int cmd_bench(const Args& args) {
  if (args.empty()) fail("bench", "which benchmark? expected one of: ", bench_names(), " (see cotan bench --help)");
  const std::string_view name = args.front();
  if (name == "--help" || name == "-h" || name == "help") {
    print_help(std::cout);
    return 0;
  }
  for (const Benchmark& b : benchmarks) {
    if (b.name == name) return b.run(Args(args.begin() + 1, args.end()));
  }
  fail("bench", "unknown benchmark '", name, "' (expected one of: ", bench_names(), ")");
}

}  // namespace cotan::app
