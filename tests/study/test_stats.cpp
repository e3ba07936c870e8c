// Gradient-norm statistics (docs/losses.md), medians and spikes, summaries, number formatting, tables.
#include "study/stats.hpp"

#include <doctest/doctest.h>

#include <cmath>

#include "tensor/error.hpp"
#include "tests/support.hpp"

using namespace cotan;
using namespace cotan::study;

namespace {

// 100 values: 40 at 1, 25 at 0.875, 25 at 1.125 and 10 planted spikes, shuffled by a fixed
// stride. Median 1 and MAD 0.125 by construction (dyadic values: the thresholds are exact), so
// median + 6 MAD = 1.75 and median + 9 MAD = 2.125.
std::vector<double> spiky_series() {
  std::vector<double> values;
  values.insert(values.end(), 40, 1.0);
  values.insert(values.end(), 25, 0.875);
  values.insert(values.end(), 25, 1.125);
  values.insert(values.end(), 2, 1.75);  // at the k = 6 threshold: not a spike (strictly above only)
  values.insert(values.end(), 3, 2.0);   // spikes for k = 6, not for k = 9
  values.insert(values.end(), 5, 3.0);   // spikes for both
  std::vector<double> shuffled(values.size());
  for (size_t i = 0; i < values.size(); ++i) shuffled[(i * 37) % values.size()] = values[i];
  return shuffled;
}

}  // namespace

TEST_CASE("stats: median of odd and even counts") {
  CHECK(median({3, 1, 2}) == 2);
  CHECK(median({4, 1, 3, 2}) == 2.5);
  CHECK(median({5}) == 5);
  CHECK(median({2, 2, 7, 7}) == 4.5);
  CHECK(median({-1, 10, 0, 0, 3, 100}) == 1.5);
  CHECK(error_of([] { median({}); }) == "[stats] median of an empty series");
  CHECK(error_of([] { median({1, NAN}); }) == "[stats] median: value 1 is NaN");
}

TEST_CASE("stats: spikes above median + k * MAD, k = 6 and 9") {
  const auto g = spiky_series();
  CHECK(median(g) == 1.0);
  CHECK(median_absolute_deviation(g) == 0.125);
  CHECK(count_spikes(g, 6) == 8);
  CHECK(count_spikes(g, 9) == 5);
  CHECK(count_spikes(g, 100) == 0);
  CHECK(count_spikes({}, 6) == 0);
  CHECK(count_spikes({2, 2, 2}, 6) == 0);  // MAD 0: only values above the median would count
  CHECK(count_spikes({2, 2, 2, 2, 5}, 6) == 1);
}

TEST_CASE("stats: gradient-norm mean, std, variance and CV over a window") {
  const GradNormStats all = grad_norm_stats({1, 2, 3, 4});
  CHECK(all.steps == 4);
  CHECK(all.mean == 2.5);
  CHECK(all.variance == doctest::Approx(1.25));  // population: (2.25 + 0.25 + 0.25 + 2.25) / 4
  CHECK(all.std == doctest::Approx(std::sqrt(1.25)));
  CHECK(all.cv == doctest::Approx(std::sqrt(1.25) / 2.5));

  const GradNormStats head = grad_norm_stats({1, 3, 100, 1000}, 2);  // steps [0, 2) only
  CHECK(head.steps == 2);
  CHECK(head.mean == 2);
  CHECK(head.variance == 1);
  CHECK(head.std == 1);
  CHECK(head.cv == 0.5);

  std::vector<double> long_run(800, 2.0);
  for (size_t t = 500; t < long_run.size(); ++t) long_run[t] = 50.0;  // after the window: ignored
  const GradNormStats paper = grad_norm_stats(long_run);
  CHECK(paper.steps == 500);
  CHECK(paper.mean == 2.0);
  CHECK(paper.cv == 0.0);

  CHECK(error_of([] { grad_norm_stats({}); }) == "[stats] gradient-norm statistics of an empty series");
  CHECK(error_of([] { grad_norm_stats({1}, 0); }) == "[stats] window 0 must be positive");
}

TEST_CASE("stats: mean and sample std across seeds") {
  const Summary s = summarize({1, 2, 3, 4});
  CHECK(s.n == 4);
  CHECK(s.mean == 2.5);
  CHECK(s.std == doctest::Approx(std::sqrt(5.0 / 3.0)));  // sum of squares 5 over n - 1 = 3
  const Summary one = summarize({7});
  CHECK(one.mean == 7);
  CHECK(one.std == 0);
  CHECK(error_of([] { summarize({}); }) == "[stats] summary of no values");
}

TEST_CASE("stats: number formatting") {
  CHECK(format_number(2.3, 3) == "2.30");
  CHECK(format_number(0.000123456, 3) == "0.000123");
  CHECK(format_number(123456.7, 3) == "123457");
  CHECK(format_number(1.5e-7, 2) == "1.5e-7");
  CHECK(format_number(2.5e9, 3) == "2.50e9");
  CHECK(format_number(9.996, 3) == "10.0");
  CHECK(format_number(-0.5, 2) == "-0.50");
  CHECK(format_number(42, 1) == "42");  // integer digits stay
  CHECK(format_number(0.0, 3) == "0");
  CHECK(format_number(NAN, 3) == "nan");
  CHECK(format_number(-INFINITY, 3) == "-inf");
  CHECK(error_of([] { format_number(1, 0); }) == "[format_number] significant digits 0 is outside [1, 17]");

  CHECK(format_summary(summarize({2.3, 2.325}), 3) == "2.31 ± 0.02");
  CHECK(format_summary(summarize({2.3125}), 3) == "2.31");
}

TEST_CASE("table: markdown with aligned columns, numbers to the right") {
  Table t({"kind", "loss", "note"});
  t.add_row({"softmax", "2.31", "baseline"});
  t.add_row({"affine", "2.287", "a|b"});
  CHECK(t.markdown() ==
        "| kind    |  loss | note     |\n"
        "|---------|------:|----------|\n"
        "| softmax |  2.31 | baseline |\n"
        "| affine  | 2.287 | a\\|b     |\n");

  Table u({"k", "loss ± std"});  // widths count code points, not bytes
  u.add_row({"x", "2.31 ± 0.05"});
  u.add_row({"yy", "10"});
  CHECK(u.markdown() ==
        "| k   |  loss ± std |\n"
        "|-----|------------:|\n"
        "| x   | 2.31 ± 0.05 |\n"
        "| yy  |          10 |\n");
  CHECK(error_of([&] { u.add_row({"only one"}); }) == "[table] row 2 has 1 cells for 2 columns");
}

TEST_CASE("table: csv quoting") {
  Table t({"name", "value"});
  t.add_row({"plain", "1.5"});
  t.add_row({"a,b", "say \"hi\""});
  t.add_row({"two\nlines", ""});
  CHECK(t.csv() ==
        "name,value\n"
        "plain,1.5\n"
        "\"a,b\",\"say \"\"hi\"\"\"\n"
        "\"two\nlines\",\n");
}
