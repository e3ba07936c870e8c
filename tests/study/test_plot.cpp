// PNG output and plots. The PNG files are read back by an independent decoder written here:
// chunks and their CRCs, the zlib header and Adler-32, inflate (stored and fixed-Huffman blocks)
// and the five row filters; then pixels are checked where lines and cells must be.
#include "study/plot.hpp"
#include "study/figures.hpp"

#include <doctest/doctest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>

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

uint32_t be32(const std::string& s, size_t at) {
  return uint32_t(uint8_t(s[at])) << 24 | uint32_t(uint8_t(s[at + 1])) << 16 | uint32_t(uint8_t(s[at + 2])) << 8 |
         uint32_t(uint8_t(s[at + 3]));
}

uint32_t crc32_bitwise(const std::string& bytes) {
  uint32_t c = 0xFFFFFFFFu;
  for (char b : bytes) {
    c ^= uint8_t(b);
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
  }
  return ~c;
}

class BitReader {
 public:
  explicit BitReader(const std::string& s, size_t start) : s_(s), pos_(start) {}
  uint32_t bits(int n) {  // least significant bit first
    uint32_t v = 0;
    for (int i = 0; i < n; ++i) {
      if (pos_ >= s_.size()) FAIL("the deflate stream ends early");
      v |= uint32_t((uint8_t(s_[pos_]) >> bit_) & 1u) << i;
      if (++bit_ == 8) bit_ = 0, ++pos_;
    }
    return v;
  }
  uint32_t huffman(int n) {  // a code of n more bits, most significant first
    uint32_t v = 0;
    for (int i = 0; i < n; ++i) v = (v << 1) | bits(1);
    return v;
  }
  void align() {
    if (bit_ != 0) bit_ = 0, ++pos_;
  }
  size_t pos() const { return pos_; }

 private:
  const std::string& s_;
  size_t pos_;
  int bit_ = 0;
};

// Fixed literal/length code, read bit by bit (RFC 1951 3.2.6).
int fixed_symbol(BitReader& r) {
  uint32_t code = r.huffman(7);
  if (code <= 0x17) return int(256 + code);
  code = (code << 1) | r.huffman(1);
  if (code >= 0x30 && code <= 0xBF) return int(code - 0x30);
  if (code >= 0xC0 && code <= 0xC7) return int(280 + code - 0xC0);
  code = (code << 1) | r.huffman(1);
  if (code < 0x190) FAIL("invalid fixed code ", code);
  return int(144 + code - 0x190);
}

std::string inflate(const std::string& z) {
  REQUIRE(z.size() >= 6);
  const uint8_t cmf = uint8_t(z[0]), flg = uint8_t(z[1]);
  CHECK((cmf & 0x0F) == 8);
  CHECK((cmf * 256 + flg) % 31 == 0);
  CHECK((flg & 0x20) == 0);
  // Length and distance bases from the RFC's rules rather than its tables.
  int length_base[29], length_extra[29], dist_base[30], dist_extra[30];
  for (int i = 0, base = 3; i < 28; ++i) {
    length_extra[i] = i < 8 ? 0 : (i - 4) / 4;
    length_base[i] = base;
    base += 1 << length_extra[i];
  }
  length_base[28] = 258, length_extra[28] = 0;
  for (int i = 0, base = 1; i < 30; ++i) {
    dist_extra[i] = i < 4 ? 0 : i / 2 - 1;
    dist_base[i] = base;
    base += 1 << dist_extra[i];
  }

  std::string out;
  BitReader r(z, 2);
  bool last = false;
  while (!last) {
    last = r.bits(1) == 1;
    const uint32_t type = r.bits(2);
    if (type == 0) {
      r.align();
      const uint32_t len = r.bits(16), nlen = r.bits(16);
      REQUIRE(len == (~nlen & 0xFFFF));
      for (uint32_t i = 0; i < len; ++i) out += char(r.bits(8));
    } else if (type == 1) {
      for (;;) {
        const int sym = fixed_symbol(r);
        if (sym < 256) {
          out += char(sym);
        } else if (sym == 256) {
          break;
        } else {
          if (sym > 285) FAIL("invalid length symbol ", sym);
          const int li = sym - 257;
          const int length = length_base[li] + int(r.bits(length_extra[li]));
          const int di = int(r.huffman(5));
          if (di >= 30) FAIL("invalid distance code ", di);
          const size_t distance = size_t(dist_base[di]) + r.bits(dist_extra[di]);
          if (distance > out.size() || distance > 32768) FAIL("distance ", distance, " out of range");
          for (int k = 0; k < length; ++k) out += out[out.size() - distance];
        }
      }
    } else {
      FAIL("deflate block type ", type, " is not written by this encoder");
    }
  }
  r.align();
  REQUIRE(r.pos() + 4 == z.size());
  uint32_t a = 1, b = 0;
  for (char c : out) a = (a + uint8_t(c)) % 65521, b = (b + a) % 65521;
  CHECK(be32(z, r.pos()) == ((b << 16) | a));
  return out;
}

