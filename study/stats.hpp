// Training statistics the paper reports (docs/losses.md, "Gradient-norm statistics"), summaries across seeds and small tables.
//
//   GradNormStats s = grad_norm_stats(grad_norms, 500);       // Table 4
//   int64_t spikes = count_spikes(grad_norms, 6.0);           // Table 5
//   Table t({"kind", "loss"});
//   t.add_row({"affine", format_summary(summarize(losses), 3)});
//   write(t.markdown()); write(t.csv());
//
// Everything is computed in f64, in the order the values are given.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace cotan::study {

// Over steps [0, window) of a gradient-norm series (all of it when shorter; `steps` says how
// many): the mean, the population standard deviation and variance, and CV = std / mean.
struct GradNormStats {
  double mean = 0, std = 0, variance = 0, cv = 0;
  int64_t steps = 0;
};
GradNormStats grad_norm_stats(const std::vector<double>& g, int64_t window = 500);

// The median; of an even count, the mean of the two middle values. Throws on an empty series or
// a NaN (a diverged run has no meaningful median).
double median(std::vector<double> values);
// median(|g - median(g)|).
double median_absolute_deviation(const std::vector<double>& g);
// #{t : g_t > median(g) + k * MAD(g)}; 0 for an empty series.
int64_t count_spikes(const std::vector<double>& g, double k);

// Mean and sample standard deviation (n - 1; 0 when n == 1) across seeds.
struct Summary {
  double mean = 0, std = 0;
  int64_t n = 0;
};
Summary summarize(const std::vector<double>& values);

// `significant` digits (1..17), e.g. format_number(2.3, 3) == "2.30",
// format_number(0.000123456, 3) == "0.000123", format_number(123456.7, 3) == "123457",
// format_number(1.5e-7, 2) == "1.5e-7": plain notation for 1e-4 <= |v| < 1e6, where integer
// digits are never replaced by zeros, otherwise scientific with a short exponent. 0 is "0";
// non-finite values are "nan", "inf" and "-inf".
std::string format_number(double value, int significant);
// "2.31 ± 0.05" (the mean to `significant` digits and the std to as many decimals); "2.31" when n == 1.
std::string format_summary(const Summary& s, int significant);

// A table of strings. markdown() pads every column to its widest cell (counted in UTF-8 code
// points) and right-aligns columns whose cells are all numbers; '|' in a cell is escaped.
// csv() quotes a field that holds a comma, a quote, CR or LF, doubling quotes (RFC 4180), with
// "\n" line ends.
class Table {
 public:
  explicit Table(std::vector<std::string> columns);
  void add_row(std::vector<std::string> cells);  // exactly one cell per column
  const std::vector<std::string>& columns() const { return columns_; }
  const std::vector<std::vector<std::string>>& rows() const { return rows_; }
  std::string markdown() const;
  std::string csv() const;

 private:
  std::vector<std::string> columns_;
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace cotan::study
