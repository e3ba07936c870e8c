// Corpus reading: listing a corpus's files, splitting text files into documents and streaming the
// documents of JSONL lines.
#include "text/corpus.hpp"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <filesystem>
#include <optional>
#include <set>

#include "text/decompress.hpp"
#include "util/json.hpp"

namespace cotan::text {

namespace fs = std::filesystem;

namespace {

constexpr const char* kDefaultCorpus = "/usr/share/games/fortunes";
constexpr const char* kOp = "corpus";
constexpr size_t kChunkBytes = size_t(1) << 20;  // decompressed bytes of a JSONL file read at a time

bool is_blank(std::string_view text) {
  return std::all_of(text.begin(), text.end(), [](unsigned char c) { return std::isspace(c) != 0; });
}

bool is_separator(std::string_view line) { return line == "%" || line == "%\r"; }

bool is_hidden(const fs::path& p) {
  const std::string name = p.filename().string();
  return !name.empty() && name[0] == '.';
}

// "X.dat" next to a file "X": a strfile index (binary offsets into X), not text.
bool is_strfile_index(const fs::path& p) {
  if (p.extension() != ".dat") return false;
  std::error_code ec;
  fs::path text = p;
  text.replace_extension();
  return fs::is_regular_file(text, ec);
}

void collect_files(const fs::path& dir, std::vector<fs::path>& out) {
  std::vector<fs::directory_entry> entries;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) entries.push_back(*it);
  if (ec) fail("data", dir.string(), ": cannot list: ", ec.message());

  bool fortune_database = false;
  for (const fs::directory_entry& e : entries)
    if (!is_hidden(e.path()) && e.is_regular_file(ec) && is_strfile_index(e.path())) fortune_database = true;

  for (const fs::directory_entry& e : entries) {
    if (is_hidden(e.path())) continue;
    if (e.is_symlink(ec)) {
      // Followed to files only; a link to a file already listed is dropped by corpus_files.
      if (e.is_regular_file(ec) && !is_strfile_index(e.path())) out.push_back(e.path());
    } else if (e.is_directory(ec)) {
      if (!fortune_database) collect_files(e.path(), out);
    } else if (e.is_regular_file(ec) && !is_strfile_index(e.path())) {
      out.push_back(e.path());
    }
  }
}

bool ends_with_ignoring_case(std::string_view text, std::string_view suffix) {
  if (text.size() < suffix.size()) return false;
  const std::string_view tail = text.substr(text.size() - suffix.size());
  return std::equal(tail.begin(), tail.end(), suffix.begin(), [](char a, char b) {
    return std::tolower(static_cast<unsigned char>(a)) == std::tolower(static_cast<unsigned char>(b));
  });
}

// JSON's whitespace (RFC 8259): a JSONL line of only these holds no value.
bool is_json_blank(std::string_view line) {
  return line.find_first_not_of(" \t\r") == std::string_view::npos;
}

// ---- a JSONL line ----

enum class LineProblem { none, bad_json, not_object, no_field, not_string };

// Follows sax_parse_json's events to the top-level object's member `field`, taking its value when
// it is a string. Everything else is parsed and checked, and dropped.
class FieldFinder final : public JsonSax {
 public:
  FieldFinder(std::string_view field, std::string& value) : field_(field), value_(value) {}

  std::string_view root_kind() const { return root_kind_; }
  std::string_view field_kind() const { return field_kind_; }  // "" when the object lacks the field

  bool null() override { return seen("null"); }
  bool boolean(bool) override { return seen("a boolean"); }
  bool number_integer(number_integer_t) override { return seen("an integer"); }
  bool number_unsigned(number_unsigned_t) override { return seen("an integer"); }
  bool number_float(number_float_t, const string_t&) override { return seen("a number"); }
  bool string(string_t& text) override {
    if (taking_) value_ = std::move(text);
    return seen("a string");
  }
  bool start_object(size_t) override { return open("an object"); }
  bool start_array(size_t) override { return open("an array"); }
  bool end_object() override { return close(); }
  bool end_array() override { return close(); }
  bool key(string_t& key) override {
    if (depth_ == 1 && key == field_) {
      if (!field_kind_.empty()) key_error(cat("duplicate key '", key, "'"));
      taking_ = true;
    }
    return true;
  }

