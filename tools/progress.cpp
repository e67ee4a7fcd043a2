#include "progress.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <cstdio>

#include <fmt/format.h>

#include "cli_support.h"

namespace mlajit::cli {
namespace {

size_t terminal_width() {
  winsize size{};
  if (ioctl(STDERR_FILENO, TIOCGWINSZ, &size) == 0 && size.ws_col > 20) return size.ws_col;
  return 120;
}

}  // namespace

Progress::Progress(size_t total, bool enabled)
    : total_(total), enabled_(enabled), terminal_(stderr_is_terminal()),
      start_(std::chrono::steady_clock::now()) {}

Progress::~Progress() { finish(); }

double Progress::elapsed_seconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

std::string Progress::line(const std::string& status, const std::string& item) const {
  const double elapsed = elapsed_seconds();
  const double eta = done_ == 0 ? 0 : elapsed / done_ * (total_ - done_);
  const int width = static_cast<int>(std::to_string(total_).size());
  // The item goes last: on a narrow terminal it is the part cut off, not the times.
  return fmt::format("[{:>{}}/{}] {} elapsed, ETA {} | {:<8} {}", done_, width, total_,
                     human_seconds(elapsed), done_ == total_ ? "0 s" : human_seconds(eta), status,
                     item);
}

void Progress::item_done(const std::string& status, const std::string& item) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++done_;
  if (!enabled_) return;
  std::string text = line(status, item);
  if (terminal_) {
    // A line wider than the terminal wraps, and \r then rewrites only its last part.
    const size_t width = terminal_width() - 1;
    if (text.size() > width) text = text.substr(0, width - 3) + "...";
    std::fprintf(stderr, "\r%s\x1b[K", text.c_str());
    line_open_ = true;
  } else {
    std::fprintf(stderr, "%s\n", text.c_str());
  }
  std::fflush(stderr);
}

void Progress::finish() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (line_open_) std::fprintf(stderr, "\n");
  line_open_ = false;
}

}  // namespace mlajit::cli
