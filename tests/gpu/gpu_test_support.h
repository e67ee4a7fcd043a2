#pragma once
// GPU tests run where a CUDA device is present and skip, saying why, everywhere else.
#include <cstdio>
#include <cstdlib>
#include <string>

#include <catch2/catch.hpp>

#include "check/mla_check.h"
#include "driver/cuda_driver.h"
#include "mlajit/runtime.h"

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

// MLAJIT_TEST_KERNEL=<family> runs every case on that family (the suite is run once per
// family); a case the family cannot run (its head dims, a forced tier, an FP8 KV cache) is
// skipped, saying so.
inline const char* family_under_test() {
  const char* family = std::getenv("MLAJIT_TEST_KERNEL");
  return family != nullptr && *family != '\0' ? family : nullptr;
}

inline bool runs_on_family_under_test(MlaCheckCase& check) {
  const char* family = family_under_test();
  if (family == nullptr) return true;
  check.options.kernel = family;
  std::string reason;
  try {
    tile_for(0, check.shape, check.options);  // refuses what the family lacks
  } catch (const Error& error) {
    reason = error.what();
  }
  if (reason.empty()) return true;
  std::printf("%-58s skipped on %s: %s\n", check.name.c_str(), family, reason.c_str());
  return false;
}

// One check's line (errors, tier, launch path) and its assertions: every output written, -inf
// LSEs where the reference has them, both errors under `tolerance`.
inline void report_check(const std::string& name, const MlaCheckResult& result, double tolerance) {
  std::printf("%-58s out %.2e lse %.2e tier %d %s%s\n", name.c_str(), result.out_error,
              result.lse_error, result.plan.tier,
              result.plan.two_launch ? "two-launch" : "cooperative",
              result.passed(tolerance) ? "" : "  <-- FAIL");
  INFO(name << " out error " << result.out_error << " lse error " << result.lse_error);
  CHECK(result.all_written);
  CHECK(result.lse_infinities_match);
  CHECK(result.out_error < tolerance);
  CHECK(result.lse_error < tolerance);
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
