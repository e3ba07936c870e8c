// The byte-level tokenizer: ids 0..255 are bytes, 256 (kEndOfDocument) ends a document. The
// default study's models and any corpus without a tokenizer.json use it; its identity in token
// shards is train::kByteTokenizer.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace cotan::text {

inline constexpr int32_t kEndOfDocument = 256;
inline constexpr int32_t kByteVocab = 257;

// One id per byte (any bytes, UTF-8 or not); no kEndOfDocument is added.
std::vector<int32_t> encode_bytes(std::string_view text);
// The bytes back; each kEndOfDocument is rendered as `eod` (nothing by default, "\n" or a
// marker such as "<|eod|>" when showing samples). Ids outside [0, 256] throw "[data] ...".
std::string decode_bytes(std::span<const int32_t> ids, std::string_view eod = "");
// The documents encoded one after another, each followed by kEndOfDocument.
std::vector<int32_t> encode_documents(const std::vector<std::string>& documents);

}  // namespace cotan::text
