// The tokenizer.json pipeline. Each component mirrors its HF tokenizers counterpart; comments
// note the places where HF's behaviour is not the obvious one, since matching it is the point.
#include "text/tokenizer.hpp"

#include <xxhash.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <queue>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "text/unicode.hpp"
#include "util/error.hpp"
#include "util/json.hpp"

namespace fs = std::filesystem;

namespace cotan::text {

// ---- UTF-8 validity ----

namespace {

// The length of the well-formed UTF-8 sequence at s[i], or 0 when it is ill-formed; `prefix` gets
// the length of its maximal well-formed prefix (at least 1), the part one U+FFFD replaces.
size_t utf8_sequence(std::string_view s, size_t i, size_t* prefix) {
  const unsigned char lead = static_cast<unsigned char>(s[i]);
  *prefix = 1;
  if (lead < 0x80) return 1;
  size_t length;
  unsigned char lo = 0x80, hi = 0xBF;  // the range of the second byte (Unicode Table 3-7)
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    if (lead == 0xE0) lo = 0xA0;
    if (lead == 0xED) hi = 0x9F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    if (lead == 0xF0) lo = 0x90;
    if (lead == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  for (size_t k = 1; k < length; ++k) {
    if (i + k >= s.size()) return 0;
    const unsigned char c = static_cast<unsigned char>(s[i + k]);
    if (k == 1 ? (c < lo || c > hi) : (c < 0x80 || c > 0xBF)) return 0;
    *prefix = k + 1;
  }
  return length;
}

}  // namespace

bool valid_utf8(std::string_view bytes, size_t* error_at) {
  size_t i = 0;
  while (i < bytes.size()) {
    // Runs of ASCII, eight bytes at a time.
    while (i + 8 <= bytes.size()) {
      uint64_t word;
      std::memcpy(&word, bytes.data() + i, 8);
      if (word & 0x8080808080808080ull) break;
      i += 8;
    }
    if (i >= bytes.size()) break;
    size_t prefix;
    const size_t n = utf8_sequence(bytes, i, &prefix);
    if (n == 0) {
      if (error_at) *error_at = i;
      return false;
    }
    i += n;
  }
  return true;
}

std::string replace_invalid_utf8(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() + 8);
  size_t i = 0;
  while (i < bytes.size()) {
    size_t prefix;
    const size_t n = utf8_sequence(bytes, i, &prefix);
    if (n > 0) {
      out.append(bytes.substr(i, n));
      i += n;
    } else {
      out += "\xEF\xBF\xBD";
      i += prefix;
    }
  }
  return out;
}

namespace {

// ---- JSON reading with the field's path in errors ----

struct Reader {
  std::string file;

  [[noreturn]] void error(const std::string& where, const std::string& what) const {
    fail("tokenizer", file, ": ", where, " ", what);
  }
  const Json& field(const Json& object, const std::string& where, const char* key) const {
    if (!object.is_object()) error(where, "is not an object");
    const auto it = object.find(key);
    if (it == object.end()) error(where.empty() ? std::string(key) : where + "." + key, "is missing");
    return *it;
  }
  const Json* optional(const Json& object, const char* key) const {
    const auto it = object.find(key);
    return it == object.end() || it->is_null() ? nullptr : &*it;
  }
  std::string string(const Json& value, const std::string& where) const {
    if (!value.is_string()) error(where, "is not a string");
    return value.get<std::string>();
  }
  bool boolean(const Json& object, const std::string& where, const char* key, bool fallback) const {
    const Json* v = optional(object, key);
    if (!v) return fallback;
    if (!v->is_boolean()) error(where + "." + key, "is not true or false");
    return v->get<bool>();
  }
  int64_t integer(const Json& value, const std::string& where, int64_t lo, int64_t hi) const {
    if (!value.is_number_integer()) error(where, "is not an integer");
    const int64_t v = value.is_number_unsigned() && value.get<uint64_t>() > uint64_t(INT64_MAX) ? INT64_MAX
                                                                                                 : value.get<int64_t>();
    if (v < lo || v > hi) error(where, cat("is ", v, ", outside [", lo, ", ", hi, "]"));
    return v;
  }
  std::string type(const Json& object, const std::string& where) const {
    return string(field(object, where, "type"), where + ".type");
  }
  [[noreturn]] void unsupported(const std::string& where, const std::string& type, const char* supported) const {
    fail("tokenizer", file, ": ", where, ".type \"", type, "\" is not supported (supported: ", supported, ")");
  }
  // A character given as a one-character string (Metaspace's replacement, Strip's content).
  char32_t character(const Json& value, const std::string& where) const {
    const std::string s = string(value, where);
    if (s.empty() || !valid_utf8(s)) error(where, "is not one character");
    int length;
    const char32_t c = utf8_at(s, 0, &length);
    if (size_t(length) != s.size()) error(where, "is not one character");
    return c;
  }
};

// The components of a Sequence: spec[key], a list, each read by `read(reader, item, path)`.
template <class Read>
auto read_parts(const Reader& r, const Json& spec, const std::string& where, const char* key, Read read) {
  const Json& list = r.field(spec, where, key);
  if (!list.is_array()) r.error(where + "." + key, "is not a list");
  std::vector<decltype(read(r, list[0], where))> parts;
  for (size_t i = 0; i < list.size(); ++i) parts.push_back(read(r, list[i], cat(where, ".", key, "[", i, "]")));
  return parts;
}

// A Split or Replace pattern: {"String": "..."} (a literal) or {"Regex": "..."}.
class Pattern {
 public:
  Pattern(const Reader& r, const Json& spec, const std::string& where) {
    if (!spec.is_object() || spec.size() != 1) r.error(where, "is not {\"String\": ...} or {\"Regex\": ...}");
    if (const Json* s = r.optional(spec, "String")) {
      literal_ = r.string(*s, where + ".String");
    } else if (const Json* re = r.optional(spec, "Regex")) {
      regex_ = std::make_unique<Regex>(r.string(*re, where + ".Regex"), r.file + ": " + where);
    } else {
      r.error(where, "is not {\"String\": ...} or {\"Regex\": ...}");
    }
  }
  void find_all(std::string_view text, std::vector<std::pair<size_t, size_t>>& out) const {
    if (regex_) {
      regex_->find_all(text, out);
    } else {
      find_literal(text, literal_, out);
    }
  }

