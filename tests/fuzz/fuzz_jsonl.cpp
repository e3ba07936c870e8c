// Fuzzes the corpus readers (text/corpus.cpp, text/decompress.cpp): the input is a JSONL file,
// compressed when its first bytes say gzip or zstd. Read without --strict, only corrupt compressed
// data may fail; every line is a document or one skip; the documents are non-empty UTF-8 that,
// written back as JSONL, read back the same. With --strict the read fails exactly when lines were
// skipped for a reason other than an empty text, and otherwise gives the same documents. The same
// bytes read as a text file must split into non-blank documents.
#include "tests/fuzz/fuzz_support.hpp"
#include "text/corpus.hpp"
#include "text/decompress.hpp"
#include "util/json.hpp"

using namespace cotan;
using namespace cotan::text;
using cotan::fuzz::accepts;
using cotan::fuzz::require;

namespace {

constexpr size_t kMaxDecompressed = size_t(1) << 20;  // a few kB of zstd can hold a GB of one byte

// Whether the file's data (decompressed) is at most kMaxDecompressed bytes; false too when it
// cannot be read, which the readers then report with the same error.
bool small_enough(const std::string& path) {
  size_t total = 0;
  return accepts([&] {
           ByteSource in(path);
           std::string buf(1 << 16, '\0');
           while (size_t n = in.read(buf.data(), buf.size()))
             if ((total += n) > kMaxDecompressed) return;
         }) &&
         total <= kMaxDecompressed;
}

std::vector<std::string> read_all_documents(const std::string& path, const CorpusOptions& options, CorpusStats& stats,
                                            uint64_t& consumed, uint64_t& total) {
  DocumentReader reader({path}, options);
  std::vector<std::string> docs;
  std::string doc;
  while (reader.next(doc)) docs.push_back(doc);
  stats = reader.stats();
  consumed = reader.consumed_bytes();
  total = reader.total_bytes();
  return docs;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& dir = fuzz::scratch_dir();
  const std::string path = dir + "/input.jsonl";
  fuzz::write_file(path, {reinterpret_cast<const char*>(data), size});
  if (!small_enough(path)) return 0;

  CorpusStats stats;
  uint64_t consumed = 0, total = 0;
  std::vector<std::string> docs;
  if (accepts([&] { docs = read_all_documents(path, {}, stats, consumed, total); })) {
    require(stats.lines == stats.documents + stats.skipped(), "every non-blank line is a document or a skip");
    require(stats.documents == docs.size(), "stats count the documents returned");
    require(consumed == total && total == size, "the whole file is consumed");
    std::string written;
    for (const std::string& doc : docs) {
      require(!doc.empty(), "documents are not empty");
      require(accepts([&] { written += dump_json(Json::object({{"text", doc}})) + "\n"; }), "documents are UTF-8");
    }
    const std::string again_path = dir + "/again.jsonl";
    fuzz::write_file(again_path, written);
    CorpusStats again_stats;
    std::vector<std::string> again;
    require(accepts([&] { again = read_all_documents(again_path, {.strict = true}, again_stats, consumed, total); }),
            "written documents read back");
    require(again == docs, "written documents read back the same");

    std::vector<std::string> strict;
    const bool strict_accepts =
        accepts([&] { strict = read_all_documents(path, {.strict = true}, again_stats, consumed, total); });
    require(strict_accepts == (stats.skipped() == stats.skipped_empty), "--strict fails exactly on skipped lines");
    require(!strict_accepts || strict == docs, "--strict reads the same documents");
  }

  const std::string text_path = dir + "/input.txt";
  fuzz::write_file(text_path, {reinterpret_cast<const char*>(data), size});
  std::vector<std::string> text_docs;
  if (accepts([&] { text_docs = read_all_documents(text_path, {}, stats, consumed, total); })) {
    for (const std::string& doc : text_docs)
      require(doc.find_first_not_of(" \t\n\v\f\r") != std::string::npos, "text documents are not blank");
  }
  return 0;
}
