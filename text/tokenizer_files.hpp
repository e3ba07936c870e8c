// The tokenizer files of a model directory, as HF's AutoTokenizer, transformers' generate and
// lm-evaluation-harness read them: tokenizer.json, tokenizer_config.json (the bos, eos and pad
// tokens; the chat template when the source has one) and generation_config.json.
//
//   TokenizerFiles f = hf_tokenizer_files(Tokenizer::load("teacher/"));  // the teacher's, copied
//   TokenizerFiles b = byte_tokenizer_files();                           // the byte tokenizer's
//
// The byte tokenizer (text/byte_tokenizer.hpp) is written as a byte-level BPE without merges: its
// vocabulary maps GPT-2's printable stand-in for byte b (the ByteLevel pre-tokenizer's alphabet)
// to id b, and "<|endoftext|>" to 256; the ByteLevel pre-tokenizer (no regex, no prefix space)
// turns text into those stand-ins, one per UTF-8 byte, and the ByteLevel decoder turns them back.
// HF tokenizers therefore encodes every text exactly as encode_bytes does (text that is not UTF-8
// cannot reach HF's Python API; HF is given it with U+FFFD for each ill-formed subsequence). The
// end-of-document token is in the vocabulary, not an added token, so a text spelling
// "<|endoftext|>" is its 13 bytes there too; transformers registers the tokenizer_config.json's
// eos_token as a special token, so through AutoTokenizer that spelling becomes id 256, as every
// special token's spelling does.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "text/tokenizer.hpp"

namespace cotan::text {

inline constexpr const char* kByteEndOfDocumentToken = "<|endoftext|>";

struct TokenizerFile {
  std::string name;  // "tokenizer.json"
  std::string text;
};

struct TokenizerFiles {
  std::vector<TokenizerFile> files;
  // The special token ids a model's config.json records, as JSON text: ("bos_token_id", "1"),
  // ("eos_token_id", "[128001, 128009]"), ("pad_token_id", "null").
  std::vector<std::pair<std::string, std::string>> config_ids;
};

// The byte tokenizer's tokenizer.json, as HF tokenizers' Tokenizer.save writes it (pretty, two
// spaces), and its files: tokenizer_config.json (eos and pad "<|endoftext|>", no bos) and
// generation_config.json (eos and pad 256).
std::string byte_tokenizer_json();
TokenizerFiles byte_tokenizer_files();

// True when `path` (a tokenizer.json, or a directory holding one) is the byte tokenizer's: equal
// as JSON to byte_tokenizer_json(). Readers of model directories take it for the byte tokenizer
// itself (its shard identity, its codec). False when there is no such file or it is not JSON.
bool is_byte_tokenizer_json(const std::string& path);
// Tokenizer::load(path), or nullopt (the byte tokenizer) when `path` is the byte tokenizer's.
std::optional<Tokenizer> load_tokenizer(const std::string& path);

// An HF tokenizer's files, copied from the directory of its tokenizer.json: tokenizer.json,
// tokenizer_config.json, generation_config.json, and special_tokens_map.json, chat_template.jinja
// and chat_template.json where it has them. Without a tokenizer_config.json one is written
// (tokenizer_class PreTrainedTokenizerFast, eos_id() as eos and pad token, the token the template
// puts in front of every text as bos); without a generation_config.json one is written with
// those ids. config_ids are those of the config.json beside it when it records them, else the
// tokenizer's bos_id() and eos_id(). Errors name the file: "[tokenizer] DIR/tokenizer_config.json: ...".
TokenizerFiles hf_tokenizer_files(const Tokenizer& tokenizer);

}  // namespace cotan::text
