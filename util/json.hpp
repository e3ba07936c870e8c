// JSON (RFC 8259) through nlohmann-json, with cotan's errors: parse errors give line and column,
// typed reads name what they found, and JsonFields reads one object's fields in the caller's words.
//
//   Json config = read_json_file("config.json");
//   JsonFields f(config, "config", "config.json");
//   int64_t hidden = f.required<int64_t>("hidden_size");  // "[config] config.json: missing field 'hidden_size'"
//   Json row = Json::object();
//   row["step"] = 10;  row["loss"] = 2.5;
//   std::string line = dump_json(row);                    // {"step":10,"loss":2.5}
//
// Json is nlohmann::ordered_json: objects keep their members in insertion order and dump writes
// them back in that order. parse_json differs from nlohmann's parse in three ways: a key repeated
// in one object is an error (nlohmann keeps the last one silently), so is a number too large for
// a double (nlohmann makes it infinite), and nesting is limited to 512 levels (dump recurses).
// sax_parse_json parses the same way into a handler's events, for input too large to hold as a
// Json (a Json costs 16 bytes per value and more per array and object, against a byte or two of text).
// Numbers written without a fraction or an exponent parse as integers (uint64 when non-negative,
// int64 otherwise; larger ones as doubles), all others as doubles. JSON has no NaN or Infinity:
// parse rejects them, and dump writes a non-finite double as null. Strings hold UTF-8: parse
// rejects invalid UTF-8 and unpaired surrogates, dump_json throws on invalid UTF-8.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <nlohmann/json.hpp>

#include "util/error.hpp"
#include "util/json_fwd.hpp"

namespace cotan {

// A syntax error: "[json] line 3, column 14: syntax error while parsing object - unexpected ','...".
// Columns count characters (UTF-8 code points), both start at 1; offset is the byte offset of the
// character where the parser stopped.
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

inline constexpr size_t kJsonMaxDepth = 512;  // parse's default limit on nesting (dump recurses)

struct JsonParseOptions {
  size_t max_depth = kJsonMaxDepth;  // nesting of arrays and objects
  // Called for a key that its object already has, with the keys of the enclosing objects from
  // the outermost one and then the repeated key (arrays add nothing). It may throw an error in
  // its caller's words; when it returns, the parse fails with "duplicate key 'k'".
  std::function<void(const std::vector<std::string>& path)> on_duplicate_key;
};

Json parse_json(std::string_view text, const JsonParseOptions& options = {});

// A handler of sax_parse_json's events, in nlohmann's SAX interface (nlohmann::json_sax): the
// values in document order, arrays and objects as start/end pairs, each key() just before its
// member's value. Numbers arrive as parse_json would store them (number_integer for negative
// integers, number_unsigned for the others, number_float for the rest). An event returns true to
// go on; false ends the parse there, quietly. A handler refuses input by throwing its own error,
// or a positioned one with key_error. Keys reach it as they come: a repeated key is the handler's
// to notice, so that a handler that keeps nothing of an object need not keep its keys.
// sax_parse_json reports parse errors itself and JSON text has no binary values, so those two
// events are not the handler's.
class JsonSax : public nlohmann::json_sax<Json> {
 public:
  bool binary(binary_t&) final { return true; }
  bool parse_error(size_t, const std::string&, const nlohmann::detail::exception&) final { return false; }

 protected:
  // Throws JsonParseError(reason) at the opening quote of the key the last key() event gave.
  [[noreturn]] void key_error(const std::string& reason) const;

