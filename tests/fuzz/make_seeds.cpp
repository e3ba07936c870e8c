// The seed corpora of the fuzz harnesses: valid files made by the library's own writers, plus a
// few hand-made edge cases (valid ones the writers never make, and near misses).
//
//   make_seeds TARGET DIR   writes TARGET's seeds into DIR (created if needed)
//
// TARGET is one of safetensors, sharded_index, config, token_shard, checkpoint_meta, jsonl, tokenizer. Built with
// the project's compiler; tests/fuzz/run.sh runs it before each fuzzing run.
#include <zlib.h>
#include <zstd.h>

#include <cmath>
#include <filesystem>
#include <functional>
#include <iostream>
#include <limits>

#include "nn/config.hpp"
#include "nn/safetensors.hpp"
#include "tests/fuzz/fuzz_support.hpp"
#include "train/trainer.hpp"
#include "util/json.hpp"

using namespace cotan;
namespace fs = std::filesystem;

namespace {

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// A safetensors file with this header text (no padding) and data section.
std::string safetensors_bytes(std::string_view header, std::string_view data) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[size_t(i)] = char((uint64_t(header.size()) >> (8 * i)) & 0xff);
  return out.append(header).append(data);
}

// What save_safetensors writes for these tensors, read back from the file it wrote.
std::string saved_file(const std::map<std::string, Tensor>& tensors, const std::map<std::string, std::string>& metadata = {}) {
  const std::string path = fuzz::scratch_dir() + "/seed.safetensors";
  save_safetensors(path, tensors, metadata);
  return read_file(path);
}

using Seeds = std::map<std::string, std::string>;  // file name -> bytes

Seeds safetensors_seeds() {
  Seeds s;
  s["dtypes"] = saved_file({{"f64", from_vector<double>({1.5, -2}, {2})},
                            {"f32", from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3})},
                            {"bf16", cast(from_vector<float>({0.5f, -1}, {2}), DType::bf16)},
                            {"i32", from_vector<int32_t>({-1, 7}, {1, 2})},
                            {"i64", from_vector<int64_t>({1ll << 40}, {1})},
                            {"bool", cast(from_vector<float>({1, 0, 1}, {3}), DType::boolean)}},
                           {{"format", "pt"}});
  s["scalar_and_empty"] = saved_file({{"scalar", from_vector<float>({3}, {})}, {"empty", zeros({0, 3})}});
  s["no_tensors"] = saved_file({});
  s["checkpoint_shard"] = saved_file(fuzz::shard_tensors(), {{"total_size", "104"}});
  // Valid, but never written by cotan: F16 and U8 (converted on load), BOOL bytes above 1, an
  // unaligned data section (copied on load), a hole between tensors, metadata only.
  s["f16_u8_bool"] = safetensors_bytes(
      R"({"h":{"dtype":"F16","shape":[3],"data_offsets":[0,6]},"u":{"dtype":"U8","shape":[2],"data_offsets":[6,8]},)"
      R"("b":{"dtype":"BOOL","shape":[2],"data_offsets":[8,10]}})",
      std::string("\x00\x3c\x01\x00\x00\x7c\x00\xff\x00\x02", 10));
  s["unaligned_hole"] = safetensors_bytes(
      R"({"__metadata__":{"a":"b"},"x":{"dtype":"F32","shape":[1],"data_offsets":[1,5]},)"
      R"("y":{"dtype":"I64","shape":[1,1],"data_offsets":[9,17]}})",
      std::string(17, '\x01'));
  s["metadata_only"] = safetensors_bytes(R"({"__metadata__":{"format":"pt","note":"\u00e9\ud83d\ude00"}})", "");
  // Near misses: overlapping tensors, a duplicate name, a size mismatch, truncated data.
  s["overlap"] = safetensors_bytes(
      R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
      std::string(8, '\0'));
  s["duplicate"] = safetensors_bytes(
      R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}})", "ab");
  s["size_mismatch"] = safetensors_bytes(R"({"a":{"dtype":"BF16","shape":[3],"data_offsets":[0,4]}})", "abcd");
  s["truncated"] = s["dtypes"].substr(0, s["dtypes"].size() - 3);
  return s;
}

