// BatchMlaAttention on the GPU against the float64 CPU reference. Every case draws fresh random
// inputs, poisons the outputs first, and prints its relative errors.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "check/mla_check.h"
#include "gpu_test_support.h"
#include "mlajit/runtime.h"

namespace mlajit {
namespace {

constexpr double kBf16Tolerance = 1e-2;
constexpr double kFp16Tolerance = 3e-3;

MlaShape shape_of(int heads, int page_size, bool causal = false, DType dtype = DType::kBFloat16,
                  int ckv = 512, int kpe = 64) {
  MlaShape shape;
  shape.num_heads = heads;
  shape.page_size = page_size;
  shape.causal = causal;
  shape.dtype = dtype;
  shape.head_dim_ckv = ckv;
  shape.head_dim_kpe = kpe;
  return shape;
}

void check_case(MlaCheckCase check) {
  if (!testing::runs_on_family_under_test(check)) return;
  const MlaCheckResult result = run_mla_check(check);
  const double tolerance =
      check.shape.dtype == DType::kBFloat16 ? kBf16Tolerance : kFp16Tolerance;
  std::printf("%-58s out %.2e lse %.2e tier %d cluster %d items %d %s%s\n", check.name.c_str(),
              result.out_error, result.lse_error, result.plan.tier, result.plan.cluster_size,
              result.plan.work_items, result.plan.two_launch ? "two-launch" : "cooperative",
              result.passed(tolerance) ? "" : "  <-- FAIL");
  INFO(check.name << " seed " << check.seed << " out error " << result.out_error
                  << " lse error " << result.lse_error);
  CHECK(result.all_written);
  CHECK(result.lse_infinities_match);
  CHECK(result.out_error < tolerance);
  CHECK(result.lse_error < tolerance);
}

MlaCheckCase fixed_case(std::string name, MlaShape shape, std::vector<int> q_lens,
                        std::vector<int> kv_lens, uint64_t seed) {
  MlaCheckCase check;
  check.name = std::move(name);
  check.shape = shape;
  check.q_lens = std::move(q_lens);
  check.kv_lens = std::move(kv_lens);
  check.seed = seed;
  return check;
}

}  // namespace

TEST_CASE("decode matches the reference across heads and page sizes", "[gpu]") {
  MLAJIT_REQUIRE_GPU();
  uint64_t seed = 100;
  for (int heads : {1, 16, 64, 128}) {
    for (int page : {1, 16, 64}) {
      auto check = make_random_case("decode H" + std::to_string(heads) + " page" +
                                        std::to_string(page),
                                    shape_of(heads, page), 7, 1, 1, 700, ++seed);
      check_case(check);
    }
  }
}

// A lone long request: the planner cuts each of its rows into more than 32 chunks and gives
// each CTA a one-row merge piece (test_planner.cpp checks that plan), so the merge shares
// every row's chunks between the CTA's row groups through shared memory.
TEST_CASE("a lone long request's merge shares its rows between row groups", "[gpu]") {
  MLAJIT_REQUIRE_GPU();
  check_case(fixed_case("lone request H128 page64 kv 16384", shape_of(128, 64), {1}, {16384}, 31));
  check_case(fixed_case("lone request H16 page16 kv 8191", shape_of(16, 16), {1}, {8191}, 32));
  check_case(fixed_case("lone request H16 page64 q2 causal kv 9000", shape_of(16, 64, true), {2},
                        {9000}, 33));
}

TEST_CASE("edge kv lengths 0, 1, 63, 64 and 4097 are exact", "[gpu]") {
  MLAJIT_REQUIRE_GPU();
  for (bool causal : {false, true}) {
    auto check = fixed_case(std::string("kv 0/1/63/64/4097 H16 page16") + (causal ? " causal" : ""),
                            shape_of(16, 16, causal), {1, 1, 2, 1, 3}, {0, 1, 63, 64, 4097}, 7);
    check_case(check);
  }
}

TEST_CASE("speculative decode and chunked prefill respect the causal mask", "[gpu]") {
  MLAJIT_REQUIRE_GPU();
  uint64_t seed = 300;
  for (int q_len : {2, 4, 8}) {
    for (bool causal : {false, true}) {
      check_case(make_random_case("q_len " + std::to_string(q_len) + (causal ? " causal" : "") +
                                      " H128 page64",
                                  shape_of(128, 64, causal), 5, q_len, 8, 2000, ++seed));
      check_case(make_random_case("q_len " + std::to_string(q_len) + (causal ? " causal" : "") +
                                      " H16 page1",
                                  shape_of(16, 1, causal), 9, q_len, 8, 1500, ++seed));
    }
  }
  check_case(fixed_case("chunked prefill 1000 tokens causal H16", shape_of(16, 64, true), {1000},
                        {1500}, 41));
  check_case(fixed_case("chunked prefill 1000 tokens H1", shape_of(1, 16, false), {1000}, {1200},
                        42));
}

TEST_CASE("ragged batches from 1 to 128 requests", "[gpu]") {
  MLAJIT_REQUIRE_GPU();
  check_case(make_random_case("ragged B1 H128", shape_of(128, 64), 1, 1, 3000, 3000, 51));
  check_case(make_random_case("ragged B33 H64 page16", shape_of(64, 16), 33, 1, 0, 900, 52));
  check_case(make_random_case("ragged B128 H16 page64", shape_of(16, 64), 128, 1, 1, 600, 53));
}

TEST_CASE("both head-dim pairs and both dtypes", "[gpu]") {
  MLAJIT_REQUIRE_GPU();
  uint64_t seed = 600;
  for (DType dtype : {DType::kBFloat16, DType::kFloat16}) {
    for (bool minicpm : {false, true}) {
      for (bool causal : {false, true}) {
        const int ckv = minicpm ? 256 : 512, kpe = minicpm ? 32 : 64;
        auto check = make_random_case(std::string(dtype_name(dtype)) + (minicpm ? " 256/32" : " 512/64") +
                                          (causal ? " causal q2" : " q1") + " H40",
                                      shape_of(40, 16, causal, dtype, ckv, kpe), 6,
                                      causal ? 2 : 1, 1, 1100, ++seed);
        check_case(check);
      }
    }
  }
}

TEST_CASE("every tier, forced, on both launch paths and both KV layouts", "[gpu]") {
  MLAJIT_REQUIRE_GPU();
  uint64_t seed = 700;
  for (int tier : {1, 2, 3}) {
    for (bool two_launch : {false, true}) {
      for (bool concatenated : {false, true}) {
        for (bool minicpm : {false, true}) {
          auto check = make_random_case(
              "tier " + std::to_string(tier) + (two_launch ? " two-launch" : " cooperative") +
                  (concatenated ? " concat-kv" : " split-kv") + (minicpm ? " 256/32" : " 512/64"),
              shape_of(128, 16, tier == 2, DType::kBFloat16, minicpm ? 256 : 512,
                       minicpm ? 32 : 64),
              3, tier == 2 ? 2 : 1, 1, 2500, ++seed);
          check.options.force_tier = tier;
          check.options.force_two_launch = two_launch;
          check.concatenated_kv = concatenated;
          check_case(check);
        }
      }
    }
  }
}

// Tiles of at most 16 rows (16 heads of one token, 8 of two, 4 of four) on every tier: their
// KV ring keeps stages in the rows of Q they leave empty (NarrowRing: four stages on tier 3,
// three on tier 2), so Q's first 16 rows, P and those stages must never meet. Short requests
// have fewer tiles than stages; page 1 gathers every row.
TEST_CASE("narrow tiles on every tier, forced: stages in Q's free rows", "[gpu]") {
  MLAJIT_REQUIRE_GPU();
  uint64_t seed = 1900;
  struct Rows {
    int heads, q_len;
  };
  for (int tier : {1, 2, 3}) {
    for (const Rows rows : {Rows{16, 1}, Rows{8, 2}, Rows{4, 4}}) {
      for (int page : {1, 64}) {
        const bool causal = rows.q_len > 1;
        for (DType dtype : {DType::kBFloat16, DType::kFloat16}) {
          const bool minicpm = dtype == DType::kFloat16;
          auto check = make_random_case(
              "narrow tier " + std::to_string(tier) + " H" + std::to_string(rows.heads) + " q" +
                  std::to_string(rows.q_len) + " page" + std::to_string(page) +
                  (minicpm ? " f16 256/32" : " bf16 512/64"),
              shape_of(rows.heads, page, causal, dtype, minicpm ? 256 : 512, minicpm ? 32 : 64),
              5, rows.q_len, 1, 1200, ++seed);
          check.kv_lens[0] = 1;  // one tile of one token
          check.kv_lens[1] = 40;  // fewer tiles than tier 3's stages
          check.options.force_tier = tier;
          check_case(check);
        }
      }
    }
  }
}

TEST_CASE("natural-log LSE and runs without LSE", "[gpu]") {
  MLAJIT_REQUIRE_GPU();
  auto natural = make_random_case("lse base e H16", shape_of(16, 16), 4, 1, 1, 800, 801);
  natural.options.lse_base = LseBase::kNatural;
  check_case(natural);
  auto no_lse = make_random_case("no lse H16", shape_of(16, 16), 4, 1, 1, 800, 802);
  no_lse.with_lse = false;
  check_case(no_lse);
}

}  // namespace mlajit

