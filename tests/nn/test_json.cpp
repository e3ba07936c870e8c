// JSON values: parsing (kinds, escapes, UTF-8, errors with line and column), writing, access.
#include "nn/json.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>

using namespace cotan;

namespace {

template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

std::string parse_error(std::string_view text) {
  return error_of([&] { Json::parse(text); });
}

}  // namespace

TEST_CASE("json: scalars and their kinds") {
  CHECK(Json::parse("null").is_null());
  CHECK(Json::parse("true").as_bool());
  CHECK_FALSE(Json::parse(" false ").as_bool());
  CHECK(Json::parse("42").is_int());
  CHECK(Json::parse("42").as_int() == 42);
  CHECK(Json::parse("-9223372036854775808").as_int() == INT64_MIN);
  CHECK(Json::parse("42").as_double() == 42.0);
  CHECK(Json::parse("4.5").kind() == Json::Kind::number);
  CHECK(Json::parse("-0.25e2").as_double() == -25.0);
  CHECK(Json::parse("1E3").as_double() == 1000.0);
  CHECK(Json::parse("1e-5").as_double() == 1e-5);
  CHECK(Json::parse("0.1").as_double() == 0.1);
  // Integers past int64 become doubles; underflow becomes zero.
  CHECK(Json::parse("9223372036854775808").kind() == Json::Kind::number);
  CHECK(Json::parse("9223372036854775808").as_double() == 9223372036854775808.0);
  CHECK(Json::parse("1e-400").as_double() == 0.0);
  CHECK(std::signbit(Json::parse("-1e-400").as_double()));
  CHECK(Json::parse("0.0000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000"
                    "0000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000"
                    "0000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000"
                    "0000000000000000000000000000000000000000000000000000000000001")
            .as_double() == 0.0);
  CHECK(parse_error("1e400") == "[json] line 1, column 1: number 1e400 is too large for a double");
  CHECK(std::isnan(Json::parse("NaN").as_double()));
  CHECK(Json::parse("-Infinity").as_double() == -std::numeric_limits<double>::infinity());
  Json::ParseOptions strict;
  strict.allow_nonfinite = false;
  CHECK(error_of([&] { Json::parse("[1, Infinity]", strict); }) ==
        "[json] line 1, column 5: NaN and Infinity are not allowed here");
}

TEST_CASE("json: strings, escapes and UTF-8") {
  CHECK(Json::parse(R"("a\"b\\c\/d\b\f\n\r\t")").as_string() == "a\"b\\c/d\b\f\n\r\t");
  CHECK(Json::parse(R"("\u00e9\u4e2d\ud83d\ude00")").as_string() == "\u00e9\u4e2d\U0001F600");
  CHECK(Json::parse("\"caf\xc3\xa9 \xf0\x9f\x98\x80\"").as_string() == "caf\xc3\xa9 \xf0\x9f\x98\x80");
  CHECK(Json::parse(R"("\u0000")").as_string() == std::string(1, '\0'));
  CHECK(parse_error("\"\\ud800\"") == "[json] line 1, column 2: unpaired surrogate in a \\u escape");
  CHECK(parse_error("\"\\udc00\"") == "[json] line 1, column 2: unpaired surrogate in a \\u escape");
  CHECK(parse_error("\"\\u12g4\"") == "[json] line 1, column 6: expected 4 hex digits after \\u, got character 'g'");
  CHECK(parse_error("\"\\x\"") == "[json] line 1, column 3: invalid escape \\x in a string");
  CHECK(parse_error("\"a\nb\"") == "[json] line 1, column 3: control byte 0xa in a string (escape it)");
  CHECK(parse_error("\"abc") == "[json] line 1, column 5: unterminated string");
  CHECK(parse_error("\"\xc3\x28\"") == "[json] line 1, column 2: invalid UTF-8 byte 0xc3 in a string");
  CHECK(parse_error("\"\xed\xa0\x80\"") == "[json] line 1, column 2: invalid UTF-8 byte 0xed in a string");  // surrogate
  CHECK(parse_error("\"\xc0\xaf\"") == "[json] line 1, column 2: invalid UTF-8 byte 0xc0 in a string");  // overlong
}

