#include <catch2/catch.hpp>

#include <string>

#include "jit/tile_config.h"
#include "mlajit/error.h"

using mlajit::DType;
using mlajit::Error;
using mlajit::ErrorCode;
using mlajit::KernelSpec;
using namespace mlajit::jit;

namespace {

KernelSpec mla_spec(int ckv, int kpe, DType dtype = DType::kBFloat16) {
  KernelSpec spec;
  spec.head_dim_ckv = ckv;
  spec.head_dim_kpe = kpe;
  spec.q_dtype = spec.kv_dtype = spec.o_dtype = dtype;
  return spec;
}

int selected_tier(const std::string& arch, const KernelSpec& spec) {
  const DeviceProfile& profile = device_profile(arch);
  return tier_of(select_tile_config(spec, profile.smem_per_sm, profile.smem_per_block_optin));
}

}  // namespace

TEST_CASE("shared storage of the three tiers matches the reference for 512/64 in 16-bit") {
  for (DType dtype : {DType::kBFloat16, DType::kFloat16}) {
    const KernelSpec spec = mla_spec(512, 64, dtype);
    CHECK(mla_shared_storage_bytes(spec, tile_tier(1)) == 221696);
    CHECK(mla_shared_storage_bytes(spec, tile_tier(2)) == 147968);
    CHECK(mla_shared_storage_bytes(spec, tile_tier(3)) == 92672);
  }
}

TEST_CASE("shared storage shrinks with the head dims") {
  const KernelSpec small = mla_spec(256, 32);
  // Q 64x288x2 + 2 stages x (64x256x2 + 64x64x2) + 2x64x4: the P tile (64 wide) outgrows kpe.
  CHECK(mla_shared_storage_bytes(small, tile_tier(1)) ==
        64 * 288 * 2 + 2 * (64 * 256 * 2 + 64 * 64 * 2) + 2 * 64 * 4);
  CHECK(mla_shared_storage_bytes(small, tile_tier(1)) <
        mla_shared_storage_bytes(mla_spec(512, 64), tile_tier(1)));
}

TEST_CASE("each arch's profile selects the reference's tier for 512/64") {
  const KernelSpec spec = mla_spec(512, 64);
  CHECK(selected_tier("sm_90", spec) == 1);
  CHECK(selected_tier("sm_90a", spec) == 1);
  CHECK(selected_tier("sm_100", spec) == 1);
  CHECK(selected_tier("sm_80", spec) == 2);
  CHECK(selected_tier("sm_87", spec) == 2);
  CHECK(selected_tier("sm_86", spec) == 3);
  CHECK(selected_tier("sm_89", spec) == 3);
  CHECK(selected_tier("sm_120", spec) == 3);
  CHECK(selected_tier("sm_121", spec) == 3);
}

TEST_CASE("the H200's measured shared memory selects tier 1") {
  // cuda-facts.md: 233,472 B per SM; the opt-in limit is 1 KiB less.
  CHECK(tier_of(select_tile_config(mla_spec(512, 64), 233472, 232448)) == 1);
}

TEST_CASE("a candidate must also leave the driver's 1 KiB per block on the SM") {
  const KernelSpec spec = mla_spec(512, 64);
  // Enough per-block opt-in for tier 1, but the SM holds exactly 221696 B: no room for the
  // driver's reserved 1 KiB, so tier 2 is chosen.
  CHECK(tier_of(select_tile_config(spec, 221696, 300000)) == 2);
  CHECK(tier_of(select_tile_config(spec, 221696 + 1024, 221696)) == 1);
}

TEST_CASE("too little shared memory is refused naming the bytes needed and available") {
  try {
    select_tile_config(mla_spec(512, 64), 64 * 1024, 48 * 1024);
    FAIL("a 48 KiB device was accepted");
  } catch (const Error& error) {
    CHECK(error.code() == ErrorCode::kUnsupported);
    const std::string message = error.what();
    CHECK(message.find("92672") != std::string::npos);
    CHECK(message.find("49152") != std::string::npos);
    CHECK(message.find("65536") != std::string::npos);
  }
}

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

TEST_CASE("tiers number 1 to 3 and other configs are tier 0") {
  CHECK(tile_candidates().size() == 3);
  for (int tier = 1; tier <= 3; ++tier) {
    CHECK(tier_of(tile_tier(tier)) == tier);
    CHECK(tile_candidates()[tier - 1] == tile_tier(tier));
  }
  CHECK(tile_tier(1) == mlajit::TileConfig{2, 64, true, 64});
  CHECK(tile_tier(2) == mlajit::TileConfig{2, 32, true, 64});
  CHECK(tile_tier(3) == mlajit::TileConfig{1, 16, false, 64});
  CHECK(tier_of(mlajit::TileConfig{3, 64, true, 64}) == 0);
  CHECK_THROWS_AS(tile_tier(0), Error);
  CHECK_THROWS_AS(tile_tier(4), Error);
  CHECK_THROWS_AS(mla_shared_storage_bytes(mla_spec(512, 64), {0, 64, true, 64}), Error);
}
