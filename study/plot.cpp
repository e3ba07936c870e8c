#include "study/plot.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "tensor/error.hpp"
#include "study/stats.hpp"
#include "util/atomic_file.hpp"

namespace cotan::study {

// ---- PNG: chunks with CRC-32, a zlib stream (RFC 1950) holding one deflate block (RFC 1951) ----

namespace {

constexpr std::array<uint32_t, 256> make_crc_table() {
  std::array<uint32_t, 256> table{};
  for (uint32_t n = 0; n < 256; ++n) {
    uint32_t c = n;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
    table[n] = c;
  }
  return table;
}
constexpr std::array<uint32_t, 256> crc_table = make_crc_table();

uint32_t crc32(const std::string& bytes) {
  uint32_t c = 0xFFFFFFFFu;
  for (char b : bytes) c = crc_table[(c ^ uint8_t(b)) & 0xFF] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

uint32_t adler32(const std::vector<uint8_t>& bytes) {
  constexpr uint32_t mod = 65521;
  uint32_t a = 1, b = 0;
  for (uint8_t x : bytes) {
    a = (a + x) % mod;
    b = (b + a) % mod;
  }
  return (b << 16) | a;
}

void put_u32(std::string& out, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out += char((v >> shift) & 0xFF);
}

void put_chunk(std::string& out, const char* type, const std::string& data) {
  put_u32(out, uint32_t(data.size()));
  std::string body = std::string(type, 4) + data;  // the CRC covers the type and the data
  out += body;
  put_u32(out, crc32(body));
}

// Deflate bits go out least significant first; Huffman codes most significant bit first.
class BitWriter {
 public:
  void put(uint32_t value, int bits) {
    acc_ |= uint64_t(value) << filled_;
    filled_ += bits;
    while (filled_ >= 8) {
      out_ += char(acc_ & 0xFF);
      acc_ >>= 8;
      filled_ -= 8;
    }
  }
  void put_code(uint32_t code, int bits) {
    uint32_t reversed = 0;
    for (int i = 0; i < bits; ++i) reversed |= ((code >> i) & 1u) << (bits - 1 - i);
    put(reversed, bits);
  }
  std::string finish() {
    if (filled_ > 0) out_ += char(acc_ & 0xFF);
    acc_ = 0, filled_ = 0;
    return std::move(out_);
  }

 private:
  std::string out_;
  uint64_t acc_ = 0;
  int filled_ = 0;
};

// The fixed literal/length code (RFC 1951, 3.2.6).
void put_symbol(BitWriter& w, int sym) {
  if (sym <= 143)
    w.put_code(0x30 + sym, 8);
  else if (sym <= 255)
    w.put_code(0x190 + (sym - 144), 9);
  else if (sym <= 279)
    w.put_code(sym - 256, 7);
  else
    w.put_code(0xC0 + (sym - 280), 8);
}

constexpr std::array<int, 29> length_base = {3,  4,  5,  6,  7,  8,  9,  10, 11,  13,  15,  17,  19,  23, 27,
                                             31, 35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227, 258};
constexpr std::array<int, 29> length_extra = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2,
                                              2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0};
constexpr std::array<int, 30> distance_base = {1,   2,   3,   4,   5,   7,    9,    13,   17,   25,
                                               33,  49,  65,  97,  129, 193,  257,  385,  513,  769,
                                               1025, 1537, 2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577};
constexpr std::array<int, 30> distance_extra = {0, 0, 0, 0, 1, 1, 2, 2,  3,  3,  4,  4,  5,  5,  6,
                                                6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13};

void put_match(BitWriter& w, int length, int distance) {
  int l = int(length_base.size()) - 1;
  while (length_base[size_t(l)] > length) --l;
  put_symbol(w, 257 + l);
  w.put(uint32_t(length - length_base[size_t(l)]), length_extra[size_t(l)]);
  int d = int(distance_base.size()) - 1;
  while (distance_base[size_t(d)] > distance) --d;
  w.put_code(uint32_t(d), 5);
  w.put(uint32_t(distance - distance_base[size_t(d)]), distance_extra[size_t(d)]);
}

// One final fixed-Huffman block; greedy LZ77 with hash chains over the 32 KiB window. Filtered
// plot rows are mostly runs of zeros, which become length-258 matches at distance 1 or 3.
std::string deflate_fixed(const std::vector<uint8_t>& in) {
  constexpr int window = 32768, min_match = 3, max_match = 258, max_chain = 32;
  constexpr uint32_t hash_mask = (1u << 15) - 1;
  const int64_t n = int64_t(in.size());
  std::vector<int64_t> head(hash_mask + 1, -1), prev(window, -1);
  auto hash = [&](int64_t i) {
    return ((uint32_t(in[size_t(i)]) << 10) ^ (uint32_t(in[size_t(i + 1)]) << 5) ^ in[size_t(i + 2)]) & hash_mask;
  };
  auto insert = [&](int64_t i) {
    if (i + min_match > n) return;
    const uint32_t h = hash(i);
    prev[size_t(i % window)] = head[h];
    head[h] = i;
  };

  BitWriter w;
  w.put(1, 1);  // BFINAL
  w.put(1, 2);  // BTYPE 01: fixed Huffman codes
  int64_t i = 0;
  while (i < n) {
    int best = 0;
    int64_t best_distance = 0;
    if (i + min_match <= n) {
      const int limit = int(std::min<int64_t>(max_match, n - i));
      int64_t candidate = head[hash(i)];
      for (int chain = 0; candidate >= 0 && i - candidate < window && chain < max_chain; ++chain) {
        int len = 0;
        while (len < limit && in[size_t(candidate + len)] == in[size_t(i + len)]) ++len;
        if (len > best) best = len, best_distance = i - candidate;
        if (len == limit) break;
        const int64_t next = prev[size_t(candidate % window)];
        if (next >= candidate) break;  // a slot reused by a newer position: the chain ends here
        candidate = next;
      }
    }
    if (best >= min_match) {
      put_match(w, best, int(best_distance));
      for (int k = 0; k < best; ++k) insert(i + k);
      i += best;
    } else {
      put_symbol(w, in[size_t(i)]);
      insert(i);
      ++i;
    }
  }
  put_symbol(w, 256);  // end of block
  return w.finish();
}

int paeth(int a, int b, int c) {
  const int p = a + b - c, pa = std::abs(p - a), pb = std::abs(p - b), pc = std::abs(p - c);
  if (pa <= pb && pa <= pc) return a;
  return pb <= pc ? b : c;
}

// Each row gets the filter (None, Sub, Up or Paeth) whose output has the smallest sum of
// |signed byte|, the usual heuristic; the result is the zlib payload, one filter byte per row.
std::vector<uint8_t> filter_rows(const Image& image) {
  const size_t stride = 3 * size_t(image.width);
  std::vector<uint8_t> out;
  out.reserve((stride + 1) * size_t(image.height));
  std::vector<uint8_t> zero(stride, 0), best, trial(stride);
  for (int y = 0; y < image.height; ++y) {
    const uint8_t* row = &image.rgb[size_t(y) * stride];
    const uint8_t* up = y > 0 ? row - stride : zero.data();
    uint64_t best_cost = UINT64_MAX;
    int best_type = 0;
    for (int type : {0, 1, 2, 4}) {
      uint64_t cost = 0;
      for (size_t i = 0; i < stride; ++i) {
        const int left = i >= 3 ? row[i - 3] : 0, upper_left = i >= 3 ? up[i - 3] : 0;
        int predicted = 0;
        if (type == 1) predicted = left;
        if (type == 2) predicted = up[i];
        if (type == 4) predicted = paeth(left, up[i], upper_left);
        trial[i] = uint8_t(row[i] - predicted);
        cost += uint64_t(std::abs(int(int8_t(trial[i]))));
      }
      if (cost < best_cost) best_cost = cost, best_type = type, best = trial;
    }
    out.push_back(uint8_t(best_type));
    out.insert(out.end(), best.begin(), best.end());
  }
  return out;
}

}  // namespace

Image::Image(int width, int height, Rgb fill) : width(width), height(height) {
  check(width > 0 && height > 0 && int64_t(width) * height <= (int64_t(1) << 28), "plot", "image size ", width,
        " x ", height, " is out of range");
  rgb.resize(3 * size_t(width) * size_t(height));
  for (size_t i = 0; i < rgb.size(); i += 3) rgb[i] = fill.r, rgb[i + 1] = fill.g, rgb[i + 2] = fill.b;
}

Rgb Image::at(int x, int y) const {
  check(contains(x, y), "plot", "pixel (", x, ", ", y, ") is outside the ", width, " x ", height, " image");
  const uint8_t* p = &rgb[3 * (size_t(y) * size_t(width) + size_t(x))];
  return {p[0], p[1], p[2]};
}

std::string encode_png(const Image& image) {
  check(image.width > 0 && image.height > 0 && image.rgb.size() == 3 * size_t(image.width) * size_t(image.height),
        "plot", "image of ", image.width, " x ", image.height, " has ", image.rgb.size(), " bytes of RGB");
  std::string png = "\x89PNG\r\n\x1a\n";
  std::string header;
  put_u32(header, uint32_t(image.width));
  put_u32(header, uint32_t(image.height));
  header += std::string("\x08\x02\x00\x00\x00", 5);  // 8 bits, RGB, deflate, adaptive filters, no interlace
  put_chunk(png, "IHDR", header);

  const std::vector<uint8_t> raw = filter_rows(image);
  std::string zlib = "\x78\x01";  // deflate, 32 KiB window; (0x78 * 256 + 0x01) % 31 == 0
  zlib += deflate_fixed(raw);
  put_u32(zlib, adler32(raw));
  put_chunk(png, "IDAT", zlib);
  put_chunk(png, "IEND", "");
  return png;
}

void write_png(const std::string& path, const Image& image) {
  const std::string bytes = encode_png(image);
  write_file_atomically(path, {bytes}, "plot");
}

// ---- text: a 5x7 bitmap font for printable ASCII, written as pictures ----
//
// Glyphs are 5 columns by 9 rows: capitals and digits fill rows 0-6, descenders use rows 7-8.
// Sixteen glyphs per block of nine lines, from ' ' (0x20) to DEL (0x7F, blank).

namespace {

constexpr const char* font_pictures =
//       !     "     #     $     %     &     '     (     )     *     +     ,     -     .     /
"..... ..#.. .#.#. .#.#. ..#.. ##... .##.. ..#.. ...#. .#... ..... ..... ..... ..... ..... ....#\n"
"..... ..#.. .#.#. .#.#. .#### ##..# #..#. ..#.. ..#.. ..#.. ..#.. ..#.. ..... ..... ..... ....#\n"
"..... ..#.. .#.#. ##### #.#.. ...#. #.#.. ..#.. .#... ...#. #.#.# ..#.. ..... ..... ..... ...#.\n"
"..... ..#.. ..... .#.#. .###. ..#.. .#... ..... .#... ...#. .###. ##### ..... .###. ..... ..#..\n"
"..... ..#.. ..... ##### ..#.# .#... #.#.# ..... .#... ...#. #.#.# ..#.. ..... ..... ..... .#...\n"
"..... ..... ..... .#.#. ####. #..## #..#. ..... ..#.. ..#.. ..#.. ..#.. ..#.. ..... .##.. #....\n"
"..... ..#.. ..... .#.#. ..#.. ...## .##.# ..... ...#. .#... ..... ..... ..#.. ..... .##.. #....\n"
"..... ..... ..... ..... ..... ..... ..... ..... ..... ..... ..... ..... .#... ..... ..... .....\n"
"..... ..... ..... ..... ..... ..... ..... ..... ..... ..... ..... ..... ..... ..... ..... .....\n"
// 0     1     2     3     4     5     6     7     8     9     :     ;     <     =     >     ?
".###. ..#.. .###. .###. ...#. ##### ..##. ##### .###. .###. ..... ..... ...#. ..... .#... .###.\n"
"#...# .##.. #...# #...# ..##. #.... .#... ....# #...# #...# .##.. .##.. ..#.. ..... ..#.. #...#\n"
"#..## ..#.. ....# ....# .#.#. ####. #.... ...#. #...# #...# .##.. .##.. .#... ##### ...#. ....#\n"
"#.#.# ..#.. ...#. ..##. #..#. ....# ####. ..#.. .###. .#### ..... ..... #.... ..... ....# ...#.\n"
"##..# ..#.. ..#.. ....# ##### ....# #...# .#... #...# ....# .##.. .##.. .#... ##### ...#. ..#..\n"
"#...# ..#.. .#... #...# ...#. #...# #...# .#... #...# ...#. .##.. .##.. ..#.. ..... ..#.. .....\n"
".###. .###. ##### .###. ...#. .###. .###. .#... .###. .##.. ..... ..#.. ...#. ..... .#... ..#..\n"
"..... ..... ..... ..... ..... ..... ..... ..... ..... ..... ..... .#... ..... ..... ..... .....\n"
"..... ..... ..... ..... ..... ..... ..... ..... ..... ..... ..... ..... ..... ..... ..... .....\n"
// @     A     B     C     D     E     F     G     H     I     J     K     L     M     N     O
".###. .###. ####. .###. ###.. ##### ##### .###. #...# .###. ..### #...# #.... #...# #...# .###.\n"
"#...# #...# #...# #...# #..#. #.... #.... #...# #...# ..#.. ...#. #..#. #.... ##.## #...# #...#\n"
"#.### #...# #...# #.... #...# #.... #.... #.... #...# ..#.. ...#. #.#.. #.... #.#.# ##..# #...#\n"
"#.#.# ##### ####. #.... #...# ####. ####. #.### ##### ..#.. ...#. ##... #.... #.#.# #.#.# #...#\n"
"#.### #...# #...# #.... #...# #.... #.... #...# #...# ..#.. ...#. #.#.. #.... #...# #..## #...#\n"
"#.... #...# #...# #...# #..#. #.... #.... #...# #...# ..#.. #..#. #..#. #.... #...# #...# #...#\n"
".###. #...# ####. .###. ###.. ##### #.... .#### #...# .###. .##.. #...# ##### #...# #...# .###.\n"
"..... ..... ..... ..... ..... ..... ..... ..... ..... ..... ..... ..... ..... ..... ..... .....\n"
"..... ..... ..... ..... ..... ..... ..... ..... ..... ..... ..... ..... ..... ..... ..... .....\n"
// P     Q     R     S     T     U     V     W     X     Y     Z     [     \     ]     ^     _
"####. .###. ####. .#### ##### #...# #...# #...# #...# #...# ##### .###. #.... .###. ..#.. .....\n"
"#...# #...# #...# #.... ..#.. #...# #...# #...# #...# #...# ....# .#... #.... ...#. .#.#. .....\n"
"#...# #...# #...# #.... ..#.. #...# #...# #...# .#.#. .#.#. ...#. .#... .#... ...#. #...# .....\n"
"####. #...# ####. .###. ..#.. #...# #...# #.#.# ..#.. ..#.. ..#.. .#... ..#.. ...#. ..... .....\n"
"#.... #.#.# #.#.. ....# ..#.. #...# #...# #.#.# .#.#. ..#.. .#... .#... ...#. ...#. ..... .....\n"
"#.... #..#. #..#. ....# ..#.. #...# .#.#. #.#.# #...# ..#.. #.... .#... ....# ...#. ..... .....\n"
"#.... .##.# #...# ####. ..#.. .###. ..#.. .#.#. #...# ..#.. ##### .###. ....# .###. ..... .....\n"
"..... ..... ..... ..... ..... ..... ..... ..... ..... ..... ..... ..... ..... ..... ..... #####\n"
"..... ..... ..... ..... ..... ..... ..... ..... ..... ..... ..... ..... ..... ..... ..... .....\n"
// `     a     b     c     d     e     f     g     h     i     j     k     l     m     n     o
".#... ..... #.... ..... ....# ..... ..##. ..... #.... ..#.. ...#. #.... .##.. ..... ..... .....\n"
"..#.. ..... #.... ..... ....# ..... .#..# ..... #.... ..... ..... #.... ..#.. ..... ..... .....\n"
"...#. .###. #.##. .###. .##.# .###. .#... .#### #.##. .##.. ..##. #..#. ..#.. ##.#. #.##. .###.\n"
"..... ....# ##..# #.... #..## #...# ###.. #...# ##..# ..#.. ...#. #.#.. ..#.. #.#.# ##..# #...#\n"
"..... .#### #...# #.... #...# ##### .#... #...# #...# ..#.. ...#. ##... ..#.. #.#.# #...# #...#\n"
"..... #...# #...# #...# #...# #.... .#... #...# #...# ..#.. ...#. #.#.. ..#.. #.#.# #...# #...#\n"
"..... .#### ####. .###. .#### .###. .#... .#### #...# .###. ...#. #..#. .###. #.#.# #...# .###.\n"
"..... ..... ..... ..... ..... ..... ..... ....# ..... ..... #..#. ..... ..... ..... ..... .....\n"
"..... ..... ..... ..... ..... ..... ..... .###. ..... ..... .##.. ..... ..... ..... ..... .....\n"
// p     q     r     s     t     u     v     w     x     y     z     {     |     }     ~
"..... ..... ..... ..... .#... ..... ..... ..... ..... ..... ..... ...## ..#.. ##... ..... .....\n"
"..... ..... ..... ..... .#... ..... ..... ..... ..... ..... ..... ..#.. ..#.. ..#.. ..... .....\n"
"####. .#### #.##. .#### ###.. #...# #...# #...# #...# #...# ##### ..#.. ..#.. ..#.. .#... .....\n"
"#...# #...# ##..# #.... .#... #...# #...# #...# .#.#. #...# ...#. .#... ..#.. ...#. #.#.# .....\n"
"#...# #...# #.... .###. .#... #...# #...# #.#.# ..#.. #...# ..#.. ..#.. ..#.. ..#.. ...#. .....\n"
"#...# #...# #.... ....# .#..# #..## .#.#. #.#.# .#.#. #...# .#... ..#.. ..#.. ..#.. ..... .....\n"
"####. .#### #.... ####. ..##. .##.# ..#.. .#.#. #...# .#### ##### ...## ..#.. ##... ..... .....\n"
"#.... ....# ..... ..... ..... ..... ..... ..... ..... ....# ..... ..... ..... ..... ..... .....\n"
"#.... ....# ..... ..... ..... ..... ..... ..... ..... .###. ..... ..... ..... ..... ..... .....\n"
    ;

constexpr int glyph_w = 5, glyph_rows = 9, cap_h = 7, advance = 6;  // advance: one blank column

// Row bits per glyph, bit 4 = leftmost column.
using Glyph = std::array<uint8_t, glyph_rows>;

const std::array<Glyph, 96>& font() {
  static const std::array<Glyph, 96> glyphs = [] {
    std::array<Glyph, 96> out{};
    const char* p = font_pictures;
    for (int block = 0; block < 6; ++block)
      for (int row = 0; row < glyph_rows; ++row) {
        for (int k = 0; k < 16; ++k) {
          for (int col = 0; col < glyph_w; ++col, ++p)
            if (*p == '#') out[size_t(block * 16 + k)][size_t(row)] |= uint8_t(1u << (glyph_w - 1 - col));
          ++p;  // the space between glyphs, or the newline after the last
        }
      }
    return out;
  }();
  return glyphs;
}

// One glyph per UTF-8 code point: printable ASCII as itself, anything else as '?'.
std::vector<const Glyph*> glyphs_of(const std::string& text) {
  std::vector<const Glyph*> out;
  for (char ch : text) {
    const auto c = uint8_t(ch);
    if ((c & 0xC0) == 0x80) continue;  // continuation byte
    out.push_back(&font()[c >= 0x20 && c < 0x7F ? c - 0x20 : '?' - 0x20]);
  }
  return out;
}

int text_width(const std::string& text, int scale) {
  const int n = int(glyphs_of(text).size());
  return n == 0 ? 0 : (n * advance - 1) * scale;
}

void fill_rect(Image& img, int x0, int y0, int x1, int y1, Rgb c) {  // inclusive corners
  for (int y = std::max(y0, 0); y <= std::min(y1, img.height - 1); ++y)
    for (int x = std::max(x0, 0); x <= std::min(x1, img.width - 1); ++x) img.set(x, y, c);
}

// (x, y): the top left of the capital-height box.
void draw_text(Image& img, int x, int y, const std::string& text, Rgb c, int scale) {
  for (const Glyph* g : glyphs_of(text)) {
    for (int row = 0; row < glyph_rows; ++row)
      for (int col = 0; col < glyph_w; ++col)
        if ((*g)[size_t(row)] >> (glyph_w - 1 - col) & 1u)
          fill_rect(img, x + col * scale, y + row * scale, x + (col + 1) * scale - 1, y + (row + 1) * scale - 1, c);
    x += advance * scale;
  }
}

// Turned a quarter anticlockwise, reading upwards from (x, y): x is the left edge of the box,
// where the tops of the letters point.
void draw_text_up(Image& img, int x, int y, const std::string& text, Rgb c, int scale) {
  for (const Glyph* g : glyphs_of(text)) {
    for (int row = 0; row < glyph_rows; ++row)
      for (int col = 0; col < glyph_w; ++col)
        if ((*g)[size_t(row)] >> (glyph_w - 1 - col) & 1u)
          fill_rect(img, x + row * scale, y - (col + 1) * scale + 1, x + (row + 1) * scale - 1, y - col * scale, c);
    y -= advance * scale;
  }
}

// ---- drawing ----

constexpr Rgb white{255, 255, 255}, ink{34, 34, 34}, frame_ink{80, 80, 80}, grid_ink{226, 226, 226},
    legend_edge{200, 200, 200}, missing_ink{190, 190, 190};
constexpr int text_scale = 2, title_scale = 3, tick_len = 6, pad = 16;
constexpr double line_width = 2.0;

Rgb mix(Rgb a, Rgb b, double t) {  // (1 - t) a + t b
  auto lerp = [t](uint8_t x, uint8_t y) { return uint8_t(std::lround(double(x) + t * (double(y) - double(x)))); };
  return {lerp(a.r, b.r), lerp(a.g, b.g), lerp(a.b, b.b)};
}

// Antialiased strokes collected per colour as coverage (the maximum over strokes, so joints of a
// polyline are not painted twice), then laid over the image once.
class Coverage {
 public:
  Coverage(int x0, int y0, int x1, int y1) : x0_(x0), y0_(y0), w_(x1 - x0 + 1), h_(y1 - y0 + 1) {
    cov_.assign(size_t(std::max(w_, 0)) * size_t(std::max(h_, 0)), 0.0f);
  }
  // A segment of the given width with round caps; a point when a == b.
  void segment(double ax, double ay, double bx, double by, double width) {
    const double hw = width / 2, dx = bx - ax, dy = by - ay, len2 = dx * dx + dy * dy;
    const int xa = std::max(x0_, int(std::floor(std::min(ax, bx) - hw - 1)));
    const int xb = std::min(x0_ + w_ - 1, int(std::ceil(std::max(ax, bx) + hw + 1)));
    const int ya = std::max(y0_, int(std::floor(std::min(ay, by) - hw - 1)));
    const int yb = std::min(y0_ + h_ - 1, int(std::ceil(std::max(ay, by) + hw + 1)));
    for (int y = ya; y <= yb; ++y)
      for (int x = xa; x <= xb; ++x) {
        const double t = len2 > 0 ? std::clamp(((x - ax) * dx + (y - ay) * dy) / len2, 0.0, 1.0) : 0.0;
        const double d = std::hypot(x - (ax + t * dx), y - (ay + t * dy));
        const double c = std::clamp(hw + 0.5 - d, 0.0, 1.0);
        float& slot = cov_[size_t(y - y0_) * size_t(w_) + size_t(x - x0_)];
        slot = std::max(slot, float(c));
      }
  }
  void paint(Image& img, Rgb color) const {
    for (int y = 0; y < h_; ++y)
      for (int x = 0; x < w_; ++x) {
        const float c = cov_[size_t(y) * size_t(w_) + size_t(x)];
        if (c > 0) img.set(x0_ + x, y0_ + y, c >= 1 ? color : mix(img.at(x0_ + x, y0_ + y), color, c));
      }
  }

