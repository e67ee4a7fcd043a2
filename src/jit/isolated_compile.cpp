// Choosing where a compile runs, and falling back to this process when no helper starts.
#include "jit/isolated_compile.h"

#include <atomic>

#include <fmt/format.h>

#include "common/logging.h"
#include "jit/helper_locator.h"
#include "jit/helper_pool.h"
#include "mlajit/error.h"

namespace mlajit::jit {
namespace {

using Clock = std::chrono::steady_clock;

CompileMode checked(CompileMode mode) {
  switch (mode) {
    case CompileMode::kDefault:
    case CompileMode::kAuto:
    case CompileMode::kProcess:
    case CompileMode::kInline: return mode;
  }
  throw Error(ErrorCode::kInvalidArgument,
              fmt::format("compile_mode={} is not a compile mode: expected 0 (default), 1 "
                          "(auto), 2 (process) or 3 (inline)",
                          static_cast<int>(mode)));
}

Deadline deadline_for(const IsolationOptions& options) {
  if (options.timeout.count() <= 0) return Deadline::max();
  return Clock::now() + options.timeout;
}

std::atomic<bool> warned_inline_fallback{false};

// kAuto without a helper: the first time per process at warn level, later at debug, so a
// server that lacks the helper says so once and not once per kernel.
CompileResult compile_here_instead(const CompileRequest& request, const std::string& what,
                                   const std::string& why) {
  auto log = logger("mlajit.jit");
  if (!warned_inline_fallback.exchange(true)) {
    log->warn("compiling in this process instead of a compiler helper ({}): a compiler crash or "
              "hang will take this process down. Install {} next to libmlajit.so or name it "
              "with MLAJIT_COMPILER_HELPER; MLAJIT_COMPILE_MODE=inline compiles here without "
              "this warning. (Said once per process.)",
              why, kCompilerHelperName);
  } else {
    log->debug("compiling {} in this process: {}", what, why);
  }
  return NvrtcCompiler::instance().compile(request);
}

}  // namespace

void reset_inline_fallback_warning() { warned_inline_fallback = false; }

std::string timeout_text(const IsolationOptions& options) {
  if (options.timeout.count() <= 0) return "none";
  if (options.timeout.count() % 1000 == 0) return fmt::format("{} s", options.timeout.count() / 1000);
  return fmt::format("{} ms", options.timeout.count());
}

CompileResult compile_isolated(const CompileRequest& request, CompileMode mode,
                               const IsolationOptions& options, const std::string& what) {
  mode = options.resolve(checked(mode));
  const NvrtcCompiler& nvrtc = NvrtcCompiler::instance();
  // Without NVRTC here there is no key to file a helper's cubin under (the key names this
  // process's NVRTC), and the error is the same in every mode.
  if (mode == CompileMode::kInline || !nvrtc.available()) return nvrtc.compile(request);

  const Deadline deadline = deadline_for(options);
  const HelperLocation location = locate_compiler_helper(options.helper_path);
  std::unique_ptr<CompilerHelper> helper;
  try {
    if (location.path.empty()) throw HelperUnavailable(location.problem());
    helper = HelperPool::instance().acquire(location.path, nvrtc.version(), deadline);
  } catch (const HelperUnavailable& unavailable) {
    if (mode == CompileMode::kAuto) return compile_here_instead(request, what, unavailable.what());
    throw Error(ErrorCode::kNoCompiler,
                fmt::format("cannot compile {} in a compiler helper process, and the compile "
                            "mode is 'process': {}. Install {} next to libmlajit.so, name it "
                            "with MLAJIT_COMPILER_HELPER, or allow in-process compiles with "
                            "MLAJIT_COMPILE_MODE=auto (or inline)",
                            what, unavailable.what(), kCompilerHelperName));
  }
  // Back to the pool whatever happens: a helper that failed is retired there, one that
  // reported NVRTC's verdict serves the next compile.
  struct Release {
    std::unique_ptr<CompilerHelper>& helper;
    ~Release() {
      try {
        HelperPool::instance().release(std::move(helper));
      } catch (const std::exception& error) {  // a destructor must not throw: retire it here
        logger("mlajit.jit")->debug("compiler helper not pooled: {}", error.what());
        helper.reset();
      }
    }
  } release{helper};
  return helper->compile(request, deadline, what, timeout_text(options));
}

}  // namespace mlajit::jit
