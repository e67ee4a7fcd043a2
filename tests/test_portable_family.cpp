// The portable family: its tiles and shared-memory formula, the shapes it computes and refuses,
// and the specs it chooses.
#include <catch2/catch.hpp>

#include <set>
#include <string>

#include "family/portable/portable_family.h"
#include "family/portable/portable_tiles.h"
#include "mlajit/error.h"
#include "plan/planner.h"

using mlajit::DType;
using mlajit::Error;
using mlajit::ErrorCode;
using mlajit::KernelSpec;
using mlajit::KvScales;
using mlajit::MlaShape;
using mlajit::family::DeviceTarget;
using mlajit::family::profile_target;
using namespace mlajit::family::portable;

namespace {

KernelSpec mla_spec(int ckv, int kpe, DType dtype = DType::kBFloat16) {
  KernelSpec spec;
  spec.head_dim_ckv = ckv;
  spec.head_dim_kpe = kpe;
  spec.q_dtype = spec.kv_dtype = spec.o_dtype = dtype;
  return spec;
}

int selected_tier(const std::string& arch, const KernelSpec& spec) {
  return tier_of(select_tile_config(spec, profile_target(arch)));
}

DeviceTarget limits(int smem_per_sm, int smem_per_block_optin) {
  DeviceTarget target = profile_target("sm_90");
  target.smem_per_sm = smem_per_sm;
  target.smem_per_block_optin = smem_per_block_optin;
  return target;
}

const mlajit::family::KernelFamily& portable() { return family(); }

}  // namespace

TEST_CASE("shared storage of the three tiers matches the reference for 512/64 in 16-bit") {
  for (DType dtype : {DType::kBFloat16, DType::kFloat16}) {
    const KernelSpec spec = mla_spec(512, 64, dtype);
    CHECK(shared_storage_bytes(spec, tile_tier(1)) == 221696);
    CHECK(shared_storage_bytes(spec, tile_tier(2)) == 147968);
    CHECK(shared_storage_bytes(spec, tile_tier(3)) == 92672);
  }
}

TEST_CASE("shared storage shrinks with the head dims") {
  const KernelSpec small = mla_spec(256, 32);
  // Q 64x288x2 + 2 stages x (64x256x2 + 64x64x2) + 2x64x4: the P tile (64 wide) outgrows kpe.
  CHECK(shared_storage_bytes(small, tile_tier(1)) ==
        64 * 288 * 2 + 2 * (64 * 256 * 2 + 64 * 64 * 2) + 2 * 64 * 4);
  CHECK(shared_storage_bytes(small, tile_tier(1)) <
        shared_storage_bytes(mla_spec(512, 64), tile_tier(1)));
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
  CHECK(tier_of(select_tile_config(mla_spec(512, 64), limits(233472, 232448))) == 1);
}

TEST_CASE("a candidate must also leave the driver's 1 KiB per block on the SM") {
  const KernelSpec spec = mla_spec(512, 64);
  // Enough per-block opt-in for tier 1, but the SM holds exactly 221696 B: no room for the
  // driver's reserved 1 KiB, so tier 2 is chosen.
  CHECK(tier_of(select_tile_config(spec, limits(221696, 300000))) == 2);
  CHECK(tier_of(select_tile_config(spec, limits(221696 + 1024, 221696))) == 1);
}

TEST_CASE("too little shared memory is refused naming the bytes needed and available") {
  try {
    select_tile_config(mla_spec(512, 64), limits(64 * 1024, 48 * 1024));
    FAIL("a 48 KiB device was accepted");
  } catch (const Error& error) {
    CHECK(error.code() == ErrorCode::kUnsupported);
    const std::string message = error.what();
    CHECK(message.find("92672") != std::string::npos);
    CHECK(message.find("49152") != std::string::npos);
    CHECK(message.find("65536") != std::string::npos);
  }
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
  CHECK_THROWS_AS(shared_storage_bytes(mla_spec(512, 64), {0, 64, true, 64}), Error);
}

TEST_CASE("shared storage holds KV tiles in the queries' 16-bit type, whatever the cache's") {
  KernelSpec spec = mla_spec(512, 64);
  const int bf16 = shared_storage_bytes(spec, tile_tier(1));
  CHECK(bf16 == 64 * 576 * 2 + 2 * (64 * 512 * 2 + 64 * 64 * 2) + 2 * 64 * 4);
  // An e4m3 tile lands in the top half of its 16-bit tile and is expanded in place.
  spec.kv_dtype = DType::kFloat8E4M3;
  CHECK(shared_storage_bytes(spec, tile_tier(1)) == bf16);
}

