#pragma once
// For tests of MLAJIT_KERNEL_DIR: a scratch copy of the embedded kernel files, and an
// environment variable set for one scope (restored even when a check throws).
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "jit/embedded_kernels.h"
#include "temp_dir.h"

namespace mlajit::test {

class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    const char* old = ::getenv(name);
    had_ = old != nullptr;
    if (had_) old_ = old;
    ::setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (had_) ::setenv(name_, old_.c_str(), 1);
    else ::unsetenv(name_);
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::string old_;
  bool had_ = false;
};

class KernelDirCopy {
 public:
  KernelDirCopy() : dir_("mlajit-kernels") {
    for (const auto& [name, contents] : jit::embedded_kernel_files()) {
      write(name, std::string(contents));
    }
  }
  const std::string& path() const { return dir_.path(); }
  std::string sub(const std::string& name) const { return dir_.sub(name); }
  // `name` is a path below the kernel folder ("common/ptx_mma.cuh"); folders are created.
  void write(const std::string& name, const std::string& contents) const {
    std::filesystem::create_directories(std::filesystem::path(sub(name)).parent_path());
    std::ofstream(sub(name), std::ios::binary) << contents;
  }

 private:
  TempDir dir_;
};

}  // namespace mlajit::test
