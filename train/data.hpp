// Training data: the train/validation split of a corpus's documents (read
// by text/corpus.hpp), token shards and the window loader.
//
//   TokenData data = load_tokens("/usr/share/games/fortunes", 0.05, 0);   // or a shard directory
//   WindowLoader loader(data.train, /*seq_len=*/128, /*batch_size=*/16, /*seed=*/0);
//   Batch b = loader.next();              // b.inputs, b.targets: [16, 128] i64
//   Json saved = loader.state().to_json();
//   ...
//   loader.restore(LoaderState::from_json(saved));   // yields the batches that followed the save
//
// Token ids: 0..255 are bytes, 256 ends a document (kEndOfDocument). A corpus becomes one token
// stream, each document followed by kEndOfDocument; windows are cut from that stream and may
// span document (and shard) boundaries.
//
// Token shard files (docs/formats.md, "Token shards"), all integers little-endian:
//   offset  0  8 bytes  magic "COTANTOK"
//   offset  8  u32      version, 3
//   offset 12  u32      token dtype: 1 = u16, 2 = u32
//   offset 16  u64      token count n
//   offset 24  u32      the largest token id (0 for an empty shard)
//   offset 28  u32      the tokenizer's vocabulary size (0: not recorded)
//   offset 32  u64      the tokenizer's hash (XXH3-64 of its tokenizer.json; kByteTokenizerHash
//                       for the byte tokenizer; 0: not recorded)
//   offset 40  n tokens of that dtype; the file is exactly 40 + n * (2 or 4) bytes long.
// Versions 1 (a 24-byte header without the largest id) and 2 (32 bytes: the largest id and four
// zero bytes) are still read; they record no tokenizer.
// Shards are read through mmap; a TokenShard keeps its mapping alive, and so does every
// TokenSequence that holds it.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tensor/tensor.hpp"
#include "text/byte_tokenizer.hpp"
#include "text/corpus.hpp"
#include "util/hash.hpp"
#include "util/json_fwd.hpp"

namespace cotan::train {

// ---- the byte-level tokenizer (text/byte_tokenizer.hpp) ----

using text::encode_documents;
using text::kByteVocab;
using text::kEndOfDocument;

// ---- corpus reading (text/corpus.hpp) ----

using text::corpus_files;
using text::default_corpus_path;
using text::read_documents;
using text::split_documents;

// Splits documents into (train, validation) deterministically from the seed: each document gets a
// Philox key, and the round(val_fraction * n) documents with the smallest keys go to validation,
// at least one and at most n - 1 when n >= 2 and val_fraction > 0. Both keep the input order.
struct DocumentSplit {
  std::vector<std::string> train, val;
};
DocumentSplit split_train_val(std::vector<std::string> documents, double val_fraction, uint64_t seed);
// Which of n documents split_train_val sends to validation, for a corpus read twice: once to
// count its documents, once to tokenize them.
std::vector<bool> validation_mask(size_t n, double val_fraction, uint64_t seed);

// ---- token shards ----

enum class TokenDType : uint32_t { u16 = 1, u32 = 2 };

inline constexpr char kShardMagic[8] = {'C', 'O', 'T', 'A', 'N', 'T', 'O', 'K'};
inline constexpr uint32_t kShardVersion = 3;      // the version written; 1 and 2 are still read
inline constexpr size_t kShardHeaderBytes = 40;   // version 3: the v2 fields and the tokenizer's
inline constexpr size_t kShardV2HeaderBytes = 32;
inline constexpr size_t kShardV1HeaderBytes = 24;

// What made a shard's ids: the tokenizer's hash and vocabulary size; both 0 when not recorded.
struct ShardTokenizer {
  uint64_t hash = 0;
  uint32_t vocab_size = 0;
  bool known() const { return hash != 0; }
  bool operator==(const ShardTokenizer&) const = default;
};
// The byte tokenizer's identity in shard headers.
inline constexpr uint64_t kByteTokenizerHash = fnv1a("cotan byte tokenizer: ids 0..255 are bytes, 256 ends a document");
inline constexpr ShardTokenizer kByteTokenizer{kByteTokenizerHash, uint32_t(kByteVocab)};
// "the byte tokenizer", "tokenizer 0123456789abcdef (vocabulary 151936)" or "an unrecorded tokenizer".
std::string describe(const ShardTokenizer& tokenizer);

// A validated, memory-mapped shard. Copies share the mapping.
class TokenShard {
 public:
  // Errors name the file: too short for a header, bad magic, unsupported version, unknown dtype,
  // a token count that does not match the file size.
  static TokenShard open(const std::string& path);

