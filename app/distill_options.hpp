// The options of `cotan distill`, parsed into a StudyConfig with its recipe expanded: shared by
// distill, which runs the study, and plan, which sizes it (a recipe is distill's options).
#pragma once

#include <boost/program_options.hpp>
#include <functional>
#include <memory>
#include <string>

#include "app/commands.hpp"
#include "app/options.hpp"
#include "app/recipe_args.hpp"
#include "study/study.hpp"

namespace cotan::app {

// The values of distill's options that are not members of StudyConfig.
struct DistillValues {
  std::string loss_spec, attention, resume_dir, device, dtype, seed, eval_tasks, teacher_config;
  double rho = nn::AttentionConfig{}.rho;
  AffineOptions affine;
};

struct DistilledOptions {
  RecipeArgs expanded;          // the recipe's and --set's options merged under the command line's
  po::variables_map vm;
  // Bound to the option description, so they stay where they are.
  std::unique_ptr<study::StudyConfig> study;  // with its variants, command and resolved recipe
  std::unique_ptr<DistillValues> values;
  std::unique_ptr<po::options_description> opts;  // distill's options, then those of `more`
};

// Parses raw_args (with --recipe and --set) as distill's options plus those `more` adds, checks
// every value (errors about a recipe's value name its file and line), and fills the study.
// check_files: also that the device exists and the teacher and student configs load. With
// --help in the arguments only vm and opts are filled.
DistilledOptions parse_distill_options(const Args& raw_args, const std::string& command,
                                       const std::function<void(po::options_description&)>& more, bool check_files);

}  // namespace cotan::app
