// train/data: tokenizer, corpus reading, token shards, the train/validation split and the loaders.
#include <doctest/doctest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "train/data.hpp"
#include "tests/support.hpp"
#include "util/json.hpp"

namespace fs = std::filesystem;
using namespace cotan;
using namespace cotan::train;

namespace {

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// The documents of a token stream (each ends with kEndOfDocument).
std::vector<std::string> documents_of(const TokenSequence& tokens) {
  std::vector<std::string> docs;
  std::vector<int32_t> current;
  for (int32_t id : tokens.to_vector()) {
    if (id == kEndOfDocument) {
      docs.push_back(text::decode_bytes(current));
      current.clear();
    } else {
      current.push_back(id);
    }
  }
  REQUIRE(current.empty());
  return docs;
}

std::vector<int32_t> iota_tokens(int32_t n) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), 0);
  return v;
}

std::vector<std::vector<int64_t>> take(WindowLoader& loader, int n) {
  std::vector<std::vector<int64_t>> out;
  for (int i = 0; i < n; ++i) {
    Batch b = loader.next();
    out.push_back(b.inputs.to_vector<int64_t>());
    out.push_back(b.targets.to_vector<int64_t>());
  }
  return out;
}

}  // namespace

TEST_CASE("encode and decode round-trip every byte") {
  std::string text = "plain ASCII, caf\xc3\xa9, \xe2\x82\xac, raw \xff\xfe";
  text += std::string(1, '\0') + "after NUL";
  const std::vector<int32_t> ids = text::encode_bytes(text);
  CHECK(ids.size() == text.size());
  CHECK(ids[text.find('\xc3')] == 0xc3);
  CHECK(text::decode_bytes(ids) == text);

  std::string all_bytes;
  for (int b = 0; b < 256; ++b) all_bytes += char(b);
  CHECK(text::decode_bytes(text::encode_bytes(all_bytes)) == all_bytes);

  const std::vector<int32_t> docs = encode_documents({"ab", "c"});
  CHECK(docs == std::vector<int32_t>{'a', 'b', kEndOfDocument, 'c', kEndOfDocument});
  CHECK(text::decode_bytes(docs) == "abc");
  CHECK(text::decode_bytes(docs, "<|eod|>") == "ab<|eod|>c<|eod|>");
  CHECK(kByteVocab == 257);

  CHECK(error_of([] { text::decode_bytes(std::vector<int32_t>{97, 257}); }) ==
        "[data] token id 257 is outside the byte vocabulary [0, 256]");
  CHECK(error_of([] { text::decode_bytes(std::vector<int32_t>{-1}); }) ==
        "[data] token id -1 is outside the byte vocabulary [0, 256]");
}

TEST_CASE("fortune files split at % lines") {
  TempDir dir;
  write_file(dir / "quotes", "First.\n%\nSecond, line one\nline two\n%\n%\n  \n%\nLast, no newline");
  const std::vector<std::string> docs = read_documents(dir / "quotes");
  REQUIRE(docs.size() == 3);
  CHECK(docs[0] == "First.\n");
  CHECK(docs[1] == "Second, line one\nline two\n");
  CHECK(docs[2] == "Last, no newline");

  CHECK(split_documents("a\r\n%\r\nb\r\n%\r\n") == std::vector<std::string>{"a\r\n", "b\r\n"});
  CHECK(split_documents("%\nonly\n%\n") == std::vector<std::string>{"only\n"});
  // No line is exactly "%": the whole text is one document.
  CHECK(split_documents("50% off\n%%\n") == std::vector<std::string>{"50% off\n%%\n"});
  CHECK(split_documents(" \n\t").empty());
}

TEST_CASE("directories are read in path order, without strfile indexes, duplicates or fortune subdirectories") {
  TempDir dir;
  write_file(dir / "b.txt", "bee");
  write_file(dir / "a/c.txt", "sea");
  write_file(dir / ".hidden", "hidden");
  write_file(dir / "fort/x", "x1\n%\nx2\n%\n");
  write_file(dir / "fort/x.dat", std::string("\0\0\0\2\0\0\0\2", 8));  // a strfile header
  fs::create_symlink("x", dir.path / "fort/x.u8");
  write_file(dir / "fort/off/rude", "skipped: a subdirectory of a fortune database");
  write_file(dir / "orphan.dat", "a .dat without a text file beside it is text");

  const std::vector<std::string> files = corpus_files(dir.path.string());
  CHECK(files == std::vector<std::string>{dir / "a/c.txt", dir / "b.txt", dir / "fort/x", dir / "orphan.dat"});
  CHECK(read_documents(dir.path.string()) ==
        std::vector<std::string>{"sea", "bee", "x1\n", "x2\n", "a .dat without a text file beside it is text"});
  CHECK(corpus_files(dir / "b.txt") == std::vector<std::string>{dir / "b.txt"});
}

