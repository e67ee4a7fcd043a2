#pragma once
// Unsets environment variables for one test and restores them after, so a test can set what
// it reads without leaking into the tests after it.
#include <stdlib.h>

#include <cstdlib>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace mlajit::test {

class EnvGuard {
 public:
  explicit EnvGuard(const std::vector<std::string>& names) {
    for (const auto& name : names) {
      const char* value = std::getenv(name.c_str());
      saved_.emplace_back(name, value ? std::optional<std::string>(value) : std::nullopt);
      ::unsetenv(name.c_str());
    }
  }
  ~EnvGuard() {
    for (const auto& [name, value] : saved_) {
      if (value) {
        ::setenv(name.c_str(), value->c_str(), 1);
      } else {
        ::unsetenv(name.c_str());
      }
    }
  }
  EnvGuard(const EnvGuard&) = delete;
  EnvGuard& operator=(const EnvGuard&) = delete;

 private:
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

}  // namespace mlajit::test
