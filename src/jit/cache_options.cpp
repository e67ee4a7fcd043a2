// CacheOptions::from_environment: the only place the cache reads the environment.
#include "jit/cache_options.h"

#include <cctype>
#include <cstdlib>
#include <limits>

#include <fmt/format.h>

#include "common/logging.h"
#include "jit/disk_cache.h"
#include "mlajit/error.h"

namespace mlajit::jit {
namespace {

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

uint64_t suffix_multiplier(const std::string& suffix) {
  const std::string s = lower(suffix);
  if (s.empty() || s == "b") return 1;
  if (s == "k" || s == "kb" || s == "kib") return uint64_t(1) << 10;
  if (s == "m" || s == "mb" || s == "mib") return uint64_t(1) << 20;
  if (s == "g" || s == "gb" || s == "gib") return uint64_t(1) << 30;
  if (s == "t" || s == "tb" || s == "tib") return uint64_t(1) << 40;
  return 0;
}

std::string default_user_dir() {
  // XDG: a relative XDG_CACHE_HOME is invalid and must be ignored.
  const std::string xdg = env("XDG_CACHE_HOME");
  if (!xdg.empty() && xdg[0] == '/') return xdg + "/mlajit";
  const std::string home = env("HOME");
  if (!home.empty()) return home + "/.cache/mlajit";
  logger("mlajit.cache")
      ->warn("none of MLAJIT_CACHE_DIR, XDG_CACHE_HOME, HOME is set: compiled kernels are kept "
             "in memory only; set MLAJIT_CACHE_DIR to keep them across runs");
  return "";
}

}  // namespace

uint64_t parse_byte_size(const std::string& text, const std::string& what) {
  size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
  const uint64_t multiplier = suffix_multiplier(text.substr(digits));
  const auto bad = [&](const char* why) {
    return Error(ErrorCode::kInvalidArgument,
                 fmt::format("{}=\"{}\" is not a byte size ({}); expected a whole number with an "
                             "optional K, M or G suffix, e.g. 10737418240 or 10G",
                             what, text, why));
  };
  if (digits == 0) throw bad("no digits");
  if (multiplier == 0) throw bad("unknown suffix");
  uint64_t value = 0;
  for (size_t i = 0; i < digits; ++i) {
    const uint64_t d = uint64_t(text[i] - '0');
    if (value > (std::numeric_limits<uint64_t>::max() - d) / 10) throw bad("too large");
    value = value * 10 + d;
  }
  if (value > std::numeric_limits<uint64_t>::max() / multiplier) throw bad("too large");
  return value * multiplier;
}

std::vector<std::string> split_search_path(const std::string& text) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t end = std::min(text.find(':', start), text.size());
    if (end > start) parts.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return parts;
}

bool parse_switch(const std::string& text, const std::string& what) {
  const std::string v = lower(text);
  if (v == "1" || v == "true" || v == "yes" || v == "on") return true;
  if (v.empty() || v == "0" || v == "false" || v == "no" || v == "off") return false;
  throw Error(ErrorCode::kInvalidArgument,
              fmt::format("{}=\"{}\" is not a switch; expected 1/0, true/false, yes/no or on/off",
                          what, text));
}

CacheOptions CacheOptions::from_environment() {
  CacheOptions options;
  options.read_only_dirs = split_search_path(env("MLAJIT_CACHE_PATH"));
  options.user_dir = env("MLAJIT_CACHE_DIR");
  if (options.user_dir.empty()) options.user_dir = default_user_dir();
  const std::string max_bytes = env("MLAJIT_CACHE_MAX_BYTES");
  if (!max_bytes.empty()) options.max_bytes = parse_byte_size(max_bytes, "MLAJIT_CACHE_MAX_BYTES");
  options.no_jit = parse_switch(env("MLAJIT_NO_JIT"), "MLAJIT_NO_JIT");
  return options;
}

}  // namespace mlajit::jit
