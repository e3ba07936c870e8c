// `cotan bench ops`: memory bandwidth of the CPU elementwise and reduction kernels, side by side
// with a plain std::memcpy measured in the same run. Every op is timed interleaved with the
// others (repeat r runs each op once), the median is reported as GB/s counting the bytes read
// plus the bytes written, and as a ratio to memcpy's GB/s.
#include <algorithm>
#include <boost/program_options.hpp>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>
#include <functional>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "app/bench_util.hpp"
#include "app/commands.hpp"
#include "app/options.hpp"
#include "tensor/error.hpp"
#include "tensor/op_table.hpp"
#include "tensor/ops.hpp"

namespace cotan::app {

namespace {

namespace po = boost::program_options;

struct Measured {
  std::string name;
  double bytes = 0;  // read + written by one run
  std::function<void()> run;
  std::vector<double> seconds;
  std::optional<std::string> unavailable;  // why the op could not run (e.g. not implemented)

  double median() const { return app::median(seconds); }
  double gbps() const { return bytes / median() / 1e9; }
};

std::string json_string(const std::string& s) { return "\"" + json_escape(s) + "\""; }

}  // namespace

int bench_ops(const Args& args) {
  po::options_description options("cotan bench ops");
  options.add_options()
      ("help,h", "this message")
      ("json", "print one JSON object instead of a table")
      ("size", po::value<int64_t>()->default_value(int64_t(1) << 24), "elements per operand (f32)")
      ("repeat", po::value<int>()->default_value(20), "timed runs of each op (the median is reported)");
  po::variables_map vm = parse_options(args, options);
  if (vm.count("help")) {
    std::cout << options << "\n";
    return 0;
  }
  check_integers(vm, {{"size", 1, int64_t(1) << 32}, {"repeat", 1, 100000}});
  const bool json = vm.count("json") > 0;
  const int64_t size = vm["size"].as<int64_t>();
  const int repeat = vm["repeat"].as<int>();
  check(size >= 1, "bench ops", "--size must be positive, got ", size);
  check(repeat >= 1, "bench ops", "--repeat must be positive, got ", repeat);

  // Operands are [rows, cols]; the row-broadcast add and the last-axis reductions use that shape.
  const int64_t cols = size >= 1024 ? 1024 : size;
  const int64_t rows = size / cols;
  const int64_t n = rows * cols;
  const double f32 = sizeof(float);
  Backend& be = cpu_backend();
  Generator gen(0);
  Tensor x = be.random(RandomOp::uniform, {rows, cols}, DType::f32, gen, -1.0, 1.0);
  Tensor y = be.random(RandomOp::uniform, {rows, cols}, DType::f32, gen, -1.0, 1.0);
  Tensor row = be.random(RandomOp::uniform, {cols}, DType::f32, gen, -1.0, 1.0);
  Tensor row_broadcast = row.as_strided({rows, cols}, {0, 1}, 0);
  Tensor cond = be.random(RandomOp::bernoulli, {rows, cols}, DType::boolean, gen, 0.5, 0.0);
  Tensor copy_dst = Tensor::empty({rows, cols}, DType::f32);
  be.fill(copy_dst, 0.0);  // touch the pages before timing

  const double unary_bytes = 2 * f32 * double(n), binary_bytes = 3 * f32 * double(n);
  std::vector<Measured> ops = {
      {"memcpy", unary_bytes, [&] { std::memcpy(copy_dst.data_ptr(), x.data_ptr(), x.nbytes()); }, {}, {}},
      {"assign (copy)", unary_bytes, [&] { be.assign(copy_dst, x); }, {}, {}},
      {"neg", unary_bytes, [&] { be.unary(UnaryOp::neg, x, 0, 0); }, {}, {}},
      {"exp", unary_bytes, [&] { be.unary(UnaryOp::exp, x, 0, 0); }, {}, {}},
      {"add", binary_bytes, [&] { be.binary(BinaryOp::add, x, y); }, {}, {}},
      {"mul", binary_bytes, [&] { be.binary(BinaryOp::mul, x, y); }, {}, {}},
      {"add (row broadcast)", unary_bytes + f32 * double(cols),
       [&] { be.binary(BinaryOp::add, x, row_broadcast); }, {}, {}},
      {"where", binary_bytes + double(n), [&] { be.where(cond, x, y); }, {}, {}},
      {"sum (all)", f32 * double(n + 1), [&] { be.reduce(ReduceOp::sum, x, {0, 1}, false); }, {}, {}},
      {"max (all)", f32 * double(n + 1), [&] { be.reduce(ReduceOp::max, x, {0, 1}, false); }, {}, {}},
      {"sum (last axis)", f32 * double(n + rows), [&] { be.reduce(ReduceOp::sum, x, {1}, false); }, {}, {}},
      {"max (last axis)", f32 * double(n + rows), [&] { be.reduce(ReduceOp::max, x, {1}, false); }, {}, {}},
  };

  // Warm up (caches, the allocator's block cache, thread pool); an op that throws is reported
  // as n/a, e.g. a kernel that has not landed yet.
  for (Measured& op : ops) {
    try {
      op.run();
      op.run();
    } catch (const std::exception& e) {
      op.unavailable = e.what();
    }
  }
  for (int r = 0; r < repeat; ++r)
    for (Measured& op : ops)
      if (!op.unavailable) op.seconds.push_back(seconds_of(op.run));

  const double copy_gbps = ops.front().gbps();
  const int threads = num_threads();
  if (json) {
    std::cout << "{\"size\":" << n << ",\"threads\":" << threads << ",\"repeat\":" << repeat
              << ",\"copy_gbps\":" << json_number(copy_gbps) << ",\"ops\":[";
    bool first = true;
    for (const Measured& op : ops) {
      if (op.name == "memcpy") continue;
      std::cout << (first ? "" : ",") << "{\"name\":" << json_string(op.name);
      first = false;
      if (op.unavailable) {
        std::cout << ",\"gbps\":null,\"ratio_to_copy\":null,\"ms\":null,\"error\":" << json_string(*op.unavailable)
                  << "}";
        continue;
      }
      std::cout << ",\"gbps\":" << json_number(op.gbps()) << ",\"ratio_to_copy\":"
                << json_number(op.gbps() / copy_gbps) << ",\"ms\":" << json_number(op.median() * 1e3) << "}";
    }
    std::cout << "]}\n";
    return 0;
  }

  std::printf("cotan bench ops: [%lld, %lld] f32 (%lld elements), %d threads, median of %d\n",
              static_cast<long long>(rows), static_cast<long long>(cols), static_cast<long long>(n), threads,
              repeat);
  std::printf("%-22s %10s %10s %12s\n", "op", "ms", "GB/s", "vs memcpy");
  for (const Measured& op : ops) {
    if (op.unavailable) {
      std::printf("%-22s %10s %10s %12s   (%s)\n", op.name.c_str(), "n/a", "n/a", "n/a", op.unavailable->c_str());
      continue;
    }
    std::printf("%-22s %10.3f %10.2f %12.2f\n", op.name.c_str(), op.median() * 1e3, op.gbps(),
                op.gbps() / copy_gbps);
  }
  std::printf("GB/s counts bytes read plus bytes written by one run.\n");
  return 0;
}

}  // namespace cotan::app
