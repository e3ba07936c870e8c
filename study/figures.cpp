// The study's figures: their tidy CSVs, drawn by study/plot_figures.py (study/figures.hpp).
#include "study/figures.hpp"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>

#include "tensor/error.hpp"
#include "study/stats.hpp"
#include "util/atomic_file.hpp"

extern char** environ;

namespace cotan::study::detail {
extern const char* const kPlotFiguresScript;  // study/plot_figures.py, embedded at build time
}

namespace cotan::study {

namespace fs = std::filesystem;

namespace {

// A CSV number that reads back to the same double ("nan" for a value not computed).
std::string exact(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

// The tidy CSV of a per-step or per-layer figure: one row per run and index.
std::string tidy_csv(const std::vector<std::vector<FigureRun>>& runs, const std::string& index_name,
                     const std::function<const std::vector<double>&(const FigureRun&)>& ys, const std::string& metric,
                     bool index_is_step) {
  Table t({"variant", "seed", index_name, "metric", "value"});
  for (const auto& seeds : runs)
    for (const FigureRun& r : seeds) {
      const std::vector<double>& y = ys(r);
      for (size_t i = 0; i < y.size(); ++i)
        t.add_row({r.variant, cat(r.seed), index_is_step ? cat(int64_t(r.steps.at(i))) : cat(i), metric, exact(y[i])});
    }
  return t.csv();
}

// prefix + the variant with each run of other characters than letters, digits, '.', '-' and '_'
// as one '_', none at the end.
std::string figure_name(const std::string& prefix, const std::string& variant) {
  std::string out = prefix;
  for (char ch : variant) {
    if (std::isalnum(static_cast<unsigned char>(ch)) || ch == '.' || ch == '-') {
      out += ch;
    } else if (out.back() != '_' || ch == '_') {
      out += '_';
    }
  }
  while (out.size() > prefix.size() && out.back() == '_') out.pop_back();
  return out;
}

// The weight-sum histogram's CSV (study/figures.hpp).
void write_weight_sum_histogram(const fs::path& dir, const std::vector<std::vector<FigureRun>>& runs) {
  double lo = INFINITY, hi = -INFINITY;
  for (const auto& seeds : runs)
    for (const FigureRun& r : seeds)
      for (double w : r.weight_sums)
        if (std::isfinite(w)) lo = std::min(lo, w), hi = std::max(hi, w);
  if (!(lo <= hi)) return;  // no weight sums
  // A range of one value (softmax alone: every sum is 1) is widened so that it has bins.
  if (hi - lo < 1e-6) lo -= 0.05, hi += 0.05;
  const double width = (hi - lo) / kWeightSumBins;
  auto bin_of = [&](double w) { return std::clamp(int((w - lo) / width), 0, kWeightSumBins - 1); };
  auto edge = [&](int b) { return b == kWeightSumBins ? hi : lo + b * width; };

  Table t({"variant", "seed", "bin", "bin_lo", "bin_hi", "count", "fraction"});
  for (const auto& seeds : runs) {
    for (const FigureRun& r : seeds) {
      std::vector<int64_t> counts(kWeightSumBins, 0);
      int64_t n = 0;
      for (double w : r.weight_sums)
        if (std::isfinite(w)) ++counts[size_t(bin_of(w))], ++n;
      for (int b = 0; b < kWeightSumBins; ++b)
        t.add_row({r.variant, cat(r.seed), cat(b), exact(edge(b)), exact(edge(b + 1)), cat(counts[size_t(b)]),
                   exact(n > 0 ? double(counts[size_t(b)]) / double(n) : NAN)});
    }
  }
  write_file_atomically((dir / "weight_sum_hist.csv").string(), {t.csv()}, "figures");
}

// The attention heatmaps' CSVs (study/figures.hpp): seed 0 of each variant, its visible pairs.
void write_attention_heatmaps(const fs::path& dir, const std::vector<std::vector<FigureRun>>& runs) {
  for (const auto& seeds : runs) {
    const FigureRun& r = seeds[0];
    if (r.attention.empty()) continue;
    Table t({"variant", "seed", "layer", "query", "key", "weight"});
    for (size_t i = 0; i < r.attention.size(); ++i)
      for (size_t j = 0; j <= i && j < r.attention[i].size(); ++j)
        t.add_row({r.variant, cat(r.seed), cat(r.attention_layer), cat(i), cat(j), exact(r.attention[i][j])});
    write_file_atomically((dir / (attention_figure_name(r.variant) + ".csv")).string(), {t.csv()}, "figures");
  }
}

}  // namespace

std::string alpha_figure_name(const std::string& variant) { return figure_name("alpha_", variant); }
std::string attention_figure_name(const std::string& variant) { return figure_name("attention_", variant); }

void write_figures(const fs::path& dir, const std::vector<std::vector<FigureRun>>& runs) {
  for (const auto& seeds : runs)
    check(!seeds.empty() && seeds.size() == runs[0].size(), "figures", "every variant needs the same number of seeds");
  struct Figure {
    const char* name;
    const char* metric;
    std::function<const std::vector<double>&(const FigureRun&)> values;
    bool per_step;
  };
  const Figure figures[] = {
      {"kd_loss", "kd", [](const FigureRun& r) -> const auto& { return r.kd; }, true},
      {"grad_norm", "grad_norm", [](const FigureRun& r) -> const auto& { return r.grad_norm; }, true},
      {"first_token_weight", "first_token_weight", [](const FigureRun& r) -> const auto& { return r.first_token_weight; },
       false},
      {"first_token_share", "first_token_share", [](const FigureRun& r) -> const auto& { return r.first_token_share; },
       false},
      {"entropy", "entropy", [](const FigureRun& r) -> const auto& { return r.entropy; }, false},
  };
  for (const Figure& f : figures)
    write_file_atomically((dir / (std::string(f.name) + ".csv")).string(),
                          {tidy_csv(runs, f.per_step ? "step" : "layer", f.values, f.metric, f.per_step)}, "figures");
  for (const auto& seeds : runs) {
    if (seeds[0].alpha.empty()) continue;
    Table t({"variant", "seed", "layer", "head", "metric", "value"});
    for (const FigureRun& r : seeds)
      for (size_t l = 0; l < r.alpha.size(); ++l)
        for (size_t h = 0; h < r.alpha[l].size(); ++h)
          t.add_row({r.variant, cat(r.seed), cat(l), cat(h), "alpha_mean", exact(r.alpha[l][h])});
    write_file_atomically((dir / (alpha_figure_name(seeds[0].variant) + ".csv")).string(), {t.csv()}, "figures");
  }
  write_weight_sum_histogram(dir, runs);
  write_attention_heatmaps(dir, runs);
}

namespace {

// Runs args (args[0] looked up on PATH), its stdout and stderr this process's or, quiet, none;
// returns its exit status, -1 when it cannot be started.
int run_program(const std::vector<std::string>& args, bool quiet) {
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (quiet) {
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
  }
  pid_t pid = 0;
  const int err = posix_spawnp(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (err != 0) return -1;
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

}  // namespace

bool has_figure_data(const fs::path& dir) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (!name.ends_with(".csv")) continue;
    const std::string base = name.substr(0, name.size() - 4);
    for (const char* fixed : {"kd_loss", "grad_norm", "first_token_weight", "first_token_share", "entropy", "weight_sum_hist"})
      if (base == fixed) return true;
    if (base.starts_with("alpha_") || base.starts_with("attention_")) return true;
  }
  return false;
}

std::vector<std::string> plot_python_candidates() {
  if (const char* p = std::getenv("COTAN_PYTHON"); p && *p) return {p};
  return {"python3", "/usr/bin/python3"};
}

std::optional<std::string> find_plot_python() {
  for (const std::string& python : plot_python_candidates())
    if (run_program({python, "-c", "import matplotlib"}, true) == 0) return python;
  return std::nullopt;
}

const char* plot_figures_script() { return detail::kPlotFiguresScript; }

FigureRendering render_figures(const fs::path& dir) {
  FigureRendering r;
  const std::optional<std::string> python = find_plot_python();
  std::string tried;
  for (const std::string& p : plot_python_candidates()) tried += (tried.empty() ? "" : ", ") + p;
  if (!python) {
    r.message = cat("no Python with matplotlib (tried ", tried, "): the figures' CSVs are in ", dir.string(),
                    "; to draw them, install matplotlib (Debian: apt-get install python3-matplotlib) and run `cotan plot ",
                    dir.string(), "`");
    return r;
  }
  r.python = *python;
  const int status = run_program({*python, "-c", plot_figures_script(), dir.string()}, false);
  r.drawn = status == 0;
  if (!r.drawn)
    r.message = cat("drawing the figures with ", *python, " failed (exit status ", status,
                    "); their CSVs are in ", dir.string());
  return r;
}

}  // namespace cotan::study
