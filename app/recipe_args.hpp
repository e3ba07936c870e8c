// --recipe and --set on the commands that take recipes (distill, plan): a recipe's keys are the
// command's long option names (study/recipe.hpp), so a recipe is the command line written down.
// The command line wins over --set, which wins over the recipe:
//   cotan distill --recipe small --set steps=100 --seeds 3
#pragma once

#include <boost/program_options.hpp>
#include <optional>
#include <set>
#include <string>

#include "app/commands.hpp"
#include "study/recipe.hpp"

namespace cotan::app {

namespace po = boost::program_options;

// Adds --recipe NAME|FILE|DIR and --set KEY=VALUE (repeatable) to opts.
void add_recipe_options(po::options_description& opts);

struct RecipeArgs {
  Args args;  // the recipe's and --set's options, then the command line's, without --recipe and --set
  std::optional<study::Recipe> recipe;

  // Rethrows an error about an option the recipe or --set gave with where it came from:
  // "[option] --steps 0: expected ... (steps = 0 in small.toml line 9)". Other errors pass.
  [[noreturn]] void rethrow(const std::exception& e) const;

 private:
  friend RecipeArgs expand_recipe(const Args&, const po::options_description&, const std::set<std::string>&,
                                  const std::string&);
  // An option the recipe or --set gave: its value as written, where, and its words in `args`.
  struct Origin {
    std::string key, value, where;
    Args words;
  };
  std::vector<Origin> origins_;
};

// Reads --recipe and --set from args and merges them under the command line's options. `opts`
// must hold every option of the command (and the recipe options); keys in `not_in_recipes`
// (run-dir, resume, threads...) cannot come from a recipe. Unknown keys are errors naming the key
// and the file (and the closest option when one is close).
RecipeArgs expand_recipe(const Args& args, const po::options_description& opts,
                         const std::set<std::string>& not_in_recipes, const std::string& command);

// Every option of opts with a value in vm, except `excluded`, as a recipe in opts' order: the
// resolved recipe a run writes, which `--recipe <file>` replays.
std::string resolved_recipe(const po::variables_map& vm, const po::options_description& opts,
                            const std::set<std::string>& excluded, const std::string& header);

}  // namespace cotan::app
