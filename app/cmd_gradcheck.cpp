// cotan gradcheck [--json] [--seed N] [--filter SUBSTRING] [--device cuda]
// Runs the gradient-check table (autograd/gradcheck_table.hpp) and prints one row per op, then
// "N passed, M failed". With --device D the same cases run on D and on the CPU, and the rows
// compare the two (output and gradients, rtol kDeviceCompareRtol) instead of finite differences.
// Exit code 1 when any check fails. A check that throws counts as failed; its message goes to
// stderr (and into the table's last column).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include <boost/program_options.hpp>

#include "app/commands.hpp"
#include "app/options.hpp"
#include "autograd/gradcheck_table.hpp"
#include "train/gradcheck_cases.hpp"
#include "tensor/op_table.hpp"

namespace po = boost::program_options;

namespace cotan::app {

namespace {

struct Row {
  std::string name;
  double max_abs_err = 0;
  double max_rel_err = 0;
  bool pass = false;
  std::string error;  // set when the check threw
};

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (uint8_t(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", unsigned(uint8_t(c)));
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

// JSON has no NaN or infinity: those (and checks that threw) print as null.
std::string json_number(double v, bool valid) {
  if (!valid || !std::isfinite(v)) return "null";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6e", v);
  return buf;
}

}  // namespace

int cmd_gradcheck(const Args& args) {
  po::options_description options("cotan gradcheck: check every op's gradient against central differences");
  bool json = false;
  std::string seed_text, filter, device_name = "cpu";
  options.add_options()
      ("help,h", "show this help")
      ("json", po::bool_switch(&json), "print one JSON object instead of a table")
      ("seed", po::value<std::string>(&seed_text)->default_value("0"), "seed for the inputs and the projection, in [0, 2^64)")
      ("filter", po::value<std::string>(&filter), "only ops whose name contains SUBSTRING")
      ("device", po::value<std::string>(&device_name)->default_value("cpu"),
       "cpu: central differences; cuda: the CUDA results against the CPU's on the same inputs");
  po::variables_map vm = parse_options(args, options);
  if (vm.count("help")) {
    std::cout << options << "\n";
    return 0;
  }
  const uint64_t seed = parse_u64_option("seed", seed_text);
  const Device device = device_option(device_name);

  std::vector<Row> rows;
  for (const OpCheck& check : train::op_checks()) {
    if (!filter.empty() && check.name.find(filter) == std::string::npos) continue;
    Row row;
    row.name = check.name;
    try {
      GradcheckResult r = device.is_cpu() ? check.run(seed) : check.compare(seed, device);
      row.max_abs_err = r.max_abs_err;
      row.max_rel_err = r.max_rel_err;
      row.pass = r.pass;
    } catch (const std::exception& e) {
      row.error = e.what();
      std::cerr << check.name << ": " << e.what() << "\n";
    }
    rows.push_back(std::move(row));
  }
  int passed = 0, failed = 0;
  for (const Row& row : rows) (row.pass ? passed : failed)++;

  if (json) {
    std::cout << "{\"ops\": [";
    for (size_t i = 0; i < rows.size(); ++i) {
      const Row& row = rows[i];
      bool valid = row.error.empty();
      std::cout << (i ? ", " : "") << "{\"name\": " << json_string(row.name)
                << ", \"max_abs_err\": " << json_number(row.max_abs_err, valid)
                << ", \"max_rel_err\": " << json_number(row.max_rel_err, valid)
                << ", \"pass\": " << (row.pass ? "true" : "false") << "}";
    }
    std::cout << "], \"passed\": " << passed << ", \"failed\": " << failed << "}\n";
  } else {
    size_t width = 2;
    for (const Row& row : rows) width = std::max(width, row.name.size());
    std::printf("%-*s  %12s  %12s  %s\n", int(width), "op", "max_abs_err", "max_rel_err", "result");
    for (const Row& row : rows) {
      if (row.error.empty())
        std::printf("%-*s  %12.3e  %12.3e  %s\n", int(width), row.name.c_str(), row.max_abs_err, row.max_rel_err,
                    row.pass ? "PASS" : "FAIL");
      else
        std::printf("%-*s  %12s  %12s  FAIL (%s)\n", int(width), row.name.c_str(), "-", "-", row.error.c_str());
    }
    std::printf("%d passed, %d failed\n", passed, failed);
  }
  std::fflush(stdout);
  return failed > 0 ? 1 : 0;
}

}  // namespace cotan::app
