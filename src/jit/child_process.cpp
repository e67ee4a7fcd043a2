// posix_spawn with a socket for stdin/stdout, a pipe for stderr, and nothing else inherited.
#include "jit/child_process.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <thread>

#include <fmt/format.h>

#include "mlajit/error.h"

extern char** environ;

namespace mlajit::jit {
namespace {

std::string errno_text(int error) { return fmt::format("{} (errno {})", ::strerror(error), error); }

// A caller that closed its stdin/stdout/stderr gets descriptors 0-2 back from socketpair or
// pipe; dup2 onto the same number would keep close-on-exec set and the child would lose it.
int above_stdio(int fd) {
  if (fd < 0 || fd > 2) return fd;
  const int moved = ::fcntl(fd, F_DUPFD_CLOEXEC, 3);
  const int error = errno;
  ::close(fd);
  errno = error;
  return moved;
}

void set_nonblocking(int fd) { ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK); }

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

// Owns posix_spawn's attribute and file-action objects for one call.
struct SpawnSetup {
  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attributes;
  SpawnSetup() {
    posix_spawn_file_actions_init(&actions);
    posix_spawnattr_init(&attributes);
  }
  ~SpawnSetup() {
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attributes);
  }

  void wire(int socket_end, int stderr_end) {
    posix_spawn_file_actions_adddup2(&actions, socket_end, STDIN_FILENO);
    posix_spawn_file_actions_adddup2(&actions, socket_end, STDOUT_FILENO);
    posix_spawn_file_actions_adddup2(&actions, stderr_end, STDERR_FILENO);
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 34))
    // Descriptors the caller opened without O_CLOEXEC (a server's sockets, another library's
    // lock files) must not live on in a helper that outlives the compile: a flock held by a
    // helper would block other processes until the helper exits.
    posix_spawn_file_actions_addclosefrom_np(&actions, 3);
#endif
  }

  // Signal state is inherited through exec: a thread that blocks signals, or a server that
  // ignores SIGTERM, must not hand that to the helper.
  void reset_signals() {
    sigset_t none, all;
    sigemptyset(&none);
    sigfillset(&all);
    posix_spawnattr_setsigmask(&attributes, &none);
    posix_spawnattr_setsigdefault(&attributes, &all);
    posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  }
};

}  // namespace

ChildProcess ChildProcess::start(const std::string& path, const std::vector<std::string>& args) {
  int sockets[2] = {-1, -1}, pipe_ends[2] = {-1, -1};
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sockets) != 0) {
    throw Error(ErrorCode::kIoError,
                fmt::format("cannot create a socket pair for {}: {}", path, errno_text(errno)));
  }
  ChildProcess child;  // owns the descriptors from here on
  child.channel_ = above_stdio(sockets[0]);
  int child_socket = above_stdio(sockets[1]);
  int child_stderr = -1;
  const auto close_child_ends = [&] {
    close_fd(child_socket);
    close_fd(child_stderr);
  };
  if (::pipe2(pipe_ends, O_CLOEXEC) != 0) {
    const int error = errno;
    close_child_ends();
    throw Error(ErrorCode::kIoError,
                fmt::format("cannot create a pipe for {}: {}", path, errno_text(error)));
  }
  child.error_pipe_ = above_stdio(pipe_ends[0]);
  child_stderr = above_stdio(pipe_ends[1]);
  if (child.channel_ < 0 || child_socket < 0 || child.error_pipe_ < 0 || child_stderr < 0) {
    const int error = errno;
    close_child_ends();
    throw Error(ErrorCode::kIoError,
                fmt::format("cannot move descriptors for {} above 2: {}", path, errno_text(error)));
  }

  SpawnSetup setup;
  setup.wire(child_socket, child_stderr);
  setup.reset_signals();
  std::vector<std::string> argv_text = {path};
  argv_text.insert(argv_text.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& arg : argv_text) argv.push_back(arg.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  const int error =
      ::posix_spawn(&pid, path.c_str(), &setup.actions, &setup.attributes, argv.data(), environ);
  close_child_ends();  // the child has its copies; ours would hide its exit (no EOF)
  if (error != 0) {
    throw Error(ErrorCode::kIoError,
                fmt::format("cannot start {}: posix_spawn: {}", path, errno_text(error)));
  }
  child.pid_ = pid;
  set_nonblocking(child.channel_);
  set_nonblocking(child.error_pipe_);
  return child;
}

ChildProcess::ChildProcess(ChildProcess&& other) noexcept
    : pid_(other.pid_),
      channel_(other.channel_),
      error_pipe_(other.error_pipe_),
      status_(other.status_) {
  other.pid_ = -1;
  other.channel_ = -1;
  other.error_pipe_ = -1;
}

ChildProcess::~ChildProcess() {
  close_channel();
  close_error_pipe();
  if (pid_ > 0 && !status_) kill_and_wait();
}

void ChildProcess::close_channel() { close_fd(channel_); }
void ChildProcess::close_error_pipe() { close_fd(error_pipe_); }

std::optional<int> ChildProcess::try_wait() {
  if (status_ || pid_ <= 0) return status_;
  int status = 0;
  pid_t done;
  do {
    done = ::waitpid(pid_, &status, WNOHANG);
  } while (done < 0 && errno == EINTR);
  if (done == pid_) {
    status_ = status;
  } else if (done < 0) {
    // ECHILD: someone else reaped it (a SIGCHLD handler set to SIG_IGN reaps automatically);
    // there is nothing left to wait for, so say "unknown" rather than wait forever.
    status_ = -1;
  }
  return status_;
}

int ChildProcess::wait_until(Deadline deadline) {
  // Polling with a short sleep: waitpid has no timeout, and a SIGCHLD handler or a pidfd
  // would be process-wide state this library has no business installing.
  auto pause = std::chrono::microseconds(200);
  while (!try_wait()) {
    if (std::chrono::steady_clock::now() >= deadline) return kill_and_wait();
    std::this_thread::sleep_for(pause);
    pause = std::min<std::chrono::microseconds>(pause * 2, std::chrono::milliseconds(10));
  }
  return *status_;
}

int ChildProcess::kill_and_wait() {
  if (status_ || pid_ <= 0) return status_.value_or(-1);
  ::kill(pid_, SIGKILL);
  int status = 0;
  pid_t done;
  do {
    done = ::waitpid(pid_, &status, 0);
  } while (done < 0 && errno == EINTR);
  status_ = done == pid_ ? status : -1;
  return *status_;
}

std::string describe_wait_status(int status) {
  if (status == -1) return "ended (its exit status was collected elsewhere)";
  if (WIFEXITED(status)) return fmt::format("exited with status {}", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    const int signal = WTERMSIG(status);
    const char* abbreviation = ::sigabbrev_np(signal);
    return fmt::format("was killed by signal {} (SIG{}{})", signal,
                       abbreviation ? abbreviation : "?", WCOREDUMP(status) ? ", core dumped" : "");
  }
  return fmt::format("changed state (wait status 0x{:x})", status);
}

}  // namespace mlajit::jit
