// text/decompress and text/corpus: gzip and zstd files, JSONL lines, directories of mixed inputs.
// The compressed files are made here with zlib and libzstd directly, not with the code under test.
#include <doctest/doctest.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tests/support.hpp"
#include "text/corpus.hpp"
#include "text/decompress.hpp"

namespace fs = std::filesystem;
using namespace cotan;
using namespace cotan::text;

namespace {

// One gzip member holding `data` (deflate with a gzip header and trailer: windowBits 16 + 15).
std::string gzip(std::string_view data) {
  z_stream z{};
  REQUIRE(deflateInit2(&z, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) == Z_OK);
  std::string out(deflateBound(&z, uLong(data.size())), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  z.avail_in = uInt(data.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = uInt(out.size());
  REQUIRE(deflate(&z, Z_FINISH) == Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

// One zstd frame holding `data`.
std::string zstd(std::string_view data) {
  std::string out(ZSTD_compressBound(data.size()), '\0');
  const size_t n = ZSTD_compress(out.data(), out.size(), data.data(), data.size(), 3);
  REQUIRE(!ZSTD_isError(n));
  out.resize(n);
  return out;
}

// One zstd frame holding `data` and its checksum, as the zstd tool writes by default.
std::string zstd_with_checksum(std::string_view data) {
  ZSTD_CCtx* cctx = ZSTD_createCCtx();
  REQUIRE(!ZSTD_isError(ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 1)));
  std::string out(ZSTD_compressBound(data.size()), '\0');
  const size_t n = ZSTD_compress2(cctx, out.data(), out.size(), data.data(), data.size());
  ZSTD_freeCCtx(cctx);
  REQUIRE(!ZSTD_isError(n));
  out.resize(n);
  return out;
}

// A zstd skippable frame (magic 0x184D2A50, little-endian size, payload): decoders pass over it.
std::string zstd_skippable(std::string_view payload) {
  std::string out = "\x50\x2a\x4d\x18";
  for (int i = 0; i < 4; ++i) out += char((payload.size() >> (8 * i)) & 0xff);
  return out.append(payload);
}

// Every byte ByteSource gives, read `step` bytes at a time.
std::string read_in_steps(const std::string& path, size_t step) {
  ByteSource in(path);
  std::string out, buf(step, '\0');
  while (size_t n = in.read(buf.data(), step)) out.append(buf, 0, n);
  CHECK(in.read(buf.data(), step) == 0);  // the end stays the end
  CHECK(in.consumed() == in.file_size());
  return out;
}

std::vector<std::string> read_all_documents(DocumentReader& reader) {
  std::vector<std::string> docs;
  std::string doc;
  while (reader.next(doc)) docs.push_back(doc);
  return docs;
}

std::vector<std::string> documents_of(const std::vector<std::string>& inputs, const CorpusOptions& options = {}) {
  DocumentReader reader(inputs, options);
  return read_all_documents(reader);
}

// `text` as a JSON string literal, escaping only what the large corpus below holds.
std::string json_string(std::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"') out += "\\\"";
    else if (c == '\\') out += "\\\\";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out + "\"";
}

}  // namespace

TEST_CASE("file formats are told by name, ignoring case") {
  CHECK(input_format("data.jsonl") == InputFormat::jsonl);
  CHECK(input_format("dir/data.jsonl.gz") == InputFormat::jsonl);
  CHECK(input_format("/a.b/data.JSONL.ZST") == InputFormat::jsonl);
  CHECK(input_format("x.ndjson") == InputFormat::jsonl);
  CHECK(input_format("x.ndjson.zst") == InputFormat::jsonl);
  CHECK(input_format("notes.txt") == InputFormat::text);
  CHECK(input_format("notes.txt.gz") == InputFormat::text);
  CHECK(input_format("notes.zst") == InputFormat::text);
  CHECK(input_format("data.json") == InputFormat::text);
  CHECK(input_format("data.jsonl.bz2") == InputFormat::text);
  CHECK(input_format("data.jsonl.gz.zst") == InputFormat::text);  // one compression suffix only
  CHECK(input_format("jsonl") == InputFormat::text);
  CHECK(input_format("archive.jsonl/readme") == InputFormat::text);
}

TEST_CASE("plain, gzip and zstd files give the same bytes, whatever their names") {
  TempDir dir;
  std::string content = "line one\nline two, caf\xc3\xa9\n";
  for (int b = 0; b < 256; ++b) content += char(b);
  write_file(dir / "plain.gz", content);  // the name says gzip, the bytes say plain
  write_file(dir / "a.gz", gzip(content));
  write_file(dir / "a.txt", zstd(content));  // the name says text, the bytes say zstd

  CHECK(ByteSource(dir / "plain.gz").compression() == Compression::none);
  CHECK(ByteSource(dir / "a.gz").compression() == Compression::gzip);
  CHECK(ByteSource(dir / "a.txt").compression() == Compression::zstd);
  CHECK(compression_name(Compression::zstd) == "zstd");
  for (const char* name : {"plain.gz", "a.gz", "a.txt"}) {
    CAPTURE(name);
    CHECK(read_all(dir / name) == content);
    CHECK(read_in_steps(dir / name, 1) == content);
    CHECK(read_in_steps(dir / name, 7) == content);
    CHECK(ByteSource(dir / name).file_size() == fs::file_size(dir / name));
  }

  write_file(dir / "empty", "");
  CHECK(read_all(dir / "empty").empty());
  write_file(dir / "one", "\x1f");  // the first byte of gzip's magic only: plain
  CHECK(read_all(dir / "one") == "\x1f");
}

TEST_CASE("gzip members and zstd frames are read one after another") {
  TempDir dir;
  write_file(dir / "members.gz", gzip("hello, ") + gzip("") + gzip("world") + gzip("\n"));
  write_file(dir / "frames.zst", zstd("abc") + zstd_skippable("not data") + zstd("") + zstd("def"));
  for (size_t step : {size_t(1), size_t(3), size_t(1 << 16)}) {
    CAPTURE(step);
    CHECK(read_in_steps(dir / "members.gz", step) == "hello, world\n");
    CHECK(read_in_steps(dir / "frames.zst", step) == "abcdef");
  }

  // Larger than the reader's buffers, so that members and frames span several reads.
  std::string big_a(700'000, 'a'), big_b;
  for (int i = 0; i < 100'000; ++i) big_b += std::to_string(i) + ' ';
  write_file(dir / "big.gz", gzip(big_a) + gzip(big_b));
  write_file(dir / "big.zst", zstd(big_a) + zstd(big_b));
  CHECK(read_all(dir / "big.gz") == big_a + big_b);
  CHECK(read_all(dir / "big.zst") == big_a + big_b);
}

TEST_CASE("unreadable, truncated and corrupt files: the error names the file") {
  TempDir dir;
  std::string text;
  for (int i = 0; i < 2000; ++i) text += "line " + std::to_string(i) + ", a little text to compress\n";
  const std::string gz = gzip(text), zst = zstd(text);

  const std::string missing = dir / "missing.txt";
  CHECK(error_of([&] { ByteSource in(missing); }) == "[corpus] " + missing + ": cannot open: No such file or directory");
  CHECK(error_of([&] { read_all(dir.path.string()); }) == "[corpus] " + dir.path.string() + ": cannot read: Is a directory");

  for (size_t keep : {size_t(2), size_t(10), gz.size() / 2, gz.size() - 1}) {
    CAPTURE(keep);
    write_file(dir / "cut.gz", gz.substr(0, keep));
    CHECK(error_of([&] { read_all(dir / "cut.gz"); }) == "[corpus] " + (dir / "cut.gz") + ": truncated gzip stream");
  }
  for (size_t keep : {size_t(4), size_t(8), zst.size() / 2, zst.size() - 1}) {
    CAPTURE(keep);
    write_file(dir / "cut.zst", zst.substr(0, keep));
    CHECK(error_of([&] { read_all(dir / "cut.zst"); }) == "[corpus] " + (dir / "cut.zst") + ": truncated zstd stream");
  }
  // A second member cut short after a whole first one.
  write_file(dir / "cut2.gz", gz + gz.substr(0, 20));
  CHECK(error_of([&] { read_all(dir / "cut2.gz"); }) == "[corpus] " + (dir / "cut2.gz") + ": truncated gzip stream");

  std::string bad_crc = gz;
  bad_crc[bad_crc.size() - 6] ^= 0x01;  // the trailer: CRC-32, then the length, 4 bytes each
  write_file(dir / "crc.gz", bad_crc);
  CHECK(error_of([&] { read_all(dir / "crc.gz"); }) == "[corpus] " + (dir / "crc.gz") + ": corrupt gzip data (incorrect data check)");
  std::string bad_block = gz;
  bad_block[10] = char(0x07);  // the first deflate block header: type 3 does not exist
  write_file(dir / "block.gz", bad_block);
  CHECK(error_of([&] { read_all(dir / "block.gz"); }) == "[corpus] " + (dir / "block.gz") + ": corrupt gzip data (invalid block type)");
  write_file(dir / "tail.gz", gz + "junk");
  CHECK(error_of([&] { read_all(dir / "tail.gz"); }) ==
        "[corpus] " + (dir / "tail.gz") + ": the bytes after the end of the gzip stream at byte " + std::to_string(gz.size()) +
            " are not another gzip member");

  // Without a checksum a changed byte may decode to other data; with one it is an error.
  std::string bad_zstd = zstd_with_checksum(text);
  bad_zstd[bad_zstd.size() / 2] ^= 0x20;
  write_file(dir / "bad.zst", bad_zstd);
  const std::string bad_error = error_of([&] { read_all(dir / "bad.zst"); });
  CHECK_MESSAGE(bad_error.starts_with("[corpus] " + (dir / "bad.zst") + ": corrupt zstd data ("), bad_error);
  write_file(dir / "checked.zst", zstd_with_checksum(text));
  CHECK(read_all(dir / "checked.zst") == text);
  write_file(dir / "tail.zst", zst + "junk");
  CHECK(error_of([&] { read_all(dir / "tail.zst"); }) ==
        "[corpus] " + (dir / "tail.zst") + ": corrupt zstd data (Unknown frame descriptor)");

  // Through a DocumentReader, as text and as JSONL.
  write_file(dir / "cut.txt.gz", gz.substr(0, gz.size() / 2));
  CHECK(error_of([&] { documents_of({dir / "cut.txt.gz"}); }) == "[corpus] " + (dir / "cut.txt.gz") + ": truncated gzip stream");
  write_file(dir / "cut.jsonl.zst", zstd("{\"text\": \"a\"}\n").substr(0, 12));
  CHECK(error_of([&] { documents_of({dir / "cut.jsonl.zst"}); }) == "[corpus] " + (dir / "cut.jsonl.zst") + ": truncated zstd stream");
}

TEST_CASE("JSONL: one document per line, the others skipped and counted") {
  TempDir dir;
  const std::string lines =
      "{\"text\": \"first\", \"id\": 1}\n"
      "{\"id\": 2, \"text\": \"caf\\u00e9 \\ud83d\\ude00 tab\\tquote\\\" line\\n\"}\n"
      "\n"
      "   \t \n"
      "{\"text\": \"\"}\n"
      "not json\n"
      "[1, 2]\n"
      "\"a string\"\n"
      "{\"title\": \"no text here\"}\n"
      "{\"text\": 5}\n"
      "{\"text\": null}\n"
      "{\"text\": [\"a\"]}\n"
      "{\"text\": \"\\ud800 lone surrogate\"}\n"
      "{\"text\": \"raw \xff byte\"}\n"
      "{\"text\": \"once\", \"text\": \"twice\"}\n"
      "{\"meta\": {\"text\": \"nested, not the field\"}, \"text\": \"top level\", \"more\": [{\"text\": 1}]}\n"
      "{\"text\": \"raw UTF-8 \xc3\xbc and \\u0000 NUL\"}\n"
      "{\"text\": \"two\"} {\"text\": \"values\"}\n"
      "{\"text\": \"last line, no newline\"}";
  write_file(dir / "data.jsonl", lines);
  DocumentReader reader({dir / "data.jsonl"});
  CHECK(reader.current_file().empty());
  CHECK(reader.total_bytes() == lines.size());
  CHECK(read_all_documents(reader) == std::vector<std::string>{
                                          "first",
                                          "caf\xc3\xa9 \xf0\x9f\x98\x80 tab\tquote\" line\n",
                                          "top level",
                                          std::string("raw UTF-8 \xc3\xbc and \0 NUL", 22),
                                          "last line, no newline",
                                      });
  CHECK(reader.current_file() == dir / "data.jsonl");
  const CorpusStats& s = reader.stats();
  CHECK(s.files == 1);
  CHECK(s.documents == 5);
  CHECK(s.bytes == 5 + 27 + 9 + 22 + 21);
  CHECK(s.lines == 17);
  CHECK(s.skipped_bad_json == 5);  // not json, lone surrogate, raw \xff, twice, two values
  CHECK(s.skipped_not_object == 2);
  CHECK(s.skipped_no_field == 1);
  CHECK(s.skipped_not_string == 3);
  CHECK(s.skipped_empty == 1);
  CHECK(s.skipped() == 12);
  CHECK(describe_skips(s) ==
        "skipped 12 of 17 JSONL lines: 5 not valid JSON, 2 not an object, 1 without a \"text\" field, 3 with a "
        "\"text\" that is not a string, 1 with an empty \"text\"");
  CHECK(describe_skips(CorpusStats{}) == "");
  CHECK(reader.consumed_bytes() == reader.total_bytes());

  // Another field.
  write_file(dir / "content.ndjson", "{\"text\": \"not this\", \"content\": \"this\"}\n{\"text\": \"x\"}\n");
  DocumentReader other({dir / "content.ndjson"}, {.text_field = "content"});
  CHECK(read_all_documents(other) == std::vector<std::string>{"this"});
  CHECK(describe_skips(other.stats(), "content") == "skipped 1 of 2 JSONL lines: 1 without a \"content\" field");
}

TEST_CASE("JSONL with --strict: a line that would be skipped is an error naming the file and line") {
  TempDir dir;
  const CorpusOptions strict{.strict = true};
  auto error_for = [&](const std::string& name, const std::string& lines) {
    write_file(dir / name, lines);
    return error_of([&] { documents_of({dir / name}, strict); });
  };
  const std::string good = "{\"text\": \"fine\"}\n";
  CHECK(error_for("a.jsonl", good + "\n" + "{\"text\": \"x\",}\n") ==
        "[corpus] " + (dir / "a.jsonl") +
            ":3: not valid JSON (column 14: syntax error while parsing object key - unexpected '}'; expected string literal)");
  CHECK(error_for("b.jsonl", good + "[1]\n") == "[corpus] " + (dir / "b.jsonl") + ":2: not a JSON object (an array)");
  CHECK(error_for("c.jsonl", good + good + "{\"txt\": \"typo\"}\n") ==
        "[corpus] " + (dir / "c.jsonl") +
            ":3: no \"text\" field (use --text-field to choose another; without --strict such lines are skipped and counted)");
  CHECK(error_for("d.jsonl", "{\"text\": 12}\n") == "[corpus] " + (dir / "d.jsonl") + ":1: the \"text\" field is an integer, not a string");
  CHECK(error_for("e.jsonl", "{\"text\": null}") == "[corpus] " + (dir / "e.jsonl") + ":1: the \"text\" field is null, not a string");
  CHECK(error_for("f.jsonl", "{\"text\": {}}") == "[corpus] " + (dir / "f.jsonl") + ":1: the \"text\" field is an object, not a string");
  const std::string surrogate = error_for("g.jsonl", good + "{\"text\": \"\\ud800\"}\n");
  CHECK(surrogate.starts_with("[corpus] " + (dir / "g.jsonl") + ":2: not valid JSON (column "));
  CHECK(surrogate.find("surrogate") != std::string::npos);
  // The reason quotes the end of a long string, not all of it.
  const std::string long_string = error_for("long.jsonl", "{\"text\": \"" + std::string(100'000, 'a') + "\\ud800\"}\n");
  CHECK(long_string.starts_with("[corpus] " + (dir / "long.jsonl") + ":1: not valid JSON (column 100017: "));
  CHECK(long_string.ends_with("; last read: '..." + std::string(32, 'a') + "\\ud800\"')"));
  CHECK(error_for("h.jsonl", "{\"text\": \"a\", \"text\": \"b\"}\n") ==
        "[corpus] " + (dir / "h.jsonl") + ":1: not valid JSON (column 15: duplicate key 'text')");
  // Compressed files count lines of their decompressed text.
  write_file(dir / "i.jsonl.gz", gzip(good + good) + gzip("\r\n[]\r\n"));
  CHECK(error_of([&] { documents_of({dir / "i.jsonl.gz"}, strict); }) ==
        "[corpus] " + (dir / "i.jsonl.gz") + ":4: not a JSON object (an array)");

  // Empty documents are skipped under --strict too; good files read the same.
  write_file(dir / "ok.jsonl", good + "{\"text\": \"\"}\n" + good);
  DocumentReader reader({dir / "ok.jsonl"}, strict);
  CHECK(read_all_documents(reader) == std::vector<std::string>{"fine", "fine"});
  CHECK(reader.stats().skipped_empty == 1);
}

TEST_CASE("JSONL with CRLF line endings reads as with LF") {
  TempDir dir;
  write_file(dir / "crlf.jsonl", "{\"text\": \"a\\r\\nb\"}\r\n\r\n{\"text\": \"c\"}\r\n{\"text\": \"d\"}\r");
  write_file(dir / "lf.jsonl", "{\"text\": \"a\\r\\nb\"}\n\n{\"text\": \"c\"}\n{\"text\": \"d\"}");
  const std::vector<std::string> expected{"a\r\nb", "c", "d"};
  CHECK(documents_of({dir / "crlf.jsonl"}, {.strict = true}) == expected);
  CHECK(documents_of({dir / "lf.jsonl"}, {.strict = true}) == expected);
  // Line numbers count CRLF lines once.
  write_file(dir / "bad.jsonl", "{\"text\": \"a\"}\r\n\r\nnope\r\n");
  CHECK(error_of([&] { documents_of({dir / "bad.jsonl"}, {.strict = true}); }).starts_with(
      "[corpus] " + (dir / "bad.jsonl") + ":3: not valid JSON ("));
}

TEST_CASE("a large JSONL file streams, plain, gzip and zstd, with lines longer than the read buffers") {
  TempDir dir;
  // About 9 MB: 3500 lines of a few bytes to a few kB, and three lines of 1.5 MB, 1 MB and 2 MB.
  std::vector<std::string> docs;
  uint64_t seed = 12345;
  auto next_random = [&] {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    return seed >> 33;
  };
  for (int i = 0; i < 3500; ++i) {
    std::string doc = "doc " + std::to_string(i) + ":";
    const size_t words = next_random() % 400;
    for (size_t w = 0; w < words; ++w) doc += (next_random() % 16 == 0) ? " \"quoted\"\n" : " word";
    docs.push_back(doc);
    if (i == 10) docs.push_back(std::string(1'500'000, 'x') + "\\ end");
    if (i == 1500) docs.push_back(std::string(1 << 20, 'y'));
    if (i == 3499) docs.push_back("last " + std::string(2'000'000, 'z'));
  }
  std::string jsonl;
  for (const std::string& doc : docs) jsonl += "{\"id\": 7, \"text\": " + json_string(doc) + ", \"lang\": \"en\"}\n";
  REQUIRE(jsonl.size() > 8'000'000);
  write_file(dir / "big.jsonl", jsonl);
  const size_t third = jsonl.size() / 3;  // member and frame ends fall inside lines
  write_file(dir / "big.jsonl.gz",
             gzip(jsonl.substr(0, third)) + gzip(jsonl.substr(third, third)) + gzip(jsonl.substr(2 * third)));
  write_file(dir / "big.jsonl.zst",
             zstd(jsonl.substr(0, third)) + zstd(jsonl.substr(third, third)) + zstd(jsonl.substr(2 * third)));

  for (const char* name : {"big.jsonl", "big.jsonl.gz", "big.jsonl.zst"}) {
    CAPTURE(name);
    DocumentReader reader({dir / name}, {.strict = true});
    CHECK(reader.total_bytes() == fs::file_size(dir / name));
    std::string doc;
    size_t i = 0, mismatches = 0;
    uint64_t last_consumed = 0;
    bool monotone = true;
    while (reader.next(doc)) {
      if (i >= docs.size() || doc != docs[i]) ++mismatches;
      // Streaming: the first document comes before most of the file is read.
      if (i == 0) CHECK(reader.consumed_bytes() < reader.total_bytes() / 2);
      monotone = monotone && reader.consumed_bytes() >= last_consumed;
      last_consumed = reader.consumed_bytes();
      ++i;
    }
    CHECK(mismatches == 0);
    CHECK(i == docs.size());
    CHECK(monotone);
    CHECK(reader.consumed_bytes() == reader.total_bytes());
    CHECK(reader.stats().lines == docs.size());
    CHECK(reader.stats().skipped() == 0);
  }
}

TEST_CASE("text files, compressed or not, are split into documents") {
  TempDir dir;
  write_file(dir / "fortunes.gz", gzip("one\n%\ntwo\n") + gzip("%\nthree\n"));
  write_file(dir / "essay.txt.zst", zstd("An essay.\n\nIn two paragraphs, caf\xc3\xa9 and a raw \xff byte.\n"));
  write_file(dir / "blank.txt.gz", gzip(" \n\t\n"));
  CHECK(read_documents(dir / "fortunes.gz") == std::vector<std::string>{"one\n", "two\n", "three\n"});
  CHECK(read_documents(dir / "essay.txt.zst") ==
        std::vector<std::string>{"An essay.\n\nIn two paragraphs, caf\xc3\xa9 and a raw \xff byte.\n"});
  CHECK(error_of([&] { read_documents(dir / "blank.txt.gz"); }) == "[data] " + (dir / "blank.txt.gz") + ": the corpus is empty");
}

TEST_CASE("a directory mixing JSONL, text and compressed files is read in path order") {
  TempDir dir;
  const std::string a = "{\"text\": \"a1\"}\n{\"text\": \"a2\"}\n";
  const std::string b = zstd("{\"text\": \"b1\"}\nbroken\n{\"text\": \"b2\"}\n");
  const std::string c = "c, a text file\n";
  const std::string d = gzip("d1\n%\nd2\n");
  const std::string e = gzip("{\"text\": \"e1\"}\n");
  write_file(dir / "corpus/a.jsonl", a);
  write_file(dir / "corpus/b.jsonl.zst", b);
  write_file(dir / "corpus/c.txt", c);
  write_file(dir / "corpus/sub/d.txt.gz", d);
  write_file(dir / "corpus/sub/e.ndjson.gz", e);
  write_file(dir / "corpus/.hidden.jsonl", "{\"text\": \"hidden\"}\n");
  const std::string extra = "{\"text\": \"x\"}";
  write_file(dir / "extra.jsonl", extra);

  DocumentReader reader({dir / "corpus", dir / "extra.jsonl"});
  CHECK(reader.files() == std::vector<std::string>{dir / "corpus/a.jsonl", dir / "corpus/b.jsonl.zst",
                                                   dir / "corpus/c.txt", dir / "corpus/sub/d.txt.gz",
                                                   dir / "corpus/sub/e.ndjson.gz", dir / "extra.jsonl"});
  CHECK(reader.total_bytes() == a.size() + b.size() + c.size() + d.size() + e.size() + extra.size());
  std::string doc;
  std::vector<std::string> docs, files;
  while (reader.next(doc)) {
    docs.push_back(doc);
    files.push_back(fs::path(reader.current_file()).filename().string());
    CHECK(reader.consumed_bytes() <= reader.total_bytes());
  }
  CHECK(docs == std::vector<std::string>{"a1", "a2", "b1", "b2", "c, a text file\n", "d1\n", "d2\n", "e1", "x"});
  CHECK(files == std::vector<std::string>{"a.jsonl", "a.jsonl", "b.jsonl.zst", "b.jsonl.zst", "c.txt", "d.txt.gz",
                                          "d.txt.gz", "e.ndjson.gz", "extra.jsonl"});
  CHECK(reader.consumed_bytes() == reader.total_bytes());
  CHECK(reader.stats().files == 6);
  CHECK(reader.stats().documents == 9);
  CHECK(reader.stats().lines == 7);  // of the JSONL files: a 2, b 3, e 1, extra 1
  CHECK(reader.stats().skipped_bad_json == 1);

  // read_documents takes the same directory, and reports skips when nothing is left.
  CHECK(read_documents(dir / "corpus") == std::vector<std::string>{"a1", "a2", "b1", "b2", "c, a text file\n", "d1\n", "d2\n", "e1"});
  write_file(dir / "skipped/all.jsonl.gz", gzip("{\"txt\": \"a\"}\n{oops}\n"));
  CHECK(error_of([&] { read_documents(dir / "skipped"); }) ==
        "[data] " + (dir / "skipped") +
            ": the corpus is empty (skipped 2 of 2 JSONL lines: 1 not valid JSON, 1 without a \"text\" field)");
  CorpusStats stats;
  CHECK(read_documents(dir / "corpus/b.jsonl.zst", {}, &stats) == std::vector<std::string>{"b1", "b2"});
  CHECK(stats.skipped_bad_json == 1);
  CHECK(stats.lines == 3);

  // No inputs: no documents; a missing input fails when the reader is made.
  DocumentReader none({});
  CHECK(!none.next(doc));
  CHECK(none.total_bytes() == 0);
  CHECK(error_of([&] { DocumentReader r({dir / "nope"}); }) == "[data] " + (dir / "nope") + ": no such file or directory");
}