 private:
  class Driver;
  friend void sax_parse_json(std::string_view text, JsonSax& handler, size_t max_depth);
  const Driver* driver_ = nullptr;
};

// Parses text, giving handler its events as they come; the parser itself keeps a bit per open
// array or object. Syntax errors, numbers too large for a double and nesting deeper than
// max_depth throw JsonParseError with the reason and position parse_json gives for the same text
// (parse_json is this function with a handler that builds the value).
void sax_parse_json(std::string_view text, JsonSax& handler, size_t max_depth = kJsonMaxDepth);

// Reads and parses a file; errors name it: "[json] config.json: line 3, column 14: ...".
Json read_json_file(const std::string& path);

// indent < 0: one line, no spaces; otherwise one member or element per line, nested by indent
// spaces. A string that is not valid UTF-8 throws "[json] cannot write ...: invalid UTF-8 byte ...".
std::string dump_json(const Json& value, int indent = -1);

// "null", "a boolean", "an integer", "a number" (with a fraction or exponent), "a string",
// "an array", "an object".
std::string_view kind_name(const Json& value);

// Structural equality where objects compare as unordered maps and 1 == 1.0 (nlohmann's ==
// compares ordered_json objects in member order).
bool json_equal(const Json& a, const Json& b);

// Typed access; a wrong kind throws "[json] expected an integer, got a string".
bool as_bool(const Json& value);
int64_t as_int(const Json& value);    // integers only; "integer ... does not fit in an int64"
uint64_t as_uint(const Json& value);  // non-negative integers only
double as_double(const Json& value);  // integers and doubles
const std::string& as_string(const Json& value);

// Members of an object (another kind throws "[json] expected an object, got an array"):
// find_member gives nullptr for a missing key, member throws "[json] no key 'name'".
const Json* find_member(const Json& object, std::string_view key);
const Json& member(const Json& object, std::string_view key);

// The fields of one JSON object, with errors that name the op and the source:
//   JsonFields f(json, "config", "model/config.json");
//   f.required<int64_t>("vocab_size")  missing: "[config] model/config.json: missing field 'vocab_size'"
//   f.optional("rope_theta", 1e4)      absent or null: 1e4
//   wrong kind: "[config] model/config.json: field 'rope_theta' must be a number, got a string"
// T is bool, int64_t, uint64_t, double or std::string. object("rope_scaling") reads a nested
// object whose errors say "field 'rope_scaling.factor'".
class JsonFields {
 public:
  // Throws "[op] source: expected a JSON object, got an array" for another kind.
  JsonFields(const Json& object, std::string_view op, std::string_view source, std::string_view prefix = "");

  // The value of a present, non-null field, else nullptr.
  const Json* find(std::string_view key) const;

  template <class T>
  T required(std::string_view key) const {
    const Json* v = find(key);
    if (!v) error("missing field '", name(key), "'");
    return read<T>(key, *v);
  }

  template <class T>
  T optional(std::string_view key, T fallback) const {
    const Json* v = find(key);
    return v ? read<T>(key, *v) : fallback;
  }
  std::string optional(std::string_view key, const char* fallback) const {
    return optional<std::string>(key, std::string(fallback));
  }

  // A nested object: nullopt when absent or null; another kind is an error.
  std::optional<JsonFields> object(std::string_view key) const;

  // Throws "[op] source: <args>".
  template <class... Args>
  [[noreturn]] void error(const Args&... args) const {
    if (source_.empty()) fail(op_, args...);
    fail(op_, source_, ": ", args...);
  }

  // "rope_scaling.factor": the key with this object's prefix.
  std::string name(std::string_view key) const;
  const Json& json() const { return *object_; }

 private:
  template <class T>
  T read(std::string_view key, const Json& v) const {
    static_assert(std::is_same_v<T, bool> || std::is_same_v<T, int64_t> || std::is_same_v<T, uint64_t> ||
                      std::is_same_v<T, double> || std::is_same_v<T, std::string>,
                  "JsonFields reads bool, int64_t, uint64_t, double or std::string");
    T out{};
    if (!read_value(v, out)) error("field '", name(key), "' must be ", wanted(out), ", got ", describe(v));
    return out;
  }
  static bool read_value(const Json& v, bool& out);
  static bool read_value(const Json& v, int64_t& out);
  static bool read_value(const Json& v, uint64_t& out);
  static bool read_value(const Json& v, double& out);
  static bool read_value(const Json& v, std::string& out);
  static std::string_view wanted(bool) { return "a boolean"; }
  static std::string_view wanted(int64_t) { return "an integer"; }
  static std::string_view wanted(uint64_t) { return "a non-negative integer"; }
  static std::string_view wanted(double) { return "a number"; }
  static std::string_view wanted(const std::string&) { return "a string"; }
  // A number as its text, other kinds by kind_name.
  static std::string describe(const Json& v);

  const Json* object_;
  std::string op_, source_, prefix_;
};

}  // namespace cotan
