// PNG plots with no external dependency: an RGB raster, a PNG encoder (zlib stream of one
// fixed-Huffman deflate block, LZ77 over a 32 KiB window), a built-in 5x7 bitmap font, line plots
// and heatmaps.
//
//   line_plot("runs/grad_norm.png", "gradient norm", "step", "||g||",
//             {{"softmax", steps, g_softmax}, {"affine", steps, g_affine}}, /*log_y=*/true);
//   heatmap("runs/alpha.png", "mean alpha", alpha /* [layers][heads] */, "layer", "head");
//
// Files are written atomically (util/atomic_file.hpp), so a reader never sees half a PNG; errors
// name the target: "[plot] /x/y.png: cannot write: /x/y.png.tmp: Permission denied".
// Non-finite points (and y <= 0 on a log axis) are skipped: the line breaks there.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace cotan::study {

struct Rgb {
  uint8_t r = 0, g = 0, b = 0;
  bool operator==(const Rgb&) const = default;
};

// Row-major 8-bit RGB pixels, (0, 0) at the top left.
struct Image {
  int width = 0, height = 0;
  std::vector<uint8_t> rgb;  // 3 * width * height

  Image() = default;
  Image(int width, int height, Rgb fill = {255, 255, 255});
  bool contains(int x, int y) const { return x >= 0 && y >= 0 && x < width && y < height; }
  Rgb at(int x, int y) const;  // throws outside the image
  void set(int x, int y, Rgb c) {
    if (!contains(x, y)) return;
    uint8_t* p = &rgb[3 * (size_t(y) * size_t(width) + size_t(x))];
    p[0] = c.r, p[1] = c.g, p[2] = c.b;
  }
};

// The PNG file's bytes (8-bit RGB, no interlace) / written atomically to `path`.
std::string encode_png(const Image& image);
void write_png(const std::string& path, const Image& image);

struct Series {
  std::string label;
  std::vector<double> x, y;  // the same length
  // A band drawn under the line in a light shade of its colour, from lo to hi (a spread over
  // seeds): both empty, or both as long as x.
  std::vector<double> lo = {}, hi = {};
};

// Where a plot drew its data: the plot area in pixels (edges inclusive) and the axis ranges.
// px and py map data to pixel centres; a heatmap's x runs over columns [0, cols) and its y over
// rows, row 0 at the top (y_min = rows, y_max = 0).
struct PlotFrame {
  int left = 0, top = 0, right = 0, bottom = 0;
  double x_min = 0, x_max = 1, y_min = 0, y_max = 1;
  bool log_y = false;
  std::vector<double> x_ticks, y_ticks;  // data values (y_ticks are values, not logs, on a log axis)
  double px(double x) const;
  double py(double y) const;
};

// The colour of series i (a 10-colour qualitative palette, repeating) / of t in [0, 1] on the
// heatmap scale (viridis).
Rgb series_color(size_t i);
Rgb colormap(double t);

// With `categories` the x values are categories such as layers: the axis runs half a step past
// the first and last integer, with a tick and a label at each integer (every k-th when they would
// crowd), and every point gets a marker.
Image render_line_plot(const std::string& title, const std::string& xlabel, const std::string& ylabel,
                       const std::vector<Series>& series, bool log_y = false, PlotFrame* frame = nullptr,
                       bool categories = false);
void line_plot(const std::string& path, const std::string& title, const std::string& xlabel,
               const std::string& ylabel, const std::vector<Series>& series, bool log_y = false,
               bool categories = false);

// The colour scale of a heatmap: a range shared by several heatmaps (NaN: the values' own, from
// the smallest finite value to the largest; values outside it take the end colours), the label
// along the colour bar, and whether each cell shows its value (3 significant digits, in dark or
// light ink by the cell's brightness; left out where it does not fit).
struct HeatmapScale {
  double lo = std::numeric_limits<double>::quiet_NaN(), hi = std::numeric_limits<double>::quiet_NaN();
  std::string label;
  bool values_in_cells = false;
};

// values[row][col], e.g. layers x heads of alpha, coloured on `scale` (a colour bar on the right
// gives its ends and middle); non-finite cells are grey.
Image render_heatmap(const std::string& title, const std::vector<std::vector<double>>& values,
                     const std::string& row_label, const std::string& col_label, PlotFrame* frame = nullptr,
                     const HeatmapScale& scale = {});
void heatmap(const std::string& path, const std::string& title, const std::vector<std::vector<double>>& values,
             const std::string& row_label, const std::string& col_label, const HeatmapScale& scale = {});

}  // namespace cotan::study
