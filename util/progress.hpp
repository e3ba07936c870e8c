// Progress of long jobs: a bar redrawn in place on a terminal, a plain line now and then in logs.
//
//   Progress progress("tokenize", total_bytes, isatty(STDERR_FILENO), std::cerr);
//   progress.update(done_bytes, "12.5 MB/s");   // at most every 0.2 s on a terminal, 10 s in logs
//   progress.finish("3 files, 1200 documents");
#pragma once

#include <chrono>
#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>

namespace cotan {

// "m:ss", rounded to the second ("12:05"; minutes grow past 59).
std::string format_duration(double seconds);

class Progress {
 public:
  Progress(std::string label, uint64_t total, bool bar, std::ostream& out, double log_every_s = 10);
  // `done` of `total`, with the ETA at the pace so far; `detail` follows the percentage and
  // `after` the ETA (a whole job's ETA after one part's).
  void update(uint64_t done, std::string_view detail = {}, std::string_view after = {});
  // Ends the bar's line (a terminal) and writes "label: summary (elapsed m:ss)".
  void finish(std::string_view summary);
  double elapsed_s() const;

 private:
  void draw(uint64_t done, std::string_view detail, std::string_view after);

  std::string label_;
  uint64_t total_;
  bool bar_;
  std::ostream& out_;
  double every_s_;
  std::chrono::steady_clock::time_point start_, last_;
  bool drawn_ = false;
};

}  // namespace cotan
