// The study's figures and their tidy CSVs (study/figures.hpp).
#include "study/figures.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <functional>

#include "tensor/error.hpp"
#include "study/plot.hpp"
#include "study/stats.hpp"
#include "util/atomic_file.hpp"

namespace cotan::study {

namespace fs = std::filesystem;

namespace {

// A CSV number that reads back to the same double ("nan" for a value not computed).
std::string exact(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

// The mean, smallest and largest of the finite values (NaN when none is).
struct Spread {
  double mean = NAN, lo = NAN, hi = NAN;
};

Spread spread(const std::vector<double>& xs) {
  Spread s;
  double sum = 0;
  int n = 0;
  for (double x : xs) {
    if (!std::isfinite(x)) continue;
    sum += x;
    s.lo = n == 0 ? x : std::min(s.lo, x);
    s.hi = n == 0 ? x : std::max(s.hi, x);
    ++n;
  }
  if (n > 0) s.mean = sum / n;
  return s;
}

// One curve per variant, x from its first seed's run: the mean of y over seeds, with the min-max
// band when there are several.
std::vector<Series> curves(const std::vector<std::vector<FigureRun>>& runs,
                           const std::function<const std::vector<double>&(const FigureRun&)>& xs,
                           const std::function<const std::vector<double>&(const FigureRun&)>& ys) {
  std::vector<Series> out;
  for (const auto& seeds : runs) {
    Series s{seeds.at(0).variant, xs(seeds[0]), {}};
    for (size_t i = 0; i < s.x.size(); ++i) {
      std::vector<double> at;
      for (const FigureRun& r : seeds) at.push_back(i < ys(r).size() ? ys(r)[i] : NAN);
      const Spread sp = spread(at);
      s.y.push_back(sp.mean);
      if (seeds.size() > 1) s.lo.push_back(sp.lo), s.hi.push_back(sp.hi);
    }
    out.push_back(std::move(s));
  }
  return out;
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

std::string seeds_note(const std::vector<std::vector<FigureRun>>& runs) {
  const size_t n = runs.empty() ? 0 : runs[0].size();
  return n > 1 ? cat(" (mean of ", n, " seeds, band: min to max)") : "";
}

}  // namespace

namespace {

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

// The weight-sum histogram and its CSV (study/figures.hpp).
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
  std::vector<Series> outlines;
  for (const auto& seeds : runs) {
    std::vector<int64_t> pooled(kWeightSumBins, 0);
    int64_t pooled_n = 0;
    for (const FigureRun& r : seeds) {
      std::vector<int64_t> counts(kWeightSumBins, 0);
      int64_t n = 0;
      for (double w : r.weight_sums)
        if (std::isfinite(w)) ++counts[size_t(bin_of(w))], ++n;
      for (int b = 0; b < kWeightSumBins; ++b) {
        t.add_row({r.variant, cat(r.seed), cat(b), exact(edge(b)), exact(edge(b + 1)), cat(counts[size_t(b)]),
                   exact(n > 0 ? double(counts[size_t(b)]) / double(n) : NAN)});
        pooled[size_t(b)] += counts[size_t(b)];
      }
      pooled_n += n;
    }
    // The outline of the bars: up and down at each edge, along the top of each bin.
    Series s{seeds[0].variant, {edge(0)}, {0.0}};
    for (int b = 0; b < kWeightSumBins; ++b) {
      const double f = pooled_n > 0 ? double(pooled[size_t(b)]) / double(pooled_n) : 0.0;
      s.x.insert(s.x.end(), {edge(b), edge(b + 1)});
      s.y.insert(s.y.end(), {f, f});
    }
    s.x.push_back(hi);
    s.y.push_back(0.0);
    outlines.push_back(std::move(s));
  }
  const std::string base = (dir / "weight_sum_hist").string();
  const size_t n_seeds = runs[0].size();
  line_plot(base + ".png",
            cat("Per-query weight sum", n_seeds > 1 ? cat(" (", n_seeds, " seeds pooled)") : std::string()),
            "sum_j A_ij", "fraction of queries", outlines);
  write_file_atomically(base + ".csv", {t.csv()}, "figures");
}

// The attention heatmaps and their CSVs (study/figures.hpp): seed 0 of each variant.
void write_attention_heatmaps(const fs::path& dir, const std::vector<std::vector<FigureRun>>& runs) {
  HeatmapScale scale;
  scale.label = "A_ij, mean over heads";
  double lo = INFINITY, hi = -INFINITY;
  for (const auto& seeds : runs) {
    const auto& a = seeds[0].attention;
    for (size_t i = 0; i < a.size(); ++i)
      for (size_t j = 0; j <= i && j < a[i].size(); ++j)
        if (std::isfinite(a[i][j])) lo = std::min(lo, a[i][j]), hi = std::max(hi, a[i][j]);
  }
  if (lo <= hi) scale.lo = lo, scale.hi = hi;
  for (const auto& seeds : runs) {
    const FigureRun& r = seeds[0];
    if (r.attention.empty()) continue;
    std::vector<std::vector<double>> shown = r.attention;  // masked keys (j > i) grey
    Table t({"variant", "seed", "layer", "query", "key", "weight"});
    for (size_t i = 0; i < shown.size(); ++i)
      for (size_t j = 0; j < shown[i].size(); ++j) {
        if (j > i) {
          shown[i][j] = NAN;
          continue;
        }
        t.add_row({r.variant, cat(r.seed), cat(r.attention_layer), cat(i), cat(j), exact(r.attention[i][j])});
      }
    const std::string base = (dir / attention_figure_name(r.variant)).string();
    const std::string of_seed = seeds.size() > 1 ? ", seed 0" : "";
    heatmap(base + ".png", cat("A: ", r.variant, ", layer ", r.attention_layer, of_seed), shown, "query i", "key j",
            scale);
    write_file_atomically(base + ".csv", {t.csv()}, "figures");
  }
}

}  // namespace

std::string alpha_figure_name(const std::string& variant) { return figure_name("alpha_", variant); }
std::string attention_figure_name(const std::string& variant) { return figure_name("attention_", variant); }

void write_figures(const fs::path& dir, const std::vector<std::vector<FigureRun>>& runs) {
  for (const auto& seeds : runs)
    check(!seeds.empty() && seeds.size() == runs[0].size(), "figures", "every variant needs the same number of seeds");
  const std::string note = seeds_note(runs);
  auto steps = [](const FigureRun& r) -> const std::vector<double>& { return r.steps; };
  std::vector<double> layer_index;
  for (const auto& seeds : runs) layer_index.resize(std::max(layer_index.size(), seeds[0].entropy.size()));
  for (size_t l = 0; l < layer_index.size(); ++l) layer_index[l] = double(l);
  auto layers = [&layer_index](const FigureRun&) -> const std::vector<double>& { return layer_index; };

  struct Figure {
    const char* name;
    const char* title;
    const char* ylabel;
    const char* metric;
    std::function<const std::vector<double>&(const FigureRun&)> values;
    bool per_step;
  };
  const Figure figures[] = {
      {"kd_loss", "Training KD loss", "KD loss", "kd", [](const FigureRun& r) -> const auto& { return r.kd; }, true},
      {"grad_norm", "Gradient norm before clipping", "||g||", "grad_norm",
       [](const FigureRun& r) -> const auto& { return r.grad_norm; }, true},
      {"first_token_weight", "First-token attention weight", "mean A_i0", "first_token_weight",
       [](const FigureRun& r) -> const auto& { return r.first_token_weight; }, false},
      {"first_token_share", "First-token weight / the query's weight sum", "mean A_i0 / sum_j A_ij",
       "first_token_share", [](const FigureRun& r) -> const auto& { return r.first_token_share; }, false},
      {"entropy", "Attention entropy", "entropy (nats)", "entropy",
       [](const FigureRun& r) -> const auto& { return r.entropy; }, false},
  };
  for (const Figure& f : figures) {
    const std::string base = (dir / f.name).string();
    const std::vector<Series> series = f.per_step ? curves(runs, steps, f.values) : curves(runs, layers, f.values);
    line_plot(base + ".png", f.title + note, f.per_step ? "step" : "layer", f.ylabel, series, f.per_step, !f.per_step);
    write_file_atomically(base + ".csv", {tidy_csv(runs, f.per_step ? "step" : "layer", f.values, f.metric, f.per_step)},
                          "figures");
  }

  // The alpha heatmaps: the mean over seeds, on one colour scale for every variant.
  HeatmapScale scale;
  scale.label = "mean alpha";
  scale.values_in_cells = true;
  std::vector<std::pair<const std::vector<FigureRun>*, std::vector<std::vector<double>>>> grids;
  double lo = INFINITY, hi = -INFINITY;
  for (const auto& seeds : runs) {
    if (seeds[0].alpha.empty()) continue;
    std::vector<std::vector<double>> grid = seeds[0].alpha;
    for (size_t l = 0; l < grid.size(); ++l)
      for (size_t h = 0; h < grid[l].size(); ++h) {
        std::vector<double> at;
        for (const FigureRun& r : seeds) at.push_back(r.alpha.at(l).at(h));
        grid[l][h] = spread(at).mean;
        if (std::isfinite(grid[l][h])) lo = std::min(lo, grid[l][h]), hi = std::max(hi, grid[l][h]);
      }
    grids.emplace_back(&seeds, std::move(grid));
  }
  if (lo <= hi) scale.lo = lo, scale.hi = hi;
  for (const auto& entry : grids) {
    const std::vector<FigureRun>& seeds = *entry.first;
    const std::string base = (dir / alpha_figure_name(seeds[0].variant)).string();
    const std::string mean_of = seeds.size() > 1 ? cat(", mean of ", seeds.size(), " seeds") : "";
    heatmap(base + ".png", "alpha: " + seeds[0].variant + mean_of, entry.second, "layer", "head", scale);
    Table t({"variant", "seed", "layer", "head", "metric", "value"});
    for (const FigureRun& r : seeds)
      for (size_t l = 0; l < r.alpha.size(); ++l)
        for (size_t h = 0; h < r.alpha[l].size(); ++h)
          t.add_row({r.variant, cat(r.seed), cat(l), cat(h), "alpha_mean", exact(r.alpha[l][h])});
    write_file_atomically(base + ".csv", {t.csv()}, "figures");
  }
  write_weight_sum_histogram(dir, runs);
  write_attention_heatmaps(dir, runs);
}

}  // namespace cotan::study
