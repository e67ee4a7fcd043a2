// IsolationOptions::from_environment: the only place the compile mode, timeout and helper
// path are read from the environment.
#include "jit/isolation_options.h"

#include <cctype>
#include <cmath>
#include <cstdlib>

#include <fmt/format.h>

#include "mlajit/error.h"

namespace mlajit::jit {
namespace {

std::string env(const char* name) {
  const char* value = std::getenv(name);
  return value ? std::string(value) : std::string();
}

std::string lower(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

}  // namespace

const char* compile_mode_name(CompileMode mode) {
  switch (mode) {
    case CompileMode::kDefault: return "default";
    case CompileMode::kAuto: return "auto";
    case CompileMode::kProcess: return "process";
    case CompileMode::kInline: return "inline";
  }
  return "unknown";
}

CompileMode parse_compile_mode(const std::string& text, const std::string& what) {
  const std::string value = lower(text);
  if (value.empty() || value == "auto") return CompileMode::kAuto;
  if (value == "process") return CompileMode::kProcess;
  if (value == "inline") return CompileMode::kInline;
  throw Error(ErrorCode::kInvalidArgument,
              fmt::format("{}=\"{}\" is not a compile mode: expected auto (a helper process, "
                          "in-process where none starts), process (always a helper process) "
                          "or inline (in this process)",
                          what, text));
}

std::chrono::milliseconds parse_timeout(const std::string& text, const std::string& what) {
  const auto bad = [&](const char* why) {
    return Error(ErrorCode::kInvalidArgument,
                 fmt::format("{}=\"{}\" is not a time limit ({}): expected seconds, e.g. 300, "
                             "or a number with a unit, e.g. 1500ms, 30s, 5m; 0 for none",
                             what, text, why));
  };
  size_t digits = 0;
  while (digits < text.size() &&
         (std::isdigit(static_cast<unsigned char>(text[digits])) || text[digits] == '.')) {
    ++digits;
  }
  if (digits == 0) throw bad("no number");
  const std::string number = text.substr(0, digits), unit = lower(text.substr(digits));
  char* end = nullptr;
  const double value = std::strtod(number.c_str(), &end);
  if (end != number.c_str() + number.size() || !std::isfinite(value)) throw bad("not a number");
  double milliseconds = 0;
  if (unit.empty() || unit == "s") milliseconds = value * 1e3;
  else if (unit == "ms") milliseconds = value;
  else if (unit == "m" || unit == "min") milliseconds = value * 60e3;
  else throw bad("unknown unit");
  if (milliseconds > 1e12) throw bad("too large");  // ~30 years: keeps time_point math in range
  if (value > 0 && milliseconds < 1) throw bad("below a millisecond");
  return std::chrono::milliseconds(static_cast<int64_t>(std::llround(milliseconds)));
}

IsolationOptions IsolationOptions::from_environment() {
  IsolationOptions options;
  options.mode = parse_compile_mode(env("MLAJIT_COMPILE_MODE"), "MLAJIT_COMPILE_MODE");
  const std::string timeout = env("MLAJIT_COMPILE_TIMEOUT");
  if (!timeout.empty()) options.timeout = parse_timeout(timeout, "MLAJIT_COMPILE_TIMEOUT");
  options.helper_path = env("MLAJIT_COMPILER_HELPER");
  return options;
}

CompileMode IsolationOptions::resolve(CompileMode requested) const {
  return requested == CompileMode::kDefault ? mode : requested;
}

}  // namespace mlajit::jit
