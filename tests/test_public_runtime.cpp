// The public API the CLI is built on, beside BatchMlaAttention: the fleet matrix, NVRTC and
// driver facts, device copies and launch timing, on a machine that may have no GPU.
#include <catch2/catch.hpp>

#include <set>
#include <string>

#include "family/fleet_matrix.h"
#include "jit/nvrtc_compiler.h"
#include "mlajit/device_memory.h"
#include "mlajit/error.h"
#include "mlajit/fleet.h"
#include "mlajit/runtime.h"
#include "mlajit/timing.h"

using mlajit::DType;
using mlajit::ErrorCode;

namespace {

// Runs `call`, which must throw Error(`code`) with `text` in its message.
template <typename Call>
void require_error(Call call, ErrorCode code, const std::string& text) {
  try {
    call();
    FAIL("no error; expected " << mlajit::error_code_name(code) << " mentioning " << text);
  } catch (const mlajit::Error& error) {
    INFO(error.what());
    CHECK(error.code() == code);
    CHECK_THAT(error.what(), Catch::Contains(text));
  }
}

bool gpu_present() { return mlajit::driver_available() && mlajit::device_count() > 0; }

}  // namespace

TEST_CASE("the public fleet matrix is the family layer's, with each spec's tier") {
  const auto matrix = mlajit::fleet_matrix();
  const auto internal = mlajit::family::fleet_matrix({});
  REQUIRE(matrix.size() == internal.size());
  for (size_t i = 0; i < matrix.size(); ++i) {
    CHECK(matrix[i].spec == internal[i]);
    if (matrix[i].spec.family == "portable") {
      CHECK(matrix[i].tier >= 1);  // tiers 1..3
    } else {
      CHECK(matrix[i].tier == 0);  // hopper: one tile config, no tiers
    }
  }
  mlajit::FleetOptions options;
  options.kernel = "portable";  // the family with tiers (sm_90 also has a hopper row)
  options.archs = {"sm_90"};
  options.dtypes = {DType::kBFloat16};
  options.kv_dtypes = {DType::kBFloat16};
  options.head_dims = {"512/64"};
  options.all_tiers = true;
  const auto tiers = mlajit::fleet_matrix(options);
  REQUIRE(tiers.size() == 6);  // each tier twice: with and without the narrow layout
  std::set<int> seen;
  for (const auto& entry : tiers) seen.insert(entry.tier);
  CHECK(seen == std::set<int>{1, 2, 3});
  // A replacement profile with an sm_89-sized shared memory gets tier 3 only (twice).
  options.all_tiers = false;
  options.smem_per_sm = 102400;
  options.smem_per_block_optin = 101376;
  REQUIRE(mlajit::fleet_matrix(options).size() == 2);
  for (const auto& entry : mlajit::fleet_matrix(options)) CHECK(entry.tier == 3);
}

TEST_CASE("the public fleet matrix refuses bad head dims, half a profile and unknown names") {
  mlajit::FleetOptions options;
  options.head_dims = {"128/16"};
  require_error([&] { mlajit::fleet_matrix(options); }, ErrorCode::kInvalidArgument, "128/16");
  options.head_dims = {"512x64"};
  require_error([&] { mlajit::fleet_matrix(options); }, ErrorCode::kInvalidArgument, "512x64");
  options.head_dims = {};
  options.smem_per_sm = 100000;
  require_error([&] { mlajit::fleet_matrix(options); }, ErrorCode::kInvalidArgument,
                "smem_per_block_optin=0");
  options.smem_per_sm = 0;
  options.kernel = "hoppr";
  require_error([&] { mlajit::fleet_matrix(options); }, ErrorCode::kInvalidArgument, "portable");
  options.kernel = "auto";
  options.archs = {"sm_999"};
  require_error([&] { mlajit::fleet_matrix(options); }, ErrorCode::kInvalidArgument, "sm_999");
}

TEST_CASE("compiler_info says what the NVRTC loader found") {
  const auto& nvrtc = mlajit::jit::NvrtcCompiler::instance();
  const mlajit::CompilerInfo info = mlajit::compiler_info();
  REQUIRE(info.available == nvrtc.available());
  if (!info.available) {
    CHECK(info.unavailable_reason == nvrtc.unavailable_reason());
    CHECK(!info.unavailable_reason.empty());
    return;
  }
  CHECK(info.unavailable_reason.empty());
  CHECK(info.version == nvrtc.version());
  CHECK(info.version >= 13000);
  CHECK(info.library_path == nvrtc.library_path());
  CHECK(info.supported_archs == nvrtc.supported_archs());
}

TEST_CASE("time_launches checks its counts before it looks for a GPU") {
  auto nothing = [](void*, int) {};
  mlajit::LaunchTimingOptions options;
  options.iterations = 0;
  require_error([&] { mlajit::time_launches(nothing, options); }, ErrorCode::kInvalidArgument,
                "iterations=0");
  options.iterations = 1;
  options.warmup = -1;
  require_error([&] { mlajit::time_launches(nothing, options); }, ErrorCode::kInvalidArgument,
                "warmup=-1");
}

TEST_CASE("without a GPU the timing and the new device copies say there is none") {
  if (gpu_present()) {
    WARN("skipped: this machine has a usable CUDA GPU");
    return;
  }
  int calls = 0;
  auto count = [&](void*, int) { ++calls; };
  auto no_gpu = [](const char* what, auto call) {
    INFO(what);
    try {
      call();
      FAIL(what << " did not throw without a GPU");
    } catch (const mlajit::Error& error) {
      INFO(error.what());
      CHECK((error.code() == ErrorCode::kNoDriver || error.code() == ErrorCode::kNoDevice));
    }
  };
  no_gpu("time_launches", [&] { mlajit::time_launches(count); });
  CHECK(calls == 0);  // nothing was launched
  char host[16] = {};
  no_gpu("copy_device_to_device", [&] { mlajit::copy_device_to_device(host, host + 8, 8); });
  no_gpu("device_memset", [&] { mlajit::device_memset(host, 0xFF, 8); });
  // Null pointers are the caller's mistake, said before the driver is asked.
  require_error([] { mlajit::device_memset(nullptr, 0, 8); }, ErrorCode::kInvalidArgument, "null");
  require_error([&] { mlajit::copy_device_to_device(nullptr, host, 8); },
                ErrorCode::kInvalidArgument, "null");
  // Zero bytes is nothing to do, with or without a GPU.
  mlajit::device_memset(nullptr, 0, 0);
  mlajit::copy_device_to_device(nullptr, nullptr, 0);
}
