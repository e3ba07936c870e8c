// The byte-level tokenizer, corpus reading and the train/validation split of documents.
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "tensor/random.hpp"
#include "train/data.hpp"

namespace cotan::train {

namespace fs = std::filesystem;

namespace {

constexpr const char* kDefaultCorpus = "/usr/share/games/fortunes";
constexpr uint64_t kSplitStream = 0x53504C54ull << 32;  // "SPLT": Philox stream of the val split

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("data", path, ": cannot read: ", std::strerror(errno));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) fail("data", path, ": cannot read: ", std::strerror(errno));
  return std::move(text).str();
}

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

}  // namespace

// ---- tokenizer ----

std::vector<int32_t> encode(std::string_view text) {
  std::vector<int32_t> ids(text.size());
  std::transform(text.begin(), text.end(), ids.begin(), [](char c) { return int32_t(static_cast<unsigned char>(c)); });
  return ids;
}

std::string decode(std::span<const int32_t> ids, std::string_view eod) {
  std::string text;
  text.reserve(ids.size());
  for (int32_t id : ids) {
    if (id == kEndOfDocument) {
      text += eod;
    } else if (id >= 0 && id < 256) {
      text += char(static_cast<unsigned char>(id));
    } else {
      fail("data", "token id ", id, " is outside the byte vocabulary [0, ", kByteVocab - 1, "]");
    }
  }
  return text;
}

std::vector<int32_t> encode_documents(const std::vector<std::string>& documents) {
  size_t total = 0;
  for (const std::string& d : documents) total += d.size() + 1;
  std::vector<int32_t> ids;
  ids.reserve(total);
  for (const std::string& d : documents) {
    for (char c : d) ids.push_back(int32_t(static_cast<unsigned char>(c)));
    ids.push_back(kEndOfDocument);
  }
  return ids;
}

// ---- corpus ----

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

std::vector<std::string> read_documents(const std::string& path) {
  std::vector<std::string> documents;
  for (const std::string& file : corpus_files(path)) {
    std::vector<std::string> docs = split_documents(read_file(file));
    std::move(docs.begin(), docs.end(), std::back_inserter(documents));
  }
  if (documents.empty()) fail("data", path, ": the corpus is empty");
  return documents;
}

DocumentSplit split_train_val(std::vector<std::string> documents, double val_fraction, uint64_t seed) {
  if (!(val_fraction >= 0.0 && val_fraction < 1.0))
    fail("data", "the validation fraction must be in [0, 1), got ", val_fraction);
  const size_t n = documents.size();
  size_t n_val = size_t(std::llround(val_fraction * double(n)));
  if (n >= 2 && val_fraction > 0.0) n_val = std::clamp<size_t>(n_val, 1, n - 1);
  if (n < 2) n_val = 0;

  // Rank documents by a Philox key (ties by index); the n_val smallest go to validation.
  std::vector<std::pair<uint64_t, size_t>> keys(n);
  for (size_t i = 0; i < n; ++i) {
    const std::array<uint32_t, 4> w = Philox::block(i, seed, kSplitStream);
    keys[i] = {(uint64_t(w[0]) << 32) | w[1], i};
  }
  std::vector<bool> in_val(n, false);
  if (n_val > 0) {
    std::nth_element(keys.begin(), keys.begin() + std::ptrdiff_t(n_val - 1), keys.end());
    for (size_t k = 0; k < n_val; ++k) in_val[keys[k].second] = true;
  }
  DocumentSplit split;
  split.val.reserve(n_val);
  split.train.reserve(n - n_val);
  for (size_t i = 0; i < n; ++i) (in_val[i] ? split.val : split.train).push_back(std::move(documents[i]));
  return split;
}

}  // namespace cotan::train
