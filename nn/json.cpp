#include "nn/json.hpp"

#include <charconv>
#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>
#include <unordered_set>

namespace cotan {

JsonParseError::JsonParseError(std::string reason, size_t line, size_t column, size_t offset)
    : Error(cat("[json] line ", line, ", column ", column, ": ", reason)),
      reason_(std::move(reason)),
      line_(line),
      column_(column),
      offset_(offset) {}

std::string_view kind_name(Json::Kind kind) {
  switch (kind) {
    case Json::Kind::null: return "null";
    case Json::Kind::boolean: return "a boolean";
    case Json::Kind::integer: return "an integer";
    case Json::Kind::number: return "a number";
    case Json::Kind::string: return "a string";
    case Json::Kind::array: return "an array";
    case Json::Kind::object: return "an object";
  }
  return "?";
}

// ---- UTF-8 ----

namespace {

// Length of the valid UTF-8 sequence starting at s[i], or 0 when it is invalid (overlong forms,
// surrogates and code points past U+10FFFF are invalid).
size_t utf8_sequence_length(std::string_view s, size_t i) {
  auto byte = [&](size_t k) { return k < s.size() ? uint8_t(s[k]) : uint8_t(0); };
  auto continuation = [&](size_t k) { return (byte(k) & 0xC0) == 0x80; };
  uint8_t b0 = byte(i);
  if (b0 < 0x80) return 1;
  if (b0 >= 0xC2 && b0 <= 0xDF) return continuation(i + 1) ? 2 : 0;
  if (b0 >= 0xE0 && b0 <= 0xEF) {
    uint8_t b1 = byte(i + 1);
    if (b0 == 0xE0 && b1 < 0xA0) return 0;   // overlong
    if (b0 == 0xED && b1 >= 0xA0) return 0;  // surrogate
    return continuation(i + 1) && continuation(i + 2) ? 3 : 0;
  }
  if (b0 >= 0xF0 && b0 <= 0xF4) {
    uint8_t b1 = byte(i + 1);
    if (b0 == 0xF0 && b1 < 0x90) return 0;   // overlong
    if (b0 == 0xF4 && b1 >= 0x90) return 0;  // past U+10FFFF
    return continuation(i + 1) && continuation(i + 2) && continuation(i + 3) ? 4 : 0;
  }
  return 0;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += char(cp);
  } else if (cp < 0x800) {
    out += char(0xC0 | (cp >> 6));
    out += char(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += char(0xE0 | (cp >> 12));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  } else {
    out += char(0xF0 | (cp >> 18));
    out += char(0x80 | ((cp >> 12) & 0x3F));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  }
}

// ---- parser ----

class Parser {
 public:
  Parser(std::string_view text, const Json::ParseOptions& options) : s_(text), options_(options) {}

  Json parse_document() {
    skip_whitespace();
    Json value = parse_value(0);
    skip_whitespace();
    if (pos_ < s_.size()) error("unexpected " + describe_here() + " after the JSON value");
    return value;
  }

 private:
  [[noreturn]] void error(const std::string& reason) const { error_at(pos_, reason); }
  [[noreturn]] void error_at(size_t offset, const std::string& reason) const {
    size_t line = 1, column = 1;
    for (size_t i = 0; i < offset && i < s_.size(); ++i) {
      if (s_[i] == '\n') {
        ++line;
        column = 1;
      } else if ((uint8_t(s_[i]) & 0xC0) != 0x80) {
        ++column;
      }
    }
    throw JsonParseError(reason, line, column, offset);
  }

  std::string describe_here() const {
    if (pos_ >= s_.size()) return "end of input";
    char c = s_[pos_];
    if (uint8_t(c) >= 0x20 && uint8_t(c) < 0x7F) return cat("character '", c, "'");
    std::ostringstream out;
    out << "byte 0x" << std::hex << int(uint8_t(c));
    return out.str();
  }

  bool at_end() const { return pos_ >= s_.size(); }
  char peek() const { return at_end() ? '\0' : s_[pos_]; }

