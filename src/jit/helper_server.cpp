// The helper's loop: read a request, compile it with NVRTC in this process, answer.
#include "jit/helper_server.h"

#include <fcntl.h>
#include <malloc.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include <fmt/format.h>

#include "jit/helper_protocol.h"
#include "jit/nvrtc_compiler.h"
#include "mlajit/error.h"

namespace mlajit::jit::helper {
namespace {

// The library spawns with every other descriptor closed (posix_spawn_file_actions_addclosefrom_np);
// a helper started some other way (by hand, an older glibc) closes them itself, so that it
// never holds a caller's lock file or socket open while it waits for the next request.
void close_inherited_descriptors() {
#ifdef SYS_close_range
  if (::syscall(SYS_close_range, 3u, ~0u, 0u) == 0) return;
#endif
  const long limit = ::sysconf(_SC_OPEN_MAX);
  for (long fd = 3; fd < (limit > 0 ? limit : 1024); ++fd) ::close(static_cast<int>(fd));
}

// The socket moves to a descriptor above 2; 0 becomes /dev/null and 1 a copy of stderr.
int take_channel() {
  const int channel = ::fcntl(STDIN_FILENO, F_DUPFD_CLOEXEC, 3);
  const int null = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (null >= 0) {
    ::dup2(null, STDIN_FILENO);
    ::close(null);
  }
  ::dup2(STDERR_FILENO, STDOUT_FILENO);
  return channel;
}

bool write_all(int fd, const std::string& bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

enum class ReadOutcome { kFrame, kEndOfInput, kTruncated };

// Blocks until one whole frame is in `buffer` (returned in `frame`) or the input ends.
ReadOutcome read_frame(int fd, std::string& buffer, Frame& frame) {
  char chunk[1 << 16];
  for (;;) {
    if (auto taken = take_frame(buffer)) {  // throws for a garbled header
      frame = std::move(*taken);
      return ReadOutcome::kFrame;
    }
    const ssize_t n = ::read(fd, chunk, sizeof(chunk));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return buffer.empty() ? ReadOutcome::kEndOfInput : ReadOutcome::kTruncated;
    buffer.append(chunk, static_cast<size_t>(n));
  }
}

Hello hello_of(const NvrtcCompiler& nvrtc) {
  Hello hello;
  hello.pid = ::getpid();
  hello.nvrtc_version = nvrtc.available() ? nvrtc.version() : 0;
  hello.nvrtc_detail = nvrtc.available() ? nvrtc.library_path() : nvrtc.unavailable_reason();
  return hello;
}

std::string answer(const NvrtcCompiler& nvrtc, const std::string& payload) {
  try {
    const CompileResult result = nvrtc.compile(decode_request(payload));
    return encode_frame(Tag::kResult, encode_result(result));
  } catch (const Error& error) {
    return encode_frame(Tag::kFailure, encode_failure({error.code(), error.what()}));
  } catch (const std::exception& error) {
    return encode_frame(Tag::kFailure, encode_failure({ErrorCode::kInternal, error.what()}));
  }
}

}  // namespace

int serve_compiles() {
  close_inherited_descriptors();
  const int channel = take_channel();
  if (channel < 0) {
    std::fprintf(stderr, "mlajit-compiler-helper: no request socket on descriptor 0 (%s); "
                 "this program is started by libmlajit, not by hand\n", std::strerror(errno));
    return 2;
  }
  // A library that died mid-answer must end this process with an error, not a signal.
  ::signal(SIGPIPE, SIG_IGN);
  const NvrtcCompiler& nvrtc = NvrtcCompiler::instance();
  if (!write_all(channel, encode_frame(Tag::kHello, encode_hello(hello_of(nvrtc))))) return 3;

  std::string buffer;
  for (;;) {
    Frame frame{};
    ReadOutcome outcome;
    try {
      outcome = read_frame(channel, buffer, frame);
      if (outcome == ReadOutcome::kFrame && frame.tag != Tag::kCompile) {
        throw Error(ErrorCode::kInternal,
                    fmt::format("expected a CMPL frame, got {}", tag_name(static_cast<uint32_t>(frame.tag))));
      }
    } catch (const Error& error) {
      std::fprintf(stderr, "mlajit-compiler-helper: %s\n", error.what());
      return 2;
    }
    if (outcome == ReadOutcome::kEndOfInput) return 0;
    if (outcome == ReadOutcome::kTruncated) {
      std::fprintf(stderr, "mlajit-compiler-helper: the request ended after %zu bytes, "
                   "mid-frame\n", buffer.size());
      return 2;
    }
    if (!write_all(channel, answer(nvrtc, frame.payload))) return 3;
    // Give NVRTC's freed memory back to the system: an idle helper waiting for the next
    // request should hold the loaded library, not a compile's worth of heap.
    ::malloc_trim(0);
  }
}

}  // namespace mlajit::jit::helper