Image decode_png(const std::string& png) {
  REQUIRE(png.size() > 8);
  REQUIRE(png.substr(0, 8) == std::string("\x89PNG\r\n\x1a\n", 8));
  size_t at = 8;
  std::string idat;
  std::vector<std::string> order;
  int width = 0, height = 0;
  while (at < png.size()) {
    REQUIRE(at + 12 <= png.size());
    const uint32_t len = be32(png, at);
    const std::string type = png.substr(at + 4, 4), data = png.substr(at + 8, len);
    CHECK(be32(png, at + 8 + len) == crc32_bitwise(type + data));
    order.push_back(type);
    if (type == "IHDR") {
      REQUIRE(len == 13);
      width = int(be32(data, 0)), height = int(be32(data, 4));
      CHECK(data.substr(8) == std::string("\x08\x02\x00\x00\x00", 5));
    }
    if (type == "IDAT") idat += data;
    at += 12 + len;
  }
  CHECK(order.front() == "IHDR");
  CHECK(order.back() == "IEND");
  const std::string raw = inflate(idat);
  const size_t stride = 3 * size_t(width);
  REQUIRE(raw.size() == (stride + 1) * size_t(height));

  Image img(width, height);
  std::vector<uint8_t> prior(stride, 0), row(stride);
  for (int y = 0; y < height; ++y) {
    const uint8_t filter = uint8_t(raw[size_t(y) * (stride + 1)]);
    if (filter > 4) FAIL("row ", y, " has filter ", int(filter));
    for (size_t i = 0; i < stride; ++i) {
      const int x = uint8_t(raw[size_t(y) * (stride + 1) + 1 + i]);
      const int a = i >= 3 ? row[i - 3] : 0, b = prior[i], c = i >= 3 ? prior[i - 3] : 0;
      int predicted = 0;
      if (filter == 1) predicted = a;
      if (filter == 2) predicted = b;
      if (filter == 3) predicted = (a + b) / 2;
      if (filter == 4) {
        const int p = a + b - c, pa = std::abs(p - a), pb = std::abs(p - b), pc = std::abs(p - c);
        predicted = pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
      }
      row[i] = uint8_t(x + predicted);
    }
    std::copy(row.begin(), row.end(), img.rgb.begin() + std::ptrdiff_t(size_t(y) * stride));
    prior = row;
  }
  return img;
}

bool grey(Rgb c) { return c.r == c.g && c.g == c.b; }

Rgb pixel(const Image& img, double x, double y) { return img.at(int(std::lround(x)), int(std::lround(y))); }

}  // namespace

TEST_CASE("png: encoded images decode to the same pixels") {
  // Noise (literals), flat areas (long matches) and repeats further back than one row.
  Image img(37, 23);
  uint32_t state = 12345;
  for (int y = 0; y < img.height; ++y)
    for (int x = 0; x < img.width; ++x) {
      state = state * 1664525u + 1013904223u;
      if (y < 8) img.set(x, y, {uint8_t(state >> 24), uint8_t(state >> 16), uint8_t(state >> 8)});
      else if (y < 16) img.set(x, y, {uint8_t(x * 7), uint8_t(y * 11), 200});
      else img.set(x, y, img.at(x, y - 16));
    }
  const Image back = decode_png(encode_png(img));
  CHECK(back.width == 37);
  CHECK(back.height == 23);
  CHECK(back.rgb == img.rgb);

  Image big(700, 300, {250, 250, 250});  // beyond the 32 KiB window
  for (int y = 0; y < big.height; y += 7)
    for (int x = 0; x < big.width; ++x) big.set(x, y, {uint8_t(x), uint8_t(y), uint8_t(x ^ y)});
  const std::string png = encode_png(big);
  CHECK(png.size() < big.rgb.size() / 10);  // the deflate stream compresses
  CHECK(decode_png(png).rgb == big.rgb);

  CHECK(decode_png(encode_png(Image(1, 1, {1, 2, 3}))).at(0, 0) == Rgb{1, 2, 3});
}

