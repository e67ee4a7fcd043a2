// A stand-in for mlajit-compiler-helper that misbehaves on purpose, for
// tests/test_compile_isolation.cpp (pointed at through IsolationOptions::helper_path or
// MLAJIT_COMPILER_HELPER). It speaks the protocol of src/jit/helper_protocol.h on descriptor 0
// and behaves as $MLAJIT_FAKE_HELPER says:
//   ok              answers every CMPL with a fake cubin whose log is "pid=<pid>"
//   hang            says HELO, then sleeps through every CMPL
//   hang_start      sleeps before HELO
//   crash           says HELO, prints to stderr, then dies of SIGSEGV on the first CMPL
//   crash_once      as crash when $MLAJIT_FAKE_HELPER_MARKER does not exist (creating it),
//                   else as ok: a crash that the next attempt does not meet
//   garbage         answers a CMPL with bytes that are not a frame
//   truncate        answers with the first half of a RSLT frame, then exits 0
//   huge            answers with a frame header claiming 2^40 bytes
//   bad_result      answers with a RSLT frame whose payload is cut short
//   extra           answers with a good RSLT frame followed by stray bytes
//   exit_after_hello says HELO and exits 0 without reading anything
//   exit_early      prints to stderr and exits 7 before HELO
//   wrong_protocol  says HELO with protocol version 99
//   no_nvrtc        says HELO without an NVRTC
//   fds             as ok, but the log lists the descriptors open at start and the value of
//                   $MLAJIT_FAKE_HELPER_ECHO: "fds=0,1,2 echo=<value>"
// The NVRTC version in its HELO is $MLAJIT_FAKE_HELPER_NVRTC (the test passes its own).
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "jit/helper_protocol.h"

using namespace mlajit::jit;
using namespace mlajit::jit::helper;

namespace {

std::string env(const char* name) {
  const char* value = std::getenv(name);
  return value ? value : "";
}

std::string open_descriptors() {
  std::string list;
  DIR* dir = ::opendir("/proc/self/fd");
  if (dir == nullptr) return "?";
  const int own = ::dirfd(dir);
  while (const dirent* entry = ::readdir(dir)) {
    if (entry->d_name[0] == '.' || std::atoi(entry->d_name) == own) continue;
    list += (list.empty() ? "" : ",") + std::string(entry->d_name);
  }
  ::closedir(dir);
  return list;
}

void put(const std::string& bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(0, bytes.data() + done, bytes.size() - done);
    if (n <= 0) std::exit(3);
    done += static_cast<size_t>(n);
  }
}

// Blocks for the next CMPL; exits 0 at end of input.
void next_request() {
  static std::string buffer;
  char chunk[65536];
  for (;;) {
    if (auto frame = take_frame(buffer)) return;
    const ssize_t n = ::read(0, chunk, sizeof(chunk));
    if (n <= 0) std::exit(0);
    buffer.append(chunk, static_cast<size_t>(n));
  }
}

std::string fake_result(const std::string& log) {
  CompileResult result;
  result.image = {0x7f, 'E', 'L', 'F', 'f', 'a', 'k', 'e'};
  result.lowered_name = "fake_kernel";
  result.log = log;
  result.options = {"--fake"};
  result.seconds = 0.001;
  return encode_frame(Tag::kResult, encode_result(result));
}

[[noreturn]] void sleep_forever() {
  for (;;) ::pause();
}

}  // namespace

int main() {
  const std::string descriptors = open_descriptors();  // before this program opens anything
  ::signal(SIGPIPE, SIG_IGN);
  const std::string mode = env("MLAJIT_FAKE_HELPER");
  if (mode == "hang_start") sleep_forever();
  if (mode == "exit_early") {
    std::fprintf(stderr, "fake helper: exiting early on purpose\n");
    return 7;
  }
  Hello hello;
  hello.pid = ::getpid();
  hello.nvrtc_version = mode == "no_nvrtc" ? 0 : std::atoi(env("MLAJIT_FAKE_HELPER_NVRTC").c_str());
  hello.nvrtc_detail = mode == "no_nvrtc" ? "fake helper: no NVRTC here" : "fake";
  if (mode == "wrong_protocol") hello.protocol_version = 99;
  put(encode_frame(Tag::kHello, encode_hello(hello)));
  if (mode == "exit_after_hello") return 0;

  bool crash = mode == "crash";
  if (mode == "crash_once") {
    const std::string marker = env("MLAJIT_FAKE_HELPER_MARKER");
    crash = ::open(marker.c_str(), O_CREAT | O_EXCL | O_WRONLY, 0644) >= 0;
  }
  for (;;) {
    next_request();
    const std::string good = fake_result("pid=" + std::to_string(::getpid()));
    if (crash) {
      std::fprintf(stderr, "fake helper: about to crash\n");
      std::fflush(stderr);
      ::signal(SIGSEGV, SIG_DFL);
      ::raise(SIGSEGV);
    } else if (mode == "hang") {
      sleep_forever();
    } else if (mode == "garbage") {
      put("this is not a frame of the helper protocol");
    } else if (mode == "truncate") {
      put(good.substr(0, good.size() / 2));
      return 0;
    } else if (mode == "huge") {
      put(encode_frame(Tag::kResult, "").substr(0, 4) + std::string("\0\0\0\0\0\1\0\0", 8));
    } else if (mode == "bad_result") {
      put(encode_frame(Tag::kResult, encode_result(CompileResult{}).substr(0, 5)));
    } else if (mode == "extra") {
      put(good + "stray");
    } else if (mode == "fds") {
      put(fake_result("fds=" + descriptors + " echo=" + env("MLAJIT_FAKE_HELPER_ECHO")));
    } else {
      put(good);
    }
  }
}
