#include "study/stats.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "tensor/error.hpp"

namespace cotan::study {

GradNormStats grad_norm_stats(const std::vector<double>& g, int64_t window) {
  check(window > 0, "stats", "window ", window, " must be positive");
  check(!g.empty(), "stats", "gradient-norm statistics of an empty series");
  const size_t n = std::min(g.size(), size_t(window));
  double total = 0.0;
  for (size_t t = 0; t < n; ++t) total += g[t];
  GradNormStats s;
  s.steps = int64_t(n);
  s.mean = total / double(n);
  double squares = 0.0;  // two passes: no cancellation when the spread is small next to the mean
  for (size_t t = 0; t < n; ++t) squares += (g[t] - s.mean) * (g[t] - s.mean);
  s.variance = squares / double(n);
  s.std = std::sqrt(s.variance);
  s.cv = s.std / s.mean;
  return s;
}

double median(std::vector<double> values) {
  check(!values.empty(), "stats", "median of an empty series");
  for (size_t i = 0; i < values.size(); ++i)
    check(!std::isnan(values[i]), "stats", "median: value ", i, " is NaN");
  const size_t mid = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + std::ptrdiff_t(mid), values.end());
  const double upper = values[mid];
  if (values.size() % 2 == 1) return upper;
  // The lower middle value is the largest of the elements nth_element put before `mid`.
  const double lower = *std::max_element(values.begin(), values.begin() + std::ptrdiff_t(mid));
  return 0.5 * (lower + upper);
}

double median_absolute_deviation(const std::vector<double>& g) {
  const double m = median(g);
  std::vector<double> deviation(g.size());
  for (size_t t = 0; t < g.size(); ++t) deviation[t] = std::abs(g[t] - m);
  return median(std::move(deviation));
}

int64_t count_spikes(const std::vector<double>& g, double k) {
  if (g.empty()) return 0;
  const double threshold = median(g) + k * median_absolute_deviation(g);
  return std::count_if(g.begin(), g.end(), [&](double x) { return x > threshold; });
}

Summary summarize(const std::vector<double>& values) {
  check(!values.empty(), "stats", "summary of no values");
  Summary s;
  s.n = int64_t(values.size());
  double total = 0.0;
  for (double v : values) total += v;
  s.mean = total / double(s.n);
  if (s.n > 1) {
    double squares = 0.0;
    for (double v : values) squares += (v - s.mean) * (v - s.mean);
    s.std = std::sqrt(squares / double(s.n - 1));
  }
  return s;
}

std::string format_number(double value, int significant) {
  check(significant >= 1 && significant <= 17, "format_number", "significant digits ", significant,
        " is outside [1, 17]");
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  if (value == 0.0) return "0";
  char buf[64];
  // The exponent after rounding to `significant` digits: 9.996 to 3 digits is 1.00e+01.
  std::snprintf(buf, sizeof buf, "%.*e", significant - 1, value);
  const char* e = std::strchr(buf, 'e');  // "%e" always writes an exponent
  const int exponent = std::atoi(e + 1);
  if (exponent >= -4 && exponent < 6) {
    std::snprintf(buf, sizeof buf, "%.*f", std::max(0, significant - 1 - exponent), value);
    return buf;
  }
  return std::string(static_cast<const char*>(buf), e) + "e" + std::to_string(exponent);
}

std::string format_summary(const Summary& s, int significant) {
  std::string mean = format_number(s.mean, significant);
  if (s.n <= 1) return mean;
  std::string spread;
  const size_t point = mean.find('.');
  if (mean.find('e') == std::string::npos && std::isfinite(s.std)) {
    const int decimals = point == std::string::npos ? 0 : int(mean.size() - point - 1);
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.*f", decimals, s.std);
    spread = buf;
  } else {
    spread = format_number(s.std, significant);
  }
  return mean + " ± " + spread;
}

// ---- tables ----

namespace {

size_t display_width(const std::string& s) {
  // UTF-8 code points: every byte that is not a continuation byte (10xxxxxx) starts one.
  return size_t(std::count_if(s.begin(), s.end(), [](char c) { return (uint8_t(c) & 0xC0) != 0x80; }));
}

bool parses_as_number(const std::string& s) {
  if (s.empty() || std::isspace(uint8_t(s[0]))) return false;
  char* end = nullptr;
  std::strtod(s.c_str(), &end);
  return end == s.c_str() + s.size();
}

// "1.5", "-2e-3", "nan", and summaries "2.31 ± 0.05".
bool looks_numeric(const std::string& s) {
  const std::string pm = " ± ";
  const size_t at = s.find(pm);
  if (at == std::string::npos) return parses_as_number(s);
  return parses_as_number(s.substr(0, at)) && parses_as_number(s.substr(at + pm.size()));
}

std::string markdown_cell(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '|')
      out += "\\|";
    else if (c == '\n' || c == '\r')
      out += ' ';
    else
      out += c;
  }
  return out;
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

}  // namespace

Table::Table(std::vector<std::string> columns) : columns_(std::move(columns)) {
  check(!columns_.empty(), "table", "a table needs at least one column");
}

void Table::add_row(std::vector<std::string> cells) {
  check(cells.size() == columns_.size(), "table", "row ", rows_.size(), " has ", cells.size(), " cells for ",
        columns_.size(), " columns");
  rows_.push_back(std::move(cells));
}

std::string Table::markdown() const {
  const size_t n = columns_.size();
  std::vector<std::string> header(n);
  std::vector<std::vector<std::string>> body(rows_.size(), std::vector<std::string>(n));
  std::vector<size_t> width(n, 3);  // a separator needs at least three dashes
  std::vector<bool> right(n);
  for (size_t c = 0; c < n; ++c) {
    header[c] = markdown_cell(columns_[c]);
    width[c] = std::max(width[c], display_width(header[c]));
    bool any = false, numeric = true;
    for (size_t r = 0; r < rows_.size(); ++r) {
      body[r][c] = markdown_cell(rows_[r][c]);
      width[c] = std::max(width[c], display_width(body[r][c]));
      if (rows_[r][c].empty()) continue;
      any = true;
      numeric = numeric && looks_numeric(rows_[r][c]);
    }
    right[c] = any && numeric;
  }
  auto line = [&](const std::vector<std::string>& cells) {
    std::string out = "|";
    for (size_t c = 0; c < n; ++c) {
      const size_t pad = width[c] - display_width(cells[c]);
      out += ' ';
      if (right[c]) out.append(pad, ' ');
      out += cells[c];
      if (!right[c]) out.append(pad, ' ');
      out += " |";
    }
    out += '\n';
    return out;
  };
  std::string out = line(header);
  out += '|';
  for (size_t c = 0; c < n; ++c) {
    out.append(right[c] ? width[c] + 1 : width[c] + 2, '-');
    out += right[c] ? ":|" : "|";
  }
  out += '\n';
  for (const auto& cells : body) out += line(cells);
  return out;
}

std::string Table::csv() const {
  auto line = [](const std::vector<std::string>& cells) {
    std::string out;
    for (size_t c = 0; c < cells.size(); ++c) {
      if (c > 0) out += ',';
      out += csv_field(cells[c]);
    }
    out += '\n';
    return out;
  };
  std::string out = line(columns_);
  for (const auto& cells : rows_) out += line(cells);
  return out;
}

}  // namespace cotan::study
