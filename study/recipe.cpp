#include "study/recipe.hpp"

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <toml++/toml.h>

#include "util/error.hpp"

namespace cotan::study {

namespace detail {
// recipes_embedded.cpp, generated from examples/recipes/*.toml by study/embed_recipes.py.
struct EmbeddedRecipe {
  const char* name;
  const char* text;
};
extern const EmbeddedRecipe kEmbeddedRecipes[];
extern const size_t kEmbeddedRecipeCount;
}  // namespace detail

namespace fs = std::filesystem;

namespace {

// The shortest text that reads back as the same double.
std::string exact(double v) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

int64_t line_of(const toml::node& node) { return int64_t(node.source().begin.line); }

}  // namespace

std::string Recipe::where(const RecipeEntry& entry) const { return cat(source, " line ", entry.line, ": "); }

std::vector<std::string> builtin_recipe_names() {
  std::vector<std::string> names;
  for (size_t i = 0; i < detail::kEmbeddedRecipeCount; ++i) names.emplace_back(detail::kEmbeddedRecipes[i].name);
  return names;
}

std::string_view builtin_recipe(std::string_view name) {
  for (size_t i = 0; i < detail::kEmbeddedRecipeCount; ++i)
    if (name == detail::kEmbeddedRecipes[i].name) return detail::kEmbeddedRecipes[i].text;
  return {};
}

Recipe parse_recipe(std::string_view text, const std::string& source) {
  toml::table table;
  try {
    table = toml::parse(text, source);
  } catch (const toml::parse_error& e) {
    fail("recipe", source, " line ", e.source().begin.line, ": ", e.description());
  }
  Recipe recipe;
  recipe.source = source;
  for (auto&& [key, node] : table) {
    const std::string name(key.str());
    const int64_t line = int64_t(key.source().begin.line);
    RecipeEntry entry;
    entry.key = name;
    entry.line = line;
    if (node.is_string()) {
      entry.value = *node.value<std::string>();
    } else if (node.is_integer()) {
      entry.value = cat(*node.value<int64_t>());
    } else if (node.is_floating_point()) {
      entry.value = exact(*node.value<double>());
    } else if (node.is_boolean()) {
      entry.is_switch = true;
      entry.enabled = *node.value<bool>();
    } else if (const toml::array* array = node.as_array()) {
      if (array->empty()) fail("recipe", source, " line ", line, ": '", name, "' is an empty array");
      for (const toml::node& item : *array) {
        if (!item.is_string())
          fail("recipe", source, " line ", line_of(item), ": '", name, "' must be an array of strings");
        if (!entry.value.empty()) entry.value += ',';
        entry.value += *item.value<std::string>();
      }
    } else {
      fail("recipe", source, " line ", line, ": the value of '", name, "' is a ",
           node.is_table() ? "table" : "date or time", "; expected a string, number, boolean or array of strings");
    }
    recipe.entries.push_back(std::move(entry));
  }
  std::stable_sort(recipe.entries.begin(), recipe.entries.end(),
                   [](const RecipeEntry& a, const RecipeEntry& b) { return a.line < b.line; });
  return recipe;
}

Recipe load_recipe(const std::string& name_or_path) {
  const bool path_like = name_or_path.find('/') != std::string::npos || name_or_path.ends_with(".toml");
  if (!path_like) {
    if (const std::string_view text = builtin_recipe(name_or_path); !text.empty())
      return parse_recipe(text, cat("recipe '", name_or_path, "'"));
  }
  fs::path path(name_or_path);
  std::error_code ec;
  if (fs::is_directory(path, ec)) path /= "recipe.toml";
  if (!fs::is_regular_file(path, ec)) {
    if (path_like || fs::exists(name_or_path, ec)) fail("recipe", path.string(), ": no such file");
    std::string known;
    for (const std::string& n : builtin_recipe_names()) known += (known.empty() ? "" : ", ") + n;
    fail("recipe", "no recipe '", name_or_path, "': not a file, and not one of the built-in recipes (", known, ")");
  }
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  if (!in && !in.eof()) fail("recipe", path.string(), ": cannot read the file");
  return parse_recipe(text.str(), path.string());
}

std::string format_recipe(const std::vector<ResolvedOption>& options, std::string_view header) {
  std::ostringstream out;
  std::istringstream lines{std::string(header)};
  for (std::string line; std::getline(lines, line);) out << (line.empty() ? "#" : "# " + line) << "\n";
  out << "\n";
  for (const ResolvedOption& o : options) {
    out << o.key << " = ";
    std::visit(
        [&](const auto& v) {
          using T = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<T, std::string>) {
            out << toml::value<std::string>(v);
          } else if constexpr (std::is_same_v<T, bool>) {
            out << (v ? "true" : "false");
          } else if constexpr (std::is_same_v<T, int64_t>) {
            out << v;
          } else {
            std::string text = exact(v);
            if (text.find_first_of(".eEn") == std::string::npos) text += ".0";  // a TOML float, not an integer
            out << text;
          }
        },
        o.value);
    out << "\n";
  }
  return out.str();
}

}  // namespace cotan::study
