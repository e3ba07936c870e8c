// The study's figures: the tidy CSVs behind them, and their drawing with matplotlib
// (study/plot_figures.py, run by render_figures), which is skipped with a message where there is
// no Python with matplotlib.
#include "study/figures.hpp"

#include <doctest/doctest.h>
#include <stdlib.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>

#include "tensor/error.hpp"
#include "tests/support.hpp"

using namespace cotan;
using namespace cotan::study;
namespace fs = std::filesystem;

namespace {

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in.good());
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Two variants, two seeds, every figure's data.
std::vector<std::vector<FigureRun>> sample_runs() {
  std::vector<std::vector<FigureRun>> runs(2);
  for (int64_t seed = 0; seed < 2; ++seed) {
    FigureRun softmax{"softmax", seed, {0, 1, 2}, {0.5, 0.25, 0.125 + double(seed)}, {1, 2, 3},
                      {0.1, 0.2}, {0.1, 0.2}, {2.0, 2.5}, {}};
    softmax.weight_sums = {1, 1, 1, 1};
    softmax.attention = {{1, 0}, {0.25, 0.75}};
    softmax.attention_layer = 1;
    FigureRun affine{"affine(linear_clip)", seed, {0, 1, 2}, {0.5, 0.2, 0.1}, {1, 1, 1},
                     {0.05, 0.1}, {0.1, 0.2}, {2.1, 2.4}, {{0.5, 0.625}, {0.75, 0.875 + 0.0625 * double(seed)}}};
    affine.weight_sums = {0.5, 0.51, 0.705, 1.0};
    affine.attention = {{0.5, 0}, {0.125, 0.375}};
    affine.attention_layer = 1;
    runs[0].push_back(softmax);
    runs[1].push_back(affine);
  }
  return runs;
}

// Sets an environment variable for the scope of the object, restoring it after.
struct ScopedEnv {
  std::string name;
  std::optional<std::string> old;
  ScopedEnv(const char* n, const char* value) : name(n) {
    if (const char* v = std::getenv(n)) old = v;
    setenv(n, value, 1);
  }
  ~ScopedEnv() {
    if (old) {
      setenv(name.c_str(), old->c_str(), 1);
    } else {
      unsetenv(name.c_str());
    }
  }
};

}  // namespace