Seeds sharded_index_seeds() {
  const fs::path dir = fuzz::scratch_dir() + "/checkpoint";
  save_sharded(dir.string(), fuzz::shard_tensors(), fuzz::kShardBytes);
  Seeds s;
  const std::string index = read_file(dir / kSafetensorsIndexName);
  s["index"] = index;
  Json parsed = parse_json(index);
  Json one = parsed;
  one["weight_map"] = Json::object({{"step", parsed["weight_map"]["step"]}});
  one["metadata"] = Json::object({{"total_size", 8}, {"format", "pt"}, {"nested", {{"a", Json::array({1, 2})}}}});
  s["one_tensor"] = dump_json(one);
  Json no_metadata = parsed;
  no_metadata.erase("metadata");
  s["no_metadata"] = dump_json(no_metadata, 2);
  // Near misses: a name in the other shard, a missing file, an absolute path, no weight_map.
  Json wrong_shard = parsed;
  for (auto& [name, file] : wrong_shard["weight_map"].items())
    file = as_string(file).find("00001") != std::string::npos ? "model-00002-of-00002.safetensors"
                                                              : "model-00001-of-00002.safetensors";
  s["wrong_shard"] = dump_json(wrong_shard);
  Json missing = parsed;
  missing["weight_map"]["extra"] = "model-00003-of-00003.safetensors";
  s["missing_file"] = dump_json(missing);
  Json absolute = parsed;
  absolute["weight_map"]["step"] = "/etc/model.safetensors";
  s["absolute"] = dump_json(absolute);
  s["no_weight_map"] = R"({"metadata":{"total_size":0}})";
  return s;
}

Seeds config_seeds() {
  Seeds s;
  for (const char* name : {"tiny-teacher", "tiny-student", "qwen1.5-0.5b", "llama3.2-1b"})
    s[std::string("preset_") + name] = dump_json(nn::preset(name).to_json(), 2);
  for (const nn::AttentionKindInfo& kind : nn::attention_kinds()) {
    nn::ModelConfig c = nn::preset("tiny-student");
    c.attention.kind = kind.kind;
    c.attention.phi = nn::AlphaFn::sigmoid;
    c.attention.affine_n = nn::AffineN::full;
    c.head_dim = 16;
    s[std::string("attention_") + std::string(kind.name)] = dump_json(c.to_json());
  }
  // As Hugging Face writes them: extra fields, rope_scaling's "type" and "default".
  s["hf_llama"] = R"({"architectures":["LlamaForCausalLM"],"bos_token_id":128000,"eos_token_id":128001,
    "hidden_act":"silu","hidden_size":2048,"initializer_range":0.02,"intermediate_size":8192,
    "max_position_embeddings":131072,"model_type":"llama","num_attention_heads":32,"num_hidden_layers":16,
    "num_key_value_heads":8,"rms_norm_eps":1e-05,"rope_scaling":{"factor":32.0,"high_freq_factor":4.0,
    "low_freq_factor":1.0,"original_max_position_embeddings":8192,"rope_type":"llama3"},"rope_theta":500000.0,
    "tie_word_embeddings":true,"torch_dtype":"bfloat16","transformers_version":"4.45.0","vocab_size":128256})";
  s["hf_qwen2"] = R"({"model_type":"qwen2","hidden_size":64,"num_hidden_layers":2,"num_attention_heads":4,
    "num_key_value_heads":null,"intermediate_size":128,"vocab_size":300,"rope_scaling":{"type":"default"},
    "sliding_window":null,"use_sliding_window":false})";
  // Near misses: heads not dividing, an odd head dim, a negative size, an unknown kind.
  s["bad_heads"] = R"({"vocab_size":10,"hidden_size":12,"num_hidden_layers":1,"num_attention_heads":5,"num_key_value_heads":2,"intermediate_size":8})";
  s["odd_head_dim"] = R"({"vocab_size":10,"hidden_size":12,"num_hidden_layers":1,"num_attention_heads":4,"intermediate_size":8})";
  s["negative"] = R"({"vocab_size":-1,"hidden_size":8,"num_hidden_layers":1,"num_attention_heads":2,"intermediate_size":8})";
  s["unknown_kind"] = R"({"vocab_size":10,"hidden_size":8,"num_hidden_layers":1,"num_attention_heads":2,"intermediate_size":8,"attention":{"kind":"linear","rho":1.5}})";
  return s;
}

