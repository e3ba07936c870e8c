#include "app/prompt_codec.hpp"

#include <filesystem>

#include "text/tokenizer.hpp"
#include "text/tokenizer_files.hpp"
#include "train/data.hpp"

namespace cotan::app {

namespace {

class ByteCodec final : public PromptCodec {
 public:
  std::vector<int32_t> encode(std::string_view text) const override { return text::encode_bytes(text); }
  std::vector<int32_t> encode_plain(std::string_view text) const override { return text::encode_bytes(text); }
  std::string decode(std::span<const int32_t> ids) const override { return text::decode_bytes(ids); }
  std::optional<int32_t> eos() const override { return train::kEndOfDocument; }
  std::string name() const override { return "the byte tokenizer"; }
};

class HfCodec final : public PromptCodec {
 public:
  explicit HfCodec(const std::string& path) : tokenizer_(text::Tokenizer::load(path)) {}
  std::vector<int32_t> encode(std::string_view text) const override { return tokenizer_.encode(text, true); }
  std::vector<int32_t> encode_plain(std::string_view text) const override { return tokenizer_.encode(text, false); }
  std::string decode(std::span<const int32_t> ids) const override { return tokenizer_.decode(ids, true); }
  std::optional<int32_t> eos() const override { return tokenizer_.eos_id(); }
  std::string name() const override { return tokenizer_.path(); }
  const text::Tokenizer* hf() const override { return &tokenizer_; }
  int64_t vocab_size() const { return tokenizer_.vocab_size(); }

 private:
  text::Tokenizer tokenizer_;
};

}  // namespace

std::unique_ptr<PromptCodec> model_codec(const std::string& dir, int64_t vocab_size, const std::string& command) {
  const std::filesystem::path path = std::filesystem::path(dir) / "tokenizer.json";
  if (std::filesystem::exists(path) && text::is_byte_tokenizer_json(path.string())) {
    if (vocab_size < train::kByteVocab)
      fail(command, path.string(), " is the byte tokenizer's: ", train::kByteVocab, " ids, more than the model's vocab_size ",
           vocab_size);
    return std::make_unique<ByteCodec>();
  }
  if (std::filesystem::exists(path)) {
    auto hf = std::make_unique<HfCodec>(path.string());
    if (hf->vocab_size() > vocab_size)
      fail(command, path.string(), " has ", hf->vocab_size(), " ids, more than the model's vocab_size ", vocab_size);
    return hf;
  }
  if (vocab_size != train::kByteVocab)
    fail(command, dir, " has no tokenizer.json, and its vocab_size ", vocab_size, " is not the byte tokenizer's ",
         train::kByteVocab);
  return std::make_unique<ByteCodec>();
}

nn::LoadedModel load_inference_model(const std::string& dir, DType dtype, const std::string& command) {
  namespace fs = std::filesystem;
  if (!fs::is_directory(dir)) fail(command, "--model ", dir, ": not a directory");
  if (!fs::exists(fs::path(dir) / "model.safetensors") && !fs::exists(fs::path(dir) / "model.safetensors.index.json"))
    fail(command, "--model ", dir, ": no weights (model.safetensors or model.safetensors.index.json)");
  return nn::load_model_dir(dir, dtype);
}

}  // namespace cotan::app
