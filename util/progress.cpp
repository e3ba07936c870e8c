#include "util/progress.hpp"

#include <algorithm>
#include <cstdio>

namespace cotan {

std::string format_duration(double seconds) {
  const int s = int(std::max(0.0, seconds) + 0.5);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%d:%02d", s / 60, s % 60);
  return buf;
}

Progress::Progress(std::string label, uint64_t total, bool bar, std::ostream& out, double log_every_s)
    : label_(std::move(label)),
      total_(total),
      bar_(bar),
      out_(out),
      every_s_(bar ? 0.2 : log_every_s),
      start_(std::chrono::steady_clock::now()),
      last_(start_) {}

double Progress::elapsed_s() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

void Progress::update(uint64_t done, std::string_view detail, std::string_view after) {
  const auto now = std::chrono::steady_clock::now();
  // The bar is drawn at the first update, then at most every every_s_.
  if ((drawn_ || !bar_) && std::chrono::duration<double>(now - last_).count() < every_s_) return;
  last_ = now;
  draw(done, detail, after);
}

void Progress::draw(uint64_t done, std::string_view detail, std::string_view after) {
  const double fraction = total_ > 0 ? std::min(1.0, double(done) / double(total_)) : 1.0;
  const double elapsed = elapsed_s();
  const std::string eta = fraction > 0 ? format_duration(elapsed / fraction * (1 - fraction)) : "?";
  char percent[16];
  std::snprintf(percent, sizeof percent, "%5.1f%%", 100 * fraction);
  const std::string rest = std::string(percent) + (detail.empty() ? "" : "  " + std::string(detail)) + "  ETA " + eta +
                           (after.empty() ? "" : "  " + std::string(after));
  if (bar_) {
    constexpr int kWidth = 30;
    const int filled = int(kWidth * fraction);
    out_ << "\r" << label_ << " [" << std::string(size_t(filled), '#') << std::string(size_t(kWidth - filled), '.') << "] "
         << rest << "  " << std::flush;
    drawn_ = true;
  } else {
    out_ << label_ << ": " << rest << "\n" << std::flush;
  }
}

void Progress::finish(std::string_view summary) {
  if (bar_ && drawn_) out_ << "\n";
  out_ << label_ << ": " << summary << " (" << format_duration(elapsed_s()) << ")\n" << std::flush;
}

}  // namespace cotan
