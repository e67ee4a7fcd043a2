// Device profiles per arch, and the device target a family sees for one.
#include <catch2/catch.hpp>

#include <string>

#include "family/device_target.h"
#include "jit/device_profiles.h"
#include "mlajit/error.h"

using mlajit::Error;
using mlajit::ErrorCode;
using namespace mlajit::jit;

TEST_CASE("device profiles cover the supported archs with sane numbers") {
  const char* expected[] = {"sm_80",  "sm_86",  "sm_87",  "sm_89",  "sm_90",
                            "sm_100", "sm_103", "sm_110", "sm_120", "sm_121"};
  REQUIRE(device_profiles().size() == std::size(expected));
  for (size_t i = 0; i < std::size(expected); ++i) {
    const DeviceProfile& profile = device_profiles()[i];
    CHECK(profile.arch == expected[i]);
    CHECK(profile.smem_per_block_optin == profile.smem_per_sm - 1024);
    CHECK(profile.sm_count > 0);
    CHECK_FALSE(profile.source.empty());
    CHECK_FALSE(profile.example.empty());
  }
  CHECK(device_profile("90").arch == "sm_90");
  CHECK(device_profile("sm_100f").arch == "sm_100");
  CHECK(device_profile("compute_120").arch == "sm_120");
}

TEST_CASE("an unknown arch's profile is refused listing the known ones") {
  try {
    device_profile("sm_75");
    FAIL("sm_75 has a profile");
  } catch (const Error& error) {
    CHECK(error.code() == ErrorCode::kInvalidArgument);
    CHECK(std::string(error.what()).find("sm_75") != std::string::npos);
    CHECK(std::string(error.what()).find("sm_121") != std::string::npos);
  }
  CHECK_THROWS_AS(device_profile("volta"), Error);
}

TEST_CASE("an arch's compute capability is its digits, the last one the minor version") {
  CHECK(compute_capability("sm_90").major == 9);
  CHECK(compute_capability("sm_90a").minor == 0);
  CHECK(compute_capability("compute_100f").major == 10);
  CHECK(compute_capability("sm_121").minor == 1);
  CHECK(compute_capability("87").major == 8);
  CHECK(compute_capability("87").minor == 7);
  CHECK_THROWS_AS(compute_capability("volta"), Error);
  CHECK_THROWS_AS(compute_capability("sm_9"), Error);
}

TEST_CASE("a profile's device target keeps the arch as asked, with the profile's numbers") {
  const mlajit::family::DeviceTarget target = mlajit::family::profile_target("sm_90a");
  CHECK(target.arch == "sm_90a");
  CHECK(target.cc_major == 9);
  CHECK(target.cc_minor == 0);
  CHECK(target.smem_per_sm == device_profile("sm_90").smem_per_sm);
  CHECK(target.sm_count == 132);
  CHECK(mlajit::family::profile_target("90").arch == "sm_90");
  CHECK(mlajit::family::profile_target("sm_86").cc_minor == 6);
  CHECK(mlajit::family::smem_fits(232448, target));
  CHECK_FALSE(mlajit::family::smem_fits(232449, target));
}
