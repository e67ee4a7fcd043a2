#pragma once
// The one entry point for compiling a program: in a compiler helper process (the default), or
// in this process, as the compile mode says. The kernel registry calls it from inside the
// cache's single flight, so one build per key runs whatever the mode.
#include <string>

#include "jit/isolation_options.h"
#include "jit/nvrtc_compiler.h"

namespace mlajit::jit {

// `mode` kDefault takes options.mode. `what` names the kernel in errors (the spec text).
// Throws what NvrtcCompiler::compile throws (the same errors either way), and
//  - Error(kCompileError) when the helper crashed, ran past options.timeout or answered
//    garbage (the message names which, the signal, the kernel and the helper's stderr);
//  - Error(kNoCompiler) in kProcess mode when no helper can be found or started;
//  - Error(kInvalidArgument) for a mode outside the enum.
// In kAuto mode a helper that cannot be found or started means compiling here, with one
// warning per process saying why.
CompileResult compile_isolated(const CompileRequest& request, CompileMode mode,
                               const IsolationOptions& options, const std::string& what);

// "300 s" / "none", for messages.
std::string timeout_text(const IsolationOptions& options);

// Tests: the in-process fallback warns again, as in a new process.
void reset_inline_fallback_warning();

}  // namespace mlajit::jit