TEST_CASE("corpus errors name the path") {
  TempDir dir;
  const std::string missing = dir / "nothing-here";
  CHECK(error_of([&] { read_documents(missing); }) == "[data] " + missing + ": no such file or directory");
  CHECK(error_of([&] { load_tokens(missing, 0.05, 0); }) == "[data] " + missing + ": no such file or directory");
  write_file(dir / "empty/blank.txt", "  \n");
  write_file(dir / "empty/seps", "%\n%\n");
  const std::string empty = dir / "empty";
  CHECK(error_of([&] { read_documents(empty); }) == "[data] " + empty + ": the corpus is empty");
}

TEST_CASE("token shards round-trip as u16 and u32") {
  TempDir dir;
  SUBCASE("u16") {
    std::vector<int32_t> tokens = encode_documents({"hello", "w\xc3\xb6rld"});
    tokens.push_back(65535);
    write_token_shard(dir / "a.tok", tokens);
    CHECK(fs::file_size(dir / "a.tok") == kShardHeaderBytes + 2 * tokens.size());
    const TokenShard shard = TokenShard::open(dir / "a.tok");
    CHECK(shard.dtype() == TokenDType::u16);
    CHECK(shard.size() == tokens.size());
    CHECK(shard.to_vector() == tokens);
    CHECK(shard[5] == kEndOfDocument);
    CHECK(read_bytes(dir / "a.tok").substr(0, 16) == std::string("COTANTOK\3\0\0\0\1\0\0\0", 16));
    // The largest id, then no tokenizer recorded: vocabulary 0, hash 0.
    CHECK(read_bytes(dir / "a.tok").substr(24, 16) == std::string("\xff\xff\0\0\0\0\0\0\0\0\0\0\0\0\0\0", 16));
    CHECK(shard.max_id() == 65535);
    CHECK(!shard.tokenizer().known());
  }
  SUBCASE("u32") {
    const std::vector<int32_t> tokens = {0, 65536, 256, 2000000000, 7};
    write_token_shard(dir / "b.tok", tokens);
    CHECK(fs::file_size(dir / "b.tok") == kShardHeaderBytes + 4 * tokens.size());
    const TokenShard shard = TokenShard::open(dir / "b.tok");
    CHECK(shard.dtype() == TokenDType::u32);
    CHECK(shard.to_vector() == tokens);
    CHECK(shard.max_id() == 2000000000);
  }
  SUBCASE("empty") {
    write_token_shard(dir / "c.tok", std::vector<int32_t>{});
    CHECK(TokenShard::open(dir / "c.tok").size() == 0);
  }
  SUBCASE("overwrite leaves no temporary file") {
    write_token_shard(dir / "d.tok", std::vector<int32_t>{1, 2, 3});
    write_token_shard(dir / "d.tok", std::vector<int32_t>{4, 5});
    CHECK(TokenShard::open(dir / "d.tok").to_vector() == std::vector<int32_t>{4, 5});
    CHECK(std::distance(fs::directory_iterator(dir.path), fs::directory_iterator()) == 1);
  }
  CHECK(error_of([&] { write_token_shard(dir / "e.tok", std::vector<int32_t>{1, -2}); }) ==
        "[data] " + (dir / "e.tok") + ": token id -2 is negative");
}

