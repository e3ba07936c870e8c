// The study's figures: a tidy CSV of the numbers behind each (write_figures), drawn with
// matplotlib by study/plot_figures.py (render_figures; `cotan plot RUN_DIR`), as NAME.png for
// viewing and NAME.pdf for papers beside NAME.csv. The CSVs are one row per value, the long
// format a data-frame library reads directly.
//
//   kd_loss             training KD loss per step (log y)
//   grad_norm           gradient norm before clipping (log y)
//   first_token_weight  mean A_i0 per layer
//   first_token_share   mean A_i0 / sum_j A_ij per layer
//   entropy             attention entropy per layer
//   alpha_<variant>     mean alpha per layer and head
//   weight_sum_hist     histogram of sum_j A_ij per query
//   attention_<variant> the last layer's A, mean over heads
//
// Per-step CSVs have the columns variant, seed, step, metric, value; per-layer ones variant,
// seed, layer, metric, value; alpha's variant, seed, layer, head, metric, value. Steps count from
// 0 as in metrics.jsonl, layers and heads from 0 as in the weights' names. Every seed has its
// rows; the figures draw, with several seeds, the mean over seeds as the line and the range
// from the smallest to the largest seed's value as a band. Per-layer figures treat layers as
// categories (integer ticks, a marker per layer). The alpha heatmaps share one colour scale
// (the smallest to the largest value over all of them), labelled, with each cell's value.
//
// The weight-sum histogram (the paper's Figure 3) counts every query's sum_j A_ij, over every
// layer, head and analysis batch (1 for softmax, alpha-scaled for the affine kinds, below 1 for
// sink), in kWeightSumBins bins shared by all variants, from the smallest to the largest value;
// it draws one outline per variant, the fraction of its queries (all seeds pooled) per bin. Its CSV
// has the columns variant, seed, bin, bin_lo, bin_hi, count, fraction, every bin of every run.
// The attention heatmaps (its Figure 9) show seed 0's A [T, T] of the last layer, averaged over
// heads, for the first sequence of the first analysis batch: query rows, key columns, masked
// keys grey, one colour scale over all variants. Their CSVs hold seed 0's visible (query, key)
// pairs only: variant, seed, layer, query, key, weight.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace cotan::study {

// What the figures draw of one student (one variant, one seed).
struct FigureRun {
  std::string variant;  // "affine(linear_clip)"
  int64_t seed = 0;     // the index of the seed in the study (0, 1, ...)
  std::vector<double> steps, kd, grad_norm;  // per step; kd NaN where not computed
  // per layer
  std::vector<double> first_token_weight, first_token_share, entropy;
  std::vector<std::vector<double>> alpha;  // [layer][head], empty for kinds without alpha
  std::vector<double> weight_sums;         // sum_j A_ij of every query, layer, head and batch
  std::vector<std::vector<double>> attention;  // [T][T] query x key, mean over heads; may be empty
  int64_t attention_layer = 0;             // the layer `attention` comes from
};

inline constexpr int kWeightSumBins = 40;

// runs[v][s]: variant v, seed s (every variant with the same number of seeds). Writes the
// figures' CSVs into dir (atomically); render_figures draws them.
void write_figures(const std::filesystem::path& dir, const std::vector<std::vector<FigureRun>>& runs);

// Whether `dir` holds a figure's CSV (kd_loss.csv, alpha_<variant>.csv, ...).
bool has_figure_data(const std::filesystem::path& dir);

// The Pythons the figures are drawn with, in the order they are tried: $COTAN_PYTHON alone when
// set, else python3 on PATH, then /usr/bin/python3 (Debian's, where python3-matplotlib installs).
std::vector<std::string> plot_python_candidates();
// The first candidate that imports matplotlib; nullopt when none does.
std::optional<std::string> find_plot_python();
// study/plot_figures.py, as the library carries it (embedded at build time).
const char* plot_figures_script();

struct FigureRendering {
  bool drawn = false;
  std::string python;   // the interpreter that ran the script; empty when none was found
  std::string message;  // when not drawn: why, where the CSVs are and how to draw them later
};

// Draws every figure CSV of `dir` with plot_figures_script() under find_plot_python() (the
// script prints what it drew). Never throws for a missing Python or matplotlib, or a failing
// script: the result says so.
FigureRendering render_figures(const std::filesystem::path& dir);

// The file base name of a variant's alpha heatmap: "alpha_affine_linear_clip" / of its attention
// heatmap: "attention_affine_linear_clip".
std::string alpha_figure_name(const std::string& variant);
std::string attention_figure_name(const std::string& variant);

}  // namespace cotan::study