 private:
  std::string literal_;
  std::unique_ptr<Regex> regex_;
};

// ---- pieces and splitting ----

// A piece of the text on its way through the pipeline. `at_origin`: its first character comes
// from the first character of the input (what Metaspace's prepend_scheme "first" asks, through
// HF's offsets_original().0 == 0). `token` >= 0: an added token, already final.
struct Piece {
  std::string text;
  bool at_origin = false;
  int32_t token = -1;
};

// (begin, end, is_match) for the whole of `text`, as HF's Pattern::find_matches.
struct Span {
  size_t begin, end;
  bool match;
};

void spans_from_matches(std::string_view text, const std::vector<std::pair<size_t, size_t>>& matches,
                        std::vector<Span>& out) {
  out.clear();
  if (text.empty()) {
    out.push_back({0, 0, false});
    return;
  }
  size_t prev = 0;
  for (const auto& [s, e] : matches) {
    if (prev != s) out.push_back({prev, s, false});
    out.push_back({s, e, true});
    prev = e;
  }
  if (prev != text.size()) out.push_back({prev, text.size(), false});
}

// Every character that satisfies `pred` a match of its own, the runs between them non-matches.
template <class Pred>
void spans_from_predicate(std::string_view text, Pred pred, std::vector<Span>& out) {
  out.clear();
  if (text.empty()) {
    out.push_back({0, 0, false});
    return;
  }
  size_t last = 0;
  for (size_t i = 0; i < text.size();) {
    int length;
    const char32_t c = utf8_at(text, i, &length);
    if (pred(c)) {
      if (last < i) out.push_back({last, i, false});
      out.push_back({i, i + size_t(length), true});
      last = i + size_t(length);
    }
    i += size_t(length);
  }
  if (last < text.size()) out.push_back({last, text.size(), false});
}

enum class Behavior { removed, isolated, merged_with_previous, merged_with_next, contiguous };

// HF's NormalizedString::split: the spans grouped by the behaviour; the pieces kept go to `out`
// (empty ones dropped, as PreTokenizedString::split drops them).
void split_piece(const Piece& piece, std::vector<Span>& spans, Behavior behavior, std::vector<Piece>& out) {
  struct Part {
    size_t begin, end;
    bool remove;
  };
  std::vector<Part> parts;
  parts.reserve(spans.size());
  switch (behavior) {
    case Behavior::isolated:
      for (const Span& s : spans) parts.push_back({s.begin, s.end, false});
      break;
    case Behavior::removed:
      for (const Span& s : spans) parts.push_back({s.begin, s.end, s.match});
      break;
    case Behavior::contiguous: {
      bool previous = false;
      for (const Span& s : spans) {
        if (s.match == previous && !parts.empty()) {
          parts.back().end = s.end;
        } else {
          parts.push_back({s.begin, s.end, false});
        }
        previous = s.match;
      }
      break;
    }
    case Behavior::merged_with_previous: {
      bool previous = false;
      for (const Span& s : spans) {
        if (s.match && !previous && !parts.empty()) {
          parts.back().end = s.end;
        } else {
          parts.push_back({s.begin, s.end, false});
        }
        previous = s.match;
      }
      break;
    }
    case Behavior::merged_with_next: {
      bool previous = false;
      for (auto it = spans.rbegin(); it != spans.rend(); ++it) {
        if (it->match && !previous && !parts.empty()) {
          parts.back().begin = it->begin;
        } else {
          parts.push_back({it->begin, it->end, false});
        }
        previous = it->match;
      }
      std::reverse(parts.begin(), parts.end());
      break;
    }
  }
  for (const Part& p : parts) {
    if (p.remove || p.begin == p.end) continue;
    out.push_back({piece.text.substr(p.begin, p.end - p.begin), piece.at_origin && p.begin == 0, -1});
  }
}

// ---- normalizers ----

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  virtual void apply(std::string& text, bool& at_origin) const = 0;
};

class UnicodeNormalizer final : public Normalizer {
 public:
  explicit UnicodeNormalizer(NormalForm form) : form_(form) {}
  void apply(std::string& text, bool&) const override { text = normalize(text, form_); }

 private:
  NormalForm form_;
};

class Lowercase final : public Normalizer {
 public:
  void apply(std::string& text, bool&) const override {
    std::string out;
    out.reserve(text.size());
    for (size_t i = 0; i < text.size();) {
      int length;
      const char32_t c = utf8_at(text, i, &length);
      append_lowercase(out, c);
      i += size_t(length);
    }
    text = std::move(out);
  }
};

class Replace final : public Normalizer {
 public:
  Replace(const Reader& r, const Json& spec, const std::string& where)
      : pattern_(r, r.field(spec, where, "pattern"), where + ".pattern"),
        content_(r.string(r.field(spec, where, "content"), where + ".content")) {}
  void apply(std::string& text, bool& at_origin) const override {
    thread_local std::vector<std::pair<size_t, size_t>> matches;
    pattern_.find_all(text, matches);
    if (matches.empty()) return;
    std::string out;
    out.reserve(text.size());
    size_t last = 0;
    for (const auto& [s, e] : matches) {
      out.append(text, last, s - last);
      out += content_;
      last = e;
    }
    out.append(text, last, std::string::npos);
    // A match at the start replaced by nothing: the first character now comes from further on.
    if (matches.front().first == 0 && matches.front().second > 0 && content_.empty()) at_origin = false;
    text = std::move(out);
  }
  // The decoder: the same replacement on each token.
  std::string replace(const std::string& token) const {
    std::string copy = token;
    bool unused = false;
    apply(copy, unused);
    return copy;
  }

 private:
  Pattern pattern_;
  std::string content_;
};

class Prepend final : public Normalizer {
 public:
  explicit Prepend(std::string prefix) : prefix_(std::move(prefix)) {}
  void apply(std::string& text, bool&) const override {
    if (!text.empty()) text.insert(0, prefix_);
  }

 private:
  std::string prefix_;
};

class Strip final : public Normalizer {
 public:
  Strip(bool left, bool right) : left_(left), right_(right) {}
  void apply(std::string& text, bool& at_origin) const override {
    size_t begin = 0, end = text.size();
    if (left_) {
      while (begin < end) {
        int length;
        if (!is_whitespace(utf8_at(text, begin, &length))) break;
        begin += size_t(length);
      }
    }
    if (right_) {
      while (end > begin) {
        const size_t start = utf8_last_start(std::string_view(text).substr(0, end));
        int length;
        if (!is_whitespace(utf8_at(text, start, &length))) break;
        end = start;
      }
    }
    if (begin > 0) at_origin = false;
    text = text.substr(begin, end - begin);
  }

 private:
  bool left_, right_;
};

class NormalizerSequence final : public Normalizer {
 public:
  explicit NormalizerSequence(std::vector<std::unique_ptr<Normalizer>> parts) : parts_(std::move(parts)) {}
  void apply(std::string& text, bool& at_origin) const override {
    for (const auto& p : parts_) p->apply(text, at_origin);
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> parts_;
};

std::unique_ptr<Normalizer> read_normalizer(const Reader& r, const Json& spec, const std::string& where) {
  const std::string type = r.type(spec, where);
  if (type == "NFC") return std::make_unique<UnicodeNormalizer>(NormalForm::nfc);
  if (type == "NFD") return std::make_unique<UnicodeNormalizer>(NormalForm::nfd);
  if (type == "NFKC") return std::make_unique<UnicodeNormalizer>(NormalForm::nfkc);
  if (type == "NFKD") return std::make_unique<UnicodeNormalizer>(NormalForm::nfkd);
  if (type == "Lowercase") return std::make_unique<Lowercase>();
  if (type == "Replace") return std::make_unique<Replace>(r, spec, where);
  if (type == "Prepend") return std::make_unique<Prepend>(r.string(r.field(spec, where, "prepend"), where + ".prepend"));
  if (type == "Strip") {
    return std::make_unique<Strip>(r.boolean(spec, where, "strip_left", true), r.boolean(spec, where, "strip_right", true));
  }
  if (type == "Sequence") return std::make_unique<NormalizerSequence>(read_parts(r, spec, where, "normalizers", read_normalizer));
  r.unsupported(where, type, "NFC, NFD, NFKC, NFKD, Lowercase, Replace, Prepend, Strip, Sequence");
}

// ---- pre-tokenizers ----

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // Splits (and may rewrite) the pieces that are not added tokens.
  virtual void apply(std::vector<Piece>& pieces) const = 0;
};

// Runs `fn(piece, out)` on each piece that is not an added token; added tokens pass through.
template <class Fn>
void for_each_piece(std::vector<Piece>& pieces, Fn fn) {
  std::vector<Piece> out;
  out.reserve(pieces.size() * 2);
  for (Piece& p : pieces) {
    if (p.token >= 0) {
      out.push_back(std::move(p));
    } else {
      fn(p, out);
    }
  }
  pieces = std::move(out);
}

// GPT-2's bytes_to_unicode: the printable bytes stand for themselves, the other 68 for U+0100....
struct ByteChars {
  std::array<std::string, 256> utf8;  // byte -> its character, UTF-8
  std::unordered_map<char32_t, uint8_t> byte_of;
  ByteChars() {
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
      const char32_t c = printable ? char32_t(b) : next++;
      append_utf8(utf8[size_t(b)], c);
      byte_of[c] = uint8_t(b);
    }
  }
};
const ByteChars& byte_chars() {
  static const ByteChars table;
  return table;
}

