// Recipes: TOML files that set the options of `cotan distill` and `cotan plan` (docs/recipes.md).
// Each key is an option's long name without its dashes, and its value a string, an integer, a
// float, a boolean (a switch: true gives it, false leaves it out) or an array of strings (joined
// with commas):
//   student = "qwen1.5-0.5b"
//   seq-len = 2048
//   lr = 1e-3
//   attention = ["softmax", "sink"]
// Tables are not read: a recipe is one flat list of options, its comments say what it is for.
// The built-in recipes (examples/recipes/*.toml, compiled in) are found by name, anything else is
// a file.
// Which keys exist is the command's business: this layer reads and writes the file.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace cotan::study {

struct RecipeEntry {
  std::string key;
  std::string value;  // as an option's argument: "2048", "1e-3", "softmax,sink"; "" for a switch
  bool is_switch = false;  // a boolean: `value` is empty, and `enabled` says whether it is given
  bool enabled = true;
  int64_t line = 0;        // in the file, for errors
};

struct Recipe {
  std::string source;  // the file, or "recipe 'tiny'" for a built-in one
  std::vector<RecipeEntry> entries;  // in the file's order

  // "<source> line 12: " for errors about an entry.
  std::string where(const RecipeEntry& entry) const;
};

// A built-in recipe's name, a .toml file, or a run directory holding recipe.toml. Errors name the
// file and the line: "[recipe] a.toml line 4: the value of 'steps' is a table; expected a string,
// number, boolean or array of strings".
Recipe load_recipe(const std::string& name_or_path);
Recipe parse_recipe(std::string_view text, const std::string& source);

// The names of the compiled-in recipes, and one's text (empty when there is none).
std::vector<std::string> builtin_recipe_names();
std::string_view builtin_recipe(std::string_view name);

// A resolved recipe, written back as TOML: every option's final value, in the command's order,
// so that `--recipe <run dir>/recipe.toml` runs the same job.
using RecipeValue = std::variant<std::string, int64_t, double, bool>;
struct ResolvedOption {
  std::string key;
  RecipeValue value;
};
// `header` goes first as comment lines. Doubles are written so that they read back bit for bit.
std::string format_recipe(const std::vector<ResolvedOption>& options, std::string_view header);

}  // namespace cotan::study
