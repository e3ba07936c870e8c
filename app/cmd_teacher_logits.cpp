// `cotan teacher-logits --teacher DIR --data SHARDS --top-k K --out DIR [options]`: runs the
// teacher once over token shards and writes, per shard, the top-k log-probabilities of
// softmax(u / tau) and the tail mass at every position (train/teacher_topk.hpp; the format in
// docs/formats.md), for `cotan distill --teacher-logits DIR`. Each split (train-*, val-*) is one
// token stream cut into windows of --seq-len from its start, the windows training then uses;
// position p sees the tokens of its window up to p. Files are written atomically, one per shard:
// an interrupted run continues with the shards it had not finished.
#include <unistd.h>

#include <boost/program_options.hpp>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "app/commands.hpp"
#include "app/options.hpp"
#include "autograd/autograd.hpp"
#include "nn/model.hpp"
#include "nn/model_dir.hpp"
#include "tensor/error.hpp"
#include "tensor/ops.hpp"
#include "text/tokenizer.hpp"
#include "text/tokenizer_files.hpp"
#include "train/data.hpp"
#include "train/teacher_topk.hpp"
#include "util/checksum.hpp"
#include "util/progress.hpp"

namespace po = boost::program_options;
namespace fs = std::filesystem;

namespace cotan::app {
namespace {

constexpr const char* kOp = "teacher-logits";

struct Job {
  const nn::CausalLM* model;
  const nn::Params* params;
  nn::State state;
  int64_t k, seq_len, batch_size;
  double temperature;
  uint64_t teacher_id;
};

// An existing output for the shard that matches the job: finished, skipped. One made otherwise is
// an error naming the field, rather than a file silently replaced.
bool finished(const std::string& path, const train::TopkHeader& want) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return false;
  const train::TopkHeader h = train::TopkFile::read_header(path);
  const auto differs = [&](const char* field, const auto& have, const auto& now) {
    fail(kOp, path, " exists with ", field, " ", have, " but this run has ", now,
         ": remove it or choose another --out");
  };
  if (h.k != want.k) differs("top-k", h.k, want.k);
  if (h.temperature != want.temperature) differs("temperature", h.temperature, want.temperature);
  if (h.seq_len != want.seq_len) differs("seq_len", h.seq_len, want.seq_len);
  if (h.teacher_id != want.teacher_id) differs("teacher", h.teacher_id, want.teacher_id);
  if (h.source_bytes != want.source_bytes || h.source_xxh3 != want.source_xxh3)
    differs("source checksum", h.source_xxh3, want.source_xxh3);
  train::TopkFile::open(path);  // a complete, uncorrupted file
  return true;
}

// The positions [begin, end) of `tokens` (one split's stream), windows of seq_len from its start.
void run_shard(const Job& job, const train::TokenSequence& tokens, uint64_t begin, uint64_t end,
               std::vector<int32_t>& ids, std::vector<float>& logp, std::vector<float>& tail, Progress& progress,
               uint64_t& done, uint64_t total) {
  const uint64_t L = uint64_t(job.seq_len), n = tokens.size(), k = uint64_t(job.k);
  ids.assign((end - begin) * k, 0);
  logp.assign((end - begin) * k, 0);
  tail.assign(end - begin, 0);
  const Device device = job.params->begin()->second.device();
  uint64_t window = begin / L;
  while (window * L < end) {
    // Up to batch_size whole windows at once; a window cut short by the stream's end alone.
    const uint64_t first = window * L, len = std::min(L, n - first);
    uint64_t rows = 1;
    if (len == L)
      while (rows < uint64_t(job.batch_size) && (window + rows) * L < end && (window + rows + 1) * L <= n) ++rows;
    std::vector<int64_t> input(rows * len);
    for (uint64_t r = 0; r < rows; ++r) tokens.copy_to(first + r * L, len, input.data() + r * len);
    Tensor logits;
    {
      NoGrad no_grad;
      logits = job.model->apply(to(from_vector(input, {int64_t(rows), int64_t(len)}), device), *job.params, job.state).first;
    }
    const train::TopkTargets top = train::teacher_topk(logits, job.k, job.temperature);
    const std::vector<int32_t> ti = top.ids.to_vector<int32_t>();
    const std::vector<float> tl = top.logp.to_vector<float>(), tt = top.tail.to_vector<float>();
    for (uint64_t j = 0; j < rows * len; ++j) {
      const uint64_t p = first + j;  // windows are consecutive: row r starts at first + r * L
      if (p < begin || p >= end) continue;
      std::copy(ti.begin() + j * k, ti.begin() + (j + 1) * k, ids.begin() + (p - begin) * k);
      std::copy(tl.begin() + j * k, tl.begin() + (j + 1) * k, logp.begin() + (p - begin) * k);
      tail[p - begin] = tt[j];
    }
    const uint64_t covered = std::min(end, first + rows * len) - std::max(begin, first);
    done += covered;
    progress.update(done, cat(done, "/", total, " positions"));
    window += rows;
  }
}

}  // namespace