  void skip_whitespace() {
    while (!at_end() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r')) ++pos_;
  }

  void expect_literal(std::string_view word) {
    if (s_.substr(pos_, word.size()) != word) error("unexpected " + describe_here());
    pos_ += word.size();
  }

  Json parse_value(size_t depth) {
    switch (peek()) {
      case '{': return parse_object(depth + 1);
      case '[': return parse_array(depth + 1);
      case '"': return Json(parse_string());
      case 't': expect_literal("true"); return Json(true);
      case 'f': expect_literal("false"); return Json(false);
      case 'n': expect_literal("null"); return Json();
      case 'N':
      case 'I':
        return parse_nonfinite();
      default:
        if (peek() == '-' || (peek() >= '0' && peek() <= '9')) return parse_number();
        error(at_end() ? "unexpected end of input, expected a value" : "unexpected " + describe_here());
    }
  }

  void enter(size_t depth) {
    if (depth > options_.max_depth) error(cat("nesting deeper than ", options_.max_depth, " levels"));
  }

  Json parse_object(size_t depth) {
    enter(depth);
    ++pos_;  // '{'
    Json::Object members;
    std::unordered_set<std::string> seen;
    skip_whitespace();
    if (peek() == '}') {
      ++pos_;
      return Json(std::move(members));
    }
    while (true) {
      if (peek() != '"') error("expected a string key, got " + describe_here());
      size_t key_pos = pos_;
      std::string key = parse_string();
      if (!options_.allow_duplicate_keys && !seen.insert(key).second) error_at(key_pos, "duplicate key '" + key + "'");
      skip_whitespace();
      if (peek() != ':') error("expected ':' after an object key, got " + describe_here());
      ++pos_;
      skip_whitespace();
      Json value = parse_value(depth);
      members.emplace_back(std::move(key), std::move(value));
      skip_whitespace();
      if (peek() == ',') {
        ++pos_;
        skip_whitespace();
        continue;
      }
      if (peek() == '}') {
        ++pos_;
        return Json(std::move(members));
      }
      error("expected ',' or '}' after an object member, got " + describe_here());
    }
  }

  Json parse_array(size_t depth) {
    enter(depth);
    ++pos_;  // '['
    Json::Array items;
    skip_whitespace();
    if (peek() == ']') {
      ++pos_;
      return Json(std::move(items));
    }
    while (true) {
      items.push_back(parse_value(depth));
      skip_whitespace();
      if (peek() == ',') {
        ++pos_;
        skip_whitespace();
        continue;
      }
      if (peek() == ']') {
        ++pos_;
        return Json(std::move(items));
      }
      error("expected ',' or ']' after an array element, got " + describe_here());
    }
  }

  uint32_t parse_hex4() {
    uint32_t value = 0;
    for (int k = 0; k < 4; ++k, ++pos_) {
      char c = peek();
      uint32_t digit;
      if (c >= '0' && c <= '9') digit = uint32_t(c - '0');
      else if (c >= 'a' && c <= 'f') digit = uint32_t(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F') digit = uint32_t(c - 'A' + 10);
      else error("expected 4 hex digits after \\u, got " + describe_here());
      value = value * 16 + digit;
    }
    return value;
  }

  std::string parse_string() {
    ++pos_;  // opening quote
    std::string out;
    while (true) {
      if (at_end()) error("unterminated string");
      char c = s_[pos_];
      if (c == '"') {
        ++pos_;
        return out;
      }
      if (uint8_t(c) < 0x20) error(cat("control ", describe_here(), " in a string (escape it)"));
      if (c == '\\') {
        size_t escape_pos = pos_++;
        char e = peek();
        ++pos_;
        switch (e) {
          case '"': out += '"'; break;
          case '\\': out += '\\'; break;
          case '/': out += '/'; break;
          case 'b': out += '\b'; break;
          case 'f': out += '\f'; break;
          case 'n': out += '\n'; break;
          case 'r': out += '\r'; break;
          case 't': out += '\t'; break;
          case 'u': {
            uint32_t cp = parse_hex4();
            if (cp >= 0xDC00 && cp <= 0xDFFF) error_at(escape_pos, "unpaired surrogate in a \\u escape");
            if (cp >= 0xD800 && cp <= 0xDBFF) {
              if (s_.substr(pos_, 2) != "\\u") error_at(escape_pos, "unpaired surrogate in a \\u escape");
              pos_ += 2;
              uint32_t low = parse_hex4();
              if (low < 0xDC00 || low > 0xDFFF) error_at(escape_pos, "unpaired surrogate in a \\u escape");
              cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
            }
            append_utf8(out, cp);
            break;
          }
          default:
            pos_ = escape_pos + 1;
            error("invalid escape \\" + (at_end() ? std::string() : std::string(1, e)) + " in a string");
        }
        continue;
      }
      size_t n = utf8_sequence_length(s_, pos_);
      if (n == 0) error("invalid UTF-8 " + describe_here() + " in a string");
      out.append(s_.substr(pos_, n));
      pos_ += n;
    }
  }

  Json parse_nonfinite() {
    size_t start = pos_;
    bool negative = peek() == '-';
    if (negative) ++pos_;
    double value;
    if (s_.substr(pos_, 3) == "NaN" && !negative) {
      pos_ += 3;
      value = std::numeric_limits<double>::quiet_NaN();
    } else if (s_.substr(pos_, 8) == "Infinity") {
      pos_ += 8;
      value = negative ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
    } else {
      pos_ = start;
      error("unexpected " + describe_here());
    }
    if (!options_.allow_nonfinite) error_at(start, "NaN and Infinity are not allowed here");
    return Json(value);
  }

  Json parse_number() {
    size_t start = pos_;
    if (peek() == '-') {
      ++pos_;
      if (peek() == 'I') {
        pos_ = start;
        return parse_nonfinite();
      }
    }
    auto digits = [&] {
      size_t first = pos_;
      while (peek() >= '0' && peek() <= '9') ++pos_;
      return pos_ - first;
    };
    // Decimal exponent of the leading significant digit, to tell overflow from underflow.
    size_t int_start = pos_;
    size_t int_digits = digits();
    if (int_digits == 0) error("expected a digit, got " + describe_here());
    if (int_digits > 1 && s_[int_start] == '0') error_at(int_start, "leading zero in a number");
    bool integral = true;
    if (peek() == '.') {
      ++pos_;
      integral = false;
      if (digits() == 0) error("expected a digit after the decimal point, got " + describe_here());
    }
    if (peek() == 'e' || peek() == 'E') {
      ++pos_;
      integral = false;
      if (peek() == '+' || peek() == '-') ++pos_;
      if (digits() == 0) error("expected a digit in the exponent, got " + describe_here());
    }
    const char* first = s_.data() + start;
    const char* last = s_.data() + pos_;
    if (integral) {
      int64_t value;
      auto [ptr, ec] = std::from_chars(first, last, value);
      if (ec == std::errc() && ptr == last) return Json(value);
    }
    double value;
    auto [ptr, ec] = std::from_chars(first, last, value);
    if (ec == std::errc::result_out_of_range) {
      if (magnitude_exponent(start) > 0) error_at(start, "number " + std::string(first, last) + " is too large for a double");
      value = s_[start] == '-' ? -0.0 : 0.0;  // underflow
    } else if (ec != std::errc() || ptr != last) {
      error_at(start, "malformed number " + std::string(first, last));
    }
    return Json(value);
  }

  // For a syntactically valid number at s_[start, pos_): the power of ten of its leading
  // significant digit (saturating), or INT64_MIN for zero.
  int64_t magnitude_exponent(size_t start) const {
    std::string_view text = s_.substr(start, pos_ - start);
    size_t e = text.find_first_of("eE");
    std::string_view mantissa = text.substr(0, e);
    int64_t exponent = 0;
    if (e != std::string_view::npos) {
      std::string_view ex = text.substr(e + 1);
      bool negative = !ex.empty() && ex[0] == '-';
      if (!ex.empty() && (ex[0] == '+' || ex[0] == '-')) ex.remove_prefix(1);
      for (char c : ex) exponent = std::min<int64_t>(exponent * 10 + (c - '0'), int64_t(1) << 40);
      if (negative) exponent = -exponent;
    }
    if (!mantissa.empty() && mantissa[0] == '-') mantissa.remove_prefix(1);
    size_t dot = mantissa.find('.');
    std::string_view whole = mantissa.substr(0, dot);
    size_t nonzero = whole.find_first_not_of('0');
    if (nonzero != std::string_view::npos) return exponent + int64_t(whole.size() - nonzero) - 1;
    if (dot == std::string_view::npos) return INT64_MIN;
    std::string_view fraction = mantissa.substr(dot + 1);
    nonzero = fraction.find_first_not_of('0');
    if (nonzero == std::string_view::npos) return INT64_MIN;
    return exponent - int64_t(nonzero) - 1;
  }

  std::string_view s_;
  const Json::ParseOptions& options_;
  size_t pos_ = 0;
};

// ---- writer ----

void dump_string(std::string& out, std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  out += '"';
  for (size_t i = 0; i < s.size();) {
    uint8_t c = uint8_t(s[i]);
    if (c >= 0x80) {
      size_t n = utf8_sequence_length(s, i);
      if (n == 0) fail("json", "cannot write a string that is not valid UTF-8 (byte ", i, " of \"", s.substr(0, 40), "\")");
      out.append(s.substr(i, n));
      i += n;
      continue;
    }
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          out += "\\u00";
          out += kHex[c >> 4];
          out += kHex[c & 15];
        } else {
          out += char(c);
        }
    }
    ++i;
  }
  out += '"';
}

void dump_double(std::string& out, double value) {
  if (std::isnan(value)) {
    out += "NaN";
    return;
  }
  if (std::isinf(value)) {
    out += value > 0 ? "Infinity" : "-Infinity";
    return;
  }
  char buffer[64];
  auto [end, ec] = std::to_chars(buffer, buffer + sizeof buffer, value);  // shortest round trip
  std::string_view text(buffer, size_t(end - buffer));
  out += text;
  if (text.find_first_of(".e") == std::string_view::npos) out += ".0";  // stays a double when read back
}

void newline(std::string& out, int indent, int depth) {
  if (indent < 0) return;
  out += '\n';
  out.append(size_t(indent) * size_t(depth), ' ');
}

void dump_value(std::string& out, const Json& v, int indent, int depth) {
  switch (v.kind()) {
    case Json::Kind::null: out += "null"; return;
    case Json::Kind::boolean: out += v.as_bool() ? "true" : "false"; return;
    case Json::Kind::integer: {
      char buffer[24];
      auto [end, ec] = std::to_chars(buffer, buffer + sizeof buffer, v.as_int());
      out.append(buffer, end);
      return;
    }
    case Json::Kind::number: dump_double(out, v.as_double()); return;
    case Json::Kind::string: dump_string(out, v.as_string()); return;
    case Json::Kind::array: {
      const auto& items = v.as_array();
      out += '[';
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) out += ',';
        newline(out, indent, depth + 1);
        dump_value(out, items[i], indent, depth + 1);
      }
      if (!items.empty()) newline(out, indent, depth);
      out += ']';
      return;
    }
    case Json::Kind::object: {
      const auto& members = v.as_object();
      out += '{';
      for (size_t i = 0; i < members.size(); ++i) {
        if (i) out += ',';
        newline(out, indent, depth + 1);
        dump_string(out, members[i].first);
        out += indent < 0 ? ":" : ": ";
        dump_value(out, members[i].second, indent, depth + 1);
      }
      if (!members.empty()) newline(out, indent, depth);
      out += '}';
      return;
    }
  }
}

}  // namespace