 private:
  int x0_, y0_, w_, h_;
  std::vector<float> cov_;
};

// ---- axes ----

struct Axis {
  double lo = 0, hi = 1;
  std::vector<double> ticks;
  std::vector<std::string> labels;
};

// 1, 2 or 5 times a power of ten, at least `raw`.
double nice_step(double raw) {
  const double p = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * p >= raw * (1 - 1e-9)) return m * p;
  return 10 * p;
}

std::vector<double> linear_ticks(double lo, double hi, double step) {
  std::vector<double> out;
  for (double k = std::ceil(lo / step - 1e-9); k * step <= hi + step * 1e-9; k += 1)
    out.push_back(std::abs(k) < 0.5 ? 0.0 : k * step);
  return out;
}

// "2e7", "2.5e-5": `digits` significant digits, trailing zeros dropped.
std::string short_scientific(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*e", digits - 1, v);
  std::string s = buf;
  const size_t e = s.find('e');
  std::string mantissa = s.substr(0, e);
  if (mantissa.find('.') != std::string::npos) {
    while (mantissa.back() == '0') mantissa.pop_back();
    if (mantissa.back() == '.') mantissa.pop_back();
  }
  return mantissa + "e" + std::to_string(std::atoi(s.c_str() + e + 1));
}

std::vector<std::string> linear_labels(const std::vector<double>& ticks, double step) {
  double biggest = 0;
  for (double t : ticks) biggest = std::max(biggest, std::abs(t));
  std::vector<std::string> out;
  const int step_exp = int(std::floor(std::log10(step) + 1e-9));
  for (double t : ticks) {
    if (biggest >= 1e6 || step < 1e-4) {
      const int digits = biggest > 0 ? int(std::floor(std::log10(biggest))) - step_exp + 1 : 1;
      out.push_back(t == 0 ? "0" : short_scientific(t, std::clamp(digits, 1, 12)));
    } else {
      char buf[64];
      std::snprintf(buf, sizeof buf, "%.*f", std::max(0, -step_exp), t);
      out.push_back(buf);
    }
  }
  return out;
}

// Ticks at least about `min_gap` pixels apart over `length` pixels; when `horizontal` (labels side
// by side), the step grows until the labels leave room between them.
Axis linear_axis(double lo, double hi, int length, int min_gap, bool horizontal) {
  Axis a{lo, hi, {}, {}};
  double step = nice_step((hi - lo) * min_gap / std::max(length, 1));
  for (int tries = 0; tries < 8; ++tries) {
    a.ticks = linear_ticks(lo, hi, step);
    a.labels = linear_labels(a.ticks, step);
    int widest = 0;
    for (const auto& l : a.labels) widest = std::max(widest, text_width(l, text_scale));
    const double gap = step / (hi - lo) * length;
    if (!horizontal || gap >= widest + 3 * pad / 2) break;
    step = nice_step(step * 1.01);
  }
  return a;
}

// lo, hi > 0 (the data range, padded in log space by the caller).
Axis log_axis(double lo, double hi, int length) {
  Axis a{lo, hi, {}, {}};
  const int first = int(std::ceil(std::log10(lo) - 1e-9)), last = int(std::floor(std::log10(hi) + 1e-9));
  // Decades when there are at least three; else 1-2-5 within each decade; else every digit.
  for (const std::vector<double>& mantissas : {std::vector<double>{1}, {1, 2, 5}, {1, 2, 3, 4, 5, 6, 7, 8, 9}}) {
    a.ticks.clear();
    const int stride = mantissas.size() == 1 ? std::max(1, (last - first) / 8 + 1) : 1;
    for (int e = first - 1; e <= last; ++e) {
      if (mantissas.size() == 1 && (e - first) % stride != 0) continue;
      for (double m : mantissas) {
        const double t = m * std::pow(10.0, e);
        if (t >= lo * (1 - 1e-9) && t <= hi * (1 + 1e-9)) a.ticks.push_back(t);
      }
    }
    if (a.ticks.size() >= 3) break;
  }
  if (a.ticks.size() < 2) return linear_axis(lo, hi, length, 80, false);
  const bool scientific = a.ticks.back() >= 1e5 || a.ticks.front() < 1e-3;
  for (double t : a.ticks) a.labels.push_back(scientific ? short_scientific(t, 1) : format_number(t, 1));
  return a;
}

}  // namespace

