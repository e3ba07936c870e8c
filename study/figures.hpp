// The study's figures (PNG, study/plot.hpp), each with a tidy CSV of the numbers it draws beside
// it, under the same base name: one row per value, the long format a data-frame library reads
// directly.
//
//   kd_loss.png             training KD loss per step (log y)        kd_loss.csv
//   grad_norm.png           gradient norm before clipping (log y)    grad_norm.csv
//   first_token_weight.png  mean A_i0 per layer                      first_token_weight.csv
//   first_token_share.png   mean A_i0 / sum_j A_ij per layer         first_token_share.csv
//   entropy.png             attention entropy per layer              entropy.csv
//   alpha_<variant>.png     mean alpha per layer and head            alpha_<variant>.csv
//   weight_sum_hist.png     histogram of sum_j A_ij per query        weight_sum_hist.csv
//   attention_<variant>.png the last layer's A, mean over heads      attention_<variant>.csv
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

// runs[v][s]: variant v, seed s (every variant with the same number of seeds). Writes the figures
// and their CSVs into dir.
void write_figures(const std::filesystem::path& dir, const std::vector<std::vector<FigureRun>>& runs);

// The file base name of a variant's alpha heatmap: "alpha_affine_linear_clip" / of its attention
// heatmap: "attention_affine_linear_clip".
std::string alpha_figure_name(const std::string& variant);
std::string attention_figure_name(const std::string& variant);

}  // namespace cotan::study