TEST_CASE("json: arrays and objects keep their order") {
  Json v = Json::parse(R"( {"b": [1, 2.5, "x", null, [], {}], "a": {"nested": true}} )");
  REQUIRE(v.is_object());
  CHECK(v.size() == 2);
  CHECK(v.as_object()[0].first == "b");
  CHECK(v.as_object()[1].first == "a");
  CHECK(v.at("b").size() == 6);
  CHECK(v.at("b").at(0).as_int() == 1);
  CHECK(v.at("b").at(2).as_string() == "x");
  CHECK(v.at("b").at(4).as_array().empty());
  CHECK(v.at("a").at("nested").as_bool());
  CHECK(v.contains("a"));
  CHECK_FALSE(v.contains("c"));
  CHECK(v.find("c") == nullptr);
  CHECK(v.dump() == R"({"b":[1,2.5,"x",null,[],{}],"a":{"nested":true}})");
}

TEST_CASE("json: errors give line and column") {
  CHECK(parse_error("") == "[json] line 1, column 1: unexpected end of input, expected a value");
  CHECK(parse_error("{\n  \"a\": 1,\n  \"b\" 2\n}") ==
        "[json] line 3, column 7: expected ':' after an object key, got character '2'");
  CHECK(parse_error("[1, 2") == "[json] line 1, column 6: expected ',' or ']' after an array element, got end of input");
  CHECK(parse_error("[1,]") == "[json] line 1, column 4: unexpected character ']'");
  CHECK(parse_error("{\"a\":1,}") == "[json] line 1, column 8: expected a string key, got character '}'");
  CHECK(parse_error("{\"a\":1 \"b\":2}") ==
        "[json] line 1, column 8: expected ',' or '}' after an object member, got character '\"'");
  CHECK(parse_error("{'a': 1}") == "[json] line 1, column 2: expected a string key, got character '''");
  CHECK(parse_error("tru") == "[json] line 1, column 1: unexpected character 't'");
  CHECK(parse_error("1 2") == "[json] line 1, column 3: unexpected character '2' after the JSON value");
  CHECK(parse_error("01") == "[json] line 1, column 1: leading zero in a number");
  CHECK(parse_error("1.") == "[json] line 1, column 3: expected a digit after the decimal point, got end of input");
  CHECK(parse_error("-") == "[json] line 1, column 2: expected a digit, got end of input");
  CHECK(parse_error("1e+") == "[json] line 1, column 4: expected a digit in the exponent, got end of input");
  CHECK(parse_error("\x01") == "[json] line 1, column 1: unexpected byte 0x1");
  // Columns count characters, not bytes.
  CHECK(parse_error("[\"\xc3\xa9\xc3\xa9\", x]") == "[json] line 1, column 8: unexpected character 'x'");

  try {
    Json::parse("[\n\n   }");
    FAIL("no error");
  } catch (const JsonParseError& e) {
    CHECK(e.line() == 3);
    CHECK(e.column() == 4);
    CHECK(e.offset() == 6);
    CHECK(e.reason() == "unexpected character '}'");
  }
}

TEST_CASE("json: duplicate keys and nesting depth") {
  CHECK(parse_error("{\"a\": 1,\n \"a\": 2}") == "[json] line 2, column 2: duplicate key 'a'");
  Json::ParseOptions lenient;
  lenient.allow_duplicate_keys = true;
  Json v = Json::parse(R"({"a": 1, "a": 2})", lenient);
  CHECK(v.size() == 2);
  CHECK(v.at("a").as_int() == 1);  // the first one

  std::string deep(600, '[');
  CHECK(parse_error(deep) == "[json] line 1, column 513: nesting deeper than 512 levels");
  std::string ok = std::string(100, '[') + std::string(100, ']');
  CHECK(Json::parse(ok).is_array());
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
  CHECK(row.dump() ==
        R"({"step":10,"lr":0.001,"loss":2.5,"name":"run \"1\"","ok":true,"none":null,"ids":[1,-2],"nested":{"x":7}})");
  CHECK(Json::parse(row.dump()) == row);
  CHECK(row.dump(2) == "{\n  \"step\": 10,\n  \"lr\": 0.001,\n  \"loss\": 2.5,\n  \"name\": \"run \\\"1\\\"\",\n"
                       "  \"ok\": true,\n  \"none\": null,\n  \"ids\": [\n    1,\n    -2\n  ],\n"
                       "  \"nested\": {\n    \"x\": 7\n  }\n}");
  CHECK(Json::parse(row.dump(4)) == row);
  CHECK(Json::object().dump(2) == "{}");
  CHECK(Json::array().dump(2) == "[]");
  CHECK(error_of([] { Json(uint64_t(1) << 63); }) == "[json] integer 9223372036854775808 does not fit in an int64");
}

