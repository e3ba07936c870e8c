// JSON through util/json.hpp: parsing (kinds, escapes, UTF-8, errors with line and column,
// duplicate keys, depth), SAX parsing, writing, typed access, equality and JsonFields.
#include "util/json.hpp"
#include "tests/support.hpp"

#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>

using namespace cotan;

namespace {

std::string parse_error(std::string_view text) {
  return error_of([&] { parse_json(text); });
}

// nlohmann's wording after cotan's "[json] line L, column C: ".
std::string syntax(size_t line, size_t column, std::string_view reason) {
  return cat("[json] line ", line, ", column ", column, ": syntax error while parsing ", reason);
}

}  // namespace

TEST_CASE("json: scalars and their kinds") {
  CHECK(parse_json("null").is_null());
  CHECK(as_bool(parse_json("true")));
  CHECK_FALSE(as_bool(parse_json(" false ")));
  CHECK(parse_json("42").is_number_integer());
  CHECK(as_int(parse_json("42")) == 42);
  CHECK(as_int(parse_json("-9223372036854775808")) == INT64_MIN);
  CHECK(as_double(parse_json("42")) == 42.0);
  CHECK(parse_json("4.5").is_number_float());
  CHECK(kind_name(parse_json("4.5")) == "a number");
  CHECK(kind_name(parse_json("4")) == "an integer");
  CHECK(as_double(parse_json("-0.25e2")) == -25.0);
  CHECK(as_double(parse_json("1E3")) == 1000.0);
  CHECK(as_double(parse_json("1e-5")) == 1e-5);
  CHECK(as_double(parse_json("0.1")) == 0.1);
  // Integers past int64 are uint64, past uint64 doubles; underflow becomes zero.
  CHECK(parse_json("9223372036854775808").is_number_unsigned());
  CHECK(as_uint(parse_json("18446744073709551615")) == UINT64_MAX);
  CHECK(as_double(parse_json("9223372036854775808")) == 9223372036854775808.0);
  CHECK(error_of([] { as_int(parse_json("9223372036854775808")); }) ==
        "[json] integer 9223372036854775808 does not fit in an int64");
  CHECK(parse_json("18446744073709551616").is_number_float());
  CHECK(parse_json("-9223372036854775809").is_number_float());
  CHECK(as_double(parse_json("1e-400")) == 0.0);
  CHECK(std::signbit(as_double(parse_json("-1e-400"))));
  CHECK(as_double(parse_json(
            "0.0000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000"
            "0000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000"
            "0000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000"
            "0000000000000000000000000000000000000000000000000000000000001")) == 0.0);
  CHECK(parse_error("1e400") == "[json] line 1, column 1: number 1e400 is too large for a double");
  CHECK(parse_error("[0, -1e400]") == "[json] line 1, column 5: number -1e400 is too large for a double");
  // JSON has no NaN or Infinity.
  CHECK(parse_error("NaN") == syntax(1, 1, "value - invalid literal; last read: 'N'"));
  CHECK(parse_error("-Infinity") == syntax(1, 2, "value - invalid number; expected digit after '-'; last read: '-I'"));
  CHECK(parse_error("[1, Infinity]") == syntax(1, 5, "value - invalid literal; last read: '1, I'"));
}

