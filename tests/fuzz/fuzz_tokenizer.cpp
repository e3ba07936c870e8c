// Fuzzes the tokenizer (text/tokenizer.cpp, text/unicode.cpp) on text: the input, any bytes, is
// encoded with the qwen2 fixture tokenizer (NFC, a Split regex, byte-level BPE, added tokens).
// Encoding never fails; invalid UTF-8 reads as its U+FFFD replacement, and encode_checked refuses
// exactly the invalid inputs; decoding the ids gives back text canonically equivalent to the
// (replaced) text, since a byte-level tokenizer loses nothing; every id is in the vocabulary.
// Equivalent, not equal to its NFC form: added tokens are cut out before normalization (as HF
// does), so a combining mark right after one (">" + U+0338) is not composed with it.
#include "tests/fuzz/fuzz_support.hpp"
#include "text/tokenizer.hpp"
#include "text/unicode.hpp"

using namespace cotan;
using cotan::fuzz::accepts;
using cotan::fuzz::require;

namespace {

const text::Tokenizer& tokenizer() {
  static const text::Tokenizer t = text::Tokenizer::load(COTAN_SOURCE_DIR "/tests/tokenizer/fixtures/qwen2");
  return t;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 4096) return 0;
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  const text::Tokenizer& t = tokenizer();
  std::vector<int32_t> ids;
  require(accepts([&] { ids = t.encode(bytes); }), "encode accepts any bytes");
  for (int32_t id : ids) require(id >= 0 && id < t.vocab_size(), "every id is in the vocabulary");
  const bool valid = text::valid_utf8(bytes);
  const std::string text = valid ? std::string(bytes) : text::replace_invalid_utf8(bytes);
  require(text::valid_utf8(text), "the replacement is valid UTF-8");
  if (!valid) require(t.encode(text) == ids, "invalid UTF-8 encodes as its replacement");
  std::vector<int32_t> checked;
  require(accepts([&] { checked = t.encode_checked(bytes); }) == valid, "encode_checked refuses invalid UTF-8 only");
  if (valid) require(checked == ids, "encode_checked agrees with encode");
  require(text::normalize(t.decode(ids), text::NormalForm::nfc) == text::normalize(text, text::NormalForm::nfc),
          "decode gives the text back, up to canonical equivalence");
  return 0;
}