class ByteLevel final : public PreTokenizer {
 public:
  ByteLevel(bool add_prefix_space, bool use_regex, const std::string& file) : add_prefix_space_(add_prefix_space) {
    if (use_regex) {
      regex_ = std::make_unique<Regex>(
          R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)", file + ": ByteLevel");
    }
  }
  void apply(std::vector<Piece>& pieces) const override {
    thread_local std::vector<std::pair<size_t, size_t>> matches;
    thread_local std::vector<Span> spans;
    for_each_piece(pieces, [&](Piece& p, std::vector<Piece>& out) {
      if (add_prefix_space_ && p.text[0] != ' ') p.text.insert(0, 1, ' ');
      const size_t first = out.size();
      if (regex_) {
        regex_->find_all(p.text, matches);
        spans_from_matches(p.text, matches, spans);
        split_piece(p, spans, Behavior::isolated, out);
      } else {
        out.push_back(std::move(p));
      }
      for (size_t i = first; i < out.size(); ++i) out[i].text = to_byte_chars(out[i].text);
    });
  }
  static std::string to_byte_chars(std::string_view text) {
    const ByteChars& table = byte_chars();
    std::string out;
    out.reserve(text.size() * 2);
    for (char c : text) out += table.utf8[static_cast<unsigned char>(c)];
    return out;
  }

 private:
  bool add_prefix_space_;
  std::unique_ptr<Regex> regex_;
};

Behavior read_behavior(const Reader& r, const Json& value, const std::string& where) {
  const std::string b = r.string(value, where);
  if (b == "Removed") return Behavior::removed;
  if (b == "Isolated") return Behavior::isolated;
  if (b == "MergedWithPrevious") return Behavior::merged_with_previous;
  if (b == "MergedWithNext") return Behavior::merged_with_next;
  if (b == "Contiguous") return Behavior::contiguous;
  r.error(where, cat("\"", b, "\" is not Removed, Isolated, MergedWithPrevious, MergedWithNext or Contiguous"));
}

class Split final : public PreTokenizer {
 public:
  Split(const Reader& r, const Json& spec, const std::string& where)
      : pattern_(r, r.field(spec, where, "pattern"), where + ".pattern"),
        behavior_(read_behavior(r, r.field(spec, where, "behavior"), where + ".behavior")),
        invert_(r.boolean(spec, where, "invert", false)) {}
  void apply(std::vector<Piece>& pieces) const override {
    thread_local std::vector<std::pair<size_t, size_t>> matches;
    thread_local std::vector<Span> spans;
    for_each_piece(pieces, [&](Piece& p, std::vector<Piece>& out) {
      pattern_.find_all(p.text, matches);
      spans_from_matches(p.text, matches, spans);
      if (invert_) {
        for (Span& s : spans) s.match = !s.match;
      }
      split_piece(p, spans, behavior_, out);
    });
  }

 private:
  Pattern pattern_;
  Behavior behavior_;
  bool invert_;
};

enum class PrependScheme { always, first, never };

class Metaspace final : public PreTokenizer {
 public:
  Metaspace(char32_t replacement, PrependScheme scheme, bool split)
      : replacement_(replacement), scheme_(scheme), split_(split) {
    append_utf8(replacement_utf8_, replacement);
  }
  void apply(std::vector<Piece>& pieces) const override {
    thread_local std::vector<Span> spans;
    for_each_piece(pieces, [&](Piece& p, std::vector<Piece>& out) {
      std::string text;
      text.reserve(p.text.size() + 8);
      for (char c : p.text) {
        if (c == ' ') {
          text += replacement_utf8_;
        } else {
          text += c;
        }
      }
      const bool starts = text.starts_with(replacement_utf8_);
      if ((scheme_ == PrependScheme::always && !starts) || (scheme_ == PrependScheme::first && !starts && p.at_origin))
        text.insert(0, replacement_utf8_);
      p.text = std::move(text);
      if (split_) {
        spans_from_predicate(p.text, [&](char32_t c) { return c == replacement_; }, spans);
        split_piece(p, spans, Behavior::merged_with_next, out);
      } else {
        out.push_back(std::move(p));
      }
    });
  }

 private:
  char32_t replacement_;
  std::string replacement_utf8_;
  PrependScheme scheme_;
  bool split_;
};

class Digits final : public PreTokenizer {
 public:
  explicit Digits(bool individual) : individual_(individual) {}
  void apply(std::vector<Piece>& pieces) const override {
    thread_local std::vector<Span> spans;
    for_each_piece(pieces, [&](Piece& p, std::vector<Piece>& out) {
      spans_from_predicate(p.text, is_numeric, spans);
      split_piece(p, spans, individual_ ? Behavior::isolated : Behavior::contiguous, out);
    });
  }

 private:
  bool individual_;
};

class PreTokenizerSequence final : public PreTokenizer {
 public:
  explicit PreTokenizerSequence(std::vector<std::unique_ptr<PreTokenizer>> parts) : parts_(std::move(parts)) {}
  void apply(std::vector<Piece>& pieces) const override {
    for (const auto& p : parts_) p->apply(pieces);
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> parts_;
};

PrependScheme read_prepend_scheme(const Reader& r, const Json& spec, const std::string& where) {
  PrependScheme scheme = PrependScheme::always;
  if (const Json* s = r.optional(spec, "prepend_scheme")) {
    const std::string v = r.string(*s, where + ".prepend_scheme");
    if (v == "always") {
      scheme = PrependScheme::always;
    } else if (v == "first") {
      scheme = PrependScheme::first;
    } else if (v == "never") {
      scheme = PrependScheme::never;
    } else {
      r.error(where + ".prepend_scheme", cat("\"", v, "\" is not always, first or never"));
    }
  }
  // Files from before prepend_scheme say add_prefix_space; false means "never".
  if (const Json* a = r.optional(spec, "add_prefix_space")) {
    if (!a->is_boolean()) r.error(where + ".add_prefix_space", "is not true or false");
    if (!a->get<bool>()) {
      if (scheme != PrependScheme::never && r.optional(spec, "prepend_scheme"))
        r.error(where + ".add_prefix_space", "false does not match prepend_scheme");
      scheme = PrependScheme::never;
    }
  }
  return scheme;
}

std::unique_ptr<PreTokenizer> read_pre_tokenizer(const Reader& r, const Json& spec, const std::string& where) {
  const std::string type = r.type(spec, where);
  if (type == "ByteLevel") {
    return std::make_unique<ByteLevel>(r.boolean(spec, where, "add_prefix_space", true),
                                       r.boolean(spec, where, "use_regex", true), r.file);
  }
  if (type == "Split") return std::make_unique<Split>(r, spec, where);
  if (type == "Metaspace") {
    return std::make_unique<Metaspace>(r.character(r.field(spec, where, "replacement"), where + ".replacement"),
                                       read_prepend_scheme(r, spec, where), r.boolean(spec, where, "split", true));
  }
  if (type == "Digits") return std::make_unique<Digits>(r.boolean(spec, where, "individual_digits", false));
  if (type == "Sequence") return std::make_unique<PreTokenizerSequence>(read_parts(r, spec, where, "pretokenizers", read_pre_tokenizer));
  r.unsupported(where, type, "ByteLevel, Split, Metaspace, Digits, Sequence");
}

// ---- the BPE model ----

struct TransparentHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return XXH3_64bits(s.data(), s.size()); }
};
using Vocab = std::unordered_map<std::string, int32_t, TransparentHash, std::equal_to<>>;