 private:
  // A value starts: the root, the field's value, or one nested in either.
  bool seen(std::string_view kind) {
    if (depth_ == 0) root_kind_ = kind;
    if (taking_) field_kind_ = kind;
    taking_ = false;
    return true;
  }
  bool open(std::string_view kind) {
    seen(kind);
    ++depth_;
    return true;
  }
  bool close() {
    --depth_;
    return true;
  }

  std::string_view field_;
  std::string& value_;
  size_t depth_ = 0;
  bool taking_ = false;  // the last key was the field's, at the top level
  std::string_view root_kind_, field_kind_;
};

// nlohmann's reasons end with "; last read: '<the token so far>'", which for a string is all of
// it up to the error: keep the end of a long one, from a character boundary.
std::string shorten_last_read(std::string reason) {
  constexpr std::string_view kLastRead = "; last read: '";
  constexpr size_t kKeep = 40;
  const size_t at = reason.rfind(kLastRead);
  if (at == std::string::npos) return reason;
  const size_t token = at + kLastRead.size();
  if (reason.size() - token <= 2 * kKeep) return reason;
  size_t tail = reason.size() - kKeep;
  while (tail < reason.size() && (uint8_t(reason[tail]) & 0xC0) == 0x80) ++tail;
  return reason.substr(0, token) + "..." + reason.substr(tail);
}

// The document of one JSONL line into `value`, or what is wrong with the line into `detail`.
LineProblem parse_line(std::string_view line, std::string_view field, std::string& value, std::string& detail) {
  FieldFinder finder(field, value);
  try {
    sax_parse_json(line, finder);
  } catch (const JsonParseError& e) {
    detail = cat("column ", e.column(), ": ", shorten_last_read(e.reason()));
    return LineProblem::bad_json;
  } catch (const Error& e) {
    detail = e.what();
    if (detail.starts_with("[json] ")) detail.erase(0, 7);
    return LineProblem::bad_json;
  }
  if (finder.root_kind() != "an object") {
    detail = finder.root_kind();
    return LineProblem::not_object;
  }
  if (finder.field_kind().empty()) return LineProblem::no_field;
  if (finder.field_kind() != "a string") {
    detail = finder.field_kind();
    return LineProblem::not_string;
  }
  return LineProblem::none;
}

}  // namespace

// ---- text files and directories ----

std::string default_corpus_path() {
  std::error_code ec;
  if (!fs::is_directory(kDefaultCorpus, ec))
    fail("data", "the default corpus ", kDefaultCorpus,
         " is missing: install Debian's fortunes package (build.sh does) or pass --data PATH");
  return kDefaultCorpus;
}

std::vector<std::string> split_documents(std::string_view text) {
  // Lines as [begin, end) without their '\n'; a separator line is exactly "%" (or "%\r").
  bool fortune = false;
  for (size_t begin = 0; begin <= text.size() && !fortune;) {
    size_t end = text.find('\n', begin);
    if (end == std::string_view::npos) end = text.size();
    fortune = is_separator(text.substr(begin, end - begin));
    begin = end + 1;
  }
  std::vector<std::string> documents;
  auto keep = [&](std::string_view doc) {
    if (!is_blank(doc)) documents.emplace_back(doc);
  };
  if (!fortune) {
    keep(text);
    return documents;
  }
  size_t doc_begin = 0;
  for (size_t begin = 0; begin < text.size();) {
    size_t end = text.find('\n', begin);
    const size_t next = end == std::string_view::npos ? text.size() : end + 1;
    if (end == std::string_view::npos) end = text.size();
    if (is_separator(text.substr(begin, end - begin))) {
      keep(text.substr(doc_begin, begin - doc_begin));
      doc_begin = next;
    }
    begin = next;
  }
  if (doc_begin < text.size()) keep(text.substr(doc_begin));
  return documents;
}

