#pragma once
// One compiler helper process seen from the library: started once, then asked for compiles
// one at a time (helper_protocol.h). A compile that crashes the helper, runs past its
// deadline or gets a garbled answer kills the helper and throws; the process that asked is
// untouched.
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>

#include "jit/child_process.h"
#include "jit/helper_protocol.h"
#include "jit/nvrtc_compiler.h"

namespace mlajit::jit {

// The helper could not be started or does not speak the protocol: with CompileMode::kAuto the
// compile falls back to this process, with kProcess it fails with Error(kNoCompiler).
class HelperUnavailable : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class CompilerHelper {
 public:
  // Starts `path` and waits (until `deadline`) for its HELO. Throws HelperUnavailable naming
  // the path and the cause: spawn errors, an exit before HELO (with its stderr), another
  // protocol version, or NVRTC `expected_nvrtc_version` not being the one the helper loaded
  // (the cache key names this process's NVRTC; a cubin of another one must not be filed
  // under it).
  static std::unique_ptr<CompilerHelper> start(const std::string& path, int expected_nvrtc_version,
                                               Deadline deadline);

  // Compiles in the helper. NVRTC's own verdicts come back as they would in-process (an
  // Error(kCompileError) with the log, kUnsupported for an arch, ...) and leave the helper
  // usable. A helper that dies, hangs past `deadline` (`timeout_text` names the limit in the
  // message) or answers garbage is killed and reaped, and Error(kCompileError) names what
  // happened, `what` (the kernel) and the helper's stderr; usable() is false afterwards.
  CompileResult compile(const CompileRequest& request, Deadline deadline, const std::string& what,
                        const std::string& timeout_text);

  // Helpers this process has started (tests: a cache hit must start none).
  static uint64_t started_count();

  bool usable() const { return usable_; }
  int nvrtc_version() const { return nvrtc_version_; }  // from its HELO
  pid_t pid() const { return child_.pid(); }
  const std::string& path() const { return path_; }
  // Closes the request socket and waits briefly for the helper to exit; then kills it.
  void retire();
  ~CompilerHelper();

 private:
  CompilerHelper(ChildProcess child, std::string path);
  enum class Wait { kFrame, kClosed, kTimedOut };
  // Sends `out`, then reads until a whole frame, end of input or `deadline`; drains stderr
  // meanwhile. Throws Error(kInternal) for a garbled frame header.
  Wait exchange(const std::string& out, Deadline deadline, helper::Frame& frame);
  void drain_stderr();
  std::string stderr_text() const;

  ChildProcess child_;
  std::string path_;
  std::string inbox_;
  std::string stderr_tail_;
  bool usable_ = true;
  int nvrtc_version_ = 0;
};

}  // namespace mlajit::jit
