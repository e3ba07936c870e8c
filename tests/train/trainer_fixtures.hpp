// What the trainer's and the study's tests share: tiny model configs, a byte corpus, a run
// configuration in a temporary directory, the metrics without timings, a frozen teacher.
#pragma once

#include <filesystem>
#include <fstream>
#include <string>
#include <tuple>

#include "nn/model.hpp"
#include "train/trainer.hpp"
#include "util/json.hpp"

namespace cotan::train::testing {

namespace fs = std::filesystem;


inline nn::ModelConfig micro(nn::AttentionKind kind, int64_t vocab = kByteVocab) {
  nn::ModelConfig c;
  c.vocab_size = vocab;
  c.hidden_size = 16;
  c.num_layers = 2;
  c.num_heads = 2;
  c.num_kv_heads = 1;
  c.intermediate_size = 24;
  c.attention.kind = kind;
  return c;
}

inline TokenData corpus() {
  std::vector<std::string> docs;
  for (int i = 0; i < 40; ++i) docs.push_back("document " + std::to_string(i * 7919 % 1000) + ": the quick brown fox jumps.");
  DocumentSplit split = split_train_val(docs, 0.1, 1);
  return {TokenSequence(encode_documents(split.train)), TokenSequence(encode_documents(split.val)), kByteTokenizer};
}

// A config for a run in the temporary directory `dir`, removed first unless `keep` (to resume).
inline TrainConfig config(const std::string& dir, int64_t steps, bool keep = false) {
  TrainConfig c;
  c.run_dir = (fs::temp_directory_path() / dir).string();
  if (!keep) fs::remove_all(c.run_dir);
  c.steps = steps;
  c.batch_size = 2;
  c.grad_accum = 2;
  c.seq_len = 16;
  c.seed = 3;
  c.schedule.lr = 3e-3;
  c.schedule.warmup_steps = 5;
  c.eval_every = 10;
  c.eval_batches = 2;
  c.log_every = 0;
  return c;
}

// The metrics file without its timing field.
inline std::string deterministic_metrics(const std::string& dir) {
  std::ifstream in(fs::path(dir) / "metrics.jsonl");
  std::string line, out;
  while (std::getline(in, line)) {
    Json row = parse_json(line);
    Json kept = Json::object();
    for (const auto& [key, value] : row.items())
      if (key != "tokens_per_s" && key != "elapsed_s") kept[key] = value;
    out += kept.dump() + "\n";
  }
  return out;
}

struct Pair {
  nn::CausalLM teacher{micro(nn::AttentionKind::softmax)};
  nn::Params teacher_params;
  nn::State teacher_state;
  Pair() {
    Generator gen(99);
    std::tie(teacher_params, teacher_state) = teacher.init(gen);
  }
  Teacher view() const { return {&teacher, &teacher_params, &teacher_state}; }
};

// A pretraining run of the softmax micro model on the corpus, from the same initial weights.
struct SmallRun {
  TokenData data = corpus();
  nn::CausalLM model{micro(nn::AttentionKind::softmax)};
  TrainResult run(const TrainConfig& c, bool resume) const {
    Generator gen(5);
    auto [ps, st] = model.init(gen);
    return fit(model, ps, st, Teacher{}, data, c, resume);
  }
};

}  // namespace cotan::train::testing