double PlotFrame::px(double x) const { return left + (x - x_min) / (x_max - x_min) * (right - left); }

double PlotFrame::py(double y) const {
  auto f = [this](double v) { return log_y ? std::log10(v) : v; };
  return bottom - (f(y) - f(y_min)) / (f(y_max) - f(y_min)) * (bottom - top);
}

Rgb series_color(size_t i) {
  static constexpr std::array<Rgb, 10> palette = {{{31, 119, 180},
                                                   {255, 127, 14},
                                                   {44, 160, 44},
                                                   {214, 39, 40},
                                                   {148, 103, 189},
                                                   {140, 86, 75},
                                                   {227, 119, 194},
                                                   {127, 127, 127},
                                                   {188, 189, 34},
                                                   {23, 190, 207}}};
  return palette[i % palette.size()];
}

Rgb colormap(double t) {
  static constexpr std::array<Rgb, 9> viridis = {{{68, 1, 84},
                                                  {71, 45, 123},
                                                  {59, 82, 139},
                                                  {44, 114, 142},
                                                  {33, 145, 140},
                                                  {40, 174, 128},
                                                  {94, 201, 98},
                                                  {173, 220, 48},
                                                  {253, 231, 37}}};
  if (!(t > 0)) return viridis.front();  // NaN too
  if (t >= 1) return viridis.back();
  const double s = t * double(viridis.size() - 1);
  const size_t i = size_t(s);
  return mix(viridis[i], viridis[i + 1], s - double(i));
}

