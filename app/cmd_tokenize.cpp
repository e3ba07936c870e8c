// `cotan tokenize INPUT... --out DIR [--shard-tokens N] [--val-fraction F] [--seed S]`: reads text
// corpora (files or directories, see train/data.hpp), splits their documents into training and
// validation sets and writes byte-level token shards DIR/train-00000.tok, ... and
// DIR/val-00000.tok, ..., each document followed by the end-of-document token. With one input,
// the shards hold exactly the tokens `--data INPUT` gives with the same fraction and seed.
#include <boost/program_options.hpp>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <span>
#include <string>
#include <vector>

#include "app/commands.hpp"
#include "app/options.hpp"
#include "tensor/error.hpp"
#include "train/data.hpp"

namespace po = boost::program_options;
namespace fs = std::filesystem;

namespace cotan::app {
namespace {

std::string shard_name(const std::string& split, size_t index) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%s-%05zu.tok", split.c_str(), index);
  return buf;
}

// Writes tokens as shards of at most shard_tokens each; returns how many were written.
size_t write_split(const fs::path& dir, const std::string& split, const std::vector<int32_t>& tokens,
                   uint64_t shard_tokens) {
  size_t shards = 0;
  const std::span<const int32_t> all(tokens);
  for (uint64_t begin = 0; begin < tokens.size(); begin += shard_tokens, ++shards) {
    const uint64_t n = std::min<uint64_t>(shard_tokens, tokens.size() - begin);
    train::write_token_shard((dir / shard_name(split, shards)).string(), all.subspan(begin, n));
  }
  return shards;
}

void report(const std::string& split, size_t documents, size_t tokens, size_t shards, const fs::path& dir) {
  std::cout << split << ": " << documents << " documents, " << tokens << " tokens";
  if (shards == 0) {
    std::cout << ", no shards\n";
  } else {
    std::cout << " -> " << (dir / shard_name(split, 0)).string();
    if (shards > 1) std::cout << " ... " << shard_name(split, shards - 1);
    std::cout << " (" << shards << (shards == 1 ? " shard" : " shards") << ")\n";
  }
}

}  // namespace

int cmd_tokenize(const Args& args) {
  po::options_description options("cotan tokenize INPUT... --out DIR [options]");
  options.add_options()
      ("help,h", "print this help")
      ("out", po::value<std::string>(), "output directory for train-*.tok and val-*.tok (created)")
      ("shard-tokens", po::value<int64_t>()->default_value(100'000'000), "tokens per shard at most")
      ("val-fraction", po::value<double>()->default_value(0.05, "0.05"), "fraction of documents for validation")
      ("seed", po::value<std::string>()->default_value("0"), "seed of the train/validation split, in [0, 2^64)");
  add_threads_option(options);
  po::options_description hidden;
  hidden.add_options()("input", po::value<std::vector<std::string>>(), "text files or directories");
  po::options_description all;
  all.add(options).add(hidden);
  po::positional_options_description positional;
  positional.add("input", -1);
  po::variables_map vm;
  po::store(po::command_line_parser(args).options(all).positional(positional).run(), vm);
  po::notify(vm);
  apply_threads_option(vm);
  if (vm.count("help")) {
    std::cout << options << "\n";
    return 0;
  }
  if (!vm.count("input")) fail("tokenize", "no input: name one or more text files or directories");
  if (!vm.count("out")) fail("tokenize", "--out DIR is required");
  const int64_t shard_tokens = vm["shard-tokens"].as<int64_t>();
  check_integer("shard-tokens", shard_tokens, 1);
  const double val_fraction = vm["val-fraction"].as<double>();
  check_number("val-fraction", val_fraction, 0, 1);
  const uint64_t seed = parse_u64_option("seed", vm["seed"].as<std::string>());

  const fs::path out = vm["out"].as<std::string>();
  std::error_code ec;
  if (fs::is_directory(out, ec)) {
    for (const fs::directory_entry& e : fs::directory_iterator(out)) {
      const std::string name = e.path().filename().string();
      if (name.ends_with(".tok"))
        fail("tokenize", out.string(), " already holds token shards (", name, "); remove them or choose another --out");
    }
  }

  std::vector<std::string> documents;
  size_t bytes = 0;
  const auto& inputs = vm["input"].as<std::vector<std::string>>();
  for (const std::string& input : inputs) {
    std::vector<std::string> docs = train::read_documents(input);
    for (std::string& d : docs) {
      bytes += d.size();
      documents.push_back(std::move(d));
    }
  }
  std::cout << "read " << documents.size() << " documents (" << bytes << " bytes) from " << inputs.size()
            << (inputs.size() == 1 ? " input\n" : " inputs\n");

  const train::DocumentSplit split = train::split_train_val(
      std::move(documents), val_fraction, seed);
  fs::create_directories(out, ec);
  if (ec) fail("tokenize", "cannot create ", out.string(), ": ", ec.message());
  const std::vector<int32_t> train_tokens = train::encode_documents(split.train);
  const std::vector<int32_t> val_tokens = train::encode_documents(split.val);
  report("train", split.train.size(), train_tokens.size(), write_split(out, "train", train_tokens, uint64_t(shard_tokens)), out);
  report("val", split.val.size(), val_tokens.size(), write_split(out, "val", val_tokens, uint64_t(shard_tokens)), out);
  return 0;
}

}  // namespace cotan::app