TEST_CASE("figures: every figure has a tidy CSV beside it, one row per value and seed") {
  TempDir dir;
  std::vector<std::vector<FigureRun>> runs(2);
  for (int64_t seed = 0; seed < 2; ++seed) {
    FigureRun softmax{"softmax", seed, {0, 1, 2}, {0.5, 0.25, 0.125 + double(seed)}, {1, 2, 3},
                      {0.1, 0.2}, {0.1, 0.2}, {2.0, 2.5}, {}};
    FigureRun affine{"affine(linear_clip)", seed, {0, 1, 2}, {0.5, 0.2, 0.1}, {1, 1, 1},
                     {0.05, 0.1}, {0.1, 0.2}, {2.1, 2.4}, {{0.5, 0.625}, {0.75, 0.875 + 0.0625 * double(seed)}}};
    runs[0].push_back(softmax);
    runs[1].push_back(affine);
  }
  write_figures(dir.path, runs);
  for (const char* name : {"kd_loss", "grad_norm", "first_token_weight", "first_token_share", "entropy",
                           "alpha_affine_linear_clip"}) {
    INFO(name);
    CHECK(fs::is_regular_file(dir.path / (std::string(name) + ".csv")));
    CHECK_FALSE(fs::exists(dir.path / (std::string(name) + ".png")));  // drawn by render_figures
  }
  CHECK_FALSE(fs::exists(dir.path / "alpha_softmax.csv"));
  const std::string kd = read_file(dir.path / "kd_loss.csv");
  CHECK(kd.starts_with("variant,seed,step,metric,value\nsoftmax,0,0,kd,0.5\nsoftmax,0,1,kd,0.25\n"));
  CHECK(kd.find("\nsoftmax,1,2,kd,1.125\n") != std::string::npos);
  CHECK(kd.find("\n\"affine(linear_clip)\",") == std::string::npos);  // no quoting needed
  CHECK(std::count(kd.begin(), kd.end(), '\n') == 1 + 2 * 2 * 3);
  const std::string first = read_file(dir.path / "first_token_weight.csv");
  CHECK(first.starts_with("variant,seed,layer,metric,value\nsoftmax,0,0,first_token_weight,0.10000000000000001\n"));
  CHECK(first.find("\naffine(linear_clip),1,1,first_token_weight,0.10000000000000001\n") != std::string::npos);
  const std::string alpha = read_file(dir.path / "alpha_affine_linear_clip.csv");
  CHECK(alpha == "variant,seed,layer,head,metric,value\n"
                 "affine(linear_clip),0,0,0,alpha_mean,0.5\naffine(linear_clip),0,0,1,alpha_mean,0.625\n"
                 "affine(linear_clip),0,1,0,alpha_mean,0.75\naffine(linear_clip),0,1,1,alpha_mean,0.875\n"
                 "affine(linear_clip),1,0,0,alpha_mean,0.5\naffine(linear_clip),1,0,1,alpha_mean,0.625\n"
                 "affine(linear_clip),1,1,0,alpha_mean,0.75\naffine(linear_clip),1,1,1,alpha_mean,0.9375\n");
  CHECK(alpha_figure_name("affine(sigmoid, affine_n=full)") == "alpha_affine_sigmoid_affine_n_full");
  CHECK(alpha_figure_name("affine_gated") == "alpha_affine_gated");
}

// The line of `csv` that starts with `prefix` ("" when none does).
std::string line_starting(const std::string& csv, const std::string& prefix) {
  const size_t at = csv.starts_with(prefix) ? 0 : csv.find("\n" + prefix);
  if (at == std::string::npos) return "";
  const size_t begin = at == 0 && csv.starts_with(prefix) ? 0 : at + 1;
  return csv.substr(begin, csv.find('\n', begin) - begin);
}

TEST_CASE("figures: the weight-sum histogram and the attention heatmaps, with their CSVs") {
  TempDir dir;
  std::vector<std::vector<FigureRun>> runs(2);
  for (int64_t seed = 0; seed < 2; ++seed) {
    FigureRun softmax{"softmax", seed, {0}, {0.5}, {1}, {0.1}, {0.1}, {2.0}, {}};
    softmax.weight_sums = {1, 1, 1, 1};
    softmax.attention = {{1, 0}, {0.25 + 0.125 * double(seed), 0.75 - 0.125 * double(seed)}};
    softmax.attention_layer = 1;
    FigureRun affine{"affine(linear_clip)", seed, {0}, {0.5}, {1}, {0.1}, {0.1}, {2.0}, {{0.5}}};
    affine.weight_sums = {0.5, 0.51, 0.705, seed == 0 ? 1.0 : 0.705};
    affine.attention = {{0.5, 0}, {0.125, 0.375}};
    affine.attention_layer = 1;
    runs[0].push_back(softmax);
    runs[1].push_back(affine);
  }
  write_figures(dir.path, runs);
  for (const char* name : {"weight_sum_hist", "attention_softmax", "attention_affine_linear_clip"}) {
    INFO(name);
    CHECK(fs::is_regular_file(dir.path / (std::string(name) + ".csv")));
  }

  // Bins shared by every variant, from the smallest sum (0.5) to the largest (1), every bin of
  // every run, counts and fractions.
  const std::string hist = read_file(dir.path / "weight_sum_hist.csv");
  CHECK(hist.starts_with("variant,seed,bin,bin_lo,bin_hi,count,fraction\nsoftmax,0,0,0.5,"));
  CHECK(std::count(hist.begin(), hist.end(), '\n') == 1 + 2 * 2 * kWeightSumBins);
  auto row_end = [&](const std::string& prefix) {
    const std::string line = line_starting(hist, prefix);
    const size_t cut = line.rfind(',', line.rfind(',') - 1);
    return cut == std::string::npos ? line : line.substr(cut + 1);
  };
  CHECK(row_end("softmax,0,39,") == "4,1");
  CHECK(row_end("softmax,1,0,") == "0,0");
  CHECK(row_end("affine(linear_clip),0,0,") == "2,0.5");    // 0.5 and 0.51
  CHECK(row_end("affine(linear_clip),0,16,") == "1,0.25");  // 0.705
  CHECK(row_end("affine(linear_clip),0,39,") == "1,0.25");  // 1: the last bin holds its upper edge
  CHECK(row_end("affine(linear_clip),1,16,") == "2,0.5");
  CHECK(line_starting(hist, "affine(linear_clip),1,39,").find(",1,0,0") != std::string::npos);  // bin_hi 1

  // Seed 0's visible (query, key) pairs of the last layer.
  CHECK(read_file(dir.path / "attention_softmax.csv") ==
        "variant,seed,layer,query,key,weight\nsoftmax,0,1,0,0,1\nsoftmax,0,1,1,0,0.25\nsoftmax,0,1,1,1,0.75\n");
  CHECK(read_file(dir.path / "attention_affine_linear_clip.csv") ==
        "variant,seed,layer,query,key,weight\naffine(linear_clip),0,1,0,0,0.5\n"
        "affine(linear_clip),0,1,1,0,0.125\naffine(linear_clip),0,1,1,1,0.375\n");
  CHECK(attention_figure_name("affine(sigmoid, affine_n=full)") == "attention_affine_sigmoid_affine_n_full");
}

