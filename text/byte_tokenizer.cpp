#include "text/byte_tokenizer.hpp"

#include <algorithm>

#include "util/error.hpp"

namespace cotan::text {

std::vector<int32_t> encode_bytes(std::string_view text) {
  std::vector<int32_t> ids(text.size());
  std::transform(text.begin(), text.end(), ids.begin(), [](char c) { return int32_t(static_cast<unsigned char>(c)); });
  return ids;
}

std::string decode_bytes(std::span<const int32_t> ids, std::string_view eod) {
  std::string text;
  text.reserve(ids.size());
  for (int32_t id : ids) {
    if (id == kEndOfDocument) {
      text += eod;
    } else if (id >= 0 && id < 256) {
      text += char(static_cast<unsigned char>(id));
    } else {
      fail("data", "token id ", id, " is outside the byte vocabulary [0, ", kByteVocab - 1, "]");
    }
  }
  return text;
}

std::vector<int32_t> encode_documents(const std::vector<std::string>& documents) {
  size_t total = 0;
  for (const std::string& d : documents) total += d.size() + 1;
  std::vector<int32_t> ids;
  ids.reserve(total);
  for (const std::string& d : documents) {
    for (char c : d) ids.push_back(int32_t(static_cast<unsigned char>(c)));
    ids.push_back(kEndOfDocument);
  }
  return ids;
}

}  // namespace cotan::text