TEST_CASE("json: doubles are written as the shortest text that reads back exactly") {
  for (double x : {0.1, 1.0 / 3.0, 1e300, -2.5e-308, 4.9e-324, 123456789.0, 1.0, -0.0, 1e22}) {
    Json back = Json::parse(Json(x).dump());
    CHECK(back.kind() == Json::Kind::number);
    CHECK(std::bit_cast<uint64_t>(back.as_double()) == std::bit_cast<uint64_t>(x));
  }
  CHECK(Json(1.0).dump() == "1.0");
  CHECK(Json(0.1).dump() == "0.1");
  CHECK(Json(1e22).dump() == "1e+22");
  CHECK(Json(std::nan("")).dump() == "NaN");
  CHECK(Json(-std::numeric_limits<double>::infinity()).dump() == "-Infinity");
}

TEST_CASE("json: strings are escaped on the way out") {
  CHECK(Json(std::string("a\"\\\n\t\x01\x1f\x7f/")).dump() == "\"a\\\"\\\\\\n\\t\\u0001\\u001f\x7f/\"");
  CHECK(Json("\xc3\xa9").dump() == "\"\xc3\xa9\"");
  CHECK(error_of([] { Json("ab\xff").dump(); }) ==
        "[json] cannot write a string that is not valid UTF-8 (byte 2 of \"ab\xff\")");
  std::string all;
  for (int c = 1; c < 128; ++c) all += char(c);
  all += "\xf4\x8f\xbf\xbf";  // U+10FFFF
  CHECK(Json::parse(Json(all).dump()).as_string() == all);
}

TEST_CASE("json: typed access and lookups report what they found") {
  Json v = Json::parse(R"({"n": 3, "s": "x", "f": 1.5, "a": [1]})");
  CHECK(error_of([&] { v.at("s").as_int(); }) == "[json] expected an integer, got a string");
  CHECK(error_of([&] { v.at("f").as_int(); }) == "[json] expected an integer, got a number");
  CHECK(error_of([&] { v.at("n").as_string(); }) == "[json] expected a string, got an integer");
  CHECK(error_of([&] { v.at("missing"); }) == "[json] no key 'missing'");
  CHECK(error_of([&] { v.at("a").at(3); }) == "[json] index 3 is out of range for an array of 1");
  CHECK(error_of([&] { v.at("n").size(); }) == "[json] expected an array or an object, got an integer");
  CHECK(v.at("f").as_double() == 1.5);
  CHECK(v.at("n").as_double() == 3.0);
}

TEST_CASE("json: equality") {
  CHECK(Json::parse(R"({"a": 1, "b": [true, null]})") == Json::parse(R"({"b": [true, null], "a": 1.0})"));
  CHECK_FALSE(Json::parse(R"({"a": 1})") == Json::parse(R"({"a": 2})"));
  CHECK_FALSE(Json::parse(R"({"a": 1})") == Json::parse(R"({"b": 1})"));
  CHECK_FALSE(Json::parse("[1, 2]") == Json::parse("[2, 1]"));
  CHECK_FALSE(Json::parse("\"1\"") == Json::parse("1"));
  CHECK_FALSE(Json::parse("null") == Json::parse("false"));
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
        "[json] " + path + ": line 3, column 15: expected a string key, got character ','");
  {
    std::ofstream out(path);
    out << "{\"hidden_size\": 64}";
  }
  CHECK(read_json_file(path).at("hidden_size").as_int() == 64);
  CHECK(error_of([&] { read_json_file(dir + "/absent.json"); }) == "[json] " + dir + "/absent.json: cannot open the file");
  std::filesystem::remove_all(dir);
}
