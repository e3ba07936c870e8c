// cotan plot RUN_DIR: draws a study's figures again from the CSVs in its run directory, with
// matplotlib (study/plot_figures.py, which the binary carries; study/figures.hpp), as PNG and
// PDF beside each CSV. --print-script writes the script to stdout, to run or edit it by hand.
#include <boost/program_options.hpp>
#include <filesystem>
#include <iostream>

#include "app/commands.hpp"
#include "app/options.hpp"
#include "study/figures.hpp"
#include "util/error.hpp"

namespace po = boost::program_options;
namespace fs = std::filesystem;

namespace cotan::app {

int cmd_plot(const Args& args) {
  std::string run_dir;
  po::options_description opts("cotan plot RUN_DIR: draw a study's figures from their CSVs, with matplotlib");
  opts.add_options()("help,h", "show this help")("run-dir", po::value(&run_dir)->value_name("DIR"),
                                                  "the study's run directory (also the first argument)")(
      "print-script", "print the plotting script (Python, matplotlib) and exit");
  po::positional_options_description positional;
  positional.add("run-dir", 1);
  po::variables_map vm;
  po::store(po::command_line_parser(args).options(opts).positional(positional).run(), vm);
  po::notify(vm);
  if (vm.count("help")) {
    std::cout << opts << "\nThe Python is $COTAN_PYTHON when set, else the first of python3 and /usr/bin/python3 that "
                         "imports matplotlib.\n";
    return 0;
  }
  if (vm.count("print-script")) {
    std::cout << study::plot_figures_script();
    return 0;
  }
  if (run_dir.empty()) fail("plot", "a run directory is required: cotan plot RUN_DIR");
  if (!fs::is_directory(run_dir)) fail("plot", run_dir, ": not a directory");
  if (!study::has_figure_data(run_dir))
    fail("plot", run_dir, " holds no figure CSVs (kd_loss.csv, alpha_<variant>.csv, ...): not a study's run directory");
  std::cout << std::flush;
  const study::FigureRendering r = study::render_figures(run_dir);
  if (!r.drawn) fail("plot", r.message);
  return 0;
}

}  // namespace cotan::app
