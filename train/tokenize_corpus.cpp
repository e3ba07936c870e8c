#include "train/tokenize_corpus.hpp"

#include <tbb/parallel_for.h>

#include <unistd.h>

#include <cstdio>
#include <filesystem>

#include "text/tokenizer_files.hpp"
#include "util/atomic_file.hpp"
#include "util/checksum.hpp"
#include "util/error.hpp"
#include "util/hash.hpp"
#include "util/json.hpp"
#include "util/progress.hpp"

namespace fs = std::filesystem;

namespace cotan::train {

CorpusTokenizer::CorpusTokenizer(const text::Tokenizer* tokenizer, const std::string& eos)
    : tokenizer_(tokenizer), eos_(kEndOfDocument) {
  if (!tokenizer_) {
    if (!eos.empty()) fail("tokenize", "--eos needs --tokenizer: the byte tokenizer ends documents with id 256");
    return;
  }
  if (!eos.empty()) {
    const std::optional<int32_t> id = tokenizer_->token_to_id(eos);
    if (!id) fail("tokenize", "--eos \"", eos, "\" is not a token of ", tokenizer_->path());
    eos_ = *id;
  } else if (const std::optional<int32_t> id = tokenizer_->eos_id()) {
    eos_ = *id;
  } else {
    fail("tokenize", tokenizer_->path(), " names no end-of-sequence token (no tokenizer_config.json eos_token, and ",
         "none of <|endoftext|>, <|end_of_text|>, </s>, <|im_end|>, <eos>, <|eot_id|>): name one with --eos");
  }
}

void CorpusTokenizer::encode_document(std::string_view document, bool strict, std::vector<int32_t>& out) const {
  if (!tokenizer_) {
    for (unsigned char c : document) out.push_back(int32_t(c));
  } else {
    const std::vector<int32_t> ids = strict ? tokenizer_->encode_checked(document) : tokenizer_->encode(document);
    out.insert(out.end(), ids.begin(), ids.end());
  }
  out.push_back(eos_);
}

std::string CorpusTokenizer::decode(std::span<const int32_t> ids) const {
  if (!tokenizer_) return text::decode_bytes(ids, "\n");
  return tokenizer_->decode(ids);
}

ShardTokenizer CorpusTokenizer::identity() const {
  if (!tokenizer_) return kByteTokenizer;
  return {tokenizer_->hash(), uint32_t(tokenizer_->vocab_size())};
}

int64_t CorpusTokenizer::vocab_size() const { return tokenizer_ ? tokenizer_->vocab_size() : kByteVocab; }

nn::ModelDirExtras CorpusTokenizer::model_dir_files() const {
  const text::TokenizerFiles files = tokenizer_ ? text::hf_tokenizer_files(*tokenizer_) : text::byte_tokenizer_files();
  nn::ModelDirExtras out;
  for (const text::TokenizerFile& f : files.files) out.files.push_back({f.name, f.text});
  out.config_fields = files.config_ids;
  return out;
}

std::string CorpusTokenizer::name() const { return tokenizer_ ? tokenizer_->path() : "the byte tokenizer"; }

std::string shard_name(std::string_view split, size_t index) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*s-%05zu.tok", int(split.size()), split.data(), index);
  return buf;
}

namespace {

// A split's tokens, written out a shard at a time.
class ShardSink {
 public:
  ShardSink(fs::path dir, std::string split, uint64_t shard_tokens, ShardTokenizer tokenizer)
      : dir_(std::move(dir)), split_(std::move(split)), shard_tokens_(shard_tokens), tokenizer_(tokenizer) {}
  void append(std::span<const int32_t> ids) {
    while (!ids.empty()) {
      const size_t n = std::min<size_t>(ids.size(), size_t(shard_tokens_ - buffer_.size()));
      buffer_.insert(buffer_.end(), ids.begin(), ids.begin() + ptrdiff_t(n));
      ids = ids.subspan(n);
      tokens_ += n;
      if (buffer_.size() == shard_tokens_) flush();
    }
  }
  void finish() {
    if (!buffer_.empty()) flush();
  }
  uint64_t tokens() const { return tokens_; }
  size_t shards() const { return shards_; }

 private:
  void flush() {
    write_token_shard((dir_ / shard_name(split_, shards_)).string(), buffer_, tokenizer_);
    ++shards_;
    buffer_.clear();
  }
  fs::path dir_;
  std::string split_;
  uint64_t shard_tokens_;
  ShardTokenizer tokenizer_;
  std::vector<int32_t> buffer_;
  uint64_t tokens_ = 0;
  size_t shards_ = 0;
};

std::string megabytes_per_s(uint64_t bytes, double seconds) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MB/s", double(bytes) / 1e6 / std::max(seconds, 1e-9));
  return buf;
}

TokenizeSummary write_shards(const TokenizeJob& job, const CorpusTokenizer& tokenizer, uint64_t n);

}  // namespace