std::vector<std::string> corpus_files(const std::string& path) {
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  if (!fs::exists(status)) fail("data", path, ": no such file or directory");
  if (fs::is_regular_file(status)) return {path};
  if (!fs::is_directory(status)) fail("data", path, ": not a regular file or a directory");

  std::vector<fs::path> found;
  collect_files(path, found);
  std::sort(found.begin(), found.end(), [](const fs::path& a, const fs::path& b) { return a.native() < b.native(); });
  std::vector<std::string> files;
  std::set<fs::path> seen;  // canonical paths: a symlink and its target are one file
  for (const fs::path& p : found) {
    fs::path canonical = fs::canonical(p, ec);
    if (ec) canonical = p;
    if (seen.insert(canonical).second) files.push_back(p.string());
  }
  return files;
}

// ---- formats ----

InputFormat input_format(std::string_view path) {
  std::string_view name = path.substr(path.find_last_of('/') + 1);  // npos + 1 == 0
  for (std::string_view compressed : {".gz", ".zst"}) {
    if (ends_with_ignoring_case(name, compressed)) {
      name.remove_suffix(compressed.size());
      break;
    }
  }
  return ends_with_ignoring_case(name, ".jsonl") || ends_with_ignoring_case(name, ".ndjson") ? InputFormat::jsonl
                                                                                             : InputFormat::text;
}

std::string describe_skips(const CorpusStats& stats, std::string_view text_field) {
  if (stats.skipped() == 0) return "";
  const std::string field = cat('"', text_field, '"');
  std::string out =
      cat("skipped ", stats.skipped(), " of ", stats.lines, stats.lines == 1 ? " JSONL line:" : " JSONL lines:");
  const char* separator = " ";
  auto part = [&](uint64_t count, const std::string& what) {
    if (count == 0) return;
    out += cat(separator, count, " ", what);
    separator = ", ";
  };
  part(stats.skipped_bad_json, "not valid JSON");
  part(stats.skipped_not_object, "not an object");
  part(stats.skipped_no_field, "without a " + field + " field");
  part(stats.skipped_not_string, "with a " + field + " that is not a string");
  part(stats.skipped_empty, "with an empty " + field);
  return out;
}

// ---- DocumentReader ----

struct DocumentReader::Impl {
  CorpusOptions options;
  std::vector<std::string> files;
  std::vector<uint64_t> sizes;  // of files, when listed
  uint64_t total = 0;
  uint64_t finished_bytes = 0;  // the sizes of the files read to the end
  size_t next_file = 0;         // files[next_file - 1] is the current one
  std::string current;
  CorpusStats stats;

  // A text file: its documents, handed out from the front.
  std::vector<std::string> text_documents;
  size_t text_next = 0;

  // A JSONL file: decompressed bytes [chunk_begin, chunk_end) not yet split into lines, and the
  // start of a line that runs past the chunk.
  std::optional<ByteSource> source;
  std::unique_ptr<char[]> chunk;
  size_t chunk_begin = 0, chunk_end = 0;
  std::string partial;
  bool partial_returned = false;  // next_line returned `partial`: clear it before going on
  uint64_t line_number = 0;
  std::string value, detail;  // parse_line's outputs, kept to reuse their buffers

  // The next line of the JSONL file without its '\n', a view into chunk or partial that lives
  // until the next call; false at the end of the file.
  bool next_line(std::string_view& line) {
    if (partial_returned) {
      partial.clear();
      partial_returned = false;
    }
    for (;;) {
      if (chunk_begin < chunk_end) {
        const char* start = chunk.get() + chunk_begin;
        const size_t available = chunk_end - chunk_begin;
        if (const void* newline = std::memchr(start, '\n', available)) {
          const size_t length = size_t(static_cast<const char*>(newline) - start);
          chunk_begin += length + 1;
          if (partial.empty()) {
            line = {start, length};
            return true;
          }
          partial.append(start, length);
          line = partial;
          partial_returned = true;
          return true;
        }
        partial.append(start, available);
      }
      chunk_begin = 0;
      chunk_end = source->read(chunk.get(), kChunkBytes);
      if (chunk_end == 0) {
        // The last line, without a '\n'.
        if (partial.empty()) return false;
        line = partial;
        partial_returned = true;
        return true;
      }
    }
  }

  [[noreturn]] void line_error(const std::string& what) const { fail(kOp, current, ":", line_number, ": ", what); }