Json Json::parse(std::string_view text, const ParseOptions& options) { return Parser(text, options).parse_document(); }

std::string Json::dump(int indent) const {
  std::string out;
  dump_value(out, *this, indent, 0);
  return out;
}

// ---- access ----

void Json::kind_error(std::string_view wanted) const { fail("json", "expected ", wanted, ", got ", kind_name(kind())); }

bool Json::as_bool() const {
  if (!is_bool()) kind_error("a boolean");
  return std::get<bool>(value_);
}

int64_t Json::as_int() const {
  if (!is_int()) kind_error("an integer");
  return std::get<int64_t>(value_);
}

double Json::as_double() const {
  if (is_int()) return double(std::get<int64_t>(value_));
  if (kind() != Kind::number) kind_error("a number");
  return std::get<double>(value_);
}

const std::string& Json::as_string() const {
  if (!is_string()) kind_error("a string");
  return std::get<std::string>(value_);
}

const Json::Array& Json::as_array() const {
  if (!is_array()) kind_error("an array");
  return std::get<Array>(value_);
}

Json::Array& Json::as_array() {
  if (!is_array()) kind_error("an array");
  return std::get<Array>(value_);
}

const Json::Object& Json::as_object() const {
  if (!is_object()) kind_error("an object");
  return std::get<Object>(value_);
}

