#pragma once
// GPU tests run where a CUDA device is present and skip, saying why, everywhere else.
#include <string>

#include <catch2/catch.hpp>

#include "driver/cuda_driver.h"

namespace mlajit::testing {

// What the GPU test binary returns when it skips everything; CTest's SKIP_RETURN_CODE.
constexpr int kSkipExitCode = 77;

// Empty when a GPU is usable; otherwise the reason the GPU tests skip.
inline std::string gpu_skip_reason() {
  if (!driver::driver_available()) {
    return "no CUDA driver: " + driver::driver_unavailable_reason();
  }
  if (driver::device_count() < 1) return "the CUDA driver sees no device";
  return "";
}

}  // namespace mlajit::testing

#define MLAJIT_REQUIRE_GPU()                                          \
  do {                                                                \
    const std::string mlajit_skip = mlajit::testing::gpu_skip_reason(); \
    if (!mlajit_skip.empty()) {                                       \
      WARN("GPU test skipped: " << mlajit_skip);                      \
      return;                                                         \
    }                                                                 \
  } while (0)