  const std::string& path() const { return path_; }
  TokenDType dtype() const { return dtype_; }
  uint64_t size() const { return count_; }
  // The largest token id (0 when empty): recorded in the header (version 2), found by a scan at
  // open for version 1.
  int64_t max_id() const { return max_id_; }
  // The tokenizer recorded in the header (version 3); unknown for older shards.
  const ShardTokenizer& tokenizer() const { return tokenizer_; }
  const void* data() const { return data_; }  // the first token
  int64_t operator[](uint64_t i) const;       // unchecked
  std::vector<int32_t> to_vector() const;

 private:
  std::string path_;
  TokenDType dtype_ = TokenDType::u16;
  uint64_t count_ = 0;
  int64_t max_id_ = 0;
  ShardTokenizer tokenizer_;
  const void* data_ = nullptr;
  std::shared_ptr<const void> mapping_;
};

// Writes a shard atomically (a temporary file in the same directory, then rename), recording the
// tokenizer when given: u16 when its vocabulary fits (or, when none is recorded, every id is below
// 65536), otherwise u32. Negative ids, and ids at or above a recorded vocabulary size, throw.
void write_token_shard(const std::string& path, std::span<const int32_t> tokens,
                       const ShardTokenizer& tokenizer = {});

// ---- token sequences ----

// A read-only token stream made of chunks (owned vectors or mapped shards) laid end to end.
class TokenSequence {
 public:
  TokenSequence() = default;
  explicit TokenSequence(std::vector<int32_t> tokens);
  explicit TokenSequence(const TokenShard& shard);

  void append(const TokenSequence& other);
  uint64_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  int64_t max_id() const { return max_id_; }  // the largest id, 0 when empty
  int64_t operator[](uint64_t i) const;  // bounds checked
  // Copies tokens [start, start + count) to out; throws when the range runs past the end.
  void copy_to(uint64_t start, uint64_t count, int64_t* out) const;
  std::vector<int32_t> to_vector() const;

