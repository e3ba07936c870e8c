// Fuzzes the token shard reader (train/data_shard.cpp): the input is a .tok file. A shard the
// reader opens must hold exactly its header's token count; indexing, to_vector, TokenSequence
// and load_tokens (file and shard directory) must all see the same tokens, and the window
// loader and validation batches must cut windows from them.
#include <algorithm>
#include <optional>

#include "tests/fuzz/fuzz_support.hpp"
#include "train/data.hpp"

using namespace cotan;
using namespace cotan::train;
using cotan::fuzz::accepts;
using cotan::fuzz::require;

namespace {

std::vector<int64_t> tokens_of(const TokenSequence& seq) {
  std::vector<int64_t> out(seq.size());
  seq.copy_to(0, seq.size(), out.data());
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& dir = fuzz::scratch_dir();
  const std::string path = dir + "/input.tok";
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  fuzz::write_file(path, bytes);
  std::optional<TokenShard> shard;
  if (!accepts([&] { shard.emplace(TokenShard::open(path)); })) {
    require(!accepts([&] { load_tokens(path, 0, 0); }), "load_tokens refuses a shard that open refuses");
    return 0;
  }

  const uint64_t n = shard->size();
  const bool v1 = data[8] == 1;  // version 1 headers stop after the count, version 2 after the largest id
  const size_t header = v1 ? kShardV1HeaderBytes : data[8] == 2 ? kShardV2HeaderBytes : kShardHeaderBytes;
  if (shard->tokenizer().known() && n > 0)
    require(shard->max_id() < int64_t(shard->tokenizer().vocab_size), "the largest id is below the recorded vocabulary");
  require(header + n * (shard->dtype() == TokenDType::u16 ? 2 : 4) == size,
          "a shard is exactly its header and its tokens");
  const std::vector<int32_t> listed = shard->to_vector();
  require(listed.size() == n, "to_vector holds every token");
  std::vector<int64_t> indexed(n);
  for (uint64_t i = 0; i < n; ++i) indexed[i] = (*shard)[i];
  for (uint64_t i = 0; i < n; ++i) require(listed[i] == int32_t(indexed[i]), "to_vector agrees with indexing");

  // Version 1: the largest id is found by a scan. Version 2 records it (the reader trusts it, so
  // a wrong one only fails later, cleanly, in the embedding's index check).
  int64_t largest = 0;
  for (int64_t id : indexed) largest = std::max(largest, id);
  if (v1) require(shard->max_id() == largest, "a version 1 shard's largest id is its largest token");
  if (n == 0) require(shard->max_id() == 0, "an empty shard's largest id is 0");

  TokenSequence seq(*shard);
  require(seq.size() == n && tokens_of(seq) == indexed, "a sequence of the shard holds its tokens");
  TokenSequence twice = seq;
  twice.append(seq);
  require(twice.size() == 2 * n, "appending adds the tokens");
  if (n > 0) require(twice[n] == indexed[0] && twice[2 * n - 1] == indexed[n - 1], "an appended chunk reads at its place");
  require(!accepts([&] { (void)twice[2 * n]; }), "reading past the end is an error");

  const TokenData from_file = load_tokens(path, 0, 0);
  require(tokens_of(from_file.train) == indexed && from_file.val.empty(), "load_tokens on the file reads the shard");
  const std::string shards = dir + "/shards";
  std::filesystem::create_directories(shards);
  fuzz::write_file(shards + "/train-00000.tok", bytes);
  fuzz::write_file(shards + "/val-00000.tok", bytes);
  const TokenData from_dir = load_tokens(shards, 0, 0);
  require(tokens_of(from_dir.train) == indexed && tokens_of(from_dir.val) == indexed,
          "load_tokens on a shard directory reads its train and val shards");

  if (twice.size() >= 2) {
    const int64_t seq_len = int64_t(std::min<uint64_t>(twice.size() - 1, 8));
    WindowLoader loader(twice, seq_len, 3, n);
    for (int step = 0; step < 3; ++step) {
      const Batch batch = loader.next();
      require(batch.inputs.shape() == Shape{3, seq_len}, "a batch has batch_size windows of seq_len");
    }
    require(!validation_batches(twice, seq_len, 2, 4).empty(), "a long enough sequence has validation windows");
  }
  return 0;
}