class Bpe {
 public:
  Bpe(const Reader& r, const Json& spec, const std::string& where);

  // The ids of one word (a piece after pre-tokenization), appended to `out`.
  void tokenize(std::string_view word, std::vector<int32_t>& out) const;

  const Vocab& vocab() const { return vocab_; }
  size_t size() const { return vocab_.size(); }
  int32_t max_id() const { return max_id_; }
  const std::string* token(int32_t id) const {
    return id >= 0 && size_t(id) < tokens_.size() && has_token_[size_t(id)] ? &tokens_[size_t(id)] : nullptr;
  }

 private:
  struct Symbol {
    int32_t id;
    int32_t prev, next;
    uint32_t length;  // bytes of the word it covers; 0 once merged into its left neighbour
  };
  void merge_word(std::string_view word, std::vector<int32_t>& out) const;
  void merge_all(std::vector<Symbol>& symbols) const;
  // (rank, new id) of the merge of the pair (a, b), or nullptr.
  const std::pair<int32_t, int32_t>* merge(int32_t a, int32_t b) const {
    const auto it = merges_.find((uint64_t(uint32_t(a)) << 32) | uint32_t(b));
    return it == merges_.end() ? nullptr : &it->second;
  }

  std::string file_;
  Vocab vocab_;
  std::vector<std::string> tokens_;
  std::vector<bool> has_token_;
  int32_t max_id_ = -1;
  std::unordered_map<uint64_t, std::pair<int32_t, int32_t>> merges_;
  std::optional<std::string> unk_token_;
  std::optional<int32_t> unk_id_;
  std::string prefix_, suffix_;  // continuing_subword_prefix, end_of_word_suffix
  bool fuse_unk_ = false, byte_fallback_ = false, ignore_merges_ = false;
  std::array<int32_t, 256> byte_ids_{};  // <0xAB> tokens, -1 when absent
  uint64_t cache_key_;
};

std::atomic<uint64_t> next_cache_key{1};

Bpe::Bpe(const Reader& r, const Json& spec, const std::string& where) : file_(r.file), cache_key_(next_cache_key++) {
  if (const Json* d = r.optional(spec, "dropout")) {
    if (!d->is_number()) r.error(where + ".dropout", "is not a number");
    if (d->get<double>() != 0.0)
      r.error(where + ".dropout", cat("is ", d->get<double>(), ": BPE dropout samples merges at random, and cotan "
                                      "tokenizes deterministically; set it to null"));
  }
  const Json& vocab = r.field(spec, where, "vocab");
  if (!vocab.is_object()) r.error(where + ".vocab", "is not an object of token: id");
  vocab_.reserve(vocab.size());
  for (const auto& [token, id_json] : vocab.items()) {
    const int32_t id = int32_t(r.integer(id_json, cat(where, ".vocab[\"", token, "\"]"), 0, INT32_MAX - 1));
    vocab_.emplace(token, id);
    max_id_ = std::max(max_id_, id);
  }
  tokens_.resize(size_t(max_id_ + 1));
  has_token_.assign(size_t(max_id_ + 1), false);
  for (const auto& [token, id] : vocab_) {
    if (has_token_[size_t(id)])
      r.error(where + ".vocab", cat("gives id ", id, " to both \"", tokens_[size_t(id)], "\" and \"", token, "\""));
    tokens_[size_t(id)] = token;
    has_token_[size_t(id)] = true;
  }
  if (const Json* u = r.optional(spec, "unk_token")) {
    unk_token_ = r.string(*u, where + ".unk_token");
    if (const auto it = vocab_.find(*unk_token_); it != vocab_.end()) unk_id_ = it->second;
  }
  if (const Json* p = r.optional(spec, "continuing_subword_prefix")) prefix_ = r.string(*p, where + ".continuing_subword_prefix");
  if (const Json* s = r.optional(spec, "end_of_word_suffix")) suffix_ = r.string(*s, where + ".end_of_word_suffix");
  fuse_unk_ = r.boolean(spec, where, "fuse_unk", false);
  byte_fallback_ = r.boolean(spec, where, "byte_fallback", false);
  ignore_merges_ = r.boolean(spec, where, "ignore_merges", false);
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    const auto it = vocab_.find(std::string_view(name));
    byte_ids_[size_t(b)] = it == vocab_.end() ? -1 : it->second;
  }

  const Json& merges = r.field(spec, where, "merges");
  if (!merges.is_array()) r.error(where + ".merges", "is not a list");
  merges_.reserve(merges.size());
  const auto id_of = [&](const std::string& token, const std::string& at) {
    const auto it = vocab_.find(token);
    if (it == vocab_.end()) r.error(at, cat("names \"", token, "\", which is not in the vocabulary"));
    return it->second;
  };
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const std::string at = cat(where, ".merges[", rank, "]");
    const Json& m = merges[rank];
    std::string a, b;
    if (m.is_string()) {  // "a b": exactly one space
      const std::string line = m.get<std::string>();
      const size_t space = line.find(' ');
      if (space == std::string::npos || line.find(' ', space + 1) != std::string::npos)
        r.error(at, cat("\"", line, "\" is not two tokens separated by one space"));
      a = line.substr(0, space);
      b = line.substr(space + 1);
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      a = m[0].get<std::string>();
      b = m[1].get<std::string>();
    } else {
      r.error(at, "is neither \"a b\" nor [\"a\", \"b\"]");
    }
    // The merged token drops b's first prefix-length bytes, as HF does, whether or not b starts with the prefix.
    if (b.size() < prefix_.size()) r.error(at, cat("\"", b, "\" is shorter than continuing_subword_prefix"));
    const std::string merged = a + b.substr(prefix_.size());
    const int32_t ia = id_of(a, at), ib = id_of(b, at), im = id_of(merged, at);
    merges_[(uint64_t(uint32_t(ia)) << 32) | uint32_t(ib)] = {int32_t(rank), im};  // a repeated pair: the last wins
  }
}

