// The tokenizer of a model directory, as `cotan generate` needs it: text to ids, ids to text, and
// the id that ends a generation. Two codecs: the byte tokenizer of cotan's tiny models
// (train/data.hpp: ids 0..255 are bytes, 256 ends a document) and an HF tokenizer.json
// (text/tokenizer.hpp). model_codec() is the one place that chooses between them.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "nn/model_dir.hpp"

namespace cotan::text {
class Tokenizer;
}

namespace cotan::app {

class PromptCodec {
 public:
  virtual ~PromptCodec() = default;
  // The prompt's ids (an HF tokenizer adds its template's special tokens, Llama 3's BOS).
  virtual std::vector<int32_t> encode(std::string_view text) const = 0;
  // The text's ids without the template's special tokens (lm-eval-harness's add_special_tokens=False).
  virtual std::vector<int32_t> encode_plain(std::string_view text) const = 0;
  // The text of generated ids, special tokens (the end of a document, eos) left out.
  virtual std::string decode(std::span<const int32_t> ids) const = 0;
  // The id that ends a generation, if the tokenizer has one.
  virtual std::optional<int32_t> eos() const = 0;
  // "the byte tokenizer" or the tokenizer.json's path.
  virtual std::string name() const = 0;
  // The HF tokenizer; null for the byte tokenizer.
  virtual const text::Tokenizer* hf() const { return nullptr; }
};

// DIR/tokenizer.json when the directory has one (the byte tokenizer when it is the byte
// tokenizer's, text/tokenizer_files.hpp), else the byte tokenizer when the model's vocabulary is
// the byte tokenizer's 257 ids. Throws "[generate] DIR has no tokenizer.json, and its vocab_size N
// is not the byte tokenizer's 257", or when the tokenizer has more ids than the model's
// vocab_size; `command` names the errors' op.
std::unique_ptr<PromptCodec> model_codec(const std::string& dir, int64_t vocab_size,
                                         const std::string& command = "generate");

// The model directory of `cotan generate` and `cotan eval`, loaded in `dtype`. Throws "[COMMAND]
// --model DIR: not a directory" or "...: no weights (model.safetensors or
// model.safetensors.index.json)" before load_model_dir's own errors.
nn::LoadedModel load_inference_model(const std::string& dir, DType dtype, const std::string& command);

}  // namespace cotan::app
