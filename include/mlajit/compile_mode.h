#pragma once
// Where a kernel compile runs. NVRTC runs inside the process that calls it, and NVRTC can
// crash (SIGSEGV) or hang on some programs; a compile in a helper process (the
// `mlajit-compiler-helper` executable installed next to libmlajit.so) turns either into an
// Error(kCompileError) instead of taking the calling process down.
//
// The process-wide setting is MLAJIT_COMPILE_MODE (auto | process | inline; default auto).
// MlaOptions::compile_mode overrides it for the compiles one object asks for; kDefault defers
// to the process-wide setting. Compiles are shared: concurrent callers of one kernel wait for
// one build, which runs in the mode of the caller that started it (the cubin is the same
// either way), and a kernel already compiled or cached is served without compiling at all.
namespace mlajit {

enum class CompileMode : int {
  kDefault = 0,  // the process-wide setting: MLAJIT_COMPILE_MODE, else kAuto
  kAuto = 1,     // a helper process; where none can be found or started, in-process with one
                 // warning saying why
  kProcess = 2,  // always a helper process: one that cannot be started is Error(kNoCompiler)
  kInline = 3,   // in the calling process (the behaviour before helper processes existed)
};

}  // namespace mlajit