void Bpe::merge_all(std::vector<Symbol>& symbols) const {
  struct Candidate {
    int32_t rank, pos, new_id;
    bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  thread_local std::vector<Candidate> heap;
  heap.clear();
  const auto push = [&](Candidate c) {
    heap.push_back(c);
    std::push_heap(heap.begin(), heap.end(), std::greater<>());
  };
  for (size_t i = 0; i + 1 < symbols.size(); ++i) {
    if (const auto* m = merge(symbols[i].id, symbols[i + 1].id)) push({m->first, int32_t(i), m->second});
  }
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), std::greater<>());
    const Candidate top = heap.back();
    heap.pop_back();
    Symbol& left = symbols[size_t(top.pos)];
    if (left.length == 0 || left.next < 0) continue;
    const size_t right_pos = size_t(left.next);
    const Symbol right = symbols[right_pos];
    const auto* m = merge(left.id, right.id);
    if (!m || m->second != top.new_id) continue;  // a stale candidate
    left.id = top.new_id;
    left.length += right.length;
    left.next = right.next;
    symbols[right_pos].length = 0;
    if (right.next >= 0) symbols[size_t(right.next)].prev = top.pos;
    if (left.prev >= 0) {
      if (const auto* p = merge(symbols[size_t(left.prev)].id, left.id)) push({p->first, left.prev, p->second});
    }
    if (left.next >= 0) {
      if (const auto* n = merge(left.id, symbols[size_t(left.next)].id)) push({n->first, top.pos, n->second});
    }
  }
}

void Bpe::merge_word(std::string_view word, std::vector<int32_t>& out) const {
  thread_local std::vector<Symbol> symbols;
  symbols.clear();
  const auto add = [&](int32_t id, uint32_t length) {
    const int32_t index = int32_t(symbols.size());
    symbols.push_back({id, index - 1, -1, length});
    if (index > 0) symbols[size_t(index - 1)].next = index;
  };
  bool unk = false;  // a pending unknown of unk_bytes bytes
  uint32_t unk_bytes = 0;
  std::string buffer;
  for (size_t i = 0; i < word.size();) {
    const size_t length = size_t(utf8_length(static_cast<unsigned char>(word[i])));
    const bool first = i == 0, last = i + length >= word.size();
    std::string_view s = word.substr(i, length);
    if ((!first && !prefix_.empty()) || (last && !suffix_.empty())) {
      buffer.clear();
      if (!first) buffer += prefix_;
      buffer += s;
      if (last) buffer += suffix_;
      s = buffer;
    }
    i += length;
    if (const auto it = vocab_.find(s); it != vocab_.end()) {
      if (unk) add(*unk_id_, unk_bytes);
      unk = false;
      add(it->second, uint32_t(length));
      continue;
    }
    if (byte_fallback_) {
      bool all = true;
      for (char c : s) all = all && byte_ids_[static_cast<unsigned char>(c)] >= 0;
      if (all) {  // HF adds the bytes before any pending unknown, as here
        for (char c : s) add(byte_ids_[static_cast<unsigned char>(c)], 1);
        continue;
      }
    }
    if (unk_token_) {
      if (!unk_id_) fail("tokenizer", file_, ": unk_token \"", *unk_token_, "\" is not in the vocabulary");
      if (unk && fuse_unk_) {
        unk_bytes += uint32_t(length);
      } else {
        if (unk) add(*unk_id_, unk_bytes);
        unk = true;
        unk_bytes = uint32_t(length);
      }
    }
    // Without unk_token or byte tokens for it, HF drops the character.
  }
  if (unk) add(*unk_id_, unk_bytes);
  merge_all(symbols);
  for (const Symbol& s : symbols) {
    if (s.length > 0) out.push_back(s.id);
  }
}

// A per-thread cache of words already merged, for the Bpe it was filled by.
struct WordCache {
  static constexpr size_t kCapacity = 1 << 16;
  static constexpr size_t kMaxWordBytes = 128;
  uint64_t owner = 0;
  std::unordered_map<std::string, std::vector<int32_t>, TransparentHash, std::equal_to<>> words;
};

