// Hugging Face tokenizer.json files, read and run as HF `tokenizers` runs them.
//
// encode() follows HF's pipeline step for step:
//   1. added tokens whose `normalized` is false are cut out of the raw text;
//   2. every other piece is normalized (NFC, NFKC, NFD, NFKD, Lowercase, Replace, Prepend, Strip,
//      Sequence), and added tokens whose `normalized` is true are cut out of the result;
//   3. the pre-tokenizer splits each remaining piece (ByteLevel, Split, Metaspace, Digits,
//      Sequence);
//   4. the BPE model turns each word into ids (merges by rank, byte_fallback, unk_token, fuse_unk,
//      ignore_merges, continuing_subword_prefix, end_of_word_suffix);
//   5. with add_special_tokens, the post-processor adds its template (TemplateProcessing,
//      ByteLevel, Sequence).
// decode() maps ids back to token strings and runs the decoder chain (ByteLevel, Metaspace,
// ByteFallback, Fuse, Strip, Replace, Sequence).
//
// Any other component is an error naming it and the file. Regexes run on Oniguruma, the engine HF
// tokenizers uses, so \p{L}, \p{N}, (?i:...) and lookaheads mean what they mean there; Unicode
// normalization and character properties come from utf8proc.
//
// Input that is not valid UTF-8 is read as Python's bytes.decode("utf-8", errors="replace") and
// Rust's String::from_utf8_lossy read it (each maximal ill-formed subsequence becomes U+FFFD),
// which is what a user feeding such bytes to HF gets; encode_checked() refuses it instead.
//
// A Tokenizer is immutable after load and safe to use from many threads at once.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace cotan::text {

struct AddedToken {
  int32_t id = 0;
  std::string content;
  bool special = false;
  bool single_word = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = false;
};

class Tokenizer {
 public:
  // Reads a tokenizer.json, or DIR/tokenizer.json when `path` is a directory. Errors name the
  // file and the field: "[tokenizer] FILE: pre_tokenizer.type \"Whitespace\" is not supported".
  static Tokenizer load(const std::string& path);
  // The same from the file's text; `name` stands for the file in messages.
  static Tokenizer from_json(std::string_view json_text, const std::string& name);

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens = true) const;
  // Throws "[tokenizer] invalid UTF-8 at byte N" instead of replacing.
  std::vector<int32_t> encode_checked(std::string_view text, bool add_special_tokens = true) const;
  // Ids that are neither in the vocabulary nor added tokens are dropped, as HF drops them.
  std::string decode(std::span<const int32_t> ids, bool skip_special_tokens = false) const;

  // One more than the largest id of the vocabulary and the added tokens.
  int64_t vocab_size() const;
  // XXH3-64 of the tokenizer.json bytes: what token shards record.
  uint64_t hash() const;
  const std::string& path() const;

  std::optional<int32_t> token_to_id(std::string_view token) const;
  std::optional<std::string> id_to_token(int32_t id) const;
  const std::vector<AddedToken>& added_tokens() const;
  // The end-of-sequence token that separates documents: the first special added token among
  // "<|endoftext|>", "<|end_of_text|>", "</s>", "<|im_end|>", "<eos>", "<|eot_id|>"; nullopt
  // when none is present. The eos_token of a tokenizer_config.json beside the file (load) comes first.
  std::optional<int32_t> eos_id() const;
  // The beginning-of-sequence token that transformers reports (bos_token_id): the bos_token of the
  // tokenizer_config.json beside the tokenizer.json; nullopt without one (Qwen2's is null).
  std::optional<int32_t> bos_id() const;

 private:
  struct Impl;
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// True when `bytes` is valid UTF-8 (no surrogates, no overlong forms, at most U+10FFFF); when it
// is not and `error_at` is given, the offset of the first bad byte goes there.
bool valid_utf8(std::string_view bytes, size_t* error_at = nullptr);
// Each maximal ill-formed subsequence replaced by U+FFFD (Unicode's recommended practice, which
// Python's "replace" error handler and Rust's from_utf8_lossy both follow).
std::string replace_invalid_utf8(std::string_view bytes);

}  // namespace cotan::text
