#pragma once
// A child process started with posix_spawn (never a bare fork: the caller may be a
// multi-threaded server holding a CUDA context, and only async-signal-safe calls are allowed
// between fork and exec there). The child's stdin and stdout are one end of a socket pair,
// its stderr a pipe; it inherits the caller's environment and no other descriptor.
#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace mlajit::jit {

using Deadline = std::chrono::steady_clock::time_point;

class ChildProcess {
 public:
  // Throws Error(kIoError) naming the path and the errno text when the socket, the pipe or
  // posix_spawn fails (ENOENT, EACCES, ENOEXEC: glibc reports exec failures here).
  static ChildProcess start(const std::string& path, const std::vector<std::string>& args = {});

  ChildProcess(ChildProcess&& other) noexcept;
  ChildProcess& operator=(ChildProcess&& other) = delete;
  ChildProcess(const ChildProcess&) = delete;
  ~ChildProcess();  // kill_and_wait() unless already reaped: never leaves a zombie

  pid_t pid() const { return pid_; }
  // The caller's end of the child's stdin/stdout socket: non-blocking, close-on-exec. Write
  // with send(MSG_NOSIGNAL): a child that died gives EPIPE, never SIGPIPE to this process.
  int channel() const { return channel_; }
  // The read end of the child's stderr: non-blocking, close-on-exec; -1 once closed.
  int error_pipe() const { return error_pipe_; }
  void close_channel();
  void close_error_pipe();

  // The wait status once reaped (waitpid), nullopt while the child runs.
  std::optional<int> try_wait();
  // Waits until `deadline` for the child to exit, then SIGKILLs it; always reaps. Returns the
  // wait status.
  int wait_until(Deadline deadline);
  int kill_and_wait();
  bool reaped() const { return status_.has_value(); }

 private:
  ChildProcess() = default;
  pid_t pid_ = -1;
  int channel_ = -1;
  int error_pipe_ = -1;
  std::optional<int> status_;
};

// "exited with status 3", "was killed by signal 11 (SIGSEGV)".
std::string describe_wait_status(int status);

}  // namespace mlajit::jit
