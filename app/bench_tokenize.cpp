// `cotan bench tokenize`: encode throughput (MB of text per second) of an HF tokenizer.json on a
// corpus, on 1 and 2 threads (or --threads-list), side by side with HF tokenizers' encode_batch on
// the same documents and thread count when the Python package is importable
// (bench/tokenizers_reference.py, one process per thread count since rayon reads its thread count
// once). cotan and HF are timed alternately, thread count by thread count; each reports the median
// of --repeats runs after a warm-up. Both encode every document with add_special_tokens, and the
// token totals must agree.
#include <unistd.h>

#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <boost/program_options.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "app/bench_util.hpp"
#include "app/commands.hpp"
#include "app/options.hpp"
#include "tensor/error.hpp"
#include "text/corpus.hpp"
#include "text/tokenizer.hpp"
#include "util/json.hpp"

namespace po = boost::program_options;
namespace fs = std::filesystem;

namespace cotan::app {

int bench_tokenize(const Args& args);

namespace {

// `relative` in `dir` or a directory above it.
std::optional<fs::path> find_above(fs::path dir, const fs::path& relative) {
  for (; !dir.empty(); dir = dir.parent_path()) {
    std::error_code ec;
    if (fs::exists(dir / relative, ec)) return dir / relative;
    if (dir == dir.parent_path()) break;
  }
  return std::nullopt;
}

std::optional<fs::path> find_in_tree(const fs::path& relative) {
  std::error_code ec;
  if (auto found = find_above(fs::current_path(ec), relative)) return found;
  return find_above(fs::read_symlink("/proc/self/exe", ec).parent_path(), relative);
}

struct HfResult {
  std::string version;
  double seconds = 0;
  uint64_t tokens = 0;
};

// The reference in a child process; nothing (and the reason in `why`) when it cannot run.
std::optional<HfResult> run_hf(const std::string& python, const fs::path& script, const std::string& tokenizer,
                               const std::string& docs, int threads, int repeats, std::string& why) {
  const auto quote = [](const std::string& s) {
    std::string q = "'";
    for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return q + "'";
  };
  const std::string command = "env RAYON_NUM_THREADS=" + std::to_string(threads) + " TOKENIZERS_PARALLELISM=true " +
                              quote(python) + " " + quote(script.string()) + " " + quote(tokenizer) + " " + quote(docs) +
                              " " + std::to_string(repeats) + " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) {
    why = "cannot start " + python;
    return std::nullopt;
  }
  std::string out;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, pipe)) > 0;) out.append(buf, n);
  const int status = pclose(pipe);
  const size_t brace = out.rfind("\n{");
  const std::string line = out.substr(brace == std::string::npos ? 0 : brace + 1);
  Json reply;
  try {
    reply = parse_json(line);
  } catch (const Error&) {
    why = python + " failed (status " + std::to_string(status) + "): " + out.substr(0, 300);
    return std::nullopt;
  }
  if (reply.contains("error")) {
    why = reply["error"].get<std::string>();
    return std::nullopt;
  }
  HfResult r;
  r.version = reply["version"].get<std::string>();
  r.seconds = median(reply["seconds"].get<std::vector<double>>());
  r.tokens = reply["tokens"].get<uint64_t>();
  return r;
}

}  // namespace

