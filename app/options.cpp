#include "app/options.hpp"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <thread>

#include "tensor/ops.hpp"
#include "util/error.hpp"

namespace cotan::app {

namespace {

constexpr int64_t kMaxThreads = 4096;

std::string bound(double v) {
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return cat(v);
}

[[noreturn]] void out_of_range(std::string_view option, const std::string& value, const std::string& range,
                               std::string_view note) {
  fail("option", "--", option, " ", value, ": expected ", range, note.empty() ? "" : cat(" (", note, ")"));
}

}  // namespace

void add_threads_option(po::options_description& opts) {
  opts.add_options()("threads", po::value<int64_t>()->default_value(0), "CPU threads (0: all cores)");
}

void apply_threads_option(const po::variables_map& vm) {
  const int64_t threads = vm["threads"].as<int64_t>();
  check_integer("threads", threads, 0, kMaxThreads, "0: all cores");
  set_num_threads(int(threads));
}

po::variables_map parse_options(const Args& args, po::options_description& opts,
                                const po::positional_options_description* positional) {
  add_threads_option(opts);
  po::variables_map vm;
  auto parser = po::command_line_parser(args).options(opts);
  if (positional) parser.positional(*positional);
  po::store(parser.run(), vm);
  po::notify(vm);
  apply_threads_option(vm);
  return vm;
}

void check_integer(std::string_view option, int64_t value, int64_t lo, int64_t hi, std::string_view note) {
  if (value >= lo && value <= hi) return;
  out_of_range(option, cat(value), cat("an integer in [", lo, ", ", hi == kNoLimit ? std::string("inf") : cat(hi), "]"), note);
}

void check_number(std::string_view option, double value, double lo, double hi, bool lo_open, std::string_view note) {
  if (std::isfinite(value) && (lo_open ? value > lo : value >= lo) && value <= hi) return;
  out_of_range(option, cat(value), cat("a number in ", lo_open ? "(" : "[", bound(lo), ", ", bound(hi), std::isinf(hi) ? ")" : "]"),
               note);
}

void check_integers(const po::variables_map& vm, std::initializer_list<IntegerRange> ranges) {
  for (const IntegerRange& r : ranges) {
    const boost::any& value = vm[r.option].value();
    int64_t v = 0;
    if (const auto* wide = boost::any_cast<int64_t>(&value)) {
      v = *wide;
    } else if (const auto* narrow = boost::any_cast<int>(&value)) {
      v = *narrow;
    } else {
      fail("option", "--", r.option, " is not an integer option");
    }
    check_integer(r.option, v, r.lo, r.hi, r.note);
  }
}

std::string shown(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", value);
  return text;
}

uint64_t parse_u64_option(std::string_view option, const std::string& text) {
  uint64_t value = 0;
  const char* end = text.data() + text.size();
  const auto [p, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || text[0] == '-' || text[0] == '+' || ec != std::errc() || p != end)
    out_of_range(option, text, cat("an integer in [0, ", std::numeric_limits<uint64_t>::max(), "]"), "");
  return value;
}

}  // namespace cotan::app