TEST_CASE("plot: a line plot has its lines, gaps and background where they must be") {
  TempDir dir;
  const std::vector<double> xs = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  std::vector<Series> series = {{"flat", xs, std::vector<double>(11, 1.0)},
                                {"with a gap", xs, {3, 3, 3, 3, 3, NAN, 3, 3, 3, 3, 3}}};
  const fs::path path = dir.path / "lines.png";
  line_plot(path.string(), "two series", "step", "value", series);
  CHECK(fs::directory_iterator(dir.path)->path() == path);  // no temporary left behind
  const std::string bytes = read_file(path);
  PlotFrame frame;
  CHECK(bytes == encode_png(render_line_plot("two series", "step", "value", series, false, &frame)));

  const Image img = decode_png(bytes);
  CHECK(img.width == 960);
  CHECK(img.height == 600);
  CHECK(frame.px(0) == frame.left);  // the x axis spans the data exactly
  CHECK(pixel(img, frame.px(5), frame.py(1)) == series_color(0));
  CHECK(pixel(img, frame.px(2.5), frame.py(1)) == series_color(0));
  CHECK(pixel(img, frame.px(3), frame.py(3)) == series_color(1));
  CHECK(pixel(img, frame.px(7.5), frame.py(3)) == series_color(1));
  // The NaN at x = 5 breaks the second line from x = 4 to x = 6.
  CHECK(grey(pixel(img, frame.px(5), frame.py(3))));
  CHECK(grey(pixel(img, frame.px(4.5), frame.py(3))));
  // Between grid lines and away from the data: background.
  auto between = [](const std::vector<double>& ticks, double near) {
    for (size_t i = 0; i + 1 < ticks.size(); ++i)
      if (ticks[i] <= near && near < ticks[i + 1]) return (ticks[i] + ticks[i + 1]) / 2;
    FAIL("no ticks around ", near);
    return 0.0;
  };
  CHECK(pixel(img, frame.px(between(frame.x_ticks, 5)), frame.py(between(frame.y_ticks, 2))) ==
        Rgb{255, 255, 255});
  CHECK(img.at(1, 1) == Rgb{255, 255, 255});
  // The title is drawn in dark ink above the plot area.
  bool ink = false;
  for (int y = 0; y < frame.top; ++y)
    for (int x = 0; x < img.width; ++x) ink = ink || img.at(x, y).r < 100;
  CHECK(ink);
}

TEST_CASE("plot: log axes skip values <= 0, non-finite points are skipped") {
  std::vector<Series> series = {{"loss", {0, 1, 2, 3, 4, 5}, {100, 10, 0, -1, 1, 0.01}},
                                {"", {1, INFINITY, 3, 4}, {NAN, 1, 1, NAN}}};
  PlotFrame frame;
  const Image img = render_line_plot("", "", "", series, true, &frame);
  CHECK(frame.log_y);
  CHECK(frame.y_min > 0);
  CHECK(frame.y_min < 0.01);
  CHECK(frame.y_max > 100);
  CHECK(frame.y_ticks == std::vector<double>{0.01, 0.1, 1, 10, 100});
  CHECK(pixel(img, frame.px(0.5), frame.py(std::sqrt(1000.0))) == series_color(0));  // midway in log space
  CHECK(pixel(img, frame.px(3), frame.py(1)) == series_color(1));  // an isolated point is a dot
}

TEST_CASE("plot: errors name the file") {
  CHECK(error_of([] { line_plot("/nonexistent-dir/x.png", "", "", "", {}); }) ==
        "[plot] /nonexistent-dir/x.png: cannot write: /nonexistent-dir/x.png.tmp: No such file or directory");
  CHECK(error_of([] { line_plot("/tmp/y.png", "", "", "", {{"a", {1, 2, 3}, {1, 2}}}); }) ==
        "[plot] /tmp/y.png: series 'a' has 3 x values and 2 y values");
  CHECK(error_of([] { heatmap("/tmp/h.png", "", {{1, 2}, {3}}, "", ""); }) ==
        "[plot] /tmp/h.png: heatmap row 1 has 1 values, row 0 has 2");
  CHECK(error_of([] { heatmap("/tmp/h.png", "", {}, "", ""); }) == "[plot] /tmp/h.png: heatmap of no values");
}

TEST_CASE("plot: heatmap cells take the colour of their value") {
  const std::vector<std::vector<double>> values = {{0.0, 0.25, 0.5, 1.0}, {NAN, 0.75, 0.5, 0.125}, {1, 1, 0, 0}};
  TempDir dir;
  const fs::path path = dir.path / "heat.png";
  heatmap(path.string(), "alpha", values, "layer", "head");
  PlotFrame frame;
  const std::string bytes = read_file(path);
  CHECK(bytes == encode_png(render_heatmap("alpha", values, "layer", "head", &frame)));
  const Image img = decode_png(bytes);
  for (size_t r = 0; r < values.size(); ++r)
    for (size_t c = 0; c < values[r].size(); ++c) {
      const Rgb got = pixel(img, frame.px(double(c) + 0.5), frame.py(double(r) + 0.5));
      if (std::isnan(values[r][c]))
        CHECK(grey(got));
      else
        CHECK(got == colormap(values[r][c]));  // the values span [0, 1]
    }
  CHECK(colormap(0) == Rgb{68, 1, 84});
  CHECK(colormap(1) == Rgb{253, 231, 37});
  CHECK(frame.x_ticks.front() == 0);
  CHECK(frame.y_ticks.size() == 3);
}