Image render_line_plot(const std::string& title, const std::string& xlabel, const std::string& ylabel,
                       const std::vector<Series>& series, bool log_y, PlotFrame* frame_out, bool categories) {
  constexpr int width = 960, height = 600;
  auto usable = [log_y](double x, double y) { return std::isfinite(x) && std::isfinite(y) && (!log_y || y > 0); };

  // Data ranges over the points that will be drawn.
  double x_lo = INFINITY, x_hi = -INFINITY, y_lo = INFINITY, y_hi = -INFINITY;
  for (const Series& s : series) {
    check(s.x.size() == s.y.size(), "plot", "series '", s.label, "' has ", s.x.size(), " x values and ", s.y.size(),
          " y values");
    check(s.lo.size() == s.hi.size() && (s.lo.empty() || s.lo.size() == s.x.size()), "plot", "series '", s.label,
          "' has a band of ", s.lo.size(), " and ", s.hi.size(), " values for ", s.x.size(), " points");
    for (size_t i = 0; i < s.x.size(); ++i)
      if (usable(s.x[i], s.y[i])) {
        x_lo = std::min(x_lo, s.x[i]), x_hi = std::max(x_hi, s.x[i]);
        y_lo = std::min(y_lo, s.y[i]), y_hi = std::max(y_hi, s.y[i]);
        for (const std::vector<double>* edge : {&s.lo, &s.hi})
          if (!edge->empty() && usable(s.x[i], (*edge)[i]))
            y_lo = std::min(y_lo, (*edge)[i]), y_hi = std::max(y_hi, (*edge)[i]);
      }
  }
  if (x_lo > x_hi) x_lo = 0, x_hi = 1, y_lo = log_y ? 1 : 0, y_hi = log_y ? 10 : 1;
  if (categories) {
    x_lo = std::floor(x_lo) - 0.5, x_hi = std::ceil(x_hi) + 0.5;
  } else if (x_hi - x_lo <= 1e-12 * std::max(1.0, std::abs(x_lo))) {
    x_lo -= 0.5, x_hi += 0.5;
  }
  if (log_y) {
    double l0 = std::log10(y_lo), l1 = std::log10(y_hi);
    if (l1 - l0 < 1e-9) l0 -= 0.5, l1 += 0.5;
    const double margin = 0.05 * (l1 - l0);
    y_lo = std::pow(10.0, l0 - margin), y_hi = std::pow(10.0, l1 + margin);
  } else {
    if (y_hi - y_lo <= 1e-12 * std::max(1.0, std::abs(y_lo))) y_lo -= 0.5, y_hi += 0.5;
    const double margin = 0.05 * (y_hi - y_lo);
    y_lo -= margin, y_hi += margin;
  }

  // Layout: the y tick labels decide the left margin.
  const int text_h = cap_h * text_scale;
  // A title too wide for the large size is drawn at the text size.
  const int title_size = text_width(title, title_scale) <= width - 2 * pad ? title_scale : text_scale;
  const int top = pad + (title.empty() ? 0 : cap_h * title_size + pad);
  const int bottom = height - pad - (xlabel.empty() ? 0 : text_h + pad / 2) - text_h - tick_len - pad / 2;
  const Axis yaxis = log_y ? log_axis(y_lo, y_hi, bottom - top) : linear_axis(y_lo, y_hi, bottom - top, 70, false);
  int y_label_w = 0;
  for (const auto& l : yaxis.labels) y_label_w = std::max(y_label_w, text_width(l, text_scale));
  const int left = pad + (ylabel.empty() ? 0 : text_h + pad) + y_label_w + tick_len + pad / 2;
  const int right = width - 2 * pad;
  Axis xaxis = linear_axis(x_lo, x_hi, right - left, 100, true);
  if (categories) {
    // Every k-th integer, k in 1, 2, 5, 10, ..., so that the labels do not touch.
    const double first = x_lo + 0.5, last = x_hi - 0.5;
    const int label_w = text_width(cat(int64_t(last)), text_scale) + pad;
    const double per_step = double(right - left) / (x_hi - x_lo);
    int64_t every = 1;
    for (int64_t decade = 1; every * per_step < label_w; decade *= 10)
      for (int64_t m : {1, 2, 5})
        if (every * per_step < label_w) every = m * decade;
    xaxis = Axis{x_lo, x_hi, {}, {}};
    for (double t = first; t <= last + 1e-9; t += double(every)) {
      xaxis.ticks.push_back(t);
      xaxis.labels.push_back(cat(int64_t(std::llround(t))));
    }
  }

  PlotFrame frame{left, top, right, bottom, x_lo, x_hi, y_lo, y_hi, log_y, xaxis.ticks, yaxis.ticks};
  Image img(width, height, white);

  for (double t : xaxis.ticks) fill_rect(img, int(std::lround(frame.px(t))), top, int(std::lround(frame.px(t))), bottom, grid_ink);
  for (double t : yaxis.ticks) fill_rect(img, left, int(std::lround(frame.py(t))), right, int(std::lround(frame.py(t))), grid_ink);

  // Bands first, under every line: a light shade of the series' colour, column by column between
  // consecutive drawn points, blended so that overlapping bands both show.
  for (size_t k = 0; k < series.size(); ++k) {
    const Series& s = series[k];
    if (s.lo.empty()) continue;
    const Rgb shade = mix(white, series_color(k), 0.3);
    std::vector<int> painted;  // columns already shaded for this series
    for (size_t i = 0; i + 1 < s.x.size(); ++i) {
      const bool ok = usable(s.x[i], s.lo[i]) && usable(s.x[i], s.hi[i]) && usable(s.x[i + 1], s.lo[i + 1]) &&
                      usable(s.x[i + 1], s.hi[i + 1]);
      if (!ok) continue;
      const double xa = frame.px(s.x[i]), xb = frame.px(s.x[i + 1]);
      for (int x = int(std::ceil(std::min(xa, xb))); x <= int(std::floor(std::max(xa, xb))); ++x) {
        if (std::find(painted.begin(), painted.end(), x) != painted.end()) continue;
        painted.push_back(x);
        const double t = xb != xa ? (x - xa) / (xb - xa) : 0.0;
        const double ya = frame.py(s.lo[i] + t * (s.lo[i + 1] - s.lo[i]));
        const double yb = frame.py(s.hi[i] + t * (s.hi[i + 1] - s.hi[i]));
        for (int y = std::max(top, int(std::lround(std::min(ya, yb)))); y <= std::min(bottom, int(std::lround(std::max(ya, yb)))); ++y)
          img.set(x, y, mix(img.at(x, y), shade, 0.6));
      }
    }
  }

  // Series, and the pixels they pass through for placing the legend.
  std::vector<std::pair<double, double>> trace;
  for (size_t k = 0; k < series.size(); ++k) {
    const Series& s = series[k];
    Coverage cov(left, top, right, bottom);
    bool have_prev = false, prev_drawn = false;
    double px0 = 0, py0 = 0;
    for (size_t i = 0; i <= s.x.size(); ++i) {
      const bool ok = i < s.x.size() && usable(s.x[i], s.y[i]);
      if (!ok) {
        if (have_prev && !prev_drawn) cov.segment(px0, py0, px0, py0, 3 * line_width);  // an isolated point
        have_prev = false;
        continue;
      }
      const double px1 = frame.px(s.x[i]), py1 = frame.py(s.y[i]);
      if (have_prev) {
        cov.segment(px0, py0, px1, py1, line_width);
        const int samples = 1 + int(std::hypot(px1 - px0, py1 - py0) / 4);
        for (int j = 0; j < samples; ++j)
          trace.emplace_back(px0 + (px1 - px0) * j / samples, py0 + (py1 - py0) * j / samples);
      }
      trace.emplace_back(px1, py1);
      if (categories) cov.segment(px1, py1, px1, py1, 4.5 * line_width);  // the point's marker
      prev_drawn = have_prev;
      have_prev = true;
      px0 = px1, py0 = py1;
    }
    cov.paint(img, series_color(k));
  }

  // Frame, ticks and their labels.
  for (int x = left; x <= right; ++x) img.set(x, top, frame_ink), img.set(x, bottom, frame_ink);
  for (int y = top; y <= bottom; ++y) img.set(left, y, frame_ink), img.set(right, y, frame_ink);
  for (size_t i = 0; i < xaxis.ticks.size(); ++i) {
    const int x = int(std::lround(frame.px(xaxis.ticks[i])));
    fill_rect(img, x, bottom, x, bottom + tick_len, frame_ink);
    const int w = text_width(xaxis.labels[i], text_scale);
    draw_text(img, std::clamp(x - w / 2, 0, width - w), bottom + tick_len + pad / 2, xaxis.labels[i], ink, text_scale);
  }
  for (size_t i = 0; i < yaxis.ticks.size(); ++i) {
    const int y = int(std::lround(frame.py(yaxis.ticks[i])));
    fill_rect(img, left - tick_len, y, left, y, frame_ink);
    const int w = text_width(yaxis.labels[i], text_scale);
    draw_text(img, left - tick_len - pad / 2 - w, y - text_h / 2, yaxis.labels[i], ink, text_scale);
  }
  if (!xlabel.empty())
    draw_text(img, (left + right - text_width(xlabel, text_scale)) / 2, height - pad - text_h, xlabel, ink, text_scale);
  if (!ylabel.empty())
    draw_text_up(img, pad, (top + bottom + text_width(ylabel, text_scale)) / 2, ylabel, ink, text_scale);
  if (!title.empty())
    draw_text(img, (width - text_width(title, title_size)) / 2, pad, title, ink, title_size);

  // The legend goes in the corner of the plot area that covers the fewest traced pixels.
  std::vector<size_t> labelled;
  int label_w = 0;
  for (size_t k = 0; k < series.size(); ++k)
    if (!series[k].label.empty()) {
      labelled.push_back(k);
      label_w = std::max(label_w, text_width(series[k].label, text_scale));
    }
  if (!labelled.empty()) {
    constexpr int sample_len = 28, row_h = 24, inset = 10;
    const int box_w = pad / 2 + sample_len + pad / 2 + label_w + pad / 2;
    const int box_h = int(labelled.size()) * row_h + pad / 2;
    const int xs[2] = {right - inset - box_w, left + inset}, ys[2] = {top + inset, bottom - inset - box_h};
    int bx = xs[0], by = ys[0];
    size_t fewest = SIZE_MAX;
    for (int cy : ys)
      for (int cx : xs) {
        const size_t hits = size_t(std::count_if(trace.begin(), trace.end(), [&](const auto& p) {
          return p.first >= cx - 4 && p.first <= cx + box_w + 4 && p.second >= cy - 4 && p.second <= cy + box_h + 4;
        }));
        if (hits < fewest) fewest = hits, bx = cx, by = cy;
      }
    fill_rect(img, bx, by, bx + box_w, by + box_h, white);
    for (int x = bx; x <= bx + box_w; ++x) img.set(x, by, legend_edge), img.set(x, by + box_h, legend_edge);
    for (int y = by; y <= by + box_h; ++y) img.set(bx, y, legend_edge), img.set(bx + box_w, y, legend_edge);
    for (size_t r = 0; r < labelled.size(); ++r) {
      const int cy = by + pad / 2 + int(r) * row_h + text_h / 2;
      Coverage cov(bx + 1, by + 1, bx + box_w - 1, by + box_h - 1);
      cov.segment(bx + pad / 2, cy, bx + pad / 2 + sample_len, cy, 1.5 * line_width);
      cov.paint(img, series_color(labelled[r]));
      draw_text(img, bx + pad + sample_len, cy - text_h / 2, series[labelled[r]].label, ink, text_scale);
    }
  }

  if (frame_out) *frame_out = frame;
  return img;
}