Seeds token_shard_seeds() {
  Seeds s;
  const std::string path = fuzz::scratch_dir() + "/seed.tok";
  auto shard = [&](const std::vector<int32_t>& tokens) {
    train::write_token_shard(path, tokens);
    return read_file(path);
  };
  s["u16"] = shard(train::encode_documents({"hello", "world"}));
  s["u32"] = shard({1, 70000, 256, 0, 2147483647});
  s["empty"] = shard({});
  s["one"] = shard({256});
  train::write_token_shard(path, std::vector<int32_t>{3, 151935}, train::ShardTokenizer{0x1234, 151936});
  s["tokenizer"] = read_file(path);
  // Near misses: bad magic, version 2, dtype 3, a count that does not match, a short header.
  std::string bad = s["u16"];
  bad[0] = 'X';
  s["bad_magic"] = bad;
  bad = s["u16"];
  bad[8] = 2;
  s["version_2"] = bad;
  bad = s["u16"];
  bad[12] = 3;
  s["dtype_3"] = bad;
  s["truncated"] = s["u32"].substr(0, s["u32"].size() - 1);
  s["header_only"] = s["u16"].substr(0, 20);
  return s;
}

Seeds checkpoint_meta_seeds() {
  train::WindowLoader loader(train::TokenSequence(fuzz::loader_tokens()), fuzz::kLoaderSeqLen, fuzz::kLoaderBatch, 5);
  for (int i = 0; i < 9; ++i) loader.next();  // into the second epoch
  Json meta = Json::object();
  meta["step"] = 9;
  meta["optimizer_steps"] = 9;
  meta["loader"] = loader.state().to_json();
  meta["model_config"] = nn::preset("tiny-student").to_json();
  meta["train"] = train::train_settings(train::TrainConfig{}, false);
  Seeds s;
  s["trainer"] = dump_json(meta, 2) + "\n";  // as write_checkpoint writes it
  // Seeds past INT64_MAX, and as the strings of digits older checkpoints wrote.
  Json big = meta;
  big["loader"]["seed"] = std::numeric_limits<uint64_t>::max();
  big["model_config"]["attention"]["kind"] = "affine";
  big["train"]["seq_len"] = 32;
  s["big_seed"] = dump_json(big);
  Json legacy = meta;
  legacy["loader"]["seed"] = "18446744073709551615";
  legacy["loader"]["epoch"] = "3";
  s["legacy_seed"] = dump_json(legacy);
  Json past_end = meta;
  past_end["loader"]["position"] = 1000;
  s["position_past_end"] = dump_json(past_end);

  train::MetricsRecord row;
  row.step = {3, 1e-3, 2.5, 2.0, 3.0, 1.25, 0.75, 12345.0};
  row.alpha = {{"model.layers.0.self_attn.alpha_ma", 0.5, 0.1}, {"model.layers.1.self_attn.alpha_ma", 0.25, 0}};
  train::MetricsRecord eval_row = row;
  eval_row.step.step = 4;
  eval_row.step.kd = std::numeric_limits<double>::quiet_NaN();  // written as null
  eval_row.eval = train::EvalRecord{4, 1.5, 2.5, 12.2};
  s["metrics"] = dump_json(row.to_json()) + "\n" + dump_json(eval_row.to_json()) + "\n";
  s["metrics_row"] = dump_json(eval_row.to_json());
  return s;
}

