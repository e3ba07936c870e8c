// The tokenizer against HF tokenizers: the committed fixtures of tests/tokenizer/make_fixtures.py
// (HF's own ids and decodings of every document), and its errors.
#include <doctest/doctest.h>
#include <tbb/parallel_for.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "support.hpp"
#include "text/byte_tokenizer.hpp"
#include "text/decompress.hpp"
#include "text/tokenizer.hpp"
#include "text/tokenizer_files.hpp"
#include "util/json.hpp"

namespace fs = std::filesystem;
using namespace cotan;
using text::Tokenizer;

namespace {

const fs::path kFixtures = fs::path(COTAN_SOURCE_DIR) / "tests/tokenizer/fixtures";

// Little-endian reads from a fixture file's bytes.
struct Cursor {
  const std::string& bytes;
  size_t at = 0;
  uint32_t u32() {
    REQUIRE(at + 4 <= bytes.size());
    uint32_t v;
    std::memcpy(&v, bytes.data() + at, 4);
    at += 4;
    return v;
  }
  uint8_t u8() {
    REQUIRE(at < bytes.size());
    return uint8_t(bytes[at++]);
  }
  std::string take(size_t n) {
    REQUIRE(at + n <= bytes.size());
    std::string s = bytes.substr(at, n);
    at += n;
    return s;
  }
  std::vector<int32_t> ids() {
    const uint32_t n = u32();
    std::vector<int32_t> v(n);
    for (uint32_t i = 0; i < n; ++i) v[i] = int32_t(u32());
    return v;
  }
};

struct Document {
  int set;  // 0: the large set, 1: the adversarial one
  std::string text;
};

const std::vector<Document>& documents() {
  static const std::vector<Document> docs = [] {
    const std::string bytes = text::read_all((kFixtures / "texts.bin.zst").string());
    Cursor c{bytes};
    REQUIRE(c.take(8) == "CTTXT001");
    std::vector<Document> out(c.u32());
    for (Document& d : out) {
      d.set = c.u8();
      d.text = c.take(c.u32());
    }
    CHECK(c.at == bytes.size());
    return out;
  }();
  return docs;
}

struct Expected {
  std::vector<int32_t> ids, ids_plain;  // with and without the template
  std::string decoded, decoded_skip;    // decode(ids), decode(ids, skip_special_tokens)
};

// A decoded string: its bytes, or (length 0xFFFFFFFF) a prefix and a suffix around the document's
// own text, which most decodings give back.
std::string decoded_string(Cursor& c, const std::string& document) {
  const uint32_t n = c.u32();
  if (n != 0xFFFFFFFFu) return c.take(n);
  const std::string prefix = c.take(c.u32());
  return prefix + document + c.take(c.u32());
}

std::vector<Expected> expected_of(const fs::path& dir, const std::vector<Document>& docs) {
  const std::string bytes = text::read_all((dir / "expected.bin.zst").string());
  Cursor c{bytes};
  REQUIRE(c.take(8) == "CTEXP002");
  std::vector<Expected> out(c.u32());
  REQUIRE(out.size() == docs.size());
  for (size_t i = 0; i < out.size(); ++i) {
    Expected& e = out[i];
    e.ids = c.ids();
    e.ids_plain = c.ids();
    e.decoded = decoded_string(c, docs[i].text);
    e.decoded_skip = decoded_string(c, docs[i].text);
  }
  CHECK(c.at == bytes.size());
  return out;
}

std::string show(const std::vector<int32_t>& ids) {
  std::string s;
  for (size_t i = 0; i < ids.size() && i < 40; ++i) s += (i ? " " : "") + std::to_string(ids[i]);
  return ids.size() > 40 ? s + " ..." : s;
}

std::vector<fs::path> fixture_tokenizers() {
  std::vector<fs::path> dirs;
  for (const auto& e : fs::directory_iterator(kFixtures))
    if (e.is_directory() && fs::exists(e.path() / "expected.bin.zst")) dirs.push_back(e.path());
  std::sort(dirs.begin(), dirs.end());
  return dirs;
}

Tokenizer load_fixture(const fs::path& dir) {
  if (fs::exists(dir / "tokenizer.json")) return Tokenizer::load(dir.string());
  return Tokenizer::from_json(text::read_all((dir / "tokenizer.json.zst").string()), (dir / "tokenizer.json.zst").string());
}

std::string json_error(const std::string& json) {
  try {
    Tokenizer::from_json(json, "t.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// A small valid tokenizer.json with `part` spliced in as its member `key`.
std::string with(const std::string& key, const std::string& part) {
  std::string model = R"({"type":"BPE","vocab":{"a":0,"b":1,"ab":2},"merges":["a b"]})";
  std::string j = "{\"version\":\"1.0\",\"added_tokens\":[],";
  for (const char* k : {"normalizer", "pre_tokenizer", "post_processor", "decoder"})
    j += "\"" + std::string(k) + "\":" + (key == k ? part : "null") + ",";
  return j + "\"model\":" + (key == "model" ? part : model) + "}";
}

}  // namespace

TEST_CASE("the fixtures cover at least 2 MB of text and an adversarial set") {
  size_t large = 0, adversarial = 0;
  for (const Document& d : documents()) (d.set == 0 ? large : adversarial) += d.text.size();
  CHECK(large >= 2'000'000);
  CHECK(adversarial > 0);
  CHECK(fixture_tokenizers().size() >= 5);
}

TEST_CASE("encode and decode match HF tokenizers on every fixture document") {
  const std::vector<Document>& docs = documents();
  for (const fs::path& dir : fixture_tokenizers()) {
    const std::string name = dir.filename().string();
    CAPTURE(name);
    const Tokenizer tokenizer = load_fixture(dir);
    const std::vector<Expected> expected = expected_of(dir, docs);
    size_t encode_bad = 0, decode_bad = 0, tokens = 0;
    for (size_t i = 0; i < docs.size(); ++i) {
      const Expected& e = expected[i];
      tokens += e.ids.size();
      const std::vector<int32_t> ids = tokenizer.encode(docs[i].text);
      const std::vector<int32_t> plain = tokenizer.encode(docs[i].text, false);
      if (ids != e.ids || plain != e.ids_plain) {
        if (++encode_bad <= 3) {
          MESSAGE(name, " document ", i, " (set ", docs[i].set, ") ", docs[i].text.substr(0, 60), "\n  HF:    ",
                  show(e.ids), "\n  cotan: ", show(ids));
        }
      }
      const std::string decoded = tokenizer.decode(e.ids), decoded_skip = tokenizer.decode(e.ids, true);
      if (decoded != e.decoded || decoded_skip != e.decoded_skip) {
        if (++decode_bad <= 3) {
          MESSAGE(name, " document ", i, ": decode\n  HF:    ", e.decoded.substr(0, 80), "\n  cotan: ", decoded.substr(0, 80));
        }
      }
    }
    MESSAGE(name, ": ", docs.size(), " documents, ", tokens, " tokens");
    CHECK(encode_bad == 0);
    CHECK(decode_bad == 0);
  }
}

TEST_CASE("decode matches HF tokenizers on made-up id lists") {
  // Random ids, byte tokens that are not UTF-8, specials between words, ids past the vocabulary.
  for (const fs::path& dir : fixture_tokenizers()) {
    const std::string name = dir.filename().string();
    CAPTURE(name);
    const Tokenizer tokenizer = load_fixture(dir);
    const std::string bytes = text::read_all((dir / "decode.bin.zst").string());
    Cursor c{bytes};
    REQUIRE(c.take(8) == "CTDEC001");
    const uint32_t cases = c.u32();
    size_t bad = 0;
    for (uint32_t k = 0; k < cases; ++k) {
      const std::vector<int32_t> ids = c.ids();
      const std::string kept = c.take(c.u32()), skipped = c.take(c.u32());
      const std::string got = tokenizer.decode(ids), got_skip = tokenizer.decode(ids, true);
      if ((got != kept || got_skip != skipped) && ++bad <= 3)
        MESSAGE(name, " case ", k, " ids ", show(ids), "\n  HF:    ", kept, "\n  cotan: ", got);
    }
    CHECK(c.at == bytes.size());
    CHECK(cases > 0);
    CHECK(bad == 0);
  }
}

TEST_CASE("the byte tokenizer's tokenizer.json is the one HF saves, and HF encodes every document as encode_bytes does") {
  // fixtures/bytes was written by make_byte_fixture.py: the tokenizer built and saved by HF, and
  // HF's encodings (checked against cotan's reader in the tests above).
  const fs::path dir = kFixtures / "bytes";
  CHECK(json_equal(parse_json(text::byte_tokenizer_json()), read_json_file((dir / "tokenizer.json").string())));
  CHECK(text::byte_tokenizer_json() == text::read_all((dir / "tokenizer.json").string()) + "\n");
  CHECK(text::is_byte_tokenizer_json(dir.string()));
  CHECK(text::is_byte_tokenizer_json((dir / "tokenizer.json").string()));
  CHECK_FALSE(text::is_byte_tokenizer_json((kFixtures / "qwen2").string()));
  CHECK_FALSE(text::is_byte_tokenizer_json((kFixtures / "nowhere").string()));
  CHECK_FALSE(text::load_tokenizer(dir.string()).has_value());
  CHECK(text::load_tokenizer((kFixtures / "qwen2").string()).has_value());
  // A file that is not JSON is not the byte tokenizer's; loading it is the reader's error.
  TempDir tmp;
  write_file(tmp / "broken.json", "{\"model\": ");
  CHECK_FALSE(text::is_byte_tokenizer_json(tmp / "broken.json"));
  CHECK(error_of([&] { text::load_tokenizer(tmp / "broken.json"); }).find("broken.json: not valid JSON") != std::string::npos);
  const std::vector<Document>& docs = documents();
  const std::vector<Expected> expected = expected_of(dir, docs);
  size_t bad = 0, replaced = 0;
  for (size_t i = 0; i < docs.size(); ++i) {
    // HF is given invalid UTF-8 with U+FFFD for each ill-formed subsequence (its API takes str).
    const bool valid = text::valid_utf8(docs[i].text);
    replaced += !valid;
    const std::vector<int32_t> ids = text::encode_bytes(valid ? docs[i].text : text::replace_invalid_utf8(docs[i].text));
    if ((ids != expected[i].ids || ids != expected[i].ids_plain) && ++bad <= 3)
      MESSAGE("document ", i, "\n  HF:    ", show(expected[i].ids), "\n  bytes: ", show(ids));
  }
  CHECK(bad == 0);
  CHECK(replaced > 0);
  // A text spelling the end-of-document token is its bytes there too.
  const std::string eod = text::kByteEndOfDocumentToken;
  const Tokenizer hf = load_fixture(dir);
  CHECK(hf.encode("a" + eod) == text::encode_bytes("a" + eod));
  CHECK(hf.decode(std::vector<int32_t>{104, 105, text::kEndOfDocument}) == "hi" + eod);
  CHECK(hf.vocab_size() == text::kByteVocab);
}

TEST_CASE("a model directory's tokenizer files: the byte tokenizer's, and an HF tokenizer's copied or completed") {
  TempDir tmp;
  const auto write_files = [&](const std::string& sub, const text::TokenizerFiles& files) {
    for (const text::TokenizerFile& f : files.files) write_file(tmp / (sub + "/" + f.name), f.text);
    return tmp / sub;
  };
  // The byte tokenizer's: eos and pad 256, no bos; read back as cotan reads a model directory.
  const text::TokenizerFiles bytes = text::byte_tokenizer_files();
  const std::string byte_dir = write_files("bytes", bytes);
  CHECK(text::is_byte_tokenizer_json(byte_dir));
  const Tokenizer b = Tokenizer::load(byte_dir);
  CHECK(b.eos_id() == std::optional<int32_t>(256));
  CHECK_FALSE(b.bos_id().has_value());
  const Json generation = read_json_file(tmp / "bytes/generation_config.json");
  CHECK(generation["eos_token_id"] == 256);
  CHECK(bytes.config_ids == std::vector<std::pair<std::string, std::string>>{{"eos_token_id", "256"}, {"pad_token_id", "256"}});

  // A Llama-style directory with its tokenizer_config.json and config.json: copied as they are,
  // and a generation_config.json written from their ids.
  const fs::path llama = fs::path(COTAN_SOURCE_DIR) / "tests/hf/fixtures/llama_with_tokenizer";
  const text::TokenizerFiles l = text::hf_tokenizer_files(Tokenizer::load(llama.string()));
  const std::string llama_dir = write_files("llama", l);
  for (const char* name : {"tokenizer.json", "tokenizer_config.json"})
    CHECK(text::read_all(tmp / (std::string("llama/") + name)) == text::read_all((llama / name).string()));
  const Json lg = read_json_file(tmp / "llama/generation_config.json");
  CHECK(lg["bos_token_id"] == 1);
  CHECK(lg["eos_token_id"] == 2);
  CHECK(l.config_ids ==
        std::vector<std::pair<std::string, std::string>>{{"bos_token_id", "1"}, {"eos_token_id", "2"}, {"pad_token_id", "null"}});
  CHECK(Tokenizer::load(llama_dir).bos_id() == std::optional<int32_t>(1));

  // A tokenizer.json alone (Qwen2-style, no BOS in its template): a tokenizer_config.json is
  // written with its end-of-sequence token; Llama 3's template gives its bos.
  const text::TokenizerFiles q = text::hf_tokenizer_files(Tokenizer::load((kFixtures / "qwen2").string()));
  write_files("qwen2", q);
  const Json qc = read_json_file(tmp / "qwen2/tokenizer_config.json");
  CHECK(qc["eos_token"] == "<|endoftext|>");
  CHECK(qc["bos_token"].is_null());
  CHECK(q.config_ids == std::vector<std::pair<std::string, std::string>>{{"eos_token_id", std::to_string(*Tokenizer::load((kFixtures / "qwen2").string()).eos_id())}});
  const text::TokenizerFiles l3 = text::hf_tokenizer_files(Tokenizer::load((kFixtures / "llama3").string()));
  const std::string l3_dir = write_files("llama3", l3);
  CHECK(read_json_file(tmp / "llama3/tokenizer_config.json")["bos_token"] == "<|begin_of_text|>");
  CHECK(Tokenizer::load(l3_dir).bos_id() == Tokenizer::load(l3_dir).token_to_id("<|begin_of_text|>"));
}

TEST_CASE("a tokenizer encodes the same from many threads at once") {
  const std::vector<fs::path> dirs = fixture_tokenizers();
  REQUIRE(!dirs.empty());
  const Tokenizer tokenizer = load_fixture(dirs.front());
  const std::vector<Document>& docs = documents();
  const size_t n = std::min<size_t>(docs.size(), 3000);
  std::vector<std::vector<int32_t>> serial(n), parallel(n);
  for (size_t i = 0; i < n; ++i) serial[i] = tokenizer.encode(docs[i].text);
  tbb::parallel_for(size_t(0), n, [&](size_t i) { parallel[i] = tokenizer.encode(docs[i].text); });
  CHECK(serial == parallel);
}

TEST_CASE("invalid UTF-8 is replaced as Python's errors='replace' does, or refused") {
  const std::string r = "\xEF\xBF\xBD";
  // Each maximal ill-formed subsequence is one U+FFFD (Unicode's recommended practice).
  CHECK(text::replace_invalid_utf8("a\x80" "b") == "a" + r + "b");
  CHECK(text::replace_invalid_utf8("\xE2\x82") == r);                     // a truncated 3-byte sequence
  CHECK(text::replace_invalid_utf8("\xE2\x82x") == r + "x");
  CHECK(text::replace_invalid_utf8("\xF0\x80\x80") == r + r + r);         // F0 80: 80 cannot follow F0
  CHECK(text::replace_invalid_utf8("\xED\xA0\x80") == r + r + r);         // a surrogate
  CHECK(text::replace_invalid_utf8("\xC0\xAF") == r + r);                 // overlong
  CHECK(text::replace_invalid_utf8("\xF4\x90\x80\x80") == r + r + r + r);  // above U+10FFFF
  CHECK(text::replace_invalid_utf8("\xF0\x9F\x98") == r);                 // a truncated emoji
  CHECK(text::replace_invalid_utf8("\xFF\xFE") == r + r);
  CHECK(text::replace_invalid_utf8("ok \xC3\xA9") == "ok \xC3\xA9");
  size_t at = 0;
  CHECK(!text::valid_utf8("abc\xC3(", &at));
  CHECK(at == 3);
  CHECK(text::valid_utf8("\xF0\x9F\x98\x80 \xE4\xB8\xAD"));

  const Tokenizer t = Tokenizer::from_json(with("", ""), "t.json");
  CHECK(t.encode("ab\xFF") == t.encode("ab" + r));
  try {
    t.encode_checked("ab\xFF");
    FAIL("invalid UTF-8 was accepted");
  } catch (const Error& e) {
    CHECK(std::string(e.what()) == "[tokenizer] invalid UTF-8 at byte 2");
  }
}

TEST_CASE("BPE merges by rank, leftmost first, and reads both merge forms") {
  // "aaa": the pair (a, a) twice; the leftmost merges first, leaving "aa a".
  const std::string vocab = R"({"a":0,"b":1,"aa":2,"ab":3,"aab":4})";
  for (const std::string merges : {R"(["a a","a b","aa b"])", R"([["a","a"],["a","b"],["aa","b"]])"}) {
    const Tokenizer t = Tokenizer::from_json(
        R"({"model":{"type":"BPE","vocab":)" + vocab + R"(,"merges":)" + merges + "}}", "t.json");
    CHECK(t.encode("aaa") == std::vector<int32_t>{2, 0});
    CHECK(t.encode("aab") == std::vector<int32_t>{4});   // "aa" first (rank 0), then "aa b"
    CHECK(t.encode("abab") == std::vector<int32_t>{3, 3});
    CHECK(t.decode(std::vector<int32_t>{2, 0, 99}) == "aa a");  // no decoder: tokens joined by spaces; 99 dropped
    CHECK(t.vocab_size() == 5);
  }
}

TEST_CASE("bad tokenizer.json files are errors naming the file and the field") {
  CHECK(json_error("{\"model\": ").starts_with("[tokenizer] t.json: not valid JSON: "));
  CHECK(json_error("[1, 2]") == "[tokenizer] t.json: not a tokenizer.json (the top level is not an object)");
  CHECK(json_error(R"({"version":"1.0"})") == "[tokenizer] t.json: model is missing");
  CHECK(json_error(with("model", R"({"type":"WordPiece","vocab":{}})")) ==
        "[tokenizer] t.json: model.type \"WordPiece\" is not supported (supported: BPE)");
  CHECK(json_error(with("pre_tokenizer", R"({"type":"Whitespace"})")) ==
        "[tokenizer] t.json: pre_tokenizer.type \"Whitespace\" is not supported (supported: ByteLevel, Split, "
        "Metaspace, Digits, Sequence)");
  CHECK(json_error(with("normalizer", R"({"type":"Sequence","normalizers":[{"type":"NFC"},{"type":"BertNormalizer"}]})")) ==
        "[tokenizer] t.json: normalizer.normalizers[1].type \"BertNormalizer\" is not supported (supported: NFC, NFD, "
        "NFKC, NFKD, Lowercase, Replace, Prepend, Strip, Sequence)");
  CHECK(json_error(with("decoder", R"({"type":"WordPiece"})")) ==
        "[tokenizer] t.json: decoder.type \"WordPiece\" is not supported (supported: ByteLevel, Metaspace, "
        "ByteFallback, Fuse, Strip, Replace, Sequence)");
  CHECK(json_error(with("post_processor", R"({"type":"BertProcessing"})")) ==
        "[tokenizer] t.json: post_processor.type \"BertProcessing\" is not supported (supported: "
        "TemplateProcessing, ByteLevel, Sequence)");
  CHECK(json_error(with("model", R"({"type":"BPE","vocab":{"a":0},"merges":["a b"]})")) ==
        "[tokenizer] t.json: model.merges[0] names \"b\", which is not in the vocabulary");
  CHECK(json_error(with("model", R"({"type":"BPE","vocab":{"a":0},"merges":["a a a"]})")) ==
        "[tokenizer] t.json: model.merges[0] \"a a a\" is not two tokens separated by one space");
  CHECK(json_error(with("model", R"({"type":"BPE","vocab":{"a":0},"merges":[],"dropout":0.1})")) ==
        "[tokenizer] t.json: model.dropout is 0.1: BPE dropout samples merges at random, and cotan tokenizes "
        "deterministically; set it to null");
  CHECK(json_error(with("model", R"({"type":"BPE","vocab":{"a":-1},"merges":[]})")) ==
        "[tokenizer] t.json: model.vocab[\"a\"] is -1, outside [0, 2147483646]");
  CHECK(json_error(with("pre_tokenizer", R"({"type":"Split","pattern":{"Regex":"(a"},"behavior":"Isolated"})"))
            .starts_with("[tokenizer] t.json: pre_tokenizer.pattern: bad regex /(a/: "));
  CHECK(json_error(with("pre_tokenizer", R"({"type":"Split","pattern":{"String":" "},"behavior":"Apart"})")) ==
        "[tokenizer] t.json: pre_tokenizer.behavior \"Apart\" is not Removed, Isolated, MergedWithPrevious, "
        "MergedWithNext or Contiguous");
  // A template's special token outside the vocabulary (ids 0..2 here) is refused at load, naming
  // its JSON path, not when the first encode yields it.
  const std::string bos_at_7 =
      R"({"type":"TemplateProcessing","single":"<s> $A","pair":"<s> $A $B","special_tokens":{"<s>":{"id":"<s>","ids":[7],"tokens":["<s>"]}}})";
  CHECK(json_error(with("post_processor", bos_at_7)) ==
        "[tokenizer] t.json: post_processor.special_tokens[\"<s>\"].ids[0] is 7, outside the vocabulary of 3 ids");
  CHECK(json_error(with("post_processor", R"({"type":"Sequence","processors":[{"type":"ByteLevel"},)" + bos_at_7 + "]}")) ==
        "[tokenizer] t.json: post_processor.processors[1].special_tokens[\"<s>\"].ids[0] is 7, outside the vocabulary "
        "of 3 ids");
  std::string bos_at_2 = bos_at_7;
  bos_at_2.replace(bos_at_2.find("[7]"), 3, "[2]");
  CHECK(json_error(with("post_processor", bos_at_2)) == "(no error)");
  CHECK(json_error(R"({"truncation":{"max_length":512},"model":{"type":"BPE","vocab":{},"merges":[]}})") ==
        "[tokenizer] t.json: truncation is set: cotan tokenizes whole documents, without truncation or padding; set "
        "it to null");
  try {
    Tokenizer::load("/nonexistent/tokenizer.json");
    FAIL("a missing file was accepted");
  } catch (const Error& e) {
    CHECK(std::string(e.what()) == "[tokenizer] /nonexistent/tokenizer.json: no such file");
  }
}