void line_plot(const std::string& path, const std::string& title, const std::string& xlabel,
               const std::string& ylabel, const std::vector<Series>& series, bool log_y, bool categories) {
  Image img;
  try {
    img = render_line_plot(title, xlabel, ylabel, series, log_y, nullptr, categories);
  } catch (const Error& e) {
    fail("plot", path, ": ", std::string(e.what()).substr(std::string("[plot] ").size()));
  }
  write_png(path, img);
}

Image render_heatmap(const std::string& title, const std::vector<std::vector<double>>& values,
                     const std::string& row_label, const std::string& col_label, PlotFrame* frame_out,
                     const HeatmapScale& scale) {
  check(!values.empty() && !values[0].empty(), "plot", "heatmap of no values");
  const int rows = int(values.size()), cols = int(values[0].size());
  double lo = INFINITY, hi = -INFINITY;
  for (int r = 0; r < rows; ++r) {
    check(int(values[size_t(r)].size()) == cols, "plot", "heatmap row ", r, " has ", values[size_t(r)].size(),
          " values, row 0 has ", cols);
    for (double v : values[size_t(r)])
      if (std::isfinite(v)) lo = std::min(lo, v), hi = std::max(hi, v);
  }
  if (std::isfinite(scale.lo) && std::isfinite(scale.hi)) {
    check(scale.lo <= scale.hi, "plot", "heatmap colour range [", scale.lo, ", ", scale.hi, "] is empty");
    lo = scale.lo, hi = scale.hi;
  }

  const int text_h = cap_h * text_scale;
  // Cells large enough for their values when they are written in them.
  const int cell = std::clamp(std::min(640 / cols, 480 / rows), 2, scale.values_in_cells ? 72 : 48);
  const int area_w = cols * cell, area_h = rows * cell;
  // Label every k-th row and column, k in 1, 2, 5, 10, ..., so that labels do not touch.
  auto every = [](int cell_px, int label_px) {
    for (int decade = 1;; decade *= 10)
      for (int m : {1, 2, 5})
        if (m * decade * cell_px >= label_px) return m * decade;
  };
  const int row_every = every(cell, text_h + 6);
  const int col_every = every(cell, text_width(std::to_string(cols - 1), text_scale) + pad);
  const int row_tick_w = text_width(std::to_string(rows - 1), text_scale);

  const int left = pad + (row_label.empty() ? 0 : text_h + pad) + row_tick_w + tick_len + pad / 2;
  const int top = pad + (title.empty() ? 0 : cap_h * title_scale + pad);
  const int bar_x = left + area_w + 2 * pad, bar_w = 20;
  const std::string lo_text = lo <= hi ? format_number(lo, 3) : "nan", hi_text = lo <= hi ? format_number(hi, 3) : "nan";
  const std::string mid_text = lo <= hi ? format_number((lo + hi) / 2, 3) : "";
  const int bar_label_w =
      std::max({text_width(lo_text, text_scale), text_width(hi_text, text_scale), text_width(mid_text, text_scale)});
  const int bar_title_x = bar_x + bar_w + pad / 2 + bar_label_w + pad / 2;  // the colour bar's label, upwards
  const int width = std::max(bar_title_x + (scale.label.empty() ? 0 : text_h + pad / 2) + pad / 2,
                             text_width(title, title_scale) + 2 * pad);
  const int height = std::max(top + area_h + tick_len + pad / 2 + text_h + (col_label.empty() ? 0 : pad / 2 + text_h) + pad,
                              top + text_width(scale.label, text_scale) + pad);
  Image img(width, height, white);

  PlotFrame frame{left, top, left + area_w - 1, top + area_h - 1, 0, double(cols), double(rows), 0, false, {}, {}};
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) {
      const double v = values[size_t(r)][size_t(c)];
      const Rgb color = !std::isfinite(v) ? missing_ink : hi > lo ? colormap((v - lo) / (hi - lo)) : colormap(0.5);
      fill_rect(img, left + c * cell, top + r * cell, left + (c + 1) * cell - 1, top + (r + 1) * cell - 1, color);
      if (!scale.values_in_cells || !std::isfinite(v)) continue;
      // The value, at the text size when it fits, else at half of it.
      const std::string text = format_number(v, 3);
      const int size = text_width(text, text_scale) + 4 <= cell ? text_scale : 1;
      if (text_width(text, size) + 2 > cell || cap_h * size + 2 > cell) continue;
      const double luma = 0.299 * color.r + 0.587 * color.g + 0.114 * color.b;
      draw_text(img, left + c * cell + (cell - text_width(text, size)) / 2, top + r * cell + (cell - cap_h * size) / 2,
                text, luma > 140 ? ink : white, size);
    }
  for (int r = 0; r < rows; r += row_every) {
    frame.y_ticks.push_back(r);
    const int y = top + r * cell + cell / 2;
    fill_rect(img, left - tick_len, y, left - 1, y, frame_ink);
    const std::string l = std::to_string(r);
    draw_text(img, left - tick_len - pad / 2 - text_width(l, text_scale), y - text_h / 2, l, ink, text_scale);
  }
  const int bottom = top + area_h - 1;
  for (int c = 0; c < cols; c += col_every) {
    frame.x_ticks.push_back(c);
    const int x = left + c * cell + cell / 2;
    fill_rect(img, x, bottom + 1, x, bottom + tick_len, frame_ink);
    const std::string l = std::to_string(c);
    draw_text(img, x - text_width(l, text_scale) / 2, bottom + tick_len + pad / 2, l, ink, text_scale);
  }
  if (!col_label.empty())
    draw_text(img, left + (area_w - text_width(col_label, text_scale)) / 2, height - pad - text_h, col_label, ink,
              text_scale);
  if (!row_label.empty())
    draw_text_up(img, pad, top + (area_h + text_width(row_label, text_scale)) / 2, row_label, ink, text_scale);
  if (!title.empty()) draw_text(img, (width - text_width(title, title_scale)) / 2, pad, title, ink, title_scale);

  // The colour bar: the top is the largest value, the bottom the smallest.
  for (int y = top; y <= bottom; ++y)
    fill_rect(img, bar_x, y, bar_x + bar_w - 1, y, colormap(area_h > 1 ? double(bottom - y) / (bottom - top) : 0.5));
  for (int x = bar_x - 1; x <= bar_x + bar_w; ++x) img.set(x, top - 1, frame_ink), img.set(x, bottom + 1, frame_ink);
  for (int y = top - 1; y <= bottom + 1; ++y) img.set(bar_x - 1, y, frame_ink), img.set(bar_x + bar_w, y, frame_ink);
  const int label_x = bar_x + bar_w + pad / 2;
  draw_text(img, label_x, top, hi_text, ink, text_scale);
  if (area_h >= 4 * text_h) draw_text(img, label_x, (top + bottom - text_h) / 2, mid_text, ink, text_scale);
  draw_text(img, label_x, bottom - text_h + 1, lo_text, ink, text_scale);
  if (!scale.label.empty())
    draw_text_up(img, bar_title_x, top + (area_h + text_width(scale.label, text_scale)) / 2, scale.label, ink, text_scale);

  if (frame_out) *frame_out = frame;
  return img;
}

void heatmap(const std::string& path, const std::string& title, const std::vector<std::vector<double>>& values,
             const std::string& row_label, const std::string& col_label, const HeatmapScale& scale) {
  Image img;
  try {
    img = render_heatmap(title, values, row_label, col_label, nullptr, scale);
  } catch (const Error& e) {
    fail("plot", path, ": ", std::string(e.what()).substr(std::string("[plot] ").size()));
  }
  write_png(path, img);
}

}  // namespace cotan::study