TEST_CASE("token shards record the tokenizer that made them") {
  TempDir dir;
  const ShardTokenizer qwen{0x0123456789abcdefull, 151936};
  write_token_shard(dir / "a.tok", std::vector<int32_t>{5, 151935, 0}, qwen);
  const TokenShard shard = TokenShard::open(dir / "a.tok");
  CHECK(shard.tokenizer() == qwen);
  CHECK(shard.dtype() == TokenDType::u32);
  const std::string bytes = read_bytes(dir / "a.tok");
  CHECK(bytes.substr(28, 12) == std::string("\x80\x51\x02\x00\xef\xcd\xab\x89\x67\x45\x23\x01", 12));
  CHECK(fs::file_size(dir / "a.tok") == 40 + 4 * 3);
  // The vocabulary decides the width: a tokenizer of 65536 ids writes u16 even for small ids.
  write_token_shard(dir / "b.tok", std::vector<int32_t>{1, 2}, ShardTokenizer{7, 65536});
  CHECK(TokenShard::open(dir / "b.tok").dtype() == TokenDType::u16);
  write_token_shard(dir / "c.tok", std::vector<int32_t>{1, 2}, ShardTokenizer{7, 65537});
  CHECK(TokenShard::open(dir / "c.tok").dtype() == TokenDType::u32);
  write_token_shard(dir / "bytes.tok", encode_documents({"hi"}), kByteTokenizer);
  CHECK(describe(TokenShard::open(dir / "bytes.tok").tokenizer()) == "the byte tokenizer");
  CHECK(describe(qwen) == "tokenizer 0123456789abcdef (vocabulary 151936)");
  CHECK(error_of([&] { write_token_shard(dir / "d.tok", std::vector<int32_t>{257}, kByteTokenizer); }) ==
        "[data] " + (dir / "d.tok") + ": token id 257 is not below the tokenizer's vocabulary size 257");

  // One directory, two tokenizers: refused, naming both shards and both tokenizers.
  fs::create_directories(dir / "mixed");
  write_token_shard(dir / "mixed/train-00000.tok", std::vector<int32_t>{1, 2, 3}, qwen);
  write_token_shard(dir / "mixed/train-00001.tok", encode_documents({"abc"}), kByteTokenizer);
  CHECK(error_of([&] { load_tokens(dir / "mixed", 0.05, 0); }) ==
        "[data] " + (dir / "mixed/train-00001.tok") + " was made with the byte tokenizer, but " +
            (dir / "mixed/train-00000.tok") +
            " with tokenizer 0123456789abcdef (vocabulary 151936): the shards of one directory must come from one "
            "tokenizer");
  fs::remove(dir / "mixed/train-00001.tok");
  write_token_shard(dir / "mixed/val-00000.tok", std::vector<int32_t>{9}, qwen);
  CHECK(load_tokens(dir / "mixed", 0.05, 0).tokenizer == qwen);

  // Version 2 (a 32-byte header, no tokenizer) is still read.
  write_file(dir / "v2.tok", std::string("COTANTOK\2\0\0\0\1\0\0\0\2\0\0\0\0\0\0\0\x2c\1\0\0\0\0\0\0", 32) +
                                 std::string("\7\0\x2c\1", 4));
  CHECK(TokenShard::open(dir / "v2.tok").to_vector() == std::vector<int32_t>{7, 300});
  CHECK(!TokenShard::open(dir / "v2.tok").tokenizer().known());
}

TEST_CASE("the mapping outlives the shard object it came from") {
  TempDir dir;
  write_token_shard(dir / "a.tok", std::vector<int32_t>{10, 20, 30});
  TokenSequence seq;
  {
    const TokenShard shard = TokenShard::open(dir / "a.tok");
    seq = TokenSequence(shard);
  }
  fs::remove(dir / "a.tok");
  CHECK(seq.to_vector() == std::vector<int32_t>{10, 20, 30});
}

