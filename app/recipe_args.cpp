#include "app/recipe_args.hpp"

#include <algorithm>
#include <cctype>

#include "util/error.hpp"

namespace cotan::app {

namespace {

const std::set<std::string> kRecipeOptions = {"recipe", "set", "help"};

bool is_switch(const po::option_description& o) { return o.semantic()->max_tokens() == 0; }

// The edit distance between two short names, for "did you mean".
size_t distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

std::string suggestion(const std::string& key, const po::options_description& opts, const std::set<std::string>& not_allowed) {
  std::string best;
  size_t best_d = 3;  // at most two edits away
  for (const auto& o : opts.options()) {
    const std::string& name = o->long_name();
    if (name.empty() || not_allowed.count(name) || kRecipeOptions.count(name)) continue;
    const size_t d = distance(key, name);
    if (d < best_d) best_d = d, best = name;
  }
  return best.empty() ? "" : cat(" (did you mean '", best, "'?)");
}

const po::option_description& recipe_option(const std::string& key, const po::options_description& opts,
                                            const std::set<std::string>& not_in_recipes, const std::string& where,
                                            const std::string& command) {
  const po::option_description* o = opts.find_nothrow(key, false, false, false);
  if (!o || o->long_name() != key || kRecipeOptions.count(key))
    fail("recipe", where, "unknown key '", key, "': not an option of cotan ", command, suggestion(key, opts, not_in_recipes));
  if (not_in_recipes.count(key))
    fail("recipe", where, "'", key, "' cannot be set by a recipe: give --", key, " on the command line");
  return *o;
}

}  // namespace

void add_recipe_options(po::options_description& opts) {
  opts.add_options()("recipe", po::value<std::string>()->value_name("NAME|FILE"),
                     "read options from a recipe: a built-in one (tiny, small, the paper's pairs), a .toml file, or a "
                     "run directory's recipe.toml (replays that run)")(
      "set", po::value<std::vector<std::string>>()->composing()->value_name("KEY=VALUE"),
      "override one of the recipe's options (repeatable); options on the command line override both");
}

RecipeArgs expand_recipe(const Args& args, const po::options_description& opts, const std::set<std::string>& not_in_recipes,
                         const std::string& command) {
  RecipeArgs out;
  const po::parsed_options parsed = po::command_line_parser(args).options(opts).run();
  std::set<std::string> given;
  std::string recipe_name;
  std::vector<std::string> sets;  // as given: "steps=100"
  Args rest;
  for (const po::option& o : parsed.options) {
    if (o.string_key == "recipe") {
      if (!recipe_name.empty()) fail("option", "--recipe is given twice");
      recipe_name = o.value.empty() ? "" : o.value.front();
    } else if (o.string_key == "set") {
      sets.insert(sets.end(), o.value.begin(), o.value.end());
    } else {
      given.insert(o.string_key);
      rest.insert(rest.end(), o.original_tokens.begin(), o.original_tokens.end());
    }
  }
  if (recipe_name.empty() && !sets.empty()) fail("option", "--set ", sets.front(), " needs --recipe");
  if (recipe_name.empty()) {
    out.args = args;
    return out;
  }
  out.recipe = study::load_recipe(recipe_name);
  // One entry per key, in the recipe's order, then --set's; a later value replaces an earlier one.
  auto put = [&](RecipeArgs::Origin origin) {
    auto it = std::find_if(out.origins_.begin(), out.origins_.end(), [&](const auto& x) { return x.key == origin.key; });
    if (it != out.origins_.end()) *it = std::move(origin);
    else out.origins_.push_back(std::move(origin));
  };
  // The option's words: a switch is given (true) or left out (false).
  auto words = [](const std::string& key, bool is_switch, const std::string& value) {
    if (is_switch) return value == "true" ? Args{"--" + key} : Args{};
    return Args{"--" + key, value};
  };
  for (const study::RecipeEntry& e : out.recipe->entries) {
    const std::string where = out.recipe->where(e);
    const po::option_description& o = recipe_option(e.key, opts, not_in_recipes, where, command);
    if (is_switch(o) != e.is_switch)
      fail("recipe", where, "'", e.key, "' ", is_switch(o) ? "is a switch: expected true or false" : "expects a value, not a boolean");
    const std::string value = e.is_switch ? (e.enabled ? "true" : "false") : e.value;
    put({e.key, value, cat("in ", out.recipe->source, " line ", e.line), words(e.key, e.is_switch, value)});
  }
  for (const std::string& s : sets) {
    const size_t eq = s.find('=');
    if (eq == std::string::npos || eq == 0) fail("option", "--set ", s, ": expected KEY=VALUE");
    const std::string key = s.substr(0, eq), value = s.substr(eq + 1);
    const po::option_description& o = recipe_option(key, opts, not_in_recipes, cat("--set ", s, ": "), command);
    if (is_switch(o) && value != "true" && value != "false")
      fail("option", "--set ", s, ": '", key, "' is a switch: expected true or false");
    put({key, value, cat("from --set ", s), words(key, is_switch(o), value)});
  }
  // The command line's options win: theirs are dropped from the recipe's.
  std::erase_if(out.origins_, [&](const RecipeArgs::Origin& o) { return given.count(o.key) > 0; });
  for (const RecipeArgs::Origin& o : out.origins_) out.args.insert(out.args.end(), o.words.begin(), o.words.end());
  out.args.insert(out.args.end(), rest.begin(), rest.end());
  return out;
}

void RecipeArgs::rethrow(const std::exception& e) const {
  std::string what = e.what();
  for (const Origin& o : origins_) {
    // Boost names the option as "--steps" or "'--steps'"; cotan's checks as "--steps ".
    const std::string dashed = "--" + o.key;
    const size_t at = what.find(dashed);
    if (at == std::string::npos) continue;
    const size_t after = at + dashed.size();
    if (after < what.size() && (std::isalnum(static_cast<unsigned char>(what[after])) || what[after] == '-')) continue;
    if (!what.starts_with("[")) what = "[option] " + what;
    throw Error(cat(what, " (", o.key, " = ", o.value, " ", o.where, ")"));
  }
  if (dynamic_cast<const Error*>(&e)) throw Error(what);
  throw Error(what.starts_with("[") ? what : "[option] " + what);
}

std::string resolved_recipe(const po::variables_map& vm, const po::options_description& opts,
                            const std::set<std::string>& excluded, const std::string& header) {
  std::vector<study::ResolvedOption> out;
  for (const auto& o : opts.options()) {
    const std::string& key = o->long_name();
    if (key.empty() || excluded.count(key) || kRecipeOptions.count(key)) continue;
    if (is_switch(*o)) {
      bool on = vm.count(key) > 0;
      if (on) {
        if (const auto* b = boost::any_cast<bool>(&vm[key].value())) on = *b;  // bool_switch: always present
      }
      out.push_back({key, on});
      continue;
    }
    if (!vm.count(key)) continue;  // not given and without a default: the command's default
    const boost::any& v = vm[key].value();
    if (const auto* s = boost::any_cast<std::string>(&v)) out.push_back({key, *s});
    else if (const auto* i = boost::any_cast<int64_t>(&v)) out.push_back({key, *i});
    else if (const auto* n = boost::any_cast<int>(&v)) out.push_back({key, int64_t(*n)});
    else if (const auto* d = boost::any_cast<double>(&v)) out.push_back({key, *d});
    else fail("recipe", "option --", key, " has a type recipes cannot hold");
  }
  return study::format_recipe(out, header);
}

}  // namespace cotan::app