TokenizeSummary tokenize_corpus(const TokenizeJob& job, const CorpusTokenizer& tokenizer) {
  if (job.shard_tokens == 0) fail("tokenize", "shard_tokens must be positive");
  const fs::path out = job.out_dir;
  std::error_code ec;
  if (fs::is_directory(out, ec)) {
    for (const fs::directory_entry& e : fs::directory_iterator(out, ec)) {
      const std::string name = e.path().filename().string();
      if (name.ends_with(".tok"))
        fail("tokenize", out.string(), " already holds token shards (", name, "); remove them or choose another --out");
    }
  }

  // Pass 1: count the documents, for the split (and find bad lines before the long pass).
  // With --strict, documents that are not UTF-8 are refused here too, before anything is written.
  uint64_t n = 0;
  {
    text::DocumentReader reader(job.inputs, job.corpus);
    std::string doc;
    const bool check_utf8 = job.corpus.strict && tokenizer.hf();
    while (reader.next(doc)) {
      ++n;
      size_t at = 0;
      if (check_utf8 && !text::valid_utf8(doc, &at))
        fail("tokenize", reader.current_file(), ": document ", n, ": invalid UTF-8 at byte ", at,
             " (--strict; without it invalid UTF-8 is replaced by U+FFFD)");
    }
  }
  if (n == 0) {
    if (job.inputs.size() == 1) fail("tokenize", job.inputs[0], ": the corpus is empty");
    fail("tokenize", "the corpus is empty: the ", job.inputs.size(), " inputs hold no documents");
  }

  const bool created = !fs::exists(out, ec);
  fs::create_directories(out, ec);
  if (ec) fail("tokenize", "cannot create ", out.string(), ": ", ec.message());
  try {
    return write_shards(job, tokenizer, n);
  } catch (...) {
    // Shards of a run that failed are no use: remove them (and the directory this run made).
    for (const fs::directory_entry& e : fs::directory_iterator(out, ec))
      if (e.path().filename().string().ends_with(".tok")) fs::remove(e.path(), ec);
    if (created) fs::remove(out, ec);
    throw;
  }
}

namespace {

// Pass 2: blocks of documents, encoded in parallel, written in order.
TokenizeSummary write_shards(const TokenizeJob& job, const CorpusTokenizer& tokenizer, uint64_t n) {
  const fs::path out = job.out_dir;
  const std::vector<bool> in_val = validation_mask(size_t(n), job.val_fraction, job.seed);
  text::DocumentReader reader(job.inputs, job.corpus);
  ShardSink train(out, "train", job.shard_tokens, tokenizer.identity());
  ShardSink val(out, "val", job.shard_tokens, tokenizer.identity());
  std::optional<Progress> progress;
  if (job.log) progress.emplace("tokenize", reader.total_bytes(), job.progress_bar, *job.log);
  constexpr size_t kBlockBytes = size_t(16) << 20, kBlockDocuments = 1 << 16;
  std::vector<std::string> docs;
  std::vector<std::string> sources;
  std::vector<std::vector<int32_t>> ids;
  uint64_t index = 0, text_bytes = 0;
  TokenizeSummary summary;
  for (bool more = true; more;) {
    docs.clear();
    sources.clear();
    size_t block_bytes = 0;
    std::string doc;
    while (block_bytes < kBlockBytes && docs.size() < kBlockDocuments) {
      if (!reader.next(doc)) {
        more = false;
        break;
      }
      block_bytes += doc.size();
      docs.push_back(std::move(doc));
      sources.push_back(reader.current_file());
    }
    ids.resize(docs.size());
    std::vector<std::string> errors(docs.size());
    tbb::parallel_for(size_t(0), docs.size(), [&](size_t i) {
      ids[i].clear();
      try {
        tokenizer.encode_document(docs[i], job.corpus.strict, ids[i]);
      } catch (const Error& e) {
        errors[i] = e.what();
      }
    });
    for (size_t i = 0; i < docs.size(); ++i, ++index) {
      if (!errors[i].empty()) {
        std::string_view what = errors[i];
        if (what.starts_with("[tokenizer] ")) what.remove_prefix(12);
        fail("tokenize", sources[i], ": document ", index + 1, ": ", what,
             job.corpus.strict ? " (--strict; without it invalid UTF-8 is replaced by U+FFFD)" : "");
      }
      if (index >= n) fail("tokenize", "the corpus changed while it was read: more than the ", n, " documents counted");
      if (in_val[size_t(index)]) {
        val.append(ids[i]);
        ++summary.val_documents;
      } else {
        train.append(ids[i]);
        ++summary.train_documents;
      }
    }
    text_bytes += block_bytes;
    if (progress) progress->update(reader.consumed_bytes(), megabytes_per_s(text_bytes, progress->elapsed_s()));
  }
  if (index != n) fail("tokenize", "the corpus changed while it was read: ", index, " documents, not the ", n, " counted");
  train.finish();
  val.finish();
  summary.stats = reader.stats();
  summary.train_tokens = train.tokens();
  summary.val_tokens = val.tokens();
  summary.train_shards = train.shards();
  summary.val_shards = val.shards();
  summary.seconds = progress ? progress->elapsed_s() : 0;
  if (progress) {
    progress->finish(cat(summary.stats.documents, " documents, ", text_bytes, " bytes -> ",
                         summary.train_tokens + summary.val_tokens, " tokens, ",
                         megabytes_per_s(text_bytes, progress->elapsed_s())));
  }
  return summary;
}

}  // namespace