TEST_CASE("corrupt token shards are rejected with the file's name") {
  TempDir dir;
  const std::string good = dir / "good.tok", bad = dir / "bad.tok";
  write_token_shard(good, std::vector<int32_t>{1, 2, 3, 4});
  const std::string bytes = read_bytes(good);
  auto patched = [&](size_t offset, std::string_view with) {
    std::string b = bytes;
    b.replace(offset, with.size(), with);
    write_file(bad, b);
  };
  auto open_error = [&] { return error_of([&] { TokenShard::open(bad); }); };

  write_file(bad, bytes.substr(0, 10));
  CHECK(open_error() == "[data] " + bad + ": 10 bytes is too short for a token shard (the header alone is 24)");
  patched(0, "COTANTOX");
  CHECK(open_error() == "[data] " + bad + ": not a token shard (the magic is not COTANTOK)");
  patched(8, std::string("\4\0\0\0", 4));
  CHECK(open_error() == "[data] " + bad + ": token shard version 4 is not supported (expected 1 to 3)");
  patched(28, std::string("\1", 1));
  CHECK(open_error() == "[data] " + bad + ": the header records a tokenizer hash without a vocabulary size, or the reverse");
  patched(24, std::string("\0\0\1\0", 4));
  CHECK(open_error() == "[data] " + bad + ": the header's largest id 65536 does not fit the shard's u16 tokens");
  patched(12, std::string("\7\0\0\0", 4));
  CHECK(open_error() == "[data] " + bad + ": unknown token dtype code 7 (1 = u16, 2 = u32)");
  patched(16, std::string("\5\0\0\0\0\0\0\0", 8));
  CHECK(open_error() == "[data] " + bad + ": the header says 5 tokens, but the file holds 8 bytes of 2-byte tokens after the header");
  write_file(bad, bytes.substr(0, bytes.size() - 1));
  CHECK(open_error() == "[data] " + bad + ": the header says 4 tokens, but the file holds 7 bytes of 2-byte tokens after the header");
  // Version 1 (no largest id, tokens from offset 24) is still read; its largest id is found by a scan.
  write_file(bad, std::string("COTANTOK\1\0\0\0\1\0\0\0\3\0\0\0\0\0\0\0", 24) + std::string("\7\0\x2c\1\5\0", 6));
  CHECK(TokenShard::open(bad).to_vector() == std::vector<int32_t>{7, 300, 5});
  CHECK(TokenShard::open(bad).max_id() == 300);
  CHECK(TokenSequence(TokenShard::open(bad)).max_id() == 300);
  const std::string missing = dir / "missing.tok";
  CHECK(error_of([&] { TokenShard::open(missing); }) == "[data] " + missing + ": cannot open: No such file or directory");
  // load_tokens reads a .tok file as a shard, never as text.
  write_file(bad, "just text");
  CHECK(error_of([&] { load_tokens(bad, 0.05, 0); }) ==
        "[data] " + bad + ": 9 bytes is too short for a token shard (the header alone is 24)");
}

TEST_CASE("token sequences span chunks") {
  TempDir dir;
  write_token_shard(dir / "a.tok", std::vector<int32_t>{0, 1, 2});
  write_token_shard(dir / "b.tok", std::vector<int32_t>{3, 70000});
  TokenSequence seq(TokenShard::open(dir / "a.tok"));
  seq.append(TokenSequence(std::vector<int32_t>{}));
  seq.append(TokenSequence(TokenShard::open(dir / "b.tok")));
  seq.append(TokenSequence(std::vector<int32_t>{5, 6}));
  CHECK(seq.size() == 7);
  CHECK(seq.to_vector() == std::vector<int32_t>{0, 1, 2, 3, 70000, 5, 6});
  std::vector<int64_t> window(4);
  seq.copy_to(2, 4, window.data());
  CHECK(window == std::vector<int64_t>{2, 3, 70000, 5});
  CHECK(seq[6] == 6);
  CHECK(error_of([&] { seq.copy_to(5, 3, window.data()); }) == "[data] tokens [5, 8) are out of range for 7 tokens");
}

TEST_CASE("the validation split is seeded, deterministic and disjoint") {
  TempDir dir;
  std::string text;
  std::vector<std::string> all;
  for (int i = 0; i < 200; ++i) {
    all.push_back("document " + std::to_string(i) + "\n");
    text += all.back() + "%\n";
  }
  write_file(dir / "corpus", text);

  const TokenData a = load_tokens(dir / "corpus", 0.1, 7);
  const TokenData b = load_tokens(dir / "corpus", 0.1, 7);
  const TokenData c = load_tokens(dir / "corpus", 0.1, 8);
  CHECK(a.train.to_vector() == b.train.to_vector());
  CHECK(a.val.to_vector() == b.val.to_vector());
  CHECK(a.val.to_vector() != c.val.to_vector());

  const std::vector<std::string> train = documents_of(a.train), val = documents_of(a.val);
  CHECK(val.size() == 20);
  CHECK(train.size() == 180);
  std::set<std::string> seen(train.begin(), train.end());
  for (const std::string& d : val) CHECK(seen.insert(d).second);  // disjoint
  CHECK(seen == std::set<std::string>(all.begin(), all.end()));   // and complete
  CHECK(std::is_sorted(val.begin(), val.end(), [&](const std::string& x, const std::string& y) {
    return std::find(all.begin(), all.end(), x) < std::find(all.begin(), all.end(), y);
  }));  // corpus order kept

  // At least one document on each side once there are two; none to validation at fraction 0.
  const DocumentSplit two = split_train_val({"x", "y"}, 0.01, 0);
  CHECK(two.train.size() == 1);
  CHECK(two.val.size() == 1);
  CHECK(split_train_val({"x", "y"}, 0.99, 0).train.size() == 1);
  CHECK(split_train_val({"x", "y"}, 0.0, 0).val.empty());
  CHECK(split_train_val({"x"}, 0.5, 0).val.empty());
  CHECK(error_of([] { split_train_val({"x"}, 1.0, 0); }) == "[data] the validation fraction must be in [0, 1), got 1");

  SUBCASE("shards written from the split load as the same streams") {
    const DocumentSplit split = split_train_val(read_documents(dir / "corpus"), 0.1, 7);
    const std::vector<int32_t> train_tokens = encode_documents(split.train);
    const size_t half = train_tokens.size() / 2;
    fs::create_directories(dir.path / "shards");
    write_token_shard(dir / "shards/train-00000.tok", std::span(train_tokens).subspan(0, half));
    write_token_shard(dir / "shards/train-00001.tok", std::span(train_tokens).subspan(half));
    write_token_shard(dir / "shards/val-00000.tok", encode_documents(split.val));
    const TokenData shards = load_tokens(dir / "shards", 0.5, 123);  // fraction and seed unused
    CHECK(shards.train.to_vector() == a.train.to_vector());
    CHECK(shards.val.to_vector() == a.val.to_vector());

    const TokenData single = load_tokens(dir / "shards/train-00001.tok", 0.1, 7);
    CHECK(single.train.size() == train_tokens.size() - half);
    CHECK(single.val.empty());
  }
}