void Bpe::tokenize(std::string_view word, std::vector<int32_t>& out) const {
  if (word.empty()) return;
  if (ignore_merges_) {
    if (const auto it = vocab_.find(word); it != vocab_.end()) {
      out.push_back(it->second);
      return;
    }
  }
  thread_local WordCache cache;
  if (cache.owner != cache_key_) {
    cache.words.clear();
    cache.owner = cache_key_;
  }
  if (word.size() <= WordCache::kMaxWordBytes) {
    if (const auto it = cache.words.find(word); it != cache.words.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  const size_t start = out.size();
  merge_word(word, out);
  if (word.size() <= WordCache::kMaxWordBytes) {
    if (cache.words.size() >= WordCache::kCapacity) cache.words.clear();
    cache.words.emplace(std::string(word), std::vector<int32_t>(out.begin() + ptrdiff_t(start), out.end()));
  }
}

// ---- added tokens ----

// Leftmost-longest matching of the added tokens' patterns (HF: an Aho-Corasick automaton).
class TokenMatcher {
 public:
  void add(const std::string& pattern, size_t index) {
    if (pattern.empty()) return;
    int32_t node = 0;
    for (char c : pattern) {
      const uint64_t key = (uint64_t(node) << 8) | static_cast<unsigned char>(c);
      auto it = edges_.find(key);
      if (it == edges_.end()) {
        it = edges_.emplace(key, int32_t(terminal_.size())).first;
        terminal_.push_back(-1);
      }
      node = it->second;
    }
    terminal_[size_t(node)] = int32_t(index);
    first_[static_cast<unsigned char>(pattern[0])] = true;
    empty_ = false;
  }
  bool empty() const { return empty_; }
  // The longest pattern starting at `at`: (end, index), or index -1.
  std::pair<size_t, int32_t> longest_at(std::string_view text, size_t at) const {
    std::pair<size_t, int32_t> best{at, -1};
    if (!first_[static_cast<unsigned char>(text[at])]) return best;
    int32_t node = 0;
    for (size_t i = at; i < text.size(); ++i) {
      const auto it = edges_.find((uint64_t(node) << 8) | static_cast<unsigned char>(text[i]));
      if (it == edges_.end()) break;
      node = it->second;
      if (terminal_[size_t(node)] >= 0) best = {i + 1, terminal_[size_t(node)]};
    }
    return best;
  }

 private:
  std::unordered_map<uint64_t, int32_t> edges_;
  std::vector<int32_t> terminal_{-1};  // node -> pattern index; node 0 is the root
  std::array<bool, 256> first_{};
  bool empty_ = true;
};

// ---- post-processors ----

class PostProcessor {
 public:
  virtual ~PostProcessor() = default;
  virtual void apply(std::vector<int32_t>& ids, bool add_special_tokens) const = 0;
  // Throws, naming the JSON path, when an id the post-processor adds is outside [0, vocab_size):
  // checked once the vocabulary is known, so that no encode ever yields such an id.
  virtual void check_vocabulary(const Reader&, int64_t) const {}
};

// ByteLevel as a post-processor only trims offsets: the ids stay as they are.
class KeepIds final : public PostProcessor {
 public:
  void apply(std::vector<int32_t>&, bool) const override {}
};

class Template final : public PostProcessor {
 public:
  Template(const Reader& r, const Json& spec, const std::string& where) {
    std::unordered_map<std::string, std::vector<int32_t>> special;
    if (const Json* tokens = r.optional(spec, "special_tokens")) {
      if (!tokens->is_object()) r.error(where + ".special_tokens", "is not an object");
      for (const auto& [name, value] : tokens->items()) {
        const std::string at = cat(where, ".special_tokens[\"", name, "\"]");
        const Json& ids = r.field(value, at, "ids");
        if (!ids.is_array()) r.error(at + ".ids", "is not a list");
        std::vector<int32_t> list;
        for (size_t i = 0; i < ids.size(); ++i) {
          list.push_back(int32_t(r.integer(ids[i], cat(at, ".ids[", i, "]"), 0, INT32_MAX - 1)));
          paths_.emplace_back(list.back(), cat(at, ".ids[", i, "]"));
        }
        special[name] = std::move(list);
      }
    }
    const Json& single = r.field(spec, where, "single");
    const auto add_special = [&](const std::string& name, const std::string& at) {
      const auto it = special.find(name);
      if (it == special.end()) r.error(at, cat("names the special token \"", name, "\", which special_tokens lacks"));
      parts_.push_back({false, it->second});
    };
    if (single.is_string()) {  // "<s> $A": pieces separated by spaces
      std::istringstream words(single.get<std::string>());
      for (std::string w; words >> w;) {
        if (w[0] == '$') {
          parts_.push_back({true, {}});
        } else {
          add_special(w.substr(0, w.find(':')), where + ".single");
        }
      }
    } else if (single.is_array()) {
      for (size_t i = 0; i < single.size(); ++i) {
        const std::string at = cat(where, ".single[", i, "]");
        if (const Json* s = r.optional(single[i], "SpecialToken")) {
          add_special(r.string(r.field(*s, at + ".SpecialToken", "id"), at + ".SpecialToken.id"), at);
        } else if (r.optional(single[i], "Sequence")) {
          parts_.push_back({true, {}});
        } else {
          r.error(at, "is neither {\"SpecialToken\": ...} nor {\"Sequence\": ...}");
        }
      }
    } else {
      r.error(where + ".single", "is neither a string nor a list");
    }
  }
  void apply(std::vector<int32_t>& ids, bool add_special_tokens) const override {
    if (!add_special_tokens) return;
    std::vector<int32_t> out;
    out.reserve(ids.size() + 4);
    for (const Part& p : parts_) {
      if (p.sequence) {
        out.insert(out.end(), ids.begin(), ids.end());
      } else {
        out.insert(out.end(), p.ids.begin(), p.ids.end());
      }
    }
    ids = std::move(out);
  }
  void check_vocabulary(const Reader& r, int64_t vocab_size) const override {
    for (const auto& [id, at] : paths_)
      if (id >= vocab_size) r.error(at, cat("is ", id, ", outside the vocabulary of ", vocab_size, " ids"));
  }

 private:
  struct Part {
    bool sequence;
    std::vector<int32_t> ids;
  };
  std::vector<Part> parts_;
  std::vector<std::pair<int32_t, std::string>> paths_;  // every special id with its JSON path
};

class PostProcessorSequence final : public PostProcessor {
 public:
  explicit PostProcessorSequence(std::vector<std::unique_ptr<PostProcessor>> parts) : parts_(std::move(parts)) {}
  void apply(std::vector<int32_t>& ids, bool add_special_tokens) const override {
    for (const auto& p : parts_) p->apply(ids, add_special_tokens);
  }
  void check_vocabulary(const Reader& r, int64_t vocab_size) const override {
    for (const auto& p : parts_) p->check_vocabulary(r, vocab_size);
  }

 private:
  std::vector<std::unique_ptr<PostProcessor>> parts_;
};

std::unique_ptr<PostProcessor> read_post_processor(const Reader& r, const Json& spec, const std::string& where) {
  const std::string type = r.type(spec, where);
  if (type == "ByteLevel") return std::make_unique<KeepIds>();
  if (type == "TemplateProcessing") return std::make_unique<Template>(r, spec, where);
  if (type == "Sequence") return std::make_unique<PostProcessorSequence>(read_parts(r, spec, where, "processors", read_post_processor));
  r.unsupported(where, type, "TemplateProcessing, ByteLevel, Sequence");
}

// ---- decoders ----

class Decoder {
 public:
  virtual ~Decoder() = default;
  virtual void apply(std::vector<std::string>& tokens) const = 0;
};

class ByteLevelDecoder final : public Decoder {
 public:
  void apply(std::vector<std::string>& tokens) const override {
    const ByteChars& table = byte_chars();
    std::string bytes;
    for (const std::string& t : tokens) {
      // A token with a character outside the byte alphabet (an added token) goes in as it is.
      const size_t start = bytes.size();
      bool all = true;
      for (size_t i = 0; i < t.size() && all;) {
        int length;
        const char32_t c = utf8_at(t, i, &length);
        const auto it = table.byte_of.find(c);
        if (it == table.byte_of.end()) {
          all = false;
        } else {
          bytes += char(it->second);
        }
        i += size_t(length);
      }
      if (!all) {
        bytes.resize(start);
        bytes += t;
      }
    }
    tokens.assign(1, replace_invalid_utf8(bytes));
  }
};

class MetaspaceDecoder final : public Decoder {
 public:
  MetaspaceDecoder(char32_t replacement, PrependScheme scheme) : replacement_(replacement), scheme_(scheme) {}
  void apply(std::vector<std::string>& tokens) const override {
    for (size_t k = 0; k < tokens.size(); ++k) {
      std::string out;
      const std::string& t = tokens[k];
      for (size_t i = 0; i < t.size();) {
        int length;
        const char32_t c = utf8_at(t, i, &length);
        if (c != replacement_) {
          out.append(t, i, size_t(length));
        } else if (k != 0 || scheme_ == PrependScheme::never) {  // HF drops every one of the first token's
          out += ' ';
        }
        i += size_t(length);
      }
      tokens[k] = std::move(out);
    }
  }

 private:
  char32_t replacement_;
  PrependScheme scheme_;
};

class ByteFallbackDecoder final : public Decoder {
 public:
  void apply(std::vector<std::string>& tokens) const override {
    std::vector<std::string> out;
    std::string pending;
    const auto flush = [&] {
      if (pending.empty()) return;
      if (valid_utf8(pending)) {
        out.push_back(pending);
      } else {
        for (size_t i = 0; i < pending.size(); ++i) out.emplace_back("\xEF\xBF\xBD");  // one U+FFFD per byte
      }
      pending.clear();
    };
    for (std::string& t : tokens) {
      const auto hex = [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); };
      if (t.size() == 6 && t.starts_with("<0x") && t[5] == '>' && hex(t[3]) && hex(t[4])) {
        pending += char(std::stoi(t.substr(3, 2), nullptr, 16));
      } else {
        flush();
        out.push_back(std::move(t));
      }
    }
    flush();
    tokens = std::move(out);
  }
};

class FuseDecoder final : public Decoder {
 public:
  void apply(std::vector<std::string>& tokens) const override {
    std::string all;
    for (const std::string& t : tokens) all += t;
    tokens.assign(1, std::move(all));
  }
};

class StripDecoder final : public Decoder {
 public:
  StripDecoder(char32_t content, size_t start, size_t stop) : content_(content), start_(start), stop_(stop) {}
  void apply(std::vector<std::string>& tokens) const override {
    for (std::string& t : tokens) {
      std::vector<std::pair<size_t, char32_t>> chars;  // (byte offset, character)
      for (size_t i = 0; i < t.size();) {
        int length;
        chars.emplace_back(i, utf8_at(t, i, &length));
        i += size_t(length);
      }
      size_t begin = 0;
      while (begin < std::min(start_, chars.size()) && chars[begin].second == content_) ++begin;
      size_t end = chars.size();
      for (size_t k = 0; k < stop_ && end > begin && chars[end - 1].second == content_; ++k) --end;
      const size_t from = begin < chars.size() ? chars[begin].first : t.size();
      const size_t to = end < chars.size() ? chars[end].first : t.size();
      t = t.substr(from, to - from);
    }
  }

 private:
  char32_t content_;
  size_t start_, stop_;
};

class ReplaceDecoder final : public Decoder {
 public:
  ReplaceDecoder(const Reader& r, const Json& spec, const std::string& where) : replace_(r, spec, where) {}
  void apply(std::vector<std::string>& tokens) const override {
    for (std::string& t : tokens) t = replace_.replace(t);
  }

 private:
  Replace replace_;
};

class DecoderSequence final : public Decoder {
 public:
  explicit DecoderSequence(std::vector<std::unique_ptr<Decoder>> parts) : parts_(std::move(parts)) {}
  void apply(std::vector<std::string>& tokens) const override {
    for (const auto& p : parts_) p->apply(tokens);
  }

 private:
  std::vector<std::unique_ptr<Decoder>> parts_;
};

std::unique_ptr<Decoder> read_decoder(const Reader& r, const Json& spec, const std::string& where) {
  const std::string type = r.type(spec, where);
  if (type == "ByteLevel") return std::make_unique<ByteLevelDecoder>();
  if (type == "Metaspace") {
    return std::make_unique<MetaspaceDecoder>(r.character(r.field(spec, where, "replacement"), where + ".replacement"),
                                              read_prepend_scheme(r, spec, where));
  }
  if (type == "ByteFallback") return std::make_unique<ByteFallbackDecoder>();
  if (type == "Fuse") return std::make_unique<FuseDecoder>();
  if (type == "Strip") {
    return std::make_unique<StripDecoder>(r.character(r.field(spec, where, "content"), where + ".content"),
                                          size_t(r.integer(r.field(spec, where, "start"), where + ".start", 0, 1 << 20)),
                                          size_t(r.integer(r.field(spec, where, "stop"), where + ".stop", 0, 1 << 20)));
  }
  if (type == "Replace") return std::make_unique<ReplaceDecoder>(r, spec, where);
  if (type == "Sequence") return std::make_unique<DecoderSequence>(read_parts(r, spec, where, "decoders", read_decoder));
  r.unsupported(where, type, "ByteLevel, Metaspace, ByteFallback, Fuse, Strip, Replace, Sequence");
}

std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("tokenizer", path, ": cannot open: ", std::strerror(errno));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) fail("tokenizer", path, ": read error");
  return text.str();
}

}  // namespace

