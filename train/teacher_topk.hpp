// Offline teacher targets: the teacher's top-k log-probabilities and its tail mass per token,
// the files `cotan teacher-logits` writes (docs/formats.md, "Teacher top-k files") and the
// sparse KL that `cotan distill --teacher-logits` trains on (docs/losses.md, "Sparse KL").
//
// Per token, with p = softmax(u / tau) over the teacher's vocabulary, S the k ids of largest p
// (ties: the smaller id first) and the tail bucket T = V \ S:
//   ids     [N, K] i32   S, by decreasing p
//   logp    [N, K]       log p_i, i in S
//   tail    [N]          log p_T = log sum_{v in T} p_v, a log-sum-exp over the tail ids (never
//                        log(1 - sum p_i), which cancels); -inf when K = V
//
// The sparse KL compares the two distributions coarsened to S plus one bucket, q = softmax(s / tau):
//   L = tau^2 [ sum_{i in S} p_i (log p_i - log q_i) + p_T (log p_T - log q_T) ]
// with q_T = sum_{v in T} q_v (again a log-sum-exp, never 1 - sum q_i). Its gradient, written
// directly (no dense teacher row exists), with P = sum_{i in S} p_i + p_T (1 up to the rounding
// of the stored values):
//   dL/ds_v = tau (P q_v - p_v)                      v in S
//   dL/ds_v = tau q_v (P - p_T / q_T)                v in T
// By the data-processing inequality 0 <= L <= the dense fkl, equal when K = V or when q is
// proportional to p inside T.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tensor/tensor.hpp"
#include "train/data.hpp"
#include "train/losses.hpp"

namespace cotan::train {

// The top-k of softmax(teacher_logits / temperature) per row, in `dtype` (computed in f64).
// teacher_logits [N, V] or [B, T, V]; 1 <= k <= V.
TopkTargets teacher_topk(const Tensor& teacher_logits, int64_t k, double temperature, DType dtype = DType::f32);

// The sparse KL above (config.kind must be fkl), mixed with the cross-entropy as distill_loss
// does: total = kd_ratio * KD + (1 - kd_ratio) * CE, means over the counted tokens (targets of
// kIgnoreIndex are skipped; targets may be undefined at kd_ratio 1). teacher_entropy is that of
// the coarsened teacher, -sum p_i log p_i - p_T log p_T (a lower bound of the full entropy).
// Computed in f64 on the host whatever the logits' dtype; total carries the gradient to
// student_logits. Ids at or above the student's vocabulary are an error naming both.
LossParts sparse_distill_loss(const Tensor& student_logits, const TopkTargets& teacher, const Tensor& targets,
                              const LossConfig& config = {});

// The same loss with the student's LM head inside it: logits = hidden head^T, computed 256 rows at
// a time (chunk_rows) and discarded once their gradient has gone into dH = G head and, in row
// order, dW += G^T hidden, so no [N, V] tensor exists. hidden [N, D] or [B, T, D], head [V, D];
// total carries the gradient to both (a tied head's adds to the embedding's). Equal to
// sparse_distill_loss(matmul(hidden, head^T), ...) up to the logits' rounding.
LossParts sparse_head_loss(const Tensor& hidden, const Tensor& head, const TopkTargets& teacher, const Tensor& targets,
                           const LossConfig& config = {}, int64_t chunk_rows = kHeadChunkRows);

// ---- files ----

inline constexpr char kTopkMagic[8] = {'C', 'O', 'T', 'A', 'N', 'T', 'P', 'K'};
inline constexpr uint32_t kTopkVersion = 1;
inline constexpr size_t kTopkHeaderBytes = 160;
inline constexpr size_t kTopkNameBytes = 64;

// The header of a top-k file: what made it, so that a mismatch is caught before training.
struct TopkHeader {
  uint32_t k = 0;
  uint64_t positions = 0;      // = the source shard's token count
  double temperature = 1;
  uint32_t vocab_size = 0;     // the teacher's vocabulary (ids are below it)
  uint32_t seq_len = 0;        // the teacher's windows: stride seq_len from the split's start
  uint64_t teacher_id = 0;     // teacher_identity()
  ShardTokenizer tokenizer;    // the source shard's
  std::string source_name;     // the shard's file name, at most 63 bytes
  uint64_t source_bytes = 0, source_xxh3 = 0;
};

// The teacher's identity: XXH3-64 over the XXH3-64 checksums of config.json and every
// *.safetensors file of its directory (sorted by name).
uint64_t teacher_identity(const std::string& model_dir);

// Writes the file atomically. ids [n, K] i32, logp [n, K] f32, tail [n] f32 (host vectors).
void write_topk_file(const std::string& path, const TopkHeader& header, const std::vector<int32_t>& ids,
                     const std::vector<float>& logp, const std::vector<float>& tail);

// A validated, memory-mapped top-k file. Errors name the file and the field: bad magic, version,
// a size that does not match the header, a checksum mismatch (any flipped byte), and values no
// teacher gives, named with their position: an id outside the vocabulary or twice in a row's top-k,
// a log-probability above 0 or NaN, a row not sorted by probability, a tail log-mass above 0,
// masses that do not sum to 1.
class TopkFile {
 public:
  static TopkFile open(const std::string& path);
  // The header alone (cheap; no checksum verified): for resuming.
  static TopkHeader read_header(const std::string& path);

  const std::string& path() const { return path_; }
  const TopkHeader& header() const { return header_; }
  const int32_t* ids() const { return ids_; }
  const float* logp() const { return logp_; }
  const float* tail() const { return tail_; }

 private:
  // Throws "[teacher-logits] FILE: position P: ..." for values no teacher gives (see open).
  static void check_values(const TopkFile& f);

  std::string path_;
  TopkHeader header_;
  const int32_t* ids_ = nullptr;
  const float* logp_ = nullptr;
  const float* tail_ = nullptr;
  std::shared_ptr<const void> mapping_;
};

// The top-k files of one split laid end to end, aligned with that split's token stream.
class TopkSequence {
 public:
  TopkSequence() = default;
  void append(const TopkFile& file);
  uint64_t size() const { return size_; }
  int64_t k() const { return k_; }
  bool empty() const { return files_.empty(); }
  // Positions [start, start + count) into ids (count * K), logp (count * K) and tail (count).
  void copy_to(uint64_t start, uint64_t count, int32_t* ids, float* logp, float* tail) const;

 private:
  std::vector<TopkFile> files_;
  std::vector<uint64_t> starts_;
  uint64_t size_ = 0;
  int64_t k_ = 0;
};

// The name of the top-k file of a token shard: "train-00000.tok" -> "train-00000.topk".
std::string topk_file_name(const std::string& shard_name);

struct TopkData {
  TopkSequence train, val;  // val empty when the directory has no val files
  TopkHeader first;         // the first train file's header (k, temperature, seq_len, teacher)
};

// The top-k files of `dir` for the token shards of `data_path` (load_tokens' shard layout: a
// shard file or a directory of train-*/val-*.tok), every one checked against its shard (name,
// size, checksum, tokenizer) and all against each other (k, temperature, seq_len, vocabulary,
// teacher). Errors name both sides, e.g. "[teacher-logits] out/train-00000.topk was made with
// temperature 2 but the run uses 1".
TopkData load_topk(const std::string& dir, const std::string& data_path, double temperature);

}  // namespace cotan::train
