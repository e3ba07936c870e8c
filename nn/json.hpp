// JSON values (RFC 8259): parse with errors that give line and column, dump compact or indented.
//
//   Json config = read_json_file("config.json");
//   int64_t hidden = config.at("hidden_size").as_int();
//   Json row = Json::object();
//   row["step"] = 10;  row["loss"] = 2.5;
//   std::string line = row.dump();                    // {"step":10,"loss":2.5}
//
// Objects keep their members in insertion order (dump writes them back in that order); lookup is
// a linear scan, which suits configs and metrics rows. Numbers written without a fraction or an
// exponent that fit in an int64 parse as integers, all others as doubles. Strings hold UTF-8:
// parse rejects invalid UTF-8 and unpaired surrogates; dump escapes '"', '\' and control
// characters and writes other characters verbatim. Like Python's json module, dump writes
// non-finite doubles as NaN, Infinity and -Infinity and parse accepts them (ParseOptions can turn
// this off). parse rejects duplicate keys unless ParseOptions allows them (then all are kept, and
// find() returns the first).
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "tensor/error.hpp"

namespace cotan {

// A syntax error: "[json] line 3, column 14: expected ',' or '}' after an object member".
// Columns count characters (UTF-8 code points), both start at 1; offset is the byte offset.
class JsonParseError : public Error {
 public:
  JsonParseError(std::string reason, size_t line, size_t column, size_t offset);
  const std::string& reason() const { return reason_; }
  size_t line() const { return line_; }
  size_t column() const { return column_; }
  size_t offset() const { return offset_; }

 private:
  std::string reason_;
  size_t line_, column_, offset_;
};

class Json {
 public:
  enum class Kind : uint8_t { null, boolean, integer, number, string, array, object };
  using Array = std::vector<Json>;
  using Member = std::pair<std::string, Json>;
  using Object = std::vector<Member>;

  struct ParseOptions {
    bool allow_duplicate_keys = false;
    bool allow_nonfinite = true;  // NaN, Infinity, -Infinity
    size_t max_depth = 512;       // nesting of arrays and objects
  };

  Json() = default;  // null
  Json(std::nullptr_t) {}
  Json(bool value) : value_(value) {}
  template <std::integral T>
    requires(!std::same_as<T, bool>)
  Json(T value) : value_(checked_int(value)) {}
  template <std::floating_point T>
  Json(T value) : value_(double(value)) {}
  Json(const char* value) : value_(std::string(value)) {}
  Json(std::string value) : value_(std::move(value)) {}
  Json(std::string_view value) : value_(std::string(value)) {}
  Json(Array value) : value_(std::move(value)) {}
  Json(Object value) : value_(std::move(value)) {}

  static Json array(Array items = {}) { return Json(std::move(items)); }
  static Json object(Object members = {}) { return Json(std::move(members)); }

  static Json parse(std::string_view text) { return parse(text, ParseOptions{}); }
  static Json parse(std::string_view text, const ParseOptions& options);
  // indent < 0: one line, no spaces; otherwise one member or element per line, nested by indent spaces.
  std::string dump(int indent = -1) const;

  Kind kind() const { return Kind(value_.index()); }
  bool is_null() const { return kind() == Kind::null; }
  bool is_bool() const { return kind() == Kind::boolean; }
  bool is_int() const { return kind() == Kind::integer; }
  bool is_number() const { return kind() == Kind::integer || kind() == Kind::number; }  // int or double
  bool is_string() const { return kind() == Kind::string; }
  bool is_array() const { return kind() == Kind::array; }
  bool is_object() const { return kind() == Kind::object; }

  // Typed access; a wrong kind throws "[json] expected an integer, got a string".
  bool as_bool() const;
  int64_t as_int() const;    // integers only
  double as_double() const;  // integers and doubles
  const std::string& as_string() const;
  const Array& as_array() const;
  Array& as_array();
  const Object& as_object() const;
  Object& as_object();

  // Objects. at() throws "[json] no key 'name'"; operator[] appends a null member when the key is
  // missing and turns a null value into an empty object first.
  const Json* find(std::string_view key) const;
  Json* find(std::string_view key);
  bool contains(std::string_view key) const { return find(key) != nullptr; }
  const Json& at(std::string_view key) const;
  Json& at(std::string_view key);
  Json& operator[](std::string_view key);
  Json& operator[](const char* key) { return (*this)[std::string_view(key)]; }

  // Arrays. push_back turns a null value into an empty array first.
  const Json& at(size_t index) const;
  Json& at(size_t index);
  void push_back(Json value);

  // Elements of an array or members of an object.
  size_t size() const;

  // Structural equality; objects compare as unordered maps, 1 == 1.0.
  friend bool operator==(const Json& a, const Json& b);

 private:
  template <class T>
  static int64_t checked_int(T value) {
    if constexpr (std::is_unsigned_v<T> && sizeof(T) >= sizeof(int64_t))
      if (value > uint64_t(INT64_MAX)) fail("json", "integer ", value, " does not fit in an int64");
    return int64_t(value);
  }
  [[noreturn]] void kind_error(std::string_view wanted) const;

  std::variant<std::nullptr_t, bool, int64_t, double, std::string, Array, Object> value_;
};

std::string_view kind_name(Json::Kind kind);  // "null", "a boolean", "an integer", "a number", ...

// Reads and parses a file; errors name it: "[json] config.json: line 3, column 14: ...".
Json read_json_file(const std::string& path);

}  // namespace cotan
