// `cotan <command> [args]`: dispatches to the commands in app/commands.hpp. Every error ends up
// here and is printed as one line, "cotan: <message>", with exit status 1; a command line that
// names no known command exits with 2; a run stopped by Ctrl-C (after writing its checkpoint)
// exits with 130.
#include <algorithm>
#include <cstdio>
#include <exception>
#include <iostream>
#include <string>
#include <string_view>

#include "app/commands.hpp"
#include "cotan_config.h"

namespace {

using cotan::app::Args;

struct Command {
  std::string_view name;
  int (*run)(const Args&);
  std::string_view summary;
};

constexpr Command commands[] = {
    {"info", cotan::app::cmd_info, "build configuration, libraries, CPU threads and CUDA devices"},
    {"gradcheck", cotan::app::cmd_gradcheck, "numerical gradient checks of the engine's ops"},
    {"distill", cotan::app::cmd_distill, "the study: a teacher, one student per attention kind, a comparison"},
    {"plan", cotan::app::cmd_plan, "the memory per GPU and the time of a distillation recipe, before it runs"},
    {"pretrain", cotan::app::cmd_pretrain, "train a model (a teacher) with cross-entropy"},
    {"generate", cotan::app::cmd_generate, "text from a model directory, with a KV cache"},
    {"eval", cotan::app::cmd_eval, "perplexity and zero-shot accuracy of a model directory (Table 1)"},
    {"plot", cotan::app::cmd_plot, "a study's figures drawn again from their CSVs, with matplotlib"},
    {"params", cotan::app::cmd_params, "parameter count of a config and its attention kind's overhead"},
    {"tokenize", cotan::app::cmd_tokenize, "corpora (text, JSONL, .gz, .zst) to token shards, with an HF tokenizer.json or bytes"},
    {"teacher-logits", cotan::app::cmd_teacher_logits, "a teacher's top-k log-probabilities over token shards, for distill --teacher-logits"},
    {"bench", cotan::app::cmd_bench, "benchmarks:"},  // their names follow, from app/cmd_bench.cpp
};

void print_help(std::ostream& out) {
  out << "usage: cotan <command> [args]\n"
         "\n"
         "commands:\n";
  size_t width = 12;  // the longest name and two spaces
  for (const Command& c : commands) width = std::max(width, c.name.size() + 2);
  for (const Command& c : commands) {
    out << "  " << c.name << std::string(width - c.name.size(), ' ') << c.summary;
    if (c.name == "bench") out << " " << cotan::app::bench_names();
    out << "\n";
  }
  out << "  help" << std::string(width - 4, ' ') << "this message (also --help, -h)\n"
      << "  --version" << std::string(width - 9, ' ') << "print the version\n"
         "\n"
         "'cotan <command> --help' lists the options of a command.\n";
}

int run(int argc, char** argv) {
  if (argc < 2) {
    print_help(std::cerr);
    return 2;
  }
  const std::string_view name = argv[1];
  if (name == "help" || name == "--help" || name == "-h") {
    print_help(std::cout);
    return 0;
  }
  if (name == "--version" || name == "version") {
    std::cout << "cotan " << COTAN_VERSION << "\n";
    return 0;
  }
  for (const Command& c : commands) {
    if (c.name == name) return c.run(Args(argv + 2, argv + argc));
  }
  std::cerr << "cotan: unknown command '" << name << "' (try cotan --help)\n";
  return 2;
}

// The message on one line, whatever it holds.
void print_error(std::string_view message) {
  std::string line(message);
  for (char& c : line)
    if (c == '\n' || c == '\r') c = ' ';
  std::cerr << "cotan: " << line << "\n";
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    print_error(e.what());
  } catch (...) {
    print_error("unknown error");
  }
  return 1;
}
