// Corpora: text files, directories of them and JSONL files, any of them gzip or zstd compressed,
// read as a stream of documents.
//
//   DocumentReader reader({"books/", "web.jsonl.zst"}, {.text_field = "content"});
//   std::string doc;
//   while (reader.next(doc)) {
//     tokenize(doc);
//     progress(reader.consumed_bytes(), reader.total_bytes());
//   }
//   std::cerr << describe_skips(reader.stats(), "content") << "\n";
//
// The format of a file is told by its name (input_format): JSONL files hold one document per
// line, the string value of one field of the line's JSON object; every other file is text, split
// into documents by split_documents. Whether a file is compressed is told by its first bytes
// (text/decompress.hpp), so "notes.txt.gz", "notes.zst" and "web.jsonl.gz" all work.
//
// A JSONL line is parsed with sax_parse_json (util/json.hpp): invalid UTF-8 and escapes of lone
// surrogates ("\ud800", which no UTF-8 can hold) make a line invalid JSON, as do a syntax error and
// the document field given twice; other repeated keys are not looked at. The document is the
// field's string unescaped, as UTF-8 bytes. Text files are passed through as bytes, UTF-8 or not.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace cotan::text {

// ---- text files and directories ----

// "/usr/share/games/fortunes" (Debian's fortunes package: English fortune files); throws when it
// is missing, saying how to install it or to pass --data.
std::string default_corpus_path();

// The documents of one file's text. A text with at least one line consisting only of "%" (the
// fortune format; a trailing '\r' is allowed) is split at those lines, each document keeping its
// lines verbatim up to the separator (with their newlines); any other text is one document.
// Documents holding only whitespace are dropped.
std::vector<std::string> split_documents(std::string_view text);

// The files read_documents reads for `path`, in the order it reads them: `path` itself when it is
// a file; for a directory, its regular files found recursively, sorted by path, skipping
// - hidden entries (names starting with '.'),
// - strfile indexes: "X.dat" next to a file "X",
// - a file reached twice (Debian's "X.u8 -> X" symlinks): only the first path in order is kept,
// - the subdirectories of a fortune database, a directory holding strfile indexes: Debian
//   installs offensive (off/) and other-language collections there.
// Symbolic links to directories are not followed.
std::vector<std::string> corpus_files(const std::string& path);

// ---- formats ----

enum class InputFormat { text, jsonl };

// By the file's name, ignoring case: "*.jsonl" and "*.ndjson", each also with ".gz" or ".zst"
// after it, are JSONL; any other name is text.
InputFormat input_format(std::string_view path);

struct CorpusOptions {
  std::string text_field = "text";  // the member of a JSONL line's object that holds its document
  // Refuse a JSONL line that is not valid JSON, not an object, without the field or whose field is
  // not a string, instead of skipping and counting it.
  bool strict = false;
};

// What a DocumentReader has read so far.
struct CorpusStats {
  uint64_t files = 0;      // files opened
  uint64_t documents = 0;  // documents returned
  uint64_t bytes = 0;      // of the documents returned
  uint64_t lines = 0;      // non-blank JSONL lines: each is a document or one of the skips below
  uint64_t skipped_bad_json = 0;    // not valid JSON
  uint64_t skipped_not_object = 0;  // valid JSON, but not an object
  uint64_t skipped_no_field = 0;    // an object without the text field
  uint64_t skipped_not_string = 0;  // the field is null, a number, an array, ...
  uint64_t skipped_empty = 0;       // the field is the empty string (never an error)

  uint64_t skipped() const {
    return skipped_bad_json + skipped_not_object + skipped_no_field + skipped_not_string + skipped_empty;
  }
};

// The skips in one line, "" when there are none: `skipped 4 of 120 JSONL lines: 2 not valid JSON,
// 1 without a "text" field, 1 with an empty "text"`.
std::string describe_skips(const CorpusStats& stats, std::string_view text_field = "text");

// ---- reading ----

// The documents of a list of inputs (files or directories), one at a time and in order: each
// input's corpus_files, each file's documents in file order. JSONL files are streamed (a line at a
// time, however long the file); a text file is read whole, as split_documents needs.
//
// Errors: the constructor throws for an input that does not exist (corpus_files' errors); next()
// throws ByteSource's errors (a file that cannot be read, corrupt or truncated compressed data)
// and, with options.strict, for a JSONL line it would skip, naming the file and line:
//   [corpus] data.jsonl:3: not valid JSON (column 14: syntax error while parsing object key - ...)
//   [corpus] data.jsonl:5: not a JSON object (an array)
//   [corpus] data.jsonl:17: no "text" field (use --text-field to choose another; without --strict
//            such lines are skipped and counted)
//   [corpus] data.jsonl:20: the "text" field is an integer, not a string
// Lines end at '\n'; a '\r' before it is dropped, and so is a line of only spaces and tabs. The
// last line needs no '\n'. What was skipped is counted in stats().
class DocumentReader {
 public:
  explicit DocumentReader(std::vector<std::string> inputs, CorpusOptions options = {});
  ~DocumentReader();
  DocumentReader(DocumentReader&&) noexcept;
  DocumentReader& operator=(DocumentReader&&) noexcept;

  // The next document into `doc`; false (doc untouched) when every file is read.
  bool next(std::string& doc);

  // Bytes of the files on disk read so far and in all, for a progress bar: consumed_bytes() grows
  // to total_bytes() (the sizes when the reader was made), which it reaches when next() returns
  // false.
  uint64_t consumed_bytes() const;
  uint64_t total_bytes() const;
  const CorpusStats& stats() const;
  // The file the last document came from (the one being read, once next() has been called);
  // "" before the first call.
  const std::string& current_file() const;
  // Every file the reader reads, in order: the inputs' corpus_files.
  const std::vector<std::string>& files() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The documents of every file of corpus_files(path), in order: text files split by
// split_documents, JSONL files a document per line as DocumentReader reads them with these
// options; *stats, when given, receives the reader's stats. Errors: DocumentReader's,
// "[data] PATH: no such file or directory", "[data] PATH: the corpus is empty" (followed by
// describe_skips in parentheses when lines were skipped).
std::vector<std::string> read_documents(const std::string& path, const CorpusOptions& options = {},
                                        CorpusStats* stats = nullptr);

}  // namespace cotan::text