TEST_CASE("the portable family computes both head-dim pairs in bf16 and f16, nothing else") {
  CHECK(portable().name() == std::string("portable"));
  CHECK(portable().head_dims() ==
        std::vector<mlajit::family::HeadDims>{{512, 64}, {256, 32}});
  MlaShape shape;
  CHECK(portable().shape_unsupported_reason(shape).empty());
  shape.dtype = DType::kFloat16;
  shape.head_dim_ckv = 256;
  shape.head_dim_kpe = 32;
  CHECK(portable().shape_unsupported_reason(shape).empty());
  shape.head_dim_kpe = 64;
  const std::string dims = portable().shape_unsupported_reason(shape);
  CHECK(dims.find("ckv=256 kpe=64") != std::string::npos);
  CHECK(dims.find("512/64, 256/32") != std::string::npos);
  MlaShape fp8;
  fp8.kv_dtype = DType::kFloat8E4M3;
  CHECK(portable().shape_unsupported_reason(fp8).empty());
  fp8.dtype = DType::kFloat16;
  CHECK(portable().shape_unsupported_reason(fp8).empty());
  MlaShape mixed;
  mixed.kv_dtype = DType::kFloat16;
  CHECK(portable().shape_unsupported_reason(mixed).find("KV of that dtype or e4m3") !=
        std::string::npos);
  mixed.kv_dtype = DType::kBFloat16;  // set, but the same as dtype
  CHECK(portable().shape_unsupported_reason(mixed).empty());
}

TEST_CASE("the portable family refuses devices before Ampere and limits no tier fits") {
  const MlaShape shape;
  CHECK(portable().unsupported_reason(shape, profile_target("sm_80")).empty());
  DeviceTarget turing = profile_target("sm_80");
  turing.arch = "sm_75";
  turing.cc_major = 7;
  turing.cc_minor = 5;
  CHECK(portable().unsupported_reason(shape, turing).find("compute capability 8.0") !=
        std::string::npos);
  const std::string small = portable().unsupported_reason(shape, limits(64 * 1024, 48 * 1024));
  CHECK(small.find("92672") != std::string::npos);
}

TEST_CASE("the portable spec takes the device's tier, a forced tier, and the target's arch") {
  MlaShape shape;
  shape.causal = true;
  const KernelSpec spec = portable().spec_for(shape, profile_target("sm_90a"), {});
  // 128 heads: every tile has 64 rows, so the kernel leaves the narrow layout out.
  CHECK(spec.text() ==
        "portable;q=bf16;kv=bf16;o=bf16;ckv=512;kpe=64;stages=2;kv_tile=64;qk_shard=1;"
        "q_tile=64;rows=wide;arch=sm_90a");
  // The causal mask is a run-time value: the non-causal shape runs the same spec.
  MlaShape full = shape;
  full.causal = false;
  CHECK(portable().spec_for(full, profile_target("sm_90a"), {}) == spec);
  CHECK(portable().tier_of(spec) == 1);
  mlajit::MlaOptions options;
  options.force_tier = 3;
  CHECK(portable().tier_of(portable().spec_for(shape, profile_target("sm_90"), options)) == 3);
  CHECK(portable().tier_of(portable().spec_for(shape, profile_target("sm_86"), {})) == 3);
  CHECK(portable().spec_for(shape, profile_target("sm_90"), options).wide_rows_only);
  // Every tier that fits, for precompiling forced tiers: all three on sm_90, two on sm_80;
  // rows=wide on each.
  const auto every_tier = portable().fleet_specs(shape, profile_target("sm_90"), true);
  REQUIRE(every_tier.size() == 3);
  for (const KernelSpec& tier_spec : every_tier) CHECK(tier_spec.wide_rows_only);
  CHECK(portable().fleet_specs(shape, profile_target("sm_80"), true).size() == 2);
  CHECK(portable().fleet_specs(shape, profile_target("sm_80"), false).size() == 1);
}

TEST_CASE("the portable spec leaves the narrow layout out exactly for head counts that never "
          "make a tile of 16 rows or fewer") {
  const mlajit::family::DeviceTarget sm90 = profile_target("sm_90");
  for (int heads = 1; heads <= 128; ++heads) {
    INFO("heads " << heads);
    MlaShape shape;
    shape.num_heads = heads;
    // Some q_len (1..64) whose packed rows leave a tile of 1..16 rows, cutting at 64.
    bool small_tile = false;
    for (int q_len = 1; q_len <= 64; ++q_len) {
      const int last = q_len * heads % 64;
      small_tile = small_tile || (last >= 1 && last <= 16);
    }
    CHECK(portable().spec_for(shape, sm90, {}).wide_rows_only == !small_tile);
    CHECK(portable().spec_for(shape, profile_target("sm_86"), {}).wide_rows_only == !small_tile);
  }
}

