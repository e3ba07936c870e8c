// Recipe files (study/recipe.hpp): the value types, the errors, the built-in recipes, and the
// resolved recipe's text reading back to the same values.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <string>

#include "study/recipe.hpp"
#include "util/error.hpp"

using namespace cotan;
using namespace cotan::study;

namespace {

const RecipeEntry& entry(const Recipe& r, const std::string& key) {
  for (const RecipeEntry& e : r.entries)
    if (e.key == key) return e;
  FAIL("no key ", key);
  throw 0;
}

std::string error_of(const std::string& text) {
  try {
    parse_recipe(text, "r.toml");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("a recipe's values become option arguments, in the file's order") {
  const Recipe r = parse_recipe(
      "# comment\nsteps = 9000\nlr = 1e-3\nstudent = \"qwen1.5-0.5b\"\ncomposed = true\naligned-windows = false\n"
      "attention = [\"softmax\", \"sink\"]\nweight-decay = 0.1\n",
      "r.toml");
  REQUIRE(r.entries.size() == 7);
  CHECK(r.entries[0].key == "steps");
  CHECK(r.entries[0].value == "9000");
  CHECK(r.entries[0].line == 2);
  CHECK(entry(r, "lr").value == "0.001");
  CHECK(entry(r, "student").value == "qwen1.5-0.5b");
  CHECK(entry(r, "composed").is_switch);
  CHECK(entry(r, "composed").enabled);
  CHECK_FALSE(entry(r, "aligned-windows").enabled);
  CHECK(entry(r, "attention").value == "softmax,sink");
  CHECK(entry(r, "weight-decay").value == "0.1");
  CHECK(r.entries.back().key == "weight-decay");
  CHECK(r.where(entry(r, "lr")) == "r.toml line 3: ");
}

TEST_CASE("a recipe's errors name the file, the line and the key") {
  CHECK(error_of("steps = [\n") .find("[recipe] r.toml line ") == 0);
  CHECK(error_of("a = 1\n[train]\nsteps = 3\n").find("r.toml line 2: the value of 'train' is a table") != std::string::npos);
  CHECK(error_of("attention = [\"softmax\", 3]\n").find("'attention' must be an array of strings") != std::string::npos);
  CHECK(error_of("attention = []\n").find("'attention' is an empty array") != std::string::npos);
  CHECK(error_of("when = 1979-05-27\n").find("is a date or time") != std::string::npos);
  CHECK(error_of("steps = 1\nsteps = 2\n").find("r.toml line 2") != std::string::npos);
  CHECK_THROWS_WITH_AS(load_recipe("no-such-recipe"), doctest::Contains("no recipe 'no-such-recipe'"), Error);
  CHECK_THROWS_WITH_AS(load_recipe("/nonexistent/r.toml"), doctest::Contains("/nonexistent/r.toml: no such file"), Error);
}

TEST_CASE("the built-in recipes parse, and the paper's pairs hold the paper's settings") {
  const auto names = builtin_recipe_names();
  CHECK(names.size() == 5);
  for (const std::string& name : names) {
    CAPTURE(name);
    const Recipe r = load_recipe(name);
    CHECK(r.source == "recipe '" + name + "'");
    CHECK_FALSE(r.entries.empty());
  }
  for (const char* name : {"qwen1.5-0.5b-from-1.8b", "llama3.2-1b-from-3b", "llama3.2-3b-from-3.1-8b"}) {
    CAPTURE(name);
    const Recipe r = load_recipe(name);
    CHECK(entry(r, "seq-len").value == "2048");
    CHECK(std::stoll(entry(r, "batch-size").value) * std::stoll(entry(r, "grad-accum").value) == 1024);
    CHECK(entry(r, "steps").value == "9000");
    CHECK(entry(r, "lr").value == "0.001");
    CHECK(entry(r, "warmup").value == "100");
    CHECK(entry(r, "rho").value == "0.9");
    CHECK(entry(r, "loss").value == "fkl");
  }
  CHECK(entry(load_recipe("small"), "attention").value == "softmax,sink,affine");
}

TEST_CASE("a resolved recipe reads back to the same values, doubles bit for bit") {
  const double awkward[] = {0.1 + 0.2, 3e-3, 1.0 / 3.0, 1e-300, 2.0, 123456789.125, 5e-324};
  std::vector<ResolvedOption> options;
  for (size_t i = 0; i < std::size(awkward); ++i) options.push_back({"x" + std::to_string(i), awkward[i]});
  options.push_back({"name", std::string("it's \"quoted\" \\ and ünïcode")});
  options.push_back({"steps", int64_t(9000)});
  options.push_back({"composed", true});
  options.push_back({"quick", false});
  const std::string text = format_recipe(options, "line one\n\nline three");
  CHECK(text.rfind("# line one\n#\n# line three\n", 0) == 0);
  const Recipe r = parse_recipe(text, "resolved.toml");
  REQUIRE(r.entries.size() == options.size());
  for (size_t i = 0; i < std::size(awkward); ++i) {
    const double back = std::strtod(r.entries[i].value.c_str(), nullptr);
    CHECK(std::memcmp(&back, &awkward[i], sizeof back) == 0);
  }
  CHECK(entry(r, "x4").value == "2");  // written as the float 2.0, handed to the option as "2"
  CHECK(text.find("x4 = 2.0\n") != std::string::npos);
  CHECK(entry(r, "name").value == "it's \"quoted\" \\ and ünïcode");
  CHECK(entry(r, "steps").value == "9000");
  CHECK(entry(r, "composed").enabled);
  CHECK_FALSE(entry(r, "quick").enabled);
}