 private:
  struct Chunk {
    std::shared_ptr<const void> owner;  // keeps `data` alive
    const void* data = nullptr;
    TokenDType dtype = TokenDType::u32;
    uint64_t start = 0;  // position of the chunk's first token in the sequence
    uint64_t size = 0;
  };
  size_t chunk_index(uint64_t position) const;
  std::vector<Chunk> chunks_;
  uint64_t size_ = 0;
  int64_t max_id_ = 0;
};

struct TokenData {
  TokenSequence train, val;
  ShardTokenizer tokenizer;  // what the shards record (all agree); the byte tokenizer for text corpora
};

// Tokens for `--data PATH`:
// - a token shard file (a ".tok" name or the shard magic): all of it is training data, no
//   validation;
// - a directory holding train-*.tok shards: those (sorted by name) are the training split and its
//   val-*.tok shards (possibly none) the validation split;
// - anything else is a corpus (text or JSONL files, maybe compressed: text/corpus.hpp):
//   read_documents, split_train_val(val_fraction, seed), each split encoded with encode_documents.
// val_fraction and seed only apply to text corpora; `cotan tokenize` with the same fraction and
// seed writes shards holding the same two token streams.
TokenData load_tokens(const std::string& path, double val_fraction, uint64_t seed);
// Whether load_tokens reads `path` as token shards (a shard file, or a directory holding .tok
// files) rather than as a text corpus.
bool is_token_data(const std::string& path);
// The shard files load_tokens reads for token data at `path`, by split in stream order: a shard
// file is the whole train split; a directory gives its train-*.tok and val-*.tok files.
struct ShardFiles {
  std::vector<std::string> train, val;
};
ShardFiles shard_files(const std::string& path);

// ---- batches ----

// A teacher's offline top-k targets (train/teacher_topk.hpp) for the tokens of a batch.
struct TopkTargets {
  Tensor ids;   // [N, K] or [B, T, K] i32
  Tensor logp;  // [N, K] or [B, T, K], f32 (files) or f64: log p_i
  Tensor tail;  // [N] or [B, T], the same dtype: log of the tail mass, -inf when K = V
  bool defined() const { return ids.defined(); }
};
class TopkSequence;

struct Batch {
  Tensor inputs;     // [B, T] i64
  Tensor targets;    // [B, T] i64: the next token after each input
  TopkTargets topk;  // [B, T, K]: the teacher's top-k at each input position; only with offline targets
};

// The batch's tensors on `device`.
Batch to(const Batch& batch, Device device);

// Where a WindowLoader is: enough to rebuild it on the same tokens. seq_len and tokens are checked
// on restore, so that a state cannot silently be applied to other data.
struct LoaderState {
  uint64_t seed = 0;
  uint64_t epoch = 0;
  uint64_t position = 0;  // windows of this epoch already handed out (< the epoch's windows)
  int64_t seq_len = 0;
  uint64_t tokens = 0;  // size of the training sequence

  Json to_json() const;
  static LoaderState from_json(const Json& json);
  bool operator==(const LoaderState&) const = default;
};

// Draws windows of seq_len + 1 tokens from the training sequence; the first seq_len are the
// inputs, the last seq_len the targets. Epoch e cuts the stream into windows of stride seq_len
// from an offset in [0, seq_len) and visits them in a random order; both come from Philox keyed
// by the seed (stream: epoch), so a loader is a pure function of (seed, epoch, position). A batch
// that runs past the end of an epoch continues with the next one.
class WindowLoader {
 public:
  // Throws "[data] seq_len 512 needs at least 513 tokens, but the training split has 300".
  // aligned: every epoch's windows start at offset 0 (stride seq_len), the windows in which
  // `cotan teacher-logits` ran the teacher; the order is still shuffled.
  WindowLoader(TokenSequence tokens, int64_t seq_len, int64_t batch_size, uint64_t seed, bool aligned = false);
  // Batches then carry the top-k of these positions (topk aligned with the tokens; kept alive by the caller).
  void attach_topk(const TopkSequence* topk);

  Batch next();
  LoaderState state() const;
  void restore(const LoaderState& state);

  int64_t seq_len() const { return seq_len_; }
  int64_t batch_size() const { return batch_size_; }
  uint64_t epoch() const { return epoch_; }  // of the next window; advances as an epoch runs out
  uint64_t windows_in_epoch() const { return order_.size(); }

 private:
  void start_epoch(uint64_t epoch);

  TokenSequence tokens_;
  int64_t seq_len_, batch_size_;
  uint64_t seed_;
  bool aligned_ = false;
  const TopkSequence* topk_ = nullptr;
  uint64_t epoch_ = 0, position_ = 0;
  uint64_t offset_ = 0;          // the first window's start in this epoch
  std::vector<uint64_t> order_;  // window indices of this epoch, in visiting order
};

// Consecutive windows of seq_len + 1 tokens, stride seq_len (each token is a target once), from
// the start of `tokens`, batch_size rows per batch; the last batch may have fewer rows. At most
// max_batches batches (0: all). Empty when the tokens are fewer than seq_len + 1.
// With topk (aligned with the tokens) the batches carry its targets.
std::vector<Batch> validation_batches(const TokenSequence& tokens, int64_t seq_len, int64_t batch_size,
                                      int64_t max_batches = 0, const TopkSequence* topk = nullptr);

}  // namespace cotan::train
