// A one-line progress bar with an ETA for long tunings, redrawn in place on
// stderr when stderr is a terminal (never into logs or pipes).
#pragma once

#include <chrono>
#include <cstddef>
#include <ostream>
#include <string>

namespace tcc::autotune {

class ProgressBar {
 public:
  // Draws only when `enabled`; for_stderr() enables it when stderr is a TTY.
  ProgressBar(std::ostream& out, bool enabled, std::string what);
  static ProgressBar for_stderr(std::string what);

  // After `done` of `total` items; the ETA extrapolates the mean time per item.
  void update(size_t done, size_t total);
  // Clears the line (a finished bar leaves nothing behind).
  void finish();

  // The text of one frame, for tests: "[#####.....] 5/10 kernels  ETA 12 s".
  static std::string frame(size_t done, size_t total, double elapsed_s, const std::string& what);

 private:
  std::ostream& out_;
  bool enabled_;
  std::string what_;
  std::chrono::steady_clock::time_point start_;
  size_t width_ = 0;
};

}  // namespace tcc::autotune