TEST_CASE("a shard directory without train shards is an error") {
  TempDir dir;
  fs::create_directories(dir.path / "valonly");
  write_token_shard(dir / "valonly/val-00000.tok", std::vector<int32_t>{1, 2});
  CHECK(error_of([&] { load_tokens(dir / "valonly", 0.05, 0); }) ==
        "[data] " + (dir / "valonly") + ": holds .tok files but no train-*.tok shards");
}

TEST_CASE("window loader: deterministic batches with shifted targets") {
  const TokenSequence tokens(iota_tokens(1000));
  WindowLoader a(tokens, 16, 4, 1), b(tokens, 16, 4, 1), c(tokens, 16, 4, 2);
  const auto ta = take(a, 3), tb = take(b, 3), tc = take(c, 3);
  CHECK(ta == tb);
  CHECK(ta != tc);

  WindowLoader d(tokens, 16, 4, 1);
  const Batch batch = d.next();
  CHECK(batch.inputs.shape() == Shape{4, 16});
  CHECK(batch.targets.shape() == Shape{4, 16});
  CHECK(batch.inputs.dtype() == DType::i64);
  CHECK(batch.targets.dtype() == DType::i64);
  const std::vector<int64_t> in = batch.inputs.to_vector<int64_t>(), tg = batch.targets.to_vector<int64_t>();
  for (int r = 0; r < 4; ++r)
    for (int t = 0; t < 16; ++t) {
      CHECK(tg[size_t(r * 16 + t)] == in[size_t(r * 16 + t)] + 1);  // the tokens are 0, 1, 2, ...
      if (t > 0) CHECK(in[size_t(r * 16 + t)] == tg[size_t(r * 16 + t - 1)]);
    }
}

TEST_CASE("window loader: an epoch visits every window once") {
  const TokenSequence tokens(iota_tokens(1000));
  WindowLoader loader(tokens, 10, 1, 5);
  for (int epoch = 0; epoch < 3; ++epoch) {
    REQUIRE(loader.epoch() == uint64_t(epoch));
    const uint64_t n = loader.windows_in_epoch();
    std::set<int64_t> starts;
    for (uint64_t i = 0; i < n; ++i) starts.insert(loader.next().inputs.to_vector<int64_t>()[0]);
    CHECK(starts.size() == n);
    const int64_t offset = *starts.begin();
    CHECK(offset < 10);
    CHECK(n == uint64_t((1000 - 1 - offset) / 10));
    for (int64_t s : starts) CHECK((s - offset) % 10 == 0);
  }
}