TEST_CASE("json: strings, escapes and UTF-8") {
  CHECK(as_string(parse_json(R"("a\"b\\c\/d\b\f\n\r\t")")) == "a\"b\\c/d\b\f\n\r\t");
  CHECK(as_string(parse_json(R"("\u00e9\u4e2d\ud83d\ude00")")) == "\u00e9\u4e2d\U0001F600");
  CHECK(as_string(parse_json("\"caf\xc3\xa9 \xf0\x9f\x98\x80\"")) == "caf\xc3\xa9 \xf0\x9f\x98\x80");
  CHECK(as_string(parse_json(R"("\u0000")")) == std::string(1, '\0'));
  CHECK(parse_error("\"\\ud800\"") ==
        syntax(1, 8, "value - invalid string: surrogate U+D800..U+DBFF must be followed by U+DC00..U+DFFF; "
                     "last read: '\"\\ud800\"'"));
  CHECK(parse_error("\"\\udc00\"") ==
        syntax(1, 7, "value - invalid string: surrogate U+DC00..U+DFFF must follow U+D800..U+DBFF; "
                     "last read: '\"\\udc00'"));
  CHECK(parse_error("\"\\u12g4\"") ==
        syntax(1, 6, "value - invalid string: '\\u' must be followed by 4 hex digits; last read: '\"\\u12g'"));
  CHECK(parse_error("\"\\x\"") ==
        syntax(1, 3, "value - invalid string: forbidden character after backslash; last read: '\"\\x'"));
  CHECK(parse_error("\"a\nb\"") ==
        syntax(1, 3, "value - invalid string: control character U+000A (LF) must be escaped to \\u000A or \\n; "
                     "last read: '\"a<U+000A>'"));
  CHECK(parse_error("\"abc") == syntax(1, 5, "value - invalid string: missing closing quote; last read: '\"abc'"));
  CHECK(parse_error("\"\xc3\x28\"") ==
        syntax(1, 3, "value - invalid string: ill-formed UTF-8 byte; last read: '\"\xc3\x28'"));
  CHECK(parse_error("\"\xed\xa0\x80\"") ==  // a surrogate
        syntax(1, 3, "value - invalid string: ill-formed UTF-8 byte; last read: '\"\xed\xa0'"));
  CHECK(parse_error("\"\xc0\xaf\"") ==  // overlong
        syntax(1, 2, "value - invalid string: ill-formed UTF-8 byte; last read: '\"\xc0'"));
}

TEST_CASE("json: arrays and objects keep their order") {
  Json v = parse_json(R"( {"b": [1, 2.5, "x", null, [], {}], "a": {"nested": true}} )");
  REQUIRE(v.is_object());
  CHECK(v.size() == 2);
  CHECK(v.items().begin().key() == "b");
  CHECK(std::next(v.items().begin()).key() == "a");
  CHECK(member(v, "b").size() == 6);
  CHECK(as_int(member(v, "b")[0]) == 1);
  CHECK(as_string(member(v, "b")[2]) == "x");
  CHECK(member(v, "b")[4].empty());
  CHECK(as_bool(member(member(v, "a"), "nested")));
  CHECK(v.contains("a"));
  CHECK_FALSE(v.contains("c"));
  CHECK(find_member(v, "c") == nullptr);
  CHECK(dump_json(v) == R"({"b":[1,2.5,"x",null,[],{}],"a":{"nested":true}})");
}

TEST_CASE("json: errors give line and column") {
  CHECK(parse_error("") == syntax(1, 1, "value - unexpected end of input; expected '[', '{', or a literal"));
  CHECK(parse_error("{\n  \"a\": 1,\n  \"b\" 2\n}") ==
        syntax(3, 7, "object separator - unexpected number literal; expected ':'"));
  CHECK(parse_error("[1, 2") == syntax(1, 6, "array - unexpected end of input; expected ']'"));
  CHECK(parse_error("[1,]") == syntax(1, 4, "value - unexpected ']'; expected '[', '{', or a literal"));
  CHECK(parse_error("{\"a\":1,}") == syntax(1, 8, "object key - unexpected '}'; expected string literal"));
  CHECK(parse_error("{\"a\":1 \"b\":2}") == syntax(1, 10, "object - unexpected string literal; expected '}'"));
  CHECK(parse_error("{'a': 1}") == syntax(1, 2, "object key - invalid literal; last read: '{''; expected string literal"));
  CHECK(parse_error("tru") == syntax(1, 4, "value - invalid literal; last read: 'tru'"));
  CHECK(parse_error("1 2") == syntax(1, 3, "value - unexpected number literal; expected end of input"));
  CHECK(parse_error("01") == syntax(1, 2, "value - unexpected number literal; expected end of input"));
  CHECK(parse_error("1.") == syntax(1, 3, "value - invalid number; expected digit after '.'; last read: '1.'"));
  CHECK(parse_error("-") == syntax(1, 2, "value - invalid number; expected digit after '-'; last read: '-'"));
  CHECK(parse_error("1e+") == syntax(1, 4, "value - invalid number; expected digit after exponent sign; last read: '1e+'"));
  CHECK(parse_error("\x01") == syntax(1, 1, "value - invalid literal; last read: '<U+0001>'"));
  // Columns count characters, not bytes.
  CHECK(parse_error("[\"\xc3\xa9\xc3\xa9\", x]") ==
        syntax(1, 8, "value - invalid literal; last read: '\"\xc3\xa9\xc3\xa9\", x'"));

  try {
    parse_json("[\n\n   }");
    FAIL("no error");
  } catch (const JsonParseError& e) {
    CHECK(e.line() == 3);
    CHECK(e.column() == 4);
    CHECK(e.offset() == 6);
    CHECK(e.reason() == "syntax error while parsing value - unexpected '}'; expected '[', '{', or a literal");
  }
}

TEST_CASE("json: duplicate keys and nesting depth") {
  CHECK(parse_error("{\"a\": 1,\n \"a\": 2}") == "[json] line 2, column 2: duplicate key 'a'");
  // The position is the repeated key's opening quote, escapes and all.
  CHECK(parse_error(R"({"a\"b": 1, "x": [{"a\"b": 2}], "a\"b": 3})") == "[json] line 1, column 33: duplicate key 'a\"b'");
  CHECK(parse_json(R"({"a": {"a": 1}, "b": [{"a": 2}, {"a": 3}]})").size() == 2);  // one key per object

  // The hook sees the enclosing keys and may throw an error in its own words.
  std::vector<std::string> seen;
  JsonParseOptions options;
  options.on_duplicate_key = [&](const std::vector<std::string>& path) { seen = path; };
  CHECK(error_of([&] { parse_json(R"({"x": [{"y": {"k": 1, "k": 2}}]})", options); }) ==
        "[json] line 1, column 23: duplicate key 'k'");
  CHECK(seen == std::vector<std::string>{"x", "y", "k"});
  options.on_duplicate_key = [](const std::vector<std::string>& path) { fail("test", "'", path.back(), "' twice"); };
  CHECK(error_of([&] { parse_json(R"({"w": 1, "w": 2})", options); }) == "[test] 'w' twice");

  std::string deep(600, '[');
  CHECK(parse_error(deep) == "[json] line 1, column 513: nesting deeper than 512 levels");
  std::string ok = std::string(100, '[') + std::string(100, ']');
  CHECK(parse_json(ok).is_array());
  options.max_depth = 2;
  CHECK(error_of([&] { parse_json(R"({"a": [{}]})", options); }) == "[json] line 1, column 8: nesting deeper than 2 levels");
}

namespace {

// The events of a SAX parse as text: {"a": [1, -2]} gives "{ a: [ 1u -2 ] }". A key named "stop"
// ends the parse, one named "bad" is refused at its position.
struct EventLog final : JsonSax {
  std::string log;
  bool null() override { return add("null"); }
  bool boolean(bool value) override { return add(value ? "true" : "false"); }
  bool number_integer(number_integer_t value) override { return add(cat(value)); }
  bool number_unsigned(number_unsigned_t value) override { return add(cat(value, "u")); }
  bool number_float(number_float_t value, const string_t&) override { return add(cat(value, "f")); }
  bool string(string_t& value) override { return add("\"" + value + "\""); }
  bool start_object(size_t) override { return add("{"); }
  bool key(string_t& key) override {
    if (key == "bad") key_error("no keys named 'bad'");
    return add(key + ":") && key != "stop";
  }
  bool end_object() override { return add("}"); }
  bool start_array(size_t) override { return add("["); }
  bool end_array() override { return add("]"); }
  bool add(const std::string& event) {
    log += (log.empty() ? "" : " ") + event;
    return true;
  }
};

// The JsonParseError a parse throws, as "reason @ line:column/offset".
template <class F>
std::string parse_error_of(F&& parse) {
  try {
    parse();
  } catch (const JsonParseError& e) {
    return cat(e.reason(), " @ ", e.line(), ":", e.column(), "/", e.offset());
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("json: sax_parse_json gives the events, and parse_json's errors at the same positions") {
  EventLog events;
  sax_parse_json(R"( {"a": [1, -2, 2.5, "x", true, null], "b": {"a": {}, "a": []}} )", events);
  CHECK(events.log == "{ a: [ 1u -2 2.5f \"x\" true null ] b: { a: { } a: [ ] } }");  // repeated keys pass

  const std::string_view texts[] = {"",         "[1, 2",         "{\"a\":1,}", "tru",           "1 2",
                                    "01",       "[\"\xc3\xa9\", x]", "[\n\n   }",   "[1, 1e400]",    "{\"a\":\n -1E999}",
                                    "{\"a\" 1}", "[1] x",         "\"\\ud800\"", "[[[[[[[[[[[[[]"};
  for (std::string_view text : texts) {
    INFO(text);
    EventLog sax;
    const std::string error = parse_error_of([&] { sax_parse_json(text, sax); });
    CHECK(error != "(no error)");
    CHECK(error == parse_error_of([&] { parse_json(text); }));
  }
  EventLog sax;
  CHECK(parse_error_of([&] { sax_parse_json("[\n\n   }", sax); }) ==
        "syntax error while parsing value - unexpected '}'; expected '[', '{', or a literal @ 3:4/6");
  CHECK(parse_error_of([&] { sax_parse_json("[1,\n 1e400]", sax); }) == "number 1e400 is too large for a double @ 2:2/5");
  CHECK(parse_error_of([&] { sax_parse_json(std::string(600, '['), sax); }) ==
        "nesting deeper than 512 levels @ 1:513/512");
  CHECK(parse_error_of([&] { sax_parse_json("{\"a\": [{}]}", sax, 2); }) == "nesting deeper than 2 levels @ 1:8/7");

  // A handler's positioned error names the key's opening quote; its own errors pass unchanged;
  // returning false ends the parse quietly.
  CHECK(parse_error_of([&] { sax_parse_json(R"({"x\"": 1, "bad": 2})", sax); }) == "no keys named 'bad' @ 1:12/11");
  struct Refuses final : JsonSax {
    bool null() override { fail("test", "no nulls"); }
    bool boolean(bool) override { return true; }
    bool number_integer(number_integer_t) override { return true; }
    bool number_unsigned(number_unsigned_t) override { return true; }
    bool number_float(number_float_t, const string_t&) override { return true; }
    bool string(string_t&) override { return true; }
    bool start_object(size_t) override { return true; }
    bool key(string_t&) override { return true; }
    bool end_object() override { return true; }
    bool start_array(size_t) override { return true; }
    bool end_array() override { return true; }
  } refuses;
  CHECK(error_of([&] { sax_parse_json("[1, null, ", refuses); }) == "[test] no nulls");
  EventLog stops;
  sax_parse_json(R"({"a": 1, "stop": 2, "z": [)", stops);
  CHECK(stops.log == "{ a: 1u stop:");
}

TEST_CASE("json: building values and writing them") {
  Json row = Json::object();
  row["step"] = 10;
  row["lr"] = 1e-3;
  row["loss"] = 2.5f;
  row["name"] = "run \"1\"";
  row["ok"] = true;
  row["none"] = nullptr;
  row["ids"].push_back(1);
  row["ids"].push_back(int64_t(-2));
  row["nested"]["x"] = uint32_t(7);
  CHECK(dump_json(row) ==
        R"({"step":10,"lr":0.001,"loss":2.5,"name":"run \"1\"","ok":true,"none":null,"ids":[1,-2],"nested":{"x":7}})");
  CHECK(json_equal(parse_json(dump_json(row)), row));
  CHECK(dump_json(row, 2) == "{\n  \"step\": 10,\n  \"lr\": 0.001,\n  \"loss\": 2.5,\n  \"name\": \"run \\\"1\\\"\",\n"
                             "  \"ok\": true,\n  \"none\": null,\n  \"ids\": [\n    1,\n    -2\n  ],\n"
                             "  \"nested\": {\n    \"x\": 7\n  }\n}");
  CHECK(json_equal(parse_json(dump_json(row, 4)), row));
  CHECK(dump_json(Json::object(), 2) == "{}");
  CHECK(dump_json(Json::array(), 2) == "[]");
  // uint64 values are written as they are and read back exactly.
  CHECK(dump_json(Json(uint64_t(1) << 63)) == "9223372036854775808");
  CHECK(as_uint(parse_json(dump_json(Json(UINT64_MAX)))) == UINT64_MAX);
}

TEST_CASE("json: doubles are written as text that reads back exactly") {
  for (double x : {0.1, 1.0 / 3.0, 1e300, -2.5e-308, 4.9e-324, 123456789.0, 1.0, -0.0, 1e22}) {
    Json back = parse_json(dump_json(Json(x)));
    CHECK(back.is_number_float());
    CHECK(std::bit_cast<uint64_t>(as_double(back)) == std::bit_cast<uint64_t>(x));
  }
  CHECK(dump_json(Json(1.0)) == "1.0");
  CHECK(dump_json(Json(0.1)) == "0.1");
  CHECK(dump_json(Json(1e22)) == "1e+22");
  // JSON has no NaN or Infinity: they are written as null.
  CHECK(dump_json(Json(std::nan(""))) == "null");
  CHECK(dump_json(Json(-std::numeric_limits<double>::infinity())) == "null");
}

TEST_CASE("json: strings are escaped on the way out") {
  CHECK(dump_json(Json(std::string("a\"\\\n\t\x01\x1f\x7f/"))) == "\"a\\\"\\\\\\n\\t\\u0001\\u001f\x7f/\"");
  CHECK(dump_json(Json("\xc3\xa9")) == "\"\xc3\xa9\"");
  CHECK(error_of([] { dump_json(Json("ab\xff")); }) ==
        "[json] cannot write a string that is not valid UTF-8: invalid UTF-8 byte at index 2: 0xFF");
  std::string all;
  for (int c = 1; c < 128; ++c) all += char(c);
  all += "\xf4\x8f\xbf\xbf";  // U+10FFFF
  CHECK(as_string(parse_json(dump_json(Json(all)))) == all);
}

TEST_CASE("json: typed access and lookups report what they found") {
  Json v = parse_json(R"({"n": 3, "s": "x", "f": 1.5, "a": [1], "neg": -1})");
  CHECK(error_of([&] { as_int(member(v, "s")); }) == "[json] expected an integer, got a string");
  CHECK(error_of([&] { as_int(member(v, "f")); }) == "[json] expected an integer, got a number");
  CHECK(error_of([&] { as_string(member(v, "n")); }) == "[json] expected a string, got an integer");
  CHECK(error_of([&] { as_bool(member(v, "n")); }) == "[json] expected a boolean, got an integer");
  CHECK(error_of([&] { as_uint(member(v, "neg")); }) == "[json] expected a non-negative integer, got -1");
  CHECK(error_of([&] { as_double(member(v, "a")); }) == "[json] expected a number, got an array");
  CHECK(error_of([&] { member(v, "missing"); }) == "[json] no key 'missing'");
  CHECK(error_of([&] { find_member(member(v, "a"), "x"); }) == "[json] expected an object, got an array");
  CHECK(as_double(member(v, "f")) == 1.5);
  CHECK(as_double(member(v, "n")) == 3.0);
  CHECK(as_uint(member(v, "n")) == 3);
}

TEST_CASE("json: fields of an object, with errors in the caller's words") {
  const Json j = parse_json(R"({"n": 3, "s": "x", "f": 1.5, "none": null, "neg": -2,
                                "rope": {"factor": "big"}, "list": [1]})");
  const JsonFields f(j, "config", "cfg.json");
  CHECK(f.required<int64_t>("n") == 3);
  CHECK(f.required<double>("n") == 3.0);
  CHECK(f.required<std::string>("s") == "x");
  CHECK(f.optional("absent", int64_t{7}) == 7);
  CHECK(f.optional("none", 2.5) == 2.5);  // null reads as absent
  CHECK(f.optional("s", "fallback") == "x");
  CHECK(f.find("none") == nullptr);
  CHECK(error_of([&] { f.required<int64_t>("absent"); }) == "[config] cfg.json: missing field 'absent'");
  CHECK(error_of([&] { f.required<int64_t>("f"); }) == "[config] cfg.json: field 'f' must be an integer, got 1.5");
  CHECK(error_of([&] { f.optional("s", false); }) == "[config] cfg.json: field 's' must be a boolean, got a string");
  CHECK(error_of([&] { f.required<uint64_t>("neg"); }) ==
        "[config] cfg.json: field 'neg' must be a non-negative integer, got -2");
  CHECK(error_of([&] { f.required<std::string>("list"); }) == "[config] cfg.json: field 'list' must be a string, got an array");
  // Nested objects name the whole path.
  const auto rope = f.object("rope");
  REQUIRE(rope);
  CHECK(error_of([&] { rope->optional("factor", 1.0); }) ==
        "[config] cfg.json: field 'rope.factor' must be a number, got a string");
  CHECK_FALSE(f.object("none"));
  CHECK(error_of([&] { f.object("list"); }) == "[config] cfg.json: field 'list' must be an object, got an array");
  CHECK(error_of([&] { JsonFields(j["list"], "data", "loader state"); }) ==
        "[data] loader state: expected a JSON object, got an array");
  CHECK(error_of([&] { JsonFields(j, "train", "").required<bool>("n"); }) == "[train] field 'n' must be a boolean, got 3");
}

TEST_CASE("json: equality") {
  CHECK(json_equal(parse_json(R"({"a": 1, "b": [true, null]})"), parse_json(R"({"b": [true, null], "a": 1.0})")));
  CHECK_FALSE(json_equal(parse_json(R"({"a": 1})"), parse_json(R"({"a": 2})")));
  CHECK_FALSE(json_equal(parse_json(R"({"a": 1})"), parse_json(R"({"b": 1})")));
  CHECK_FALSE(json_equal(parse_json(R"({"a": 1})"), parse_json(R"({"a": 1, "b": 1})")));
  CHECK_FALSE(json_equal(parse_json("[1, 2]"), parse_json("[2, 1]")));
  CHECK_FALSE(json_equal(parse_json("\"1\""), parse_json("1")));
  CHECK_FALSE(json_equal(parse_json("null"), parse_json("false")));
  CHECK(json_equal(parse_json("-1"), Json(int64_t(-1))));
  CHECK(json_equal(parse_json("5"), Json(int64_t(5))));  // uint64 and int64 of one value
}

TEST_CASE("json: read_json_file names the file") {
  std::string dir = (std::filesystem::temp_directory_path() / "cotan-json-XXXXXX").string();
  REQUIRE(mkdtemp(dir.data()) != nullptr);
  const std::string path = dir + "/config.json";
  {
    std::ofstream out(path);
    out << "{\n  \"hidden_size\": 64,\n  \"eps\": 1e-5,,\n}\n";
  }
  CHECK(error_of([&] { read_json_file(path); }) ==
        "[json] " + path + ": line 3, column 15: syntax error while parsing object key - unexpected ','; expected string literal");
  {
    std::ofstream out(path);
    out << "{\"hidden_size\": 64}";
  }
  CHECK(as_int(member(read_json_file(path), "hidden_size")) == 64);
  CHECK(error_of([&] { read_json_file(dir + "/absent.json"); }) == "[json] " + dir + "/absent.json: cannot open the file");
  std::filesystem::remove_all(dir);
}
