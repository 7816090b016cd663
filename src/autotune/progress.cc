#include "src/autotune/progress.h"

#include <unistd.h>

#include <cmath>
#include <iostream>

namespace tcc::autotune {

namespace {
constexpr size_t kBarWidth = 30;
}

ProgressBar::ProgressBar(std::ostream& out, bool enabled, std::string what)
    : out_(out), enabled_(enabled), what_(std::move(what)), start_(std::chrono::steady_clock::now()) {}

ProgressBar ProgressBar::for_stderr(std::string what) {
  return ProgressBar(std::cerr, ::isatty(STDERR_FILENO) == 1, std::move(what));
}

std::string ProgressBar::frame(size_t done, size_t total, double elapsed_s, const std::string& what) {
  size_t filled = total ? kBarWidth * done / total : kBarWidth;
  std::string s = "[" + std::string(filled, '#') + std::string(kBarWidth - filled, '.') + "] " +
                  std::to_string(done) + "/" + std::to_string(total) + " " + what;
  if (done > 0 && done < total)
    s += "  ETA " + std::to_string(static_cast<long>(std::ceil(elapsed_s / done * (total - done)))) + " s";
  return s;
}

void ProgressBar::update(size_t done, size_t total) {
  if (!enabled_) return;
  double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  std::string s = frame(done, total, elapsed, what_);
  size_t width = s.size();
  if (s.size() < width_) s.append(width_ - s.size(), ' ');
  width_ = width;
  out_ << "\r" << s << std::flush;
}

void ProgressBar::finish() {
  if (!enabled_ || width_ == 0) return;
  out_ << "\r" << std::string(width_, ' ') << "\r" << std::flush;
  width_ = 0;
}

}  // namespace tcc::autotune