TEST_CASE("plot: categories have integer ticks and markers; a band shades lo to hi") {
  Series s{"a", {0, 1, 2}, {1, 2, 1.5}, {0.5, 1.5, 1.0}, {1.5, 2.5, 2.0}};
  PlotFrame frame;
  const Image img = render_line_plot("", "layer", "", {s}, false, &frame, true);
  CHECK(frame.x_ticks == std::vector<double>{0, 1, 2});
  CHECK(frame.x_min == -0.5);
  CHECK(frame.x_max == 2.5);
  // A marker: the series colour beside the point, off the line (which runs up to the right).
  CHECK(pixel(img, frame.px(0) - 3, frame.py(1)) == series_color(0));
  // The band: a light shade of the colour between lo and hi, away from the line.
  const Rgb band = pixel(img, frame.px(1.5), frame.py(2.2));
  CHECK(band != Rgb{255, 255, 255});
  CHECK(band != series_color(0));
  CHECK(pixel(img, frame.px(1.5), frame.py(0.95)) == Rgb{255, 255, 255});  // below lo
  CHECK(error_of([] { line_plot("/tmp/b.png", "", "", "", {{"a", {1, 2}, {1, 2}, {1}, {2}}}); }) ==
        "[plot] /tmp/b.png: series 'a' has a band of 1 and 1 values for 2 points");
}

TEST_CASE("plot: a heatmap on a given colour scale, with its label and the values in the cells") {
  const std::vector<std::vector<double>> values = {{0.25, 0.5}};
  HeatmapScale scale;
  scale.lo = 0, scale.hi = 1, scale.label = "mean alpha", scale.values_in_cells = true;
  PlotFrame frame;
  const Image img = render_heatmap("", values, "layer", "head", &frame, scale);
  // A cell's corner has the colour of its value on the given scale; its middle holds the value's
  // digits, in ink of another colour.
  const int cell = int(frame.px(1) - frame.px(0));
  CHECK(img.at(frame.left + 1, frame.top + 1) == colormap(0.25));
  CHECK(img.at(frame.left + cell + 1, frame.top + 1) == colormap(0.5));
  bool digits = false;
  for (int y = frame.top; y < frame.top + cell; ++y)
    for (int x = frame.left; x < frame.left + cell; ++x) digits = digits || img.at(x, y) != colormap(0.25);
  CHECK(digits);
  // Without values in the cells the cell is one colour.
  scale.values_in_cells = false;
  const Image plain = render_heatmap("", values, "layer", "head", &frame, scale);
  CHECK(plain.at(frame.left + cell / 2, frame.top + cell / 2) == colormap(0.25));
  CHECK(img.width > plain.width - 1);  // the bar's label has room
}

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
    CHECK(fs::is_regular_file(dir.path / (std::string(name) + ".png")));
    CHECK(fs::is_regular_file(dir.path / (std::string(name) + ".csv")));
  }
  CHECK_FALSE(fs::exists(dir.path / "alpha_softmax.png"));
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
    CHECK(decode_png(read_file(dir.path / (std::string(name) + ".png"))).width > 0);
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

TEST_CASE("plot: example figures") {
  // Written to the temporary directory for a look: a loss curve per attention kind and alpha.
  std::vector<Series> runs;
  const char* kinds[] = {"softmax", "sink", "affine", "gated"};
  for (int k = 0; k < 4; ++k) {
    Series s{kinds[k], {}, {}};
    for (int t = 0; t <= 2000; t += 10) {
      s.x.push_back(t);
      s.y.push_back(2.2 + 0.05 * k + 8.0 * std::exp(-double(t) / (250.0 + 40 * k)) + 0.04 * std::sin(t * 0.05 + k));
    }
    runs.push_back(s);
  }
  const fs::path tmp = fs::temp_directory_path();
  line_plot((tmp / "plot_example.png").string(), "KD loss by attention kind", "step", "loss", runs, true);
  std::vector<std::vector<double>> alpha(16, std::vector<double>(12));
  for (size_t l = 0; l < alpha.size(); ++l)
    for (size_t h = 0; h < alpha[l].size(); ++h) alpha[l][h] = 0.5 + 0.4 * std::sin(0.3 * double(l) + 0.7 * double(h));
  heatmap((tmp / "heatmap_example.png").string(), "mean alpha per head", alpha, "layer", "head");
  CHECK(decode_png(read_file(tmp / "plot_example.png")).width == 960);
  CHECK(decode_png(read_file(tmp / "heatmap_example.png")).height > 0);
}