// The text of one gzip member or zstd frame holding `data`.
std::string gzip_member(std::string_view data) {
  z_stream z{};
  if (deflateInit2(&z, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK) fail("fuzz", "deflateInit2 failed");
  std::string out(deflateBound(&z, uLong(data.size())), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  z.avail_in = uInt(data.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = uInt(out.size());
  const int rc = deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  if (rc != Z_STREAM_END) fail("fuzz", "deflate failed");
  return out;
}
std::string zstd_frame(std::string_view data) {
  std::string out(ZSTD_compressBound(data.size()), '\0');
  const size_t n = ZSTD_compress(out.data(), out.size(), data.data(), data.size(), 3);
  if (ZSTD_isError(n)) fail("fuzz", "ZSTD_compress: ", ZSTD_getErrorName(n));
  out.resize(n);
  return out;
}

Seeds jsonl_seeds() {
  Seeds s;
  const std::string lines = R"({"text": "first", "id": 1})" "\n"
                            R"({"id": 2, "text": "caf\u00e9 \ud83d\ude00 tab\tquote\" line\n"})" "\n\n"
                            R"({"meta": {"text": 1}, "text": "top"})" "\r\n"
                            R"({"text": ""})" "\n"
                            R"({"text": null})" "\n"
                            R"({"title": "x"})" "\n"
                            R"([1, 2])" "\n"
                            R"({"text": "last"})";
  s["lines"] = lines;
  s["near_misses"] = R"({"text": "\ud800"})" "\n" R"({"text": "a", "text": "b"})" "\n" R"({"text": "a",})" "\n"
                     "{\"text\": \"raw \xff\"}\n";
  s["lines.gz"] = gzip_member(lines.substr(0, 40)) + gzip_member(lines.substr(40));
  s["lines.zst"] = zstd_frame(lines.substr(0, 40)) + zstd_frame(lines.substr(40));
  s["fortunes"] = "one\n%\ntwo\r\n%\r\n";
  return s;
}

Seeds tokenizer_seeds() {
  Seeds s;
  s["english"] = "Hello world! It's 2026, isn't it? I'M HERE   with  spaces\n\n\ttabs\r\n";
  s["special"] = "<|endoftext|>glued<|im_start|>user\nHi<|im_end|> <think></think>";
  s["unicode"] = "caf\xc3\xa9 cafe\xcc\x81 \xe4\xb8\xad\xe6\x96\x87 \xf0\x9f\x91\xa8\xe2\x80\x8d\xf0\x9f\x91\xa9 12345678";
  s["invalid"] = "ok \xff \xe2\x82 \xed\xa0\x80 \xc0\xaf end";
  return s;
}

const std::map<std::string, std::function<Seeds()>> kTargets = {
    {"safetensors", safetensors_seeds},   {"sharded_index", sharded_index_seeds},
    {"config", config_seeds},             {"token_shard", token_shard_seeds},
    {"checkpoint_meta", checkpoint_meta_seeds}, {"jsonl", jsonl_seeds},
    {"tokenizer", tokenizer_seeds},
};

}  // namespace

int main(int argc, char** argv) {
  const auto target = argc == 3 ? kTargets.find(argv[1]) : kTargets.end();
  if (target == kTargets.end()) {
    std::cerr << "usage: make_seeds TARGET DIR (TARGET:";
    for (const auto& item : kTargets) std::cerr << " " << item.first;
    std::cerr << ")\n";
    return 2;
  }
  try {
    fs::create_directories(argv[2]);
    for (const auto& [name, bytes] : target->second()) fuzz::write_file((fs::path(argv[2]) / name).string(), bytes);
  } catch (const std::exception& e) {
    std::cerr << "make_seeds: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