int cmd_teacher_logits(const Args& args) {
  std::string teacher_dir, data, out, device_name = "cpu";
  int64_t k = 0, seq_len = 128, batch_size = 8;
  double temperature = 1;
  po::options_description opts("cotan teacher-logits --teacher DIR --data SHARDS --top-k K --out DIR [options]: the "
                               "teacher's top-k log-probabilities per token of the shards, for distill --teacher-logits");
  opts.add_options()("help,h", "show this help")(
      "teacher", po::value(&teacher_dir)->value_name("DIR"), "the teacher's model directory")(
      "data", po::value(&data)->value_name("SHARDS"), "a token shard, or a directory of train-*.tok and val-*.tok shards")(
      "top-k", po::value(&k), "log-probabilities kept per position")(
      "out", po::value(&out)->value_name("DIR"), "where the .topk files go (created); finished files are kept")(
      "temperature", po::value(&temperature)->default_value(temperature, shown(temperature)), "tau of softmax(u / tau)")(
      "seq-len", po::value(&seq_len)->default_value(seq_len), "the teacher's windows: the students' --seq-len")(
      "batch-size", po::value(&batch_size)->default_value(batch_size), "windows per teacher forward pass")(
      "device", po::value(&device_name)->default_value(device_name), "cpu | cuda | cuda:N");
  const po::variables_map vm = parse_options(args, opts);
  if (vm.count("help")) {
    std::cout << opts << "\n";
    return 0;
  }
  if (teacher_dir.empty()) fail(kOp, "--teacher DIR is required (a model directory)");
  if (data.empty()) fail(kOp, "--data SHARDS is required (token shards, as cotan tokenize writes)");
  if (out.empty()) fail(kOp, "--out DIR is required");
  check_output_dir(kOp, "--out", out);
  check_integer("top-k", k, 1);
  check_integer("seq-len", seq_len, 1);
  check_integer("batch-size", batch_size, 1);
  check_number("temperature", temperature, 0, 1e6, true);
  const Device device = device_option(device_name);

  const nn::LoadedModel loaded = nn::load_model_dir(teacher_dir);
  const int64_t vocab = loaded.config.vocab_size;
  if (k > vocab) fail(kOp, "--top-k ", k, " is larger than the teacher's vocabulary ", vocab, " (", teacher_dir, ")");
  if (seq_len > loaded.config.max_position_embeddings)
    fail(kOp, "--seq-len ", seq_len, " is above the teacher's max_position_embeddings ",
         loaded.config.max_position_embeddings, " (", teacher_dir, ")");
  const nn::CausalLM model(loaded.config);
  // Inference only: each joint product's weights side by side, read in place on every step.
  const nn::Params params = nn::adjoin(nn::to(loaded.params, device), model.joint_weight_groups());
  Job job{&model, &params, nn::to(loaded.state, device), k, seq_len, batch_size, temperature,
          train::teacher_identity(teacher_dir)};
  job.state.training = false;

  const train::ShardFiles shards = train::shard_files(data);
  std::optional<train::ShardTokenizer> teacher_tokenizer;  // its tokenizer.json's, when it has one
  if (std::error_code ec; fs::exists(fs::path(teacher_dir) / "tokenizer.json", ec)) {
    if (const std::optional<text::Tokenizer> t = text::load_tokenizer(teacher_dir)) {
      teacher_tokenizer = train::ShardTokenizer{t->hash(), uint32_t(t->vocab_size())};
    } else {
      teacher_tokenizer = train::kByteTokenizer;  // the byte tokenizer's tokenizer.json
    }
  }

  // What each shard needs, checked before the teacher runs.
  struct Todo {
    std::string shard, path;
    const train::TokenSequence* stream;
    uint64_t begin, end;
    train::TopkHeader header;
  };
  std::vector<Todo> todo;
  train::TokenSequence streams[2];
  uint64_t total = 0;
  size_t skipped = 0;
  for (int split = 0; split < 2; ++split) {
    for (const std::string& shard_path : split == 0 ? shards.train : shards.val) {
      const train::TokenShard shard = train::TokenShard::open(shard_path);
      const uint64_t begin = streams[split].size();
      streams[split].append(train::TokenSequence(shard));
      const train::ShardTokenizer& made_by = shard.tokenizer();
      if (teacher_tokenizer && made_by.known() && made_by != *teacher_tokenizer)
        fail(kOp, shard_path, " was made with ", train::describe(made_by), " but the teacher ", teacher_dir, " has ",
             train::describe(*teacher_tokenizer));
      if (made_by.vocab_size > uint32_t(vocab))
        fail(kOp, shard_path, " was made with a vocabulary of ", made_by.vocab_size, " but the teacher ", teacher_dir,
             " has ", vocab);
      if (shard.max_id() >= vocab)
        fail(kOp, shard_path, " holds id ", shard.max_id(), ", outside the teacher's vocabulary of ", vocab);
      const std::string name = fs::path(shard_path).filename().string();
      const FileChecksum sum = checksum_file(shard_path, kOp);
      train::TopkHeader h;
      h.k = uint32_t(k);
      h.positions = shard.size();
      h.temperature = temperature;
      h.vocab_size = uint32_t(vocab);
      h.seq_len = uint32_t(seq_len);
      h.teacher_id = job.teacher_id;
      h.tokenizer = made_by;
      h.source_name = name;
      h.source_bytes = sum.bytes;
      h.source_xxh3 = sum.xxh3;
      const std::string path = (fs::path(out) / train::topk_file_name(name)).string();
      if (finished(path, h)) {
        ++skipped;
        continue;
      }
      todo.push_back({shard_path, path, &streams[split], begin, begin + shard.size(), h});
      total += shard.size();
    }
  }
  create_output_dir(kOp, "--out", out);  // after every check: a refused run leaves nothing
  std::cout << "teacher: " << teacher_dir << " (vocabulary " << vocab << "), top-" << k << " at temperature "
            << temperature << ", windows of " << seq_len << "\n";
  if (skipped) std::cout << "kept " << skipped << " finished " << (skipped == 1 ? "file" : "files") << " in " << out << "\n";
  std::cout << std::flush;

  Progress progress(kOp, total, isatty(STDERR_FILENO), std::cerr);
  uint64_t done = 0;
  std::vector<int32_t> ids;
  std::vector<float> logp, tail;
  for (const Todo& t : todo) {
    run_shard(job, *t.stream, t.begin, t.end, ids, logp, tail, progress, done, total);
    train::write_topk_file(t.path, t.header, ids, logp, tail);
  }
  progress.finish(cat(todo.size(), todo.size() == 1 ? " file, " : " files, ", total, " positions"));
  std::cout << "wrote " << todo.size() << (todo.size() == 1 ? " file" : " files") << " to " << out << "\n";
  return 0;
}

}  // namespace cotan::app