Json::Object& Json::as_object() {
  if (!is_object()) kind_error("an object");
  return std::get<Object>(value_);
}

const Json* Json::find(std::string_view key) const {
  for (const auto& [k, v] : as_object())
    if (k == key) return &v;
  return nullptr;
}

Json* Json::find(std::string_view key) {
  for (auto& [k, v] : as_object())
    if (k == key) return &v;
  return nullptr;
}

const Json& Json::at(std::string_view key) const {
  if (const Json* v = find(key)) return *v;
  fail("json", "no key '", key, "'");
}

Json& Json::at(std::string_view key) {
  if (Json* v = find(key)) return *v;
  fail("json", "no key '", key, "'");
}

Json& Json::operator[](std::string_view key) {
  if (is_null()) value_ = Object();
  if (Json* v = find(key)) return *v;
  auto& members = as_object();
  members.emplace_back(std::string(key), Json());
  return members.back().second;
}

const Json& Json::at(size_t index) const {
  const auto& items = as_array();
  if (index >= items.size()) fail("json", "index ", index, " is out of range for an array of ", items.size());
  return items[index];
}

Json& Json::at(size_t index) {
  auto& items = as_array();
  if (index >= items.size()) fail("json", "index ", index, " is out of range for an array of ", items.size());
  return items[index];
}

void Json::push_back(Json value) {
  if (is_null()) value_ = Array();
  as_array().push_back(std::move(value));
}

size_t Json::size() const {
  if (is_array()) return as_array().size();
  if (is_object()) return as_object().size();
  kind_error("an array or an object");
}

bool operator==(const Json& a, const Json& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_int() && b.is_int()) return a.as_int() == b.as_int();
    return a.as_double() == b.as_double();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Json::Kind::null: return true;
    case Json::Kind::boolean: return a.as_bool() == b.as_bool();
    case Json::Kind::string: return a.as_string() == b.as_string();
    case Json::Kind::array: return a.as_array() == b.as_array();
    case Json::Kind::object: {
      if (a.size() != b.size()) return false;
      for (const auto& [key, value] : a.as_object()) {
        const Json* other = b.find(key);
        if (!other || !(*other == value)) return false;
      }
      return true;
    }
    default: return false;
  }
}

Json read_json_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("json", path, ": cannot open the file");
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) fail("json", path, ": read error");
  try {
    return Json::parse(text.str());
  } catch (const JsonParseError& e) {
    fail("json", path, ": line ", e.line(), ", column ", e.column(), ": ", e.reason());
  }
}

}  // namespace cotan
