#pragma once
// A progress report for long batches: one line per finished item, or, when stderr is a
// terminal, a single line rewritten in place with \r. Thread-safe.
#include <chrono>
#include <cstddef>
#include <mutex>
#include <string>

namespace mlajit::cli {

class Progress {
 public:
  // `enabled` false prints nothing (e.g. --quiet).
  Progress(size_t total, bool enabled);
  ~Progress();

  // One item ended with `status` ("compiled", "cached", "FAILED").
  void item_done(const std::string& status, const std::string& item);
  // Ends the rewritten line so what follows starts on a fresh one.
  void finish();
  double elapsed_seconds() const;

 private:
  std::string line(const std::string& status, const std::string& item) const;

  std::mutex mutex_;
  size_t total_ = 0;
  size_t done_ = 0;
  bool enabled_ = true;
  bool terminal_ = false;
  bool line_open_ = false;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace mlajit::cli
