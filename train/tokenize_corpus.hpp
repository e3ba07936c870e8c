// Corpora to token shards, with an HF tokenizer or the byte tokenizer, in parallel over documents.
//
//   text::Tokenizer hf = text::Tokenizer::load("Qwen1.5-1.8B/");
//   CorpusTokenizer tokenizer(&hf);
//   TokenizeJob job{.inputs = {"web.jsonl.zst"}, .out_dir = "shards/"};
//   TokenizeSummary s = tokenize_corpus(job, tokenizer);   // shards/train-00000.tok, val-00000.tok
//
// Each document becomes its ids (with the tokenizer's template: Llama 3's BOS, for one) followed
// by the tokenizer's end-of-sequence id. The corpus is read twice: once to count its documents,
// so that the train/validation split is split_train_val's (the documents with the smallest Philox
// keys go to validation), and once to tokenize them, in blocks whose documents are encoded in
// parallel and written in corpus order: the shards are the same bytes for any thread count.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "nn/model_dir.hpp"
#include "text/corpus.hpp"
#include "text/tokenizer.hpp"
#include "train/data.hpp"

namespace cotan::train {

// An HF tokenizer (not owned; it must outlive this), or the byte tokenizer when null.
class CorpusTokenizer {
 public:
  // `eos`: the token that ends each document, overriding the tokenizer's own (eos_id()). Throws
  // when an HF tokenizer has none and none is given, or `eos` is not one of its tokens.
  explicit CorpusTokenizer(const text::Tokenizer* tokenizer = nullptr, const std::string& eos = "");

  // The document's ids and the end-of-sequence id, appended to `out`. With `strict`, invalid
  // UTF-8 throws "invalid UTF-8 at byte N"; without, it is replaced as text::Tokenizer does.
  void encode_document(std::string_view document, bool strict, std::vector<int32_t>& out) const;
  std::string decode(std::span<const int32_t> ids) const;

  ShardTokenizer identity() const;
  int64_t vocab_size() const;
  int32_t eos() const { return eos_; }
  // "the byte tokenizer" or the tokenizer.json's path.
  std::string name() const;
  const text::Tokenizer* hf() const { return tokenizer_; }
  // The files a model directory trained on this tokenizer holds beside its weights, and the ids its
  // config.json records (text/tokenizer_files.hpp): the HF tokenizer's files, copied from its
  // directory, or the byte tokenizer's tokenizer.json, tokenizer_config.json and
  // generation_config.json.
  nn::ModelDirExtras model_dir_files() const;

 private:
  const text::Tokenizer* tokenizer_;
  int32_t eos_;
};

struct TokenizeJob {
  std::vector<std::string> inputs;  // text files, JSONL files, directories; .gz/.zst too
  std::string out_dir;              // created; it must hold no .tok files yet
  text::CorpusOptions corpus;       // the JSONL text field; strict: refuse bad lines and invalid UTF-8
  double val_fraction = 0.05;
  uint64_t seed = 0;
  uint64_t shard_tokens = 100'000'000;  // tokens per shard at most
  std::ostream* log = nullptr;          // progress and the summary; null: quiet
  bool progress_bar = false;            // a bar redrawn in place (a terminal) rather than log lines
};

struct TokenizeSummary {
  text::CorpusStats stats;
  uint64_t train_documents = 0, val_documents = 0;
  uint64_t train_tokens = 0, val_tokens = 0;
  size_t train_shards = 0, val_shards = 0;
  double seconds = 0;  // the tokenizing pass
};

// Errors: the corpus readers' ("[corpus] ..."), "[tokenize] DIR already holds token shards",
// "[tokenize] FILE: document N: invalid UTF-8 at byte K" (strict), "[tokenize] the corpus is empty".
TokenizeSummary tokenize_corpus(const TokenizeJob& job, const CorpusTokenizer& tokenizer);

// "train-00000.tok".
std::string shard_name(std::string_view split, size_t index);

// Tokens for `--data PATH` read with `tokenizer`. Token shards and shard directories are read as
// load_tokens reads them, and must have been made with this tokenizer (check_tokenizer). A text
// corpus (files, JSONL, directories; compressed or not) read with the byte tokenizer is
// load_tokens' in-memory encoding; with an HF tokenizer it is tokenized once into
// cache_dir/tokens/<key>/, keyed by the tokenizer's hash, its end-of-sequence id, the corpus files'
// paths, sizes, modification times and contents (XXH3-64), the text field and the split, and read
// from there after: a corpus rewritten in place, whatever its size and time, is tokenized anew.
TokenData load_corpus_tokens(const std::string& path, const CorpusTokenizer& tokenizer, double val_fraction,
                             uint64_t seed, const std::string& cache_dir, const text::CorpusOptions& corpus = {},
                             std::ostream* log = nullptr);

// Throws when the data was made with a tokenizer other than `tokenizer` (as its shards record),
// or holds ids at or above its vocabulary, naming both:
// "[data] shards/ was made with tokenizer 0123... (vocabulary 151936), but the model reads it with
//  the byte tokenizer (vocabulary 257)".
void check_tokenizer(const TokenData& data, const std::string& path, const CorpusTokenizer& tokenizer);

}  // namespace cotan::train