// ---- the tokenizer ----

struct Tokenizer::Impl {
  std::string path;
  uint64_t hash = 0;
  std::unique_ptr<Normalizer> normalizer;
  std::unique_ptr<PreTokenizer> pre_tokenizer;
  std::optional<Bpe> model;
  std::unique_ptr<PostProcessor> post_processor;
  std::unique_ptr<Decoder> decoder;
  std::vector<AddedToken> added;
  std::vector<std::string> added_pattern;          // per added token: what is matched (normalized when `normalized`)
  std::unordered_map<int32_t, size_t> added_of_id;  // id -> index into `added`
  std::unordered_set<std::string> special_contents;
  TokenMatcher raw_matcher, normalized_matcher;
  std::unique_ptr<Regex> word_char;  // a word character, for single_word
  std::optional<int32_t> eos, bos;
  int64_t vocab_size = 0;

  void split_added(std::string_view text, bool at_origin, const TokenMatcher& matcher, std::vector<Piece>& out) const;
  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens) const;
};

// HF's AddedVocabulary::find_matches: the matches of the added tokens, honouring single_word,
// lstrip and rstrip; the text between them as pieces.
void Tokenizer::Impl::split_added(std::string_view text, bool at_origin, const TokenMatcher& matcher,
                                  std::vector<Piece>& out) const {
  if (text.empty()) return;
  if (matcher.empty()) {
    out.push_back({std::string(text), at_origin, -1});
    return;
  }
  size_t start_offset = 0;
  size_t at = 0;
  while (at < text.size()) {
    const auto [stop0, index] = matcher.longest_at(text, at);
    if (index < 0) {
      ++at;
      continue;
    }
    size_t start = at, stop = stop0;
    at = stop0;  // matches never overlap
    const AddedToken& token = added[size_t(index)];
    if (token.single_word) {
      const bool word_before = start > 0 && word_char->matches_at(text, utf8_last_start(text.substr(0, start)));
      const bool word_after = stop < text.size() && word_char->matches_at(text, stop);
      if (word_before || word_after) continue;
    }
    if (token.lstrip) {
      size_t s = start;
      while (s > 0) {
        const size_t prev = utf8_last_start(text.substr(0, s));
        int length;
        if (!is_whitespace(utf8_at(text, prev, &length))) break;
        s = prev;
      }
      start = std::max(s, start_offset);
    }
    if (token.rstrip) {
      while (stop < text.size()) {
        int length;
        if (!is_whitespace(utf8_at(text, stop, &length))) break;
        stop += size_t(length);
      }
    }
    if (start_offset < start)
      out.push_back({std::string(text.substr(start_offset, start - start_offset)), at_origin && start_offset == 0, -1});
    out.push_back({std::string(text.substr(start, stop - start)), false, token.id});
    start_offset = stop;
    at = std::max(at, stop);
  }
  if (start_offset < text.size())
    out.push_back({std::string(text.substr(start_offset)), at_origin && start_offset == 0, -1});
}

std::vector<int32_t> Tokenizer::Impl::encode(std::string_view text, bool add_special_tokens) const {
  std::vector<Piece> raw, pieces;
  // 1. Added tokens matched on the raw text.
  split_added(text, true, raw_matcher, raw);
  // 2. The rest normalized, then the added tokens matched on the normalized text.
  for (Piece& p : raw) {
    if (p.token >= 0) {
      pieces.push_back(std::move(p));
      continue;
    }
    if (normalizer) normalizer->apply(p.text, p.at_origin);
    split_added(p.text, p.at_origin, normalized_matcher, pieces);
  }
  // 3. Pre-tokenization.
  if (pre_tokenizer) pre_tokenizer->apply(pieces);
  // 4. The model.
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  for (const Piece& p : pieces) {
    if (p.token >= 0) {
      ids.push_back(p.token);
    } else {
      model->tokenize(p.text, ids);
    }
  }
  // 5. The template.
  if (post_processor) post_processor->apply(ids, add_special_tokens);
  return ids;
}

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