TEST_CASE("window loader: a restored loader continues exactly") {
  // 50 tokens, seq_len 8: 5 or 6 windows per epoch, so 10 batches of 3 cross several epochs.
  const TokenSequence tokens(iota_tokens(50));
  WindowLoader original(tokens, 8, 3, 42);
  take(original, 5);
  const LoaderState saved = original.state();
  const auto expected = take(original, 5);

  const LoaderState parsed = LoaderState::from_json(parse_json(saved.to_json().dump()));
  CHECK(parsed == saved);
  WindowLoader resumed(tokens, 8, 3, 999);
  take(resumed, 2);
  resumed.restore(parsed);
  CHECK(resumed.state() == saved);
  CHECK(take(resumed, 5) == expected);
  CHECK(original.epoch() >= 2);

  // Seeds beyond int64 survive the JSON trip.
  LoaderState big = saved;
  big.seed = ~uint64_t(0);
  CHECK(LoaderState::from_json(parse_json(big.to_json().dump())) == big);

  WindowLoader other_len(tokens, 4, 3, 42);
  CHECK(error_of([&] { other_len.restore(saved); }) ==
        "[data] cannot restore the loader: the state is for seq_len 8 over 50 tokens, this loader has seq_len 4 "
        "over 50 tokens");
  LoaderState past_end = saved;
  past_end.position = 1000;
  CHECK(error_of([&] { resumed.restore(past_end); }).starts_with(
      "[data] cannot restore the loader: position 1000 is past the end of epoch "));
  CHECK(error_of([] { LoaderState::from_json(parse_json(R"({"seed": -1})")); }) ==
        "[data] loader state: 'seed' must be a non-negative integer, got -1");
}

TEST_CASE("window loader: seq_len longer than the data") {
  CHECK(error_of([] { WindowLoader(TokenSequence(iota_tokens(300)), 512, 2, 0); }) ==
        "[data] seq_len 512 needs at least 513 tokens, but the training split has 300");
  // Exactly seq_len + 1 tokens: one window, every epoch.
  WindowLoader tight(TokenSequence(iota_tokens(9)), 8, 2, 0);
  CHECK(tight.windows_in_epoch() == 1);
  CHECK(tight.next().inputs.to_vector<int64_t>() == std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7});
}

TEST_CASE("validation batches are consecutive windows in order") {
  const TokenSequence tokens(iota_tokens(30));
  // seq_len 4: windows start at 0, 4, ..., 24 (7 windows; the last ends at token 28).
  const std::vector<Batch> all = validation_batches(tokens, 4, 3);
  REQUIRE(all.size() == 3);
  CHECK(all[0].inputs.shape() == Shape{3, 4});
  CHECK(all[2].inputs.shape() == Shape{1, 4});
  std::vector<int64_t> inputs, targets;
  for (const Batch& b : all) {
    for (int64_t v : b.inputs.to_vector<int64_t>()) inputs.push_back(v);
    for (int64_t v : b.targets.to_vector<int64_t>()) targets.push_back(v);
  }
  const std::vector<int32_t> first28 = iota_tokens(28);
  CHECK(inputs == std::vector<int64_t>(first28.begin(), first28.end()));
  for (size_t i = 0; i < inputs.size(); ++i) CHECK(targets[i] == inputs[i] + 1);

  CHECK(validation_batches(tokens, 4, 3, 2).size() == 2);
  CHECK(validation_batches(tokens, 29, 3).size() == 1);
  CHECK(validation_batches(tokens, 30, 3).empty());
  CHECK(validation_batches(TokenSequence(), 4, 3).empty());
}

TEST_CASE("the default corpus: Debian's English fortunes") {
  std::string path;
  try {
    path = default_corpus_path();
  } catch (const Error& e) {
    CHECK(std::string(e.what()) ==
          "[data] the default corpus /usr/share/games/fortunes is missing: install Debian's fortunes package "
          "(build.sh does) or pass --data PATH");
    MESSAGE("skipped: /usr/share/games/fortunes is not installed");
    return;
  }
  const std::vector<std::string> files = corpus_files(path);
  for (const std::string& f : files) {
    CHECK(fs::path(f).extension() != ".dat");
    CHECK(fs::path(f).extension() != ".u8");
    CHECK(fs::path(f).parent_path() == fs::path(path));
  }
  const std::vector<std::string> docs = read_documents(path);
  size_t bytes = 0;
  for (const std::string& d : docs) bytes += d.size();
  MESSAGE("default corpus: ", files.size(), " files, ", docs.size(), " documents, ", bytes, " bytes");
  CHECK(bytes > 1'000'000);
  CHECK(docs.size() > 1000);

  const TokenData data = load_tokens(path, 0.05, 0);
  CHECK(data.train.size() + data.val.size() == bytes + docs.size());
  CHECK(data.val.size() > 0);
}