TEST_CASE("figures: drawn with matplotlib as PNG and PDF beside their CSVs, or skipped saying how to draw them") {
  TempDir dir;
  write_figures(dir.path, sample_runs());
  const std::vector<std::string> names = {"kd_loss", "grad_norm", "first_token_weight", "first_token_share", "entropy",
                                          "alpha_affine_linear_clip", "weight_sum_hist", "attention_softmax",
                                          "attention_affine_linear_clip"};
  if (find_plot_python()) {
    const FigureRendering r = render_figures(dir.path);
    CHECK(r.drawn);
    CHECK(r.message.empty());
    for (const std::string& name : names) {
      INFO(name);
      CHECK(read_file(dir.path / (name + ".png")).starts_with("\x89PNG\r\n\x1a\n"));
      CHECK(read_file(dir.path / (name + ".pdf")).starts_with("%PDF-"));
    }
    CHECK_FALSE(fs::exists(dir.path / "alpha_softmax.png"));
  } else {
    MESSAGE("no Python with matplotlib here: the drawing itself is not checked");
  }
  // The script is the one in the source tree.
  CHECK(std::string(plot_figures_script()) == read_file(fs::path(COTAN_SOURCE_DIR) / "study/plot_figures.py"));

  // Without matplotlib: nothing drawn, nothing thrown, and a message saying how to draw them.
  TempDir bare;
  write_figures(bare.path, sample_runs());
  const ScopedEnv env("COTAN_PYTHON", "/nonexistent/python3");
  CHECK(plot_python_candidates() == std::vector<std::string>{"/nonexistent/python3"});
  CHECK_FALSE(find_plot_python().has_value());
  const FigureRendering r = render_figures(bare.path);
  CHECK_FALSE(r.drawn);
  CHECK(r.message.find("no Python with matplotlib (tried /nonexistent/python3)") != std::string::npos);
  CHECK(r.message.find("apt-get install python3-matplotlib") != std::string::npos);
  CHECK(r.message.find("cotan plot " + bare.path.string()) != std::string::npos);
  CHECK(fs::exists(bare.path / "kd_loss.csv"));
  CHECK_FALSE(fs::exists(bare.path / "kd_loss.png"));
}
