// The library's side of one helper process: start, HELO, CMPL -> RSLT/FAIL, and what to say
// when the helper dies, hangs or answers garbage.
#include "jit/compiler_helper.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstring>

#include <fmt/format.h>

#include "common/logging.h"
#include "mlajit/error.h"

namespace mlajit::jit {
namespace {

using Clock = std::chrono::steady_clock;

// Enough for a sanitizer report or a loader error; a helper that prints more keeps its end.
constexpr size_t kStderrTailBytes = 16 << 10;
// How long a helper that closed its socket gets to finish exiting before it is killed.
constexpr auto kExitGrace = std::chrono::seconds(2);

std::atomic<uint64_t> helpers_started{0};

int poll_timeout_ms(Deadline deadline) {
  if (deadline == Deadline::max()) return -1;
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  // +1: poll rounds down, and a wake-up just before the deadline would spin.
  return static_cast<int>(std::clamp<int64_t>(left.count() + 1, 0, INT_MAX));
}

std::string nvrtc_version_text(int version) {
  return fmt::format("{}.{}", version / 1000, version % 1000 / 10);
}

}  // namespace

uint64_t CompilerHelper::started_count() { return helpers_started.load(); }

CompilerHelper::CompilerHelper(ChildProcess child, std::string path)
    : child_(std::move(child)), path_(std::move(path)) {}

CompilerHelper::~CompilerHelper() { retire(); }

void CompilerHelper::retire() {
  usable_ = false;
  child_.close_channel();
  // An idle helper is blocked reading its socket: it exits at end of input, and SIGKILL
  // loses nothing. Killing at once keeps a retiring compile path from waiting on it.
  child_.kill_and_wait();
  child_.close_error_pipe();
}

std::unique_ptr<CompilerHelper> CompilerHelper::start(const std::string& path,
                                                      int expected_nvrtc_version,
                                                      Deadline deadline) {
  std::unique_ptr<CompilerHelper> helper;
  try {
    helper.reset(new CompilerHelper(ChildProcess::start(path), path));
    helpers_started.fetch_add(1);
  } catch (const Error& error) {
    throw HelperUnavailable(error.what());
  }
  helper::Frame frame{};
  Wait wait;
  try {
    wait = helper->exchange("", deadline, frame);
  } catch (const Error& garbled) {
    throw HelperUnavailable(fmt::format("{} (pid {}) is not a compiler helper of this mlajit: {}",
                                        path, helper->pid(), garbled.what()));
  }
  if (wait == Wait::kTimedOut) {
    helper->child_.kill_and_wait();
    helper->drain_stderr();
    throw HelperUnavailable(fmt::format("{} (pid {}) did not say hello before the compile time "
                                        "limit and was killed{}",
                                        path, helper->pid(), helper->stderr_text()));
  }
  if (wait == Wait::kClosed) {
    const int status = helper->child_.wait_until(Clock::now() + kExitGrace);
    helper->drain_stderr();
    throw HelperUnavailable(fmt::format("{} (pid {}) {} before saying hello{}", path,
                                        helper->pid(), describe_wait_status(status),
                                        helper->stderr_text()));
  }
  helper::Hello hello;
  try {
    if (frame.tag != helper::Tag::kHello) {
      throw Error(ErrorCode::kInternal,
                  fmt::format("its first frame is {}, not HELO",
                              helper::tag_name(static_cast<uint32_t>(frame.tag))));
    }
    hello = helper::decode_hello(frame.payload);
  } catch (const Error& garbled) {
    throw HelperUnavailable(fmt::format("{} (pid {}) is not a compiler helper of this mlajit: {}",
                                        path, helper->pid(), garbled.what()));
  }
  if (hello.nvrtc_version == 0) {
    throw HelperUnavailable(fmt::format("{} (pid {}) could not load NVRTC: {}", path,
                                        helper->pid(), hello.nvrtc_detail));
  }
  if (hello.nvrtc_version != expected_nvrtc_version) {
    throw HelperUnavailable(fmt::format(
        "{} (pid {}) loaded NVRTC {} ({}) but this process uses NVRTC {}, which the cache keys "
        "name; make both find the same libnvrtc (CUDA_HOME, LD_LIBRARY_PATH)",
        path, helper->pid(), nvrtc_version_text(hello.nvrtc_version), hello.nvrtc_detail,
        nvrtc_version_text(expected_nvrtc_version)));
  }
  helper->nvrtc_version_ = hello.nvrtc_version;
  return helper;
}

CompileResult CompilerHelper::compile(const CompileRequest& request, Deadline deadline,
                                      const std::string& what, const std::string& timeout_text) {
  if (!usable_) {
    throw Error(ErrorCode::kInternal,
                fmt::format("compiler helper pid {} was asked to compile after it failed", pid()));
  }
  stderr_tail_.clear();
  const auto started = Clock::now();
  // "the compiler helper P (pid N) <event> while compiling <kernel> for <arch>: <why>. ..."
  const auto killed = [&](const std::string& event, const std::string& why) {
    usable_ = false;
    child_.close_channel();
    return Error(ErrorCode::kCompileError,
                 fmt::format("the compiler helper {} (pid {}) {} while compiling {} for {}: {}. "
                             "This process is unaffected and nothing was cached: the next "
                             "request for this kernel compiles it again{}",
                             path_, pid(), event, what, request.arch, why, stderr_text()));
  };

  const auto garbled = [&](const Error& problem) {
    child_.kill_and_wait();
    drain_stderr();
    return killed("sent a garbled answer and was killed", problem.what());
  };

  helper::Frame frame{};
  Wait wait;
  try {
    wait = exchange(helper::encode_frame(helper::Tag::kCompile, helper::encode_request(request)),
                    deadline, frame);
  } catch (const Error& problem) {
    throw garbled(problem);
  }
  if (wait == Wait::kTimedOut) {
    child_.kill_and_wait();
    drain_stderr();
    throw killed(
        fmt::format("ran past the compile time limit ({}; {:.1f} s elapsed) and was killed with "
                    "SIGKILL",
                    timeout_text, std::chrono::duration<double>(Clock::now() - started).count()),
        "NVRTC hung, or the machine is too loaded for the limit; raise MLAJIT_COMPILE_TIMEOUT "
        "if this kernel legitimately compiles that slowly");
  }
  if (wait == Wait::kClosed) {
    const int status = child_.wait_until(Clock::now() + kExitGrace);
    drain_stderr();
    throw killed(fmt::format("{} without answering", describe_wait_status(status)),
                 "NVRTC (or the helper) crashed on this program; MLAJIT_COMPILE_MODE=inline "
                 "reproduces it in-process, where it takes the process down");
  }
  // One answer per request: anything after it means the helper and the library disagree.
  const auto require_nothing_after = [&] {
    if (!inbox_.empty()) {
      throw Error(ErrorCode::kInternal, fmt::format("{} bytes after the answer", inbox_.size()));
    }
  };
  if (frame.tag == helper::Tag::kFailure) {
    helper::Failure failure;
    try {
      failure = helper::decode_failure(frame.payload);
      require_nothing_after();
    } catch (const Error& problem) {
      throw garbled(problem);
    }
    throw Error(failure.code, failure.message);  // NVRTC's verdict: the helper stays usable
  }
  CompileResult result;
  try {
    if (frame.tag != helper::Tag::kResult) {
      throw Error(ErrorCode::kInternal,
                  fmt::format("a {} frame where RSLT or FAIL belongs",
                              helper::tag_name(static_cast<uint32_t>(frame.tag))));
    }
    result = helper::decode_result(frame.payload);
    require_nothing_after();
  } catch (const Error& problem) {
    throw garbled(problem);
  }
  if (!stderr_tail_.empty()) {
    logger("mlajit.jit")->debug("compiler helper pid {} printed while compiling {}:\n{}", pid(),
                                what, stderr_tail_);
  }
  return result;
}

CompilerHelper::Wait CompilerHelper::exchange(const std::string& out, Deadline deadline,
                                              helper::Frame& frame) {
  size_t sent = 0;
  bool closed = false;
  char chunk[1 << 16];
  for (;;) {
    if (auto taken = helper::take_frame(inbox_)) {
      frame = std::move(*taken);
      return Wait::kFrame;
    }
    if (closed) return Wait::kClosed;
    const int timeout_ms = poll_timeout_ms(deadline);
    if (timeout_ms == 0) return Wait::kTimedOut;
    pollfd fds[2] = {{child_.channel(), POLLIN, 0}, {child_.error_pipe(), POLLIN, 0}};
    if (sent < out.size()) fds[0].events |= POLLOUT;
    const int ready = ::poll(fds, child_.error_pipe() >= 0 ? 2 : 1, timeout_ms);
    if (ready < 0 && errno != EINTR) {
      throw Error(ErrorCode::kInternal, fmt::format("poll failed: {}", std::strerror(errno)));
    }
    if (ready <= 0) continue;
    if (fds[1].revents != 0) drain_stderr();
    if (fds[0].revents & POLLOUT) {
      // MSG_NOSIGNAL: a helper that died gives EPIPE here, never SIGPIPE to the caller.
      const ssize_t n = ::send(child_.channel(), out.data() + sent, out.size() - sent,
                               MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) sent += static_cast<size_t>(n);
      else if (n < 0 && errno != EAGAIN && errno != EINTR) sent = out.size();  // peer gone: read on to its end
    }
    if (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) {
      const ssize_t n = ::recv(child_.channel(), chunk, sizeof(chunk), MSG_DONTWAIT);
      if (n > 0) inbox_.append(chunk, static_cast<size_t>(n));
      else if (n == 0 || (errno != EAGAIN && errno != EINTR)) closed = true;
    }
  }
}

void CompilerHelper::drain_stderr() {
  char chunk[4096];
  while (child_.error_pipe() >= 0) {
    const ssize_t n = ::read(child_.error_pipe(), chunk, sizeof(chunk));
    if (n > 0) {
      stderr_tail_.append(chunk, static_cast<size_t>(n));
      if (stderr_tail_.size() > 2 * kStderrTailBytes) {
        stderr_tail_.erase(0, stderr_tail_.size() - kStderrTailBytes);
      }
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) child_.close_error_pipe();  // the helper (and every copy of its stderr) is gone
    return;                                  // EAGAIN: nothing more for now
  }
}

std::string CompilerHelper::stderr_text() const {
  if (stderr_tail_.empty()) return "";
  const bool cut = stderr_tail_.size() > kStderrTailBytes;
  return fmt::format("\nhelper stderr{}:\n{}", cut ? " (last 16 KiB)" : "",
                     cut ? stderr_tail_.substr(stderr_tail_.size() - kStderrTailBytes) : stderr_tail_);
}

}  // namespace mlajit::jit