TEST_CASE("the portable fleet rows are 2 dtypes x 2 head-dim pairs, and FP8 KV, at their "
          "models' head counts") {
  const auto shapes = portable().fleet_shapes();
  CHECK(shapes.size() == 10);
  int fp8_rows = 0, token_scaled = 0;
  std::multiset<int> heads;
  for (const MlaShape& shape : shapes) {
    CHECK(portable().shape_unsupported_reason(shape).empty());
    heads.insert(shape.num_heads);
    // 512/64: DeepSeek and Kimi on one GPU and over 8; 256/32: MiniCPM3.
    if (shape.head_dim_ckv == 512) {
      CHECK((shape.num_heads == 128 || shape.num_heads == 16));
    } else {
      CHECK(shape.num_heads == 40);
    }
    if (shape.effective_kv_dtype() == DType::kFloat8E4M3) {
      ++fp8_rows;
      CHECK(shape.dtype == DType::kBFloat16);
      CHECK(shape.head_dim_ckv == 512);
      token_scaled += shape.kv_scales == KvScales::kPerToken128;
    } else {
      CHECK_FALSE(shape.kv_dtype.has_value());
    }
  }
  CHECK(fp8_rows == 4);  // per-tensor and per-token scales (DeepSeek-V3.2), at 128 and 16 heads
  CHECK(token_scaled == 2);
  CHECK(heads == std::multiset<int>{16, 16, 16, 16, 40, 40, 128, 128, 128, 128});
}

TEST_CASE("an e4m3 cache keeps the bf16 cache's shared memory: its tiles are expanded in place") {
  MlaShape shape;
  const KernelSpec bf16 = portable().spec_for(shape, profile_target("sm_90"), {});
  shape.kv_dtype = DType::kFloat8E4M3;
  for (int tier = 1; tier <= 3; ++tier) {
    mlajit::MlaOptions options;
    options.force_tier = tier;
    const KernelSpec fp8 = portable().spec_for(shape, profile_target("sm_90"), options);
    KernelSpec same_tile = bf16;
    same_tile.tile = fp8.tile;
    CHECK(portable().program(fp8).geometry.dynamic_smem_bytes ==
          portable().program(same_tile).geometry.dynamic_smem_bytes);
    CHECK(portable().program(fp8).name_expression.find("e4m3_t") != std::string::npos);
    // The portable kernel merges its split tiles itself, behind its grid barrier.
    CHECK(portable().program(fp8).geometry.cooperative);
    CHECK_FALSE(portable().merge_spec(fp8).has_value());
  }
  // Every arch of the fleet gets a tier, down to the 99 KB parts (sm_86, sm_89, sm_120).
  for (const char* arch : {"sm_80", "sm_86", "sm_89", "sm_120"}) {
    INFO(arch);
    CHECK(portable().unsupported_reason(shape, profile_target(arch)).empty());
  }
}

TEST_CASE("per-token scales take 16 bytes a token and stage beyond the e4m3 tiles, on every arch") {
  MlaShape shape;
  shape.kv_dtype = DType::kFloat8E4M3;
  MlaShape v32 = shape;
  v32.kv_scales = mlajit::KvScales::kPerToken128;
  for (int tier = 1; tier <= 3; ++tier) {
    INFO("tier " << tier);
    mlajit::MlaOptions options;
    options.force_tier = tier;
    const KernelSpec plain = portable().spec_for(shape, profile_target("sm_90"), options);
    const KernelSpec scaled = portable().spec_for(v32, profile_target("sm_90"), options);
    CHECK(scaled.tile == plain.tile);
    CHECK(portable().program(scaled).geometry.dynamic_smem_bytes ==
          portable().program(plain).geometry.dynamic_smem_bytes +
              plain.tile.num_stages * plain.tile.kv_tile * 16);
    CHECK(portable().program(scaled).name_expression.find("e4m3_token128_t") != std::string::npos);
  }
  for (const char* arch : {"sm_80", "sm_86", "sm_89", "sm_90", "sm_100", "sm_120"}) {
    INFO(arch);
    CHECK(portable().unsupported_reason(v32, profile_target(arch)).empty());
    CHECK(portable().spec_for(v32, profile_target(arch), {}).tile ==
          portable().spec_for(shape, profile_target(arch), {}).tile);
  }
  // Their decode tiles expand the codes (no narrow streams): the default item overhead.
  v32.num_heads = 16;
  CHECK(portable().plan_item_overhead_tokens(v32) == mlajit::plan::kItemOverheadTokens);
}

TEST_CASE("the planner's item overhead doubles for e4m3 decode with at most 16 heads") {
  MlaShape shape;  // bf16, 128 heads by default
  const int64_t base = mlajit::plan::kItemOverheadTokens;
  CHECK(portable().plan_item_overhead_tokens(shape) == base);
  shape.num_heads = 16;
  CHECK(portable().plan_item_overhead_tokens(shape) == base);
  shape.kv_dtype = DType::kFloat8E4M3;
  CHECK(portable().plan_item_overhead_tokens(shape) == 2 * base);
  shape.num_heads = 8;
  CHECK(portable().plan_item_overhead_tokens(shape) == 2 * base);
  shape.num_heads = 32;
  CHECK(portable().plan_item_overhead_tokens(shape) == base);
}