  // The next document of the JSONL file into doc; false at its end.
  bool next_jsonl(std::string& doc) {
    const std::string field = cat('"', options.text_field, '"');
    std::string_view line;
    while (next_line(line)) {
      ++line_number;
      if (line.ends_with('\r')) line.remove_suffix(1);
      if (is_json_blank(line)) continue;
      ++stats.lines;
      value.clear();
      switch (parse_line(line, options.text_field, value, detail)) {
        case LineProblem::none:
          if (value.empty()) {
            ++stats.skipped_empty;
            continue;
          }
          std::swap(doc, value);
          return true;
        case LineProblem::bad_json:
          if (options.strict) line_error(cat("not valid JSON (", detail, ")"));
          ++stats.skipped_bad_json;
          break;
        case LineProblem::not_object:
          if (options.strict) line_error(cat("not a JSON object (", detail, ")"));
          ++stats.skipped_not_object;
          break;
        case LineProblem::no_field:
          if (options.strict)
            line_error(cat("no ", field, " field (use --text-field to choose another; without --strict such "
                           "lines are skipped and counted)"));
          ++stats.skipped_no_field;
          break;
        case LineProblem::not_string:
          if (options.strict) line_error(cat("the ", field, " field is ", detail, ", not a string"));
          ++stats.skipped_not_string;
          break;
      }
    }
    return false;
  }

  // Opens files[next_file]: a text file is read and split here, a JSONL file is opened.
  void open_next_file() {
    current = files[next_file++];
    ++stats.files;
    if (input_format(current) == InputFormat::jsonl) {
      source.emplace(current);
      if (!chunk) chunk.reset(new char[kChunkBytes]);
      chunk_begin = chunk_end = 0;
      partial.clear();
      partial_returned = false;
      line_number = 0;
    } else {
      text_documents = split_documents(read_all(current));
      text_next = 0;
      finished_bytes += sizes[next_file - 1];
    }
  }

  bool next(std::string& doc) {
    for (;;) {
      if (text_next < text_documents.size()) {
        doc = std::move(text_documents[text_next++]);
        return true;
      }
      if (source) {
        if (next_jsonl(doc)) return true;
        source.reset();
        finished_bytes += sizes[next_file - 1];
      }
      text_documents.clear();
      text_next = 0;
      if (next_file == files.size()) return false;
      open_next_file();
    }
  }
};

DocumentReader::DocumentReader(std::vector<std::string> inputs, CorpusOptions options)
    : impl_(std::make_unique<Impl>()) {
  Impl& r = *impl_;
  r.options = std::move(options);
  for (const std::string& input : inputs)
    for (std::string& file : corpus_files(input)) r.files.push_back(std::move(file));
  for (const std::string& file : r.files) {
    std::error_code ec;
    const uintmax_t size = fs::file_size(file, ec);
    r.sizes.push_back(ec ? 0 : uint64_t(size));
    r.total += r.sizes.back();
  }
}

DocumentReader::~DocumentReader() = default;
DocumentReader::DocumentReader(DocumentReader&&) noexcept = default;
DocumentReader& DocumentReader::operator=(DocumentReader&&) noexcept = default;

bool DocumentReader::next(std::string& doc) {
  if (!impl_->next(doc)) return false;
  ++impl_->stats.documents;
  impl_->stats.bytes += doc.size();
  return true;
}

uint64_t DocumentReader::consumed_bytes() const {
  const Impl& r = *impl_;
  if (!r.source) return r.finished_bytes;
  return r.finished_bytes + std::min(r.source->consumed(), r.sizes[r.next_file - 1]);
}

uint64_t DocumentReader::total_bytes() const { return impl_->total; }
const CorpusStats& DocumentReader::stats() const { return impl_->stats; }
const std::string& DocumentReader::current_file() const { return impl_->current; }
const std::vector<std::string>& DocumentReader::files() const { return impl_->files; }

std::vector<std::string> read_documents(const std::string& path, const CorpusOptions& options, CorpusStats* stats) {
  DocumentReader reader({path}, options);
  std::vector<std::string> documents;
  std::string doc;
  while (reader.next(doc)) documents.push_back(std::move(doc));
  if (stats) *stats = reader.stats();
  if (documents.empty()) {
    const std::string skips = describe_skips(reader.stats(), options.text_field);
    if (skips.empty()) fail("data", path, ": the corpus is empty");
    fail("data", path, ": the corpus is empty (", skips, ")");
  }
  return documents;
}

}  // namespace cotan::text
