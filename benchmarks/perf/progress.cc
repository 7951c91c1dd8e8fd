#include "progress.h"

#include <unistd.h>

namespace coil_perf {

Progress::Progress(std::FILE* out, size_t totalRows, bool enabled)
    : out_(out), total_(totalRows), enabled_(enabled), start_(std::chrono::steady_clock::now()) {}

bool Progress::onTerminal(std::FILE* f) { return isatty(fileno(f)) == 1; }

void Progress::show(size_t done, const std::string& what) {
  if (!enabled_) return;
  const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start_;
  // \r and erase-to-end-of-line: one line, redrawn in place.
  std::fprintf(out_, "\r\033[K[%zu/%zu rows, %s] %s", done + 1, total_,
               shortDuration(elapsed.count()).c_str(), what.c_str());
  std::fflush(out_);
  drawn_ = true;
}

void Progress::clear() {
  if (!drawn_) return;
  std::fprintf(out_, "\r\033[K");
  std::fflush(out_);
  drawn_ = false;
}

std::string shortDuration(double seconds) {
  const long s = static_cast<long>(seconds);
  char text[32];
  if (s < 60) std::snprintf(text, sizeof text, "%lds", s);
  else if (s < 3600) std::snprintf(text, sizeof text, "%ldm%02lds", s / 60, s % 60);
  else std::snprintf(text, sizeof text, "%ldh%02ldm", s / 3600, (s % 3600) / 60);
  return text;
}

}  // namespace coil_perf
