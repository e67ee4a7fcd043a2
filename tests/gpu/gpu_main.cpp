// The GPU test binary's main: where no GPU is usable it says why and exits with the code CTest
// reads as "skipped" (SKIP_RETURN_CODE), so a CPU-only run reports the GPU tests as not run
// instead of as passed.
#define CATCH_CONFIG_RUNNER
#include <cstdio>

#include <catch2/catch.hpp>

#include "gpu_test_support.h"

int main(int argc, char** argv) {
  const std::string skip = mlajit::testing::gpu_skip_reason();
  if (!skip.empty()) {
    std::printf("GPU tests skipped: %s\n", skip.c_str());
    return mlajit::testing::kSkipExitCode;
  }
  return Catch::Session().run(argc, argv);
}