namespace mlajit {

// Small shapes, one per tier and launch path, for compute-sanitizer (memcheck, racecheck,
// synccheck): hidden from the default run, selected with the tag.
TEST_CASE("one small shape per tier and launch path", "[.sanitize]") {
  MLAJIT_REQUIRE_GPU();
  // A family without tiers (hopper) runs three rounds instead: pages of 16 tokens (its TMA
  // box per page), of 64 (a box per tile) and of 24 (its gather).
  const char* family = testing::family_under_test();
  const bool tiered = family == nullptr || std::string(family) == "portable";
  uint64_t seed = 1000;
  for (int tier : {1, 2, 3}) {
    for (bool two_launch : {false, true}) {
      MlaShape shape;
      shape.num_heads = 16;
      shape.page_size = tiered || tier == 1 ? 16 : tier == 2 ? 64 : 24;
      shape.causal = true;
      const std::string round = tiered ? "tier " + std::to_string(tier)
                                       : "page " + std::to_string(shape.page_size);
      auto check = make_random_case("sanitize " + round +
                                        (two_launch ? " two-launch" : " cooperative"),
                                    shape, 2, 2, 100, 300, ++seed);
      check.options.force_tier = tiered ? tier : 0;
      check.options.force_two_launch = two_launch;
      check.options.cluster_size = 1;  // forces the merge path even when nothing splits
      if (!testing::runs_on_family_under_test(check)) continue;
      const MlaCheckResult result = run_mla_check(check);
      std::printf("%-40s out %.2e lse %.2e\n", check.name.c_str(), result.out_error,
                  result.lse_error);
      CHECK(result.passed(1e-2));
    }
  }
  // Narrow tiles (16 heads of one token, 8 of two) on the small tiers, whose ring keeps stages
  // in Q's free rows.
  for (int tier : {2, 3}) {
    if (!tiered) break;
    for (int q_len : {1, 2}) {
      MlaShape shape;
      shape.num_heads = 16 / q_len;
      shape.page_size = 16;
      shape.causal = q_len > 1;
      auto check = make_random_case("sanitize narrow tier " + std::to_string(tier) + " q" +
                                        std::to_string(q_len),
                                    shape, 2, q_len, 100, 300, ++seed);
      check.options.force_tier = tier;
      if (!testing::runs_on_family_under_test(check)) continue;
      const MlaCheckResult result = run_mla_check(check);
      std::printf("%-40s out %.2e lse %.2e\n", check.name.c_str(), result.out_error,
                  result.lse_error);
      CHECK(result.passed(1e-2));
    }
  }
  // Rows of more than 32 chunks: the merge shares them between row groups through shared
  // memory, across block barriers.
  auto shared = make_random_case("sanitize shared merge rows", shape_of(16, 64), 1, 1, 8000,
                                 8192, ++seed);
  if (testing::runs_on_family_under_test(shared)) {
    const MlaCheckResult result = run_mla_check(shared);
    std::printf("%-40s out %.2e lse %.2e\n", shared.name.c_str(), result.out_error,
                result.lse_error);
    CHECK(result.passed(1e-2));
  }
}

TEST_CASE("a forced kernel family runs and its spec says so; a family's errors come first",
          "[gpu]") {
  MLAJIT_REQUIRE_GPU();
  auto check = make_random_case("kernel=portable decode H16 page64", shape_of(16, 64), 5, 1, 1,
                                900, 800);
  check.options.kernel = "portable";
  check_case(check);
  MlaOptions options;
  options.device = 0;
  options.kernel = "portable";
  const BatchMlaAttention attention(shape_of(128, 64), options);
  CHECK(attention.spec_text().rfind("portable;", 0) == 0);
  CHECK(attention.spec_text() == tile_for(0, shape_of(128, 64), options).spec_text);
  options.kernel = "hoppr";
  CHECK_THROWS_WITH(BatchMlaAttention(shape_of(128, 64), options),
                    Catch::Contains("auto, hopper, portable"));
  // A named family's own refusal is what the error says (hopper computes 512/64 only; auto
  // would take the portable family, which computes 256/32).
  MlaShape small = shape_of(128, 64);
  small.head_dim_ckv = 256;
  small.head_dim_kpe = 32;
  options.kernel = "hopper";
  CHECK_THROWS_WITH(BatchMlaAttention(small, options), Catch::Contains("ckv=512 kpe=64 only"));
}

}  // namespace mlajit