int bench_tokenize(const Args& args) {
  std::string tokenizer_path, corpus_path, threads_list = "1,2", python = "python3";
  int64_t repeats = 3, max_mb = 8;
  po::options_description opts("cotan bench tokenize [options]: encode MB/s of an HF tokenizer, against HF tokenizers");
  opts.add_options()("help,h", "show this help")(
      "tokenizer", po::value(&tokenizer_path),
      "a tokenizer.json or model directory (default: tests/tokenizer/fixtures/qwen2, a Qwen2-style byte-level BPE)")(
      "text", po::value(&corpus_path), "the documents: a corpus as `cotan tokenize` reads it (default: the fortunes corpus)")(
      "max-mb", po::value(&max_mb)->default_value(max_mb), "use the corpus's first documents up to this many MB")(
      "threads-list", po::value(&threads_list)->default_value(threads_list), "thread counts to time, comma-separated")(
      "repeats", po::value(&repeats)->default_value(repeats), "timed runs per side and thread count (the median is reported)")(
      "python", po::value(&python)->default_value(python), "the interpreter that has HF tokenizers")(
      "no-hf", "time cotan alone")("json", "print one JSON object instead of the table");
  const po::variables_map vm = parse_options(args, opts);
  if (vm.count("help")) {
    std::cout << opts << "\n";
    return 0;
  }
  check_integer("repeats", repeats, 1, 1000);
  check_integer("max-mb", max_mb, 1, 1 << 20);
  std::vector<int64_t> thread_counts;
  {
    std::stringstream list(threads_list);
    for (std::string item; std::getline(list, item, ',');) {
      int64_t t = 0;
      try {
        size_t used = 0;
        t = std::stoll(item, &used);
        if (used != item.size()) throw std::invalid_argument(item);
      } catch (const std::exception&) {
        fail("option", "--threads-list: '", item, "' is not an integer (expected a list such as 1,2)");
      }
      check_integer("threads-list", t, 1, 1024);
      thread_counts.push_back(t);
    }
    if (thread_counts.empty()) fail("option", "--threads-list is empty (expected a list such as 1,2)");
  }
  if (tokenizer_path.empty()) {
    const auto found = find_in_tree("tests/tokenizer/fixtures/qwen2/tokenizer.json");
    if (!found) fail("bench", "no --tokenizer given, and tests/tokenizer/fixtures/qwen2 is not above this directory");
    tokenizer_path = found->string();
  }
  const text::Tokenizer tokenizer = text::Tokenizer::load(tokenizer_path);
  std::vector<std::string> docs = text::read_documents(corpus_path.empty() ? text::default_corpus_path() : corpus_path);
  uint64_t bytes = 0;
  size_t keep = 0;
  while (keep < docs.size() && bytes < uint64_t(max_mb) * 1'000'000) bytes += docs[keep++].size();
  docs.resize(keep);
  for (std::string& d : docs) d = text::replace_invalid_utf8(d);  // what HF's Python strings can hold

  // The documents for the reference, one JSON string per line.
  const bool want_hf = !vm.count("no-hf");
  std::optional<fs::path> script;
  std::string docs_file, hf_missing;
  if (want_hf) {
    script = find_in_tree("bench/tokenizers_reference.py");
    if (!script) {
      hf_missing = "bench/tokenizers_reference.py not found above this directory";
    } else {
      char name[] = "/tmp/cotan-bench-tokenize-XXXXXX";
      const int fd = mkstemp(name);
      if (fd < 0) fail("bench", "cannot create a temporary file in /tmp");
      close(fd);
      docs_file = name;
      std::ofstream out(docs_file, std::ios::binary);
      for (const std::string& d : docs) out << dump_json(Json(d)) << "\n";
    }
  }

  struct Row {
    int threads;
    double cotan_s;
    uint64_t tokens;
    std::optional<HfResult> hf;
  };
  std::vector<Row> rows;
  std::string hf_version;
  for (int64_t t : thread_counts) {
    tbb::task_arena arena{int(t)};
    std::vector<std::vector<int32_t>> ids(docs.size());
    const auto run = [&] {
      arena.execute([&] {
        tbb::parallel_for(size_t(0), docs.size(), [&](size_t i) { ids[i] = tokenizer.encode(docs[i]); });
      });
    };
    run();  // warm-up
    std::vector<double> times;
    for (int64_t r = 0; r < repeats; ++r) times.push_back(seconds_of(run));
    uint64_t tokens = 0;
    for (const auto& v : ids) tokens += v.size();
    Row row{int(t), median(times), tokens, std::nullopt};
    if (want_hf && hf_missing.empty()) {
      row.hf = run_hf(python, *script, tokenizer.path(), docs_file, int(t), int(repeats), hf_missing);
      if (row.hf) {
        hf_version = row.hf->version;
        if (row.hf->tokens != tokens)
          fail("bench", "HF tokenizers made ", row.hf->tokens, " tokens and cotan ", tokens, " on the same documents");
      }
    }
    rows.push_back(row);
  }
  if (!docs_file.empty()) fs::remove(docs_file);

  const double mb = double(bytes) / 1e6;
  if (vm.count("json")) {
    Json j = Json::object();
    j["tokenizer"] = tokenizer.path();
    j["documents"] = docs.size();
    j["bytes"] = bytes;
    if (!hf_version.empty()) j["hf_tokenizers"] = hf_version;
    if (!hf_missing.empty() && want_hf) j["hf_missing"] = hf_missing;
    Json list = Json::array();
    for (const Row& r : rows) {
      Json row = Json::object();
      row["threads"] = r.threads;
      row["tokens"] = r.tokens;
      row["cotan"] = {{"seconds", r.cotan_s}, {"mb_per_s", mb / r.cotan_s}};
      if (r.hf) {
        row["hf"] = {{"seconds", r.hf->seconds}, {"mb_per_s", mb / r.hf->seconds}};
        row["ratio"] = r.hf->seconds / r.cotan_s;
      }
      list.push_back(row);
    }
    j["runs"] = list;
    std::cout << dump_json(j) << "\n";
    return 0;
  }
  std::printf("tokenizer %s: %zu documents, %.2f MB, median of %lld runs\n", tokenizer.path().c_str(), docs.size(), mb,
              static_cast<long long>(repeats));
  if (!hf_version.empty()) std::printf("HF tokenizers %s\n", hf_version.c_str());
  if (want_hf && !hf_missing.empty()) std::printf("HF tokenizers not run: %s\n", hf_missing.c_str());
  std::printf("%8s %12s %14s %12s %10s\n", "threads", "tokens", "cotan MB/s", "HF MB/s", "cotan/HF");
  for (const Row& r : rows) {
    if (r.hf) {
      std::printf("%8d %12llu %14.2f %12.2f %9.2fx\n", r.threads, static_cast<unsigned long long>(r.tokens),
                  mb / r.cotan_s, mb / r.hf->seconds, r.hf->seconds / r.cotan_s);
    } else {
      std::printf("%8d %12llu %14.2f %12s %10s\n", r.threads, static_cast<unsigned long long>(r.tokens), mb / r.cotan_s,
                  "-", "-");
    }
  }
  return 0;
}

}  // namespace cotan::app
