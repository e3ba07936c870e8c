#include "app/options.hpp"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <filesystem>
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

void add_affine_options(po::options_description& opts, AffineOptions& affine) {
  const nn::AttentionConfig defaults;
  opts.add_options()(
      "phi", po::value(&affine.phi)->value_name("FN"),
      cat("affine kinds: alpha = phi(z), linear_clip or sigmoid (default ", nn::name_of(defaults.phi), ")").c_str())(
      "affine-n", po::value(&affine.affine_n)->value_name("N"),
      cat("affine kinds: beta's N_i, visible (i + 1 keys) or full (T) (default ", nn::name_of(defaults.affine_n), ")")
          .c_str());
}

void apply_affine_options(const AffineOptions& affine, nn::AttentionConfig& attention) {
  if (!affine.phi.empty()) {
    if (affine.phi == nn::name_of(nn::AlphaFn::linear_clip)) attention.phi = nn::AlphaFn::linear_clip;
    else if (affine.phi == nn::name_of(nn::AlphaFn::sigmoid)) attention.phi = nn::AlphaFn::sigmoid;
    else out_of_range("phi", affine.phi, "linear_clip or sigmoid", "");
  }
  if (!affine.affine_n.empty()) {
    if (affine.affine_n == nn::name_of(nn::AffineN::visible)) attention.affine_n = nn::AffineN::visible;
    else if (affine.affine_n == nn::name_of(nn::AffineN::full)) attention.affine_n = nn::AffineN::full;
    else out_of_range("affine-n", affine.affine_n, "visible or full", "");
  }
}

void check_affine_options_apply(const AffineOptions& affine, nn::AttentionKind kind) {
  check_affine_options_apply(affine, nn::is_affine(kind), nn::name_of(kind));
}

void check_affine_options_apply(const AffineOptions& affine, bool affine_chosen, std::string_view chosen) {
  if (affine_chosen) return;
  std::string affine_kinds;
  for (const nn::AttentionKindInfo& k : nn::attention_kinds())
    if (k.core == CoreKind::affine) affine_kinds += cat(affine_kinds.empty() ? "" : ", ", k.name);
  for (const char* option : {"phi", "affine-n"}) {
    const std::string& value = std::string_view(option) == "phi" ? affine.phi : affine.affine_n;
    if (!value.empty())
      fail("option", "--", option, " ", value, ": applies to the affine kinds (", affine_kinds, "), not ", chosen);
  }
}

uint64_t parse_u64_option(std::string_view option, const std::string& text) {
  uint64_t value = 0;
  const char* end = text.data() + text.size();
  const auto [p, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || text[0] == '-' || text[0] == '+' || ec != std::errc() || p != end)
    out_of_range(option, text, cat("an integer in [0, ", std::numeric_limits<uint64_t>::max(), "]"), "");
  return value;
}

void check_output_dir(std::string_view op, std::string_view option, const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status status = fs::status(dir, ec);
  if (ec == std::errc::not_a_directory)
    fail(op, option, " ", dir, ": a file is in the way on its path (", option, " names a directory)");
  if (ec && ec != std::errc::no_such_file_or_directory) fail(op, option, " ", dir, ": ", ec.message());
  if (fs::exists(status) && !fs::is_directory(status))
    fail(op, option, " ", dir, ": a file of that name is in the way (", option, " names a directory)");
}

void create_output_dir(std::string_view op, std::string_view option, const std::string& dir) {
  check_output_dir(op, option, dir);
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) fail(op, option, " ", dir, ": cannot create the directory: ", ec.message());
}

}  // namespace cotan::app
