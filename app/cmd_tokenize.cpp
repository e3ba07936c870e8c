// `cotan tokenize INPUT... --out DIR [--tokenizer PATH] [options]`: reads corpora (text files,
// JSONL files, directories; any of them .gz or .zst), splits their documents into training and
// validation sets and writes token shards DIR/train-00000.tok, ... and DIR/val-00000.tok, ...,
// each document followed by the end-of-sequence token. Without --tokenizer the ids are bytes (the
// tiny study's tokenizer); with one INPUT the shards then hold exactly the tokens `--data INPUT`
// gives with the same fraction and seed.
// `cotan tokenize --decode SHARD [--tokenizer PATH]` prints a shard's text back.
#include <unistd.h>

#include <boost/program_options.hpp>
#include <iostream>
#include <string>
#include <vector>

#include "app/commands.hpp"
#include "app/options.hpp"
#include "tensor/error.hpp"
#include "text/tokenizer.hpp"
#include "text/tokenizer_files.hpp"
#include "train/data.hpp"
#include "train/tokenize_corpus.hpp"

namespace po = boost::program_options;

namespace cotan::app {
namespace {

void report(const std::string& split, uint64_t documents, uint64_t tokens, size_t shards, const std::string& dir) {
  std::cout << split << ": " << documents << " documents, " << tokens << " tokens";
  if (shards == 0) {
    std::cout << ", no shards\n";
  } else {
    std::cout << " -> " << dir << "/" << train::shard_name(split, 0);
    if (shards > 1) std::cout << " ... " << train::shard_name(split, shards - 1);
    std::cout << " (" << shards << (shards == 1 ? " shard" : " shards") << ")\n";
  }
}

int decode_shard(const std::string& path, const std::optional<text::Tokenizer>& hf, const std::string& eos) {
  const train::TokenShard shard = train::TokenShard::open(path);
  const train::CorpusTokenizer tokenizer(hf ? &*hf : nullptr, eos);
  const train::ShardTokenizer made_by = shard.tokenizer();
  if (made_by.known() && made_by != tokenizer.identity()) {
    fail("tokenize", path, " was made with ", train::describe(made_by), ", not with ", tokenizer.name(),
         hf ? " (" + train::describe(tokenizer.identity()) + ")" : ": pass the tokenizer that made it with --tokenizer");
  }
  if (!made_by.known() && shard.max_id() >= tokenizer.vocab_size()) {
    fail("tokenize", path, " holds id ", shard.max_id(), ", outside the vocabulary of ", tokenizer.name(), " (",
         tokenizer.vocab_size(), " ids)");
  }
  // A document at a time: up to and including each end-of-sequence id.
  const std::vector<int32_t> ids = shard.to_vector();
  size_t start = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] != tokenizer.eos() && i + 1 != ids.size()) continue;
    std::cout << tokenizer.decode(std::span(ids).subspan(start, i + 1 - start));
    start = i + 1;
  }
  std::cout << std::flush;
  return 0;
}

}  // namespace

int cmd_tokenize(const Args& args) {
  po::options_description options("cotan tokenize INPUT... --out DIR [options]\n"
                                  "cotan tokenize --decode SHARD [--tokenizer PATH]\n\n"
                                  "INPUT: text files, JSONL files (*.jsonl, *.ndjson) or directories of them,\n"
                                  "each also gzip or zstd compressed (*.gz, *.zst)");
  options.add_options()
      ("help,h", "print this help")
      ("out", po::value<std::string>(), "output directory for train-*.tok and val-*.tok (created)")
      ("tokenizer", po::value<std::string>(),
       "an HF tokenizer.json, or a model directory holding one (default: the byte tokenizer)")
      ("eos", po::value<std::string>()->default_value(""),
       "the token that ends each document (default: the tokenizer's, from tokenizer_config.json)")
      ("text-field", po::value<std::string>()->default_value("text"), "the JSONL field holding each document")
      ("strict", po::bool_switch(),
       "refuse JSONL lines that are not JSON objects with a string text field, and documents that are not "
       "valid UTF-8 (without it such lines are skipped and counted, and invalid UTF-8 becomes U+FFFD)")
      ("shard-tokens", po::value<int64_t>()->default_value(100'000'000), "tokens per shard at most")
      ("val-fraction", po::value<double>()->default_value(0.05, "0.05"), "fraction of documents for validation")
      ("seed", po::value<std::string>()->default_value("0"), "seed of the train/validation split, in [0, 2^64)")
      ("decode", po::value<std::string>(), "print the text of this shard instead of tokenizing");
  po::options_description hidden;
  hidden.add_options()("input", po::value<std::vector<std::string>>(), "text files or directories");
  po::options_description all;
  all.add(options).add(hidden);
  po::positional_options_description positional;
  positional.add("input", -1);
  const po::variables_map vm = parse_options(args, all, &positional);
  if (vm.count("help")) {
    add_threads_option(options);
    std::cout << options << "\n";
    return 0;
  }
  std::optional<text::Tokenizer> hf;
  if (vm.count("tokenizer")) hf = text::load_tokenizer(vm["tokenizer"].as<std::string>());  // none: the byte tokenizer's
  const std::string eos = vm["eos"].as<std::string>();
  if (vm.count("decode")) {
    if (vm.count("input") || vm.count("out")) fail("tokenize", "--decode SHARD takes no inputs and no --out");
    return decode_shard(vm["decode"].as<std::string>(), hf, eos);
  }
  if (!vm.count("input")) fail("tokenize", "no input: name one or more text files, JSONL files or directories");
  if (!vm.count("out")) fail("tokenize", "--out DIR is required");
  check_output_dir("tokenize", "--out", vm["out"].as<std::string>());
  const int64_t shard_tokens = vm["shard-tokens"].as<int64_t>();
  check_integer("shard-tokens", shard_tokens, 1);
  const double val_fraction = vm["val-fraction"].as<double>();
  check_number("val-fraction", val_fraction, 0, 1);
  if (val_fraction >= 1) fail("tokenize", "--val-fraction must be below 1, got ", val_fraction);
  const std::string text_field = vm["text-field"].as<std::string>();
  if (text_field.empty()) fail("tokenize", "--text-field must not be empty");

  const train::CorpusTokenizer tokenizer(hf ? &*hf : nullptr, eos);
  train::TokenizeJob job;
  job.inputs = vm["input"].as<std::vector<std::string>>();
  job.out_dir = vm["out"].as<std::string>();
  job.corpus.text_field = text_field;
  job.corpus.strict = vm["strict"].as<bool>();
  job.val_fraction = val_fraction;
  job.seed = parse_u64_option("seed", vm["seed"].as<std::string>());
  job.shard_tokens = uint64_t(shard_tokens);
  job.log = &std::cerr;
  job.progress_bar = isatty(STDERR_FILENO);
  std::cout << "tokenizer: " << tokenizer.name() << " (" << tokenizer.vocab_size() << " ids, end of document "
            << tokenizer.eos() << ")\n" << std::flush;
  const train::TokenizeSummary s = train::tokenize_corpus(job, tokenizer);
  std::cout << "read " << s.stats.documents << " documents (" << s.stats.bytes << " bytes) from " << s.stats.files
            << (s.stats.files == 1 ? " file\n" : " files\n");
  if (const std::string skips = text::describe_skips(s.stats, text_field); !skips.empty()) std::cout << skips << "\n";
  report("train", s.train_documents, s.train_tokens, s.train_shards, job.out_dir);
  report("val", s.val_documents, s.val_tokens, s.val_shards, job.out_dir);
  return 0;
}

}  // namespace cotan::app