Tokenizer Tokenizer::from_json(std::string_view json_text, const std::string& name) {
  auto impl = std::make_unique<Impl>();
  impl->path = name;
  impl->hash = XXH3_64bits(json_text.data(), json_text.size());
  const Reader r{name};
  Json root;
  try {
    root = parse_json(json_text);
  } catch (const JsonParseError& e) {
    fail("tokenizer", name, ": not valid JSON: ", e.what());
  }
  if (!root.is_object()) fail("tokenizer", name, ": not a tokenizer.json (the top level is not an object)");
  if (const Json* v = r.optional(root, "version")) {
    if (!v->is_string() || v->get<std::string>() != "1.0") r.error("version", cat(v->dump(), " is not \"1.0\""));
  }
  for (const char* key : {"truncation", "padding"}) {
    if (r.optional(root, key))
      r.error(key, "is set: cotan tokenizes whole documents, without truncation or padding; set it to null");
  }
  // The model.
  const Json& model = r.field(root, "", "model");
  std::string model_type = "BPE";
  if (const Json* t = r.optional(model, "type")) model_type = r.string(*t, "model.type");
  if (model_type != "BPE")
    fail("tokenizer", name, ": model.type \"", model_type, "\" is not supported (supported: BPE)");
  impl->model.emplace(r, model, "model");
  if (const Json* n = r.optional(root, "normalizer")) impl->normalizer = read_normalizer(r, *n, "normalizer");
  if (const Json* p = r.optional(root, "pre_tokenizer")) impl->pre_tokenizer = read_pre_tokenizer(r, *p, "pre_tokenizer");
  if (const Json* p = r.optional(root, "post_processor")) impl->post_processor = read_post_processor(r, *p, "post_processor");
  if (const Json* d = r.optional(root, "decoder")) impl->decoder = read_decoder(r, *d, "decoder");

  // Added tokens, with their ids given as HF gives them on load: the vocabulary's id when the
  // content is in it, else the next free id after the vocabulary.
  // Rust's regex \w (which HF's single_word test uses) is UTS #18's: Oniguruma's \w and Join_Control.
  impl->word_char = std::make_unique<Regex>(R"([\w\p{Join_Control}])", name);
  int64_t max_id = impl->model->max_id();
  if (const Json* list = r.optional(root, "added_tokens")) {
    if (!list->is_array()) r.error("added_tokens", "is not a list");
    std::unordered_map<std::string, int32_t> by_content;
    int64_t next_id = int64_t(impl->model->size());
    for (size_t i = 0; i < list->size(); ++i) {
      const std::string at = cat("added_tokens[", i, "]");
      const Json& t = (*list)[i];
      AddedToken token;
      token.content = r.string(r.field(t, at, "content"), at + ".content");
      token.special = r.boolean(t, at, "special", false);
      token.single_word = r.boolean(t, at, "single_word", false);
      token.lstrip = r.boolean(t, at, "lstrip", false);
      token.rstrip = r.boolean(t, at, "rstrip", false);
      token.normalized = r.boolean(t, at, "normalized", !token.special);
      if (token.content.empty()) continue;
      if (const auto it = by_content.find(token.content); it != by_content.end()) {
        token.id = it->second;
      } else if (const auto v = impl->model->vocab().find(token.content); v != impl->model->vocab().end()) {
        token.id = v->second;
      } else {
        token.id = int32_t(next_id++);
      }
      by_content[token.content] = token.id;
      max_id = std::max<int64_t>(max_id, token.id);
      std::string pattern = token.content;
      if (token.normalized && impl->normalizer) {
        bool unused = true;
        impl->normalizer->apply(pattern, unused);
      }
      if (token.special) impl->special_contents.insert(token.content);
      if (const auto it = impl->added_of_id.find(token.id); it != impl->added_of_id.end()) {
        impl->added[it->second] = token;  // the same content again: its last entry counts
        impl->added_pattern[it->second] = pattern;
      } else {
        impl->added_of_id[token.id] = impl->added.size();
        impl->added.push_back(token);
        impl->added_pattern.push_back(pattern);
      }
    }
  }
  for (size_t i = 0; i < impl->added.size(); ++i) {
    (impl->added[i].normalized ? impl->normalized_matcher : impl->raw_matcher).add(impl->added_pattern[i], i);
  }
  impl->vocab_size = max_id + 1;
  if (impl->post_processor) impl->post_processor->check_vocabulary(r, impl->vocab_size);
  for (const char* name_of_eos : {"<|endoftext|>", "<|end_of_text|>", "</s>", "<|im_end|>", "<eos>", "<|eot_id|>"}) {
    for (const AddedToken& t : impl->added) {
      if (t.special && t.content == name_of_eos) {
        impl->eos = t.id;
        break;
      }
    }
    if (impl->eos) break;
  }
  return Tokenizer(std::move(impl));
}

Tokenizer Tokenizer::load(const std::string& path) {
  std::error_code ec;
  const std::string file = fs::is_directory(path, ec) ? (fs::path(path) / "tokenizer.json").string() : path;
  if (!fs::exists(file, ec)) {
    if (fs::is_directory(path, ec)) fail("tokenizer", path, " has no tokenizer.json");
    fail("tokenizer", file, ": no such file");
  }
  Tokenizer tokenizer = from_json(read_text_file(file), file);
  // tokenizer_config.json beside it names the end-of-sequence and beginning-of-sequence tokens,
  // when it is there.
  const fs::path config = fs::path(file).parent_path() / "tokenizer_config.json";
  if (fs::exists(config, ec)) {
    const Json json = read_json_file(config.string());
    if (json.is_object()) {
      // A token named as a string or as {"content": ...}; nullopt when absent or null.
      auto token_of = [&](const char* key) -> std::optional<int32_t> {
        const auto it = json.find(key);
        if (it == json.end() || it->is_null()) return std::nullopt;
        std::string content;
        if (it->is_string()) {
          content = it->get<std::string>();
        } else if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) {
          content = (*it)["content"].get<std::string>();
        } else {
          fail("tokenizer", config.string(), ": ", key, " is neither a string nor {\"content\": ...}");
        }
        const std::optional<int32_t> id = tokenizer.token_to_id(content);
        if (!id) fail("tokenizer", config.string(), ": ", key, " \"", content, "\" is not a token of ", file);
        return id;
      };
      if (const std::optional<int32_t> eos = token_of("eos_token")) tokenizer.impl_->eos = eos;
      tokenizer.impl_->bos = token_of("bos_token");
    }
  }
  return tokenizer;
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  if (!valid_utf8(text)) return impl_->encode(replace_invalid_utf8(text), add_special_tokens);
  return impl_->encode(text, add_special_tokens);
}

std::vector<int32_t> Tokenizer::encode_checked(std::string_view text, bool add_special_tokens) const {
  size_t at = 0;
  if (!valid_utf8(text, &at)) fail("tokenizer", "invalid UTF-8 at byte ", at);
  return impl_->encode(text, add_special_tokens);
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (int32_t id : ids) {
    if (const auto it = impl_->added_of_id.find(id); it != impl_->added_of_id.end()) {
      if (skip_special_tokens && impl_->special_contents.count(impl_->added_pattern[it->second])) continue;
      tokens.push_back(impl_->added_pattern[it->second]);  // HF gives a normalized token's normalized form
    } else if (const std::string* token = impl_->model->token(id)) {
      if (skip_special_tokens && impl_->special_contents.count(*token)) continue;
      tokens.push_back(*token);
    }
  }
  if (!impl_->decoder) {
    std::string out;
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (i) out += ' ';
      out += tokens[i];
    }
    return out;
  }
  impl_->decoder->apply(tokens);
  std::string out;
  for (const std::string& t : tokens) out += t;
  return out;
}

int64_t Tokenizer::vocab_size() const { return impl_->vocab_size; }
uint64_t Tokenizer::hash() const { return impl_->hash; }
const std::string& Tokenizer::path() const { return impl_->path; }

std::optional<int32_t> Tokenizer::token_to_id(std::string_view token) const {
  for (const AddedToken& t : impl_->added) {
    if (t.content == token) return t.id;
  }
  if (const auto it = impl_->model->vocab().find(token); it != impl_->model->vocab().end()) return it->second;
  return std::nullopt;
}

std::optional<std::string> Tokenizer::id_to_token(int32_t id) const {
  if (const auto it = impl_->added_of_id.find(id); it != impl_->added_of_id.end()) return impl_->added[it->second].content;
  if (const std::string* token = impl_->model->token(id)) return *token;
  return std::nullopt;
}

const std::vector<AddedToken>& Tokenizer::added_tokens() const { return impl_->added; }
std::optional<int32_t> Tokenizer::eos_id() const { return impl_->eos; }
std::optional<int32_t> Tokenizer::bos_id() const { return impl_->bos; }

}  // namespace cotan::text
