#pragma once
// Where compiles run (a helper process or this one), how long a helper may take, and which
// helper executable to run: read once from the environment, overridable per compile request.
#include <chrono>
#include <string>

#include "mlajit/compile_mode.h"

namespace mlajit::jit {

// The helper's file name, installed next to libmlajit.so.
constexpr const char* kCompilerHelperName = "mlajit-compiler-helper";

struct IsolationOptions {
  CompileMode mode = CompileMode::kAuto;  // never kDefault once resolved
  // Wall-clock bound on one helper compile (start-up, request, compile, answer); past it the
  // helper is killed and the compile fails. Generous: the MLA kernel compiles in 0.5-1 s on
  // 2 cores, but a precompile with many jobs on few cores, or a sanitizer build, is far
  // slower. 0 = no bound.
  std::chrono::milliseconds timeout{std::chrono::minutes(5)};
  std::string helper_path;  // "" = search next to the library (see helper_locator.h)

  // MLAJIT_COMPILE_MODE, MLAJIT_COMPILE_TIMEOUT, MLAJIT_COMPILER_HELPER. Throws
  // Error(kInvalidArgument) naming the variable, its value and what would be right.
  static IsolationOptions from_environment();

  // `requested` unless it is kDefault, else this->mode.
  CompileMode resolve(CompileMode requested) const;
};

// "auto" | "process" | "inline" (case does not matter); "" is kAuto.
CompileMode parse_compile_mode(const std::string& text, const std::string& what);
// Seconds as a plain number ("300", "2.5"), or with a unit: "1500ms", "30s", "5m". "0" = none.
std::chrono::milliseconds parse_timeout(const std::string& text, const std::string& what);
const char* compile_mode_name(CompileMode mode);

}  // namespace mlajit::jit
