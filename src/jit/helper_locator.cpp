// Locating the compiler helper relative to the code that runs, so an installed prefix (or a
// copy of one: scripts/prepare-gpu-sitting.sh) finds its own helper wherever it lives.
#include "jit/helper_locator.h"

#include <dlfcn.h>
#include <link.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include <fmt/format.h>

#include "jit/isolation_options.h"

#ifndef MLAJIT_HELPER_FROM_BINDIR
#define MLAJIT_HELPER_FROM_BINDIR "../lib"
#endif

namespace mlajit::jit {
namespace {

std::string folder_of(const std::string& path) {
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash == 0 ? 1 : slash);
}

std::string real_path(const std::string& path) {
  char resolved[PATH_MAX];
  return ::realpath(path.c_str(), resolved) ? std::string(resolved) : path;
}

// "" when `path` is a regular file this process may execute, else why not.
std::string why_not_executable(const std::string& path) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) return ::strerror(errno);
  if (!S_ISREG(info.st_mode)) return "not a regular file";
  if (::access(path.c_str(), X_OK) != 0) return fmt::format("not executable: {}", ::strerror(errno));
  return "";
}

}  // namespace

std::string folder_of_this_code() {
  Dl_info info{};
  link_map* map = nullptr;
  if (::dladdr1(reinterpret_cast<void*>(&folder_of_this_code), &info,
                reinterpret_cast<void**>(&map), RTLD_DL_LINKMAP) != 0 &&
      map != nullptr && map->l_name != nullptr && map->l_name[0] != '\0') {
    return folder_of(real_path(map->l_name));
  }
  // The main program's link map has no name (dladdr would give argv[0], which may be a bare
  // name found through PATH): ask the kernel for the executable instead.
  return folder_of(real_path("/proc/self/exe"));
}

std::string HelperLocation::problem() const {
  return fmt::format("no usable {} was found (tried {})", kCompilerHelperName,
                     tried.empty() ? std::string("nothing") : fmt::format("{}", fmt::join(tried, "; ")));
}

HelperLocation locate_compiler_helper(const std::string& explicit_path) {
  HelperLocation location;
  std::vector<std::string> candidates;
  if (!explicit_path.empty()) {
    candidates.push_back(explicit_path);
  } else {
    const std::string here = folder_of_this_code();
    candidates.push_back(here + "/" + kCompilerHelperName);
    candidates.push_back(here + "/" + MLAJIT_HELPER_FROM_BINDIR + "/" + kCompilerHelperName);
  }
  for (const auto& candidate : candidates) {
    const std::string why = why_not_executable(candidate);
    if (why.empty()) {
      location.path = candidate;
      return location;
    }
    location.tried.push_back(
        fmt::format("{}{}: {}", explicit_path.empty() ? "" : "MLAJIT_COMPILER_HELPER=", candidate, why));
  }
  return location;
}

}  // namespace mlajit::jit
