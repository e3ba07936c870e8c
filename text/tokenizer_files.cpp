#include "text/tokenizer_files.hpp"

#include <filesystem>

#include "text/byte_tokenizer.hpp"
#include "text/decompress.hpp"
#include "util/error.hpp"
#include "util/json.hpp"

namespace cotan::text {

namespace fs = std::filesystem;

namespace {

// GPT-2's bytes_to_unicode: the printable bytes stand for themselves, the other 68 for U+0100,
// U+0101, ... in byte order. The ByteLevel pre-tokenizer's alphabet.
std::string byte_stand_in(int b) {
  const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
  int code = b;
  if (!printable) {
    code = 256;
    for (int c = 0; c < b; ++c) {
      const bool p = (c >= '!' && c <= '~') || (c >= 0xA1 && c <= 0xAC) || (c >= 0xAE && c <= 0xFF);
      code += !p;
    }
  }
  std::string utf8;  // code < 0x800: one or two bytes
  if (code < 0x80) {
    utf8 += char(code);
  } else {
    utf8 += char(0xC0 | (code >> 6));
    utf8 += char(0x80 | (code & 0x3F));
  }
  return utf8;
}

Json byte_level(bool add_prefix_space, bool use_regex) {
  Json j = Json::object();
  j["type"] = "ByteLevel";
  j["add_prefix_space"] = add_prefix_space;
  j["trim_offsets"] = true;
  j["use_regex"] = use_regex;
  return j;
}

Json byte_tokenizer() {
  Json j = Json::object();
  j["version"] = "1.0";
  j["truncation"] = nullptr;
  j["padding"] = nullptr;
  j["added_tokens"] = Json::array();
  j["normalizer"] = nullptr;
  j["pre_tokenizer"] = byte_level(false, false);
  j["post_processor"] = nullptr;
  j["decoder"] = byte_level(true, true);  // what tokenizers saves for decoders.ByteLevel()
  Json model = Json::object();
  model["type"] = "BPE";
  for (const char* key : {"dropout", "unk_token", "continuing_subword_prefix", "end_of_word_suffix"}) model[key] = nullptr;
  model["fuse_unk"] = false;
  model["byte_fallback"] = false;
  model["ignore_merges"] = false;
  Json vocab = Json::object();
  for (int b = 0; b < 256; ++b) vocab[byte_stand_in(b)] = b;
  vocab[kByteEndOfDocumentToken] = kEndOfDocument;
  model["vocab"] = vocab;
  model["merges"] = Json::array();
  j["model"] = model;
  return j;
}

std::string pretty(const Json& j) { return dump_json(j, 2) + "\n"; }

// The content of a tokenizer_config.json token entry: "x" or {"content": "x", ...}; "" for null.
std::string token_content(const Json& value, const std::string& file, const char* key) {
  if (value.is_null()) return "";
  if (value.is_string()) return value.get<std::string>();
  if (value.is_object() && value.contains("content") && value["content"].is_string())
    return value["content"].get<std::string>();
  fail("tokenizer", file, ": ", key, " is neither a string nor {\"content\": ...}");
}

}  // namespace

std::string byte_tokenizer_json() {
  static const std::string text = pretty(byte_tokenizer());
  return text;
}

TokenizerFiles byte_tokenizer_files() {
  TokenizerFiles out;
  out.files.push_back({"tokenizer.json", byte_tokenizer_json()});
  Json config = Json::object();
  config["tokenizer_class"] = "PreTrainedTokenizerFast";
  config["bos_token"] = nullptr;
  config["eos_token"] = kByteEndOfDocumentToken;
  config["pad_token"] = kByteEndOfDocumentToken;
  config["unk_token"] = nullptr;
  config["clean_up_tokenization_spaces"] = false;
  out.files.push_back({"tokenizer_config.json", pretty(config)});
  Json generation = Json::object();
  generation["eos_token_id"] = kEndOfDocument;
  generation["pad_token_id"] = kEndOfDocument;
  out.files.push_back({"generation_config.json", pretty(generation)});
  out.config_ids = {{"eos_token_id", std::to_string(kEndOfDocument)}, {"pad_token_id", std::to_string(kEndOfDocument)}};
  return out;
}

bool is_byte_tokenizer_json(const std::string& path) {
  std::error_code ec;
  const fs::path file = fs::is_directory(path, ec) ? fs::path(path) / "tokenizer.json" : fs::path(path);
  if (!fs::is_regular_file(file, ec)) return false;
  // A byte tokenizer.json is about 5 KB; a real vocabulary is far larger and needs no parse.
  if (fs::file_size(file, ec) > 64 * 1024 || ec) return false;
  static const Json byte = byte_tokenizer();
  try {
    return json_equal(read_json_file(file.string()), byte);
  } catch (const Error&) {
    return false;  // not JSON, so not the byte tokenizer's: Tokenizer::load says what is wrong
  }
}

std::optional<Tokenizer> load_tokenizer(const std::string& path) {
  if (is_byte_tokenizer_json(path)) return std::nullopt;
  return Tokenizer::load(path);
}

TokenizerFiles hf_tokenizer_files(const Tokenizer& tokenizer) {
  TokenizerFiles out;
  const fs::path source(tokenizer.path());
  const fs::path dir = source.parent_path();
  std::error_code ec;
  auto copy = [&](const std::string& name, const fs::path& from) {
    out.files.push_back({name, read_all(from.string())});
  };
  copy("tokenizer.json", source);
  // The bos token: the tokenizer_config.json's, else the special token the template puts in front
  // of every text (Llama's <s>, Llama 3's <|begin_of_text|>), else none (Qwen2).
  std::optional<int32_t> bos = tokenizer.bos_id();
  std::optional<int32_t> eos = tokenizer.eos_id();
  const fs::path config_path = dir / "tokenizer_config.json";
  if (fs::is_regular_file(config_path, ec)) {
    copy("tokenizer_config.json", config_path);
  } else {
    if (!bos) {
      const std::vector<int32_t> empty = tokenizer.encode("", true);
      if (!empty.empty())
        for (const AddedToken& t : tokenizer.added_tokens())
          if (t.id == empty.front() && t.special) bos = t.id;
    }
    Json config = Json::object();
    config["tokenizer_class"] = "PreTrainedTokenizerFast";
    config["bos_token"] = bos ? Json(*tokenizer.id_to_token(*bos)) : Json(nullptr);
    config["eos_token"] = eos ? Json(*tokenizer.id_to_token(*eos)) : Json(nullptr);
    config["pad_token"] = config["eos_token"];
    config["clean_up_tokenization_spaces"] = false;
    out.files.push_back({"tokenizer_config.json", pretty(config)});
  }
  // A config that names its tokens decides the ids config.json and generation_config.json get.
  if (fs::is_regular_file(config_path, ec)) {
    const Json config = read_json_file(config_path.string());
    if (config.is_object()) {
      for (const char* key : {"bos_token", "eos_token"}) {
        const auto it = config.find(key);
        if (it == config.end()) continue;
        const std::string content = token_content(*it, config_path.string(), key);
        std::optional<int32_t>& id = std::string(key) == "bos_token" ? bos : eos;
        id = content.empty() ? std::nullopt : tokenizer.token_to_id(content);
      }
    }
  }
  for (const char* name : {"special_tokens_map.json", "chat_template.jinja", "chat_template.json"})
    if (fs::is_regular_file(dir / name, ec)) copy(name, dir / name);
  const fs::path generation_path = dir / "generation_config.json";
  if (fs::is_regular_file(generation_path, ec)) {
    copy("generation_config.json", generation_path);
  } else {
    Json generation = Json::object();
    if (bos) generation["bos_token_id"] = *bos;
    if (eos) generation["eos_token_id"] = *eos;
    out.files.push_back({"generation_config.json", pretty(generation)});
  }
  // config.json's ids: the source model's own (a list of eos ids, say) when it records them.
  const fs::path model_config = dir / "config.json";
  if (fs::is_regular_file(model_config, ec)) {
    const Json config = read_json_file(model_config.string());
    if (config.is_object())
      for (const char* key : {"bos_token_id", "eos_token_id", "pad_token_id"})
        if (const auto it = config.find(key); it != config.end()) out.config_ids.emplace_back(key, dump_json(*it));
  }
  if (out.config_ids.empty()) {
    if (bos) out.config_ids.emplace_back("bos_token_id", std::to_string(*bos));
    if (eos) out.config_ids.emplace_back("eos_token_id", std::to_string(*eos));
  }
  return out;
}

}  // namespace cotan::text