void check_tokenizer(const TokenData& data, const std::string& path, const CorpusTokenizer& tokenizer) {
  const ShardTokenizer reads = tokenizer.identity();
  if (data.tokenizer.known() && data.tokenizer != reads) {
    fail("data", path, " was made with ", describe(data.tokenizer), ", but the model reads it with ", tokenizer.name(),
         tokenizer.hf() ? cat(" (", describe(reads), ")") : cat(" (vocabulary ", reads.vocab_size, ")"),
         ": tokenize the corpus with the model's tokenizer");
  }
  for (const TokenSequence* split : {&data.train, &data.val}) {
    if (!split->empty() && split->max_id() >= tokenizer.vocab_size())
      fail("data", path, " holds token id ", split->max_id(), ", outside the vocabulary of ", tokenizer.name(), " (",
           tokenizer.vocab_size(), " ids)");
  }
}

TokenData load_corpus_tokens(const std::string& path, const CorpusTokenizer& tokenizer, double val_fraction,
                             uint64_t seed, const std::string& cache_dir, const text::CorpusOptions& corpus,
                             std::ostream* log) {
  std::error_code ec;
  if (!fs::exists(path, ec)) fail("data", path, ": no such file or directory");
  const bool shards = is_token_data(path);
  if (shards || !tokenizer.hf()) {  // shards, or a text corpus read with the byte tokenizer
    TokenData data = load_tokens(path, val_fraction, seed);
    check_tokenizer(data, path, tokenizer);
    return data;
  }

  // A text corpus and an HF tokenizer: the cached shards, made first when missing.
  Json key = Json::object();
  key["tokenizer"] = describe(tokenizer.identity());
  key["eos"] = tokenizer.eos();
  key["text_field"] = corpus.text_field;
  key["strict"] = corpus.strict;
  key["val_fraction"] = val_fraction;
  key["seed"] = seed;
  // The files' contents too: a corpus rewritten with the same size and modification time is
  // another corpus. Hashing reads the files once more, far faster than tokenizing them.
  Json files = Json::array();
  for (const std::string& file : text::corpus_files(path)) {
    const FileChecksum sum = checksum_file(file, "data");
    Json f = Json::object();
    f["path"] = fs::absolute(file).string();
    f["bytes"] = sum.bytes;
    f["mtime"] = int64_t(fs::last_write_time(file, ec).time_since_epoch().count());
    char xxh3[17];
    std::snprintf(xxh3, sizeof xxh3, "%016llx", static_cast<unsigned long long>(sum.xxh3));
    f["xxh3_64"] = xxh3;
    files.push_back(f);
  }
  key["files"] = files;
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(fnv1a(dump_json(key))));
  const fs::path dir = fs::path(cache_dir) / "tokens" / hex;
  if (fs::exists(dir / "key.json", ec)) {
    if (log) *log << "data: reusing " << dir.string() << " (" << path << " tokenized with " << tokenizer.name() << ")\n";
  } else {
    // Tokenized into a folder of its own, renamed into place when complete: a crash leaves no
    // half-made cache behind.
    const fs::path partial = fs::path(cache_dir) / "tokens" / cat(hex, ".partial-", ::getpid());
    fs::remove_all(partial, ec);
    if (log) *log << "data: tokenizing " << path << " with " << tokenizer.name() << " into " << dir.string() << "\n";
    TokenizeJob job;
    job.inputs = {path};
    job.out_dir = partial.string();
    job.corpus = corpus;
    job.val_fraction = val_fraction;
    job.seed = seed;
    job.log = log;
    job.progress_bar = log && isatty(STDERR_FILENO);
    tokenize_corpus(job, tokenizer);
    write_file_atomically((partial / "key.json").string(), {dump_json(key, 2) + "\n"}, "data");
    fs::rename(partial, dir, ec);
    if (ec && !fs::exists(dir / "key.json")) fail("data", "cannot move ", partial.string(), " to ", dir.string(), ": ", ec.message());
    fs::remove_all(partial, ec);  // another process finished first
  }
  TokenData data = load_tokens(dir.string(), val_fraction, seed);
  check_tokenizer(data, path, tokenizer);
  return data;
}

}  // namespace cotan::train