namespace mlajit {

TEST_CASE("the hopper family on compute capability 9.0: TMA pages and gathered pages", "[gpu]") {
  MLAJIT_REQUIRE_GPU();
  const DeviceSummary device = device_summary(0);
  if (device.cc_major != 9 || device.cc_minor != 0) {
    WARN("skipping: the hopper family needs compute capability 9.0, device 0 is "
         << device.cc_major << "." << device.cc_minor);
    return;
  }
  uint64_t seed = 1100;
  // Pages of 64 and 128: a TMA box a tile; 16 and 32: a box per page; the rest the gather.
  for (int page : {1, 2, 4, 8, 16, 24, 32, 48, 64, 128}) {
    for (int heads : {16, 128}) {
      auto check = make_random_case("kernel=hopper H" + std::to_string(heads) + " page" +
                                        std::to_string(page),
                                    shape_of(heads, page), 6, 1, 1, 3000, ++seed);
      check.options.kernel = "hopper";
      check_case(check);
    }
  }
  MlaOptions options;
  options.device = 0;
  options.kernel = "hopper";
  const BatchMlaAttention attention(shape_of(128, 64), options);
  CHECK(attention.spec_text().rfind("hopper;", 0) == 0);
  CHECK(attention.spec_text().find("arch=sm_90a") != std::string::npos);
  CHECK_THROWS_WITH(BatchMlaAttention(shape_of(128, 64, false, DType::kBFloat16, 256, 32), options),
                    Catch::Contains("ckv=512 kpe=64 only"));
}

}  // namespace mlajit
