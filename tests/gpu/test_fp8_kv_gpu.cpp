// An FP8 (e4m3) KV cache with per-tensor scales against the float64 reference on the
// dequantized values (code x scale): the only error left is the kernel's 16-bit rounding, so
// the tolerances are those of the 16-bit cases. Outputs are poisoned first (mla_check.h).
// Select with "[fp8]".
#include <cstdio>
#include <string>
#include <vector>

#include "check/mla_check.h"
#include "gpu_test_support.h"
#include "mlajit/device_memory.h"

namespace mlajit {
namespace {

constexpr double kBf16Tolerance = 1e-2;
constexpr double kFp16Tolerance = 3e-3;

double tolerance_of(DType dtype) {
  return dtype == DType::kBFloat16 ? kBf16Tolerance : kFp16Tolerance;
}

MlaShape fp8_shape(int heads, int page_size, DType dtype = DType::kBFloat16, bool causal = false,
                   int ckv = 512, int kpe = 64) {
  MlaShape shape;
  shape.num_heads = heads;
  shape.page_size = page_size;
  shape.dtype = dtype;
  shape.kv_dtype = DType::kFloat8E4M3;
  shape.causal = causal;
  shape.head_dim_ckv = ckv;
  shape.head_dim_kpe = kpe;
  return shape;
}

std::string scale_word(bool on_device) { return on_device ? " dev-scale" : " float-scale"; }

using testing::report_check;

void check_fp8(MlaCheckCase check) {
  if (!testing::runs_on_family_under_test(check)) return;
  INFO(check.name << " seed " << check.seed);
  report_check(check.name, run_mla_check(check), tolerance_of(check.shape.dtype));
}

}  // namespace

TEST_CASE("e4m3 KV: float and device scales, bf16 and f16, H128 page 64 and H16 page 1",
          "[gpu][fp8]") {
  MLAJIT_REQUIRE_GPU();
  uint64_t seed = 2000;
  for (bool on_device : {false, true}) {
    for (DType dtype : {DType::kBFloat16, DType::kFloat16}) {
      for (const auto& [heads, page] : std::vector<std::pair<int, int>>{{128, 64}, {16, 1}}) {
        auto check = make_random_case("e4m3 decode H" + std::to_string(heads) + " page" +
                                          std::to_string(page) + " " + dtype_name(dtype) +
                                          scale_word(on_device),
                                      fp8_shape(heads, page, dtype), 4, 1, 1, 900, ++seed);
        check.kv_scales_on_device = on_device;
        check_fp8(check);
      }
    }
  }
}

TEST_CASE("e4m3 KV: every tier forced, split tensors and one concatenated 576-wide cache",
          "[gpu][fp8]") {
  MLAJIT_REQUIRE_GPU();
  uint64_t seed = 2100;
  for (int tier : {1, 2, 3}) {
    for (bool concatenated : {false, true}) {
      // Tier 2 also runs the causal mask; the concatenated cache also takes device scales.
      auto check = make_random_case(
          "e4m3 tier " + std::to_string(tier) + (concatenated ? " concat-576" : " split-kv") +
              scale_word(concatenated) + (tier == 2 ? " causal q2" : ""),
          fp8_shape(128, 16, DType::kBFloat16, tier == 2), 3, tier == 2 ? 2 : 1, 1, 1500,
          ++seed);
      check.options.force_tier = tier;
      check.concatenated_kv = concatenated;
      check.kv_scales_on_device = concatenated;
      check_fp8(check);
    }
  }
}

TEST_CASE("e4m3 KV: causal q_len 2 to 4 with an empty request in the batch", "[gpu][fp8]") {
  MLAJIT_REQUIRE_GPU();
  uint64_t seed = 2200;
  for (int q_len : {2, 3, 4}) {
    const bool small = q_len == 3;
    const DType dtype = small ? DType::kFloat16 : DType::kBFloat16;
    MlaCheckCase check;
    check.name = "e4m3 causal q" + std::to_string(q_len) + " kv 0/short/long H" +
                 (small ? "16 page1 f16" : "128 page64 bf16") + scale_word(q_len == 4);
    check.shape = fp8_shape(small ? 16 : 128, small ? 1 : 64, dtype, true);
    check.q_lens = {q_len, q_len, q_len, q_len};
    check.kv_lens = {0, q_len + 3, 700, 1300};
    check.seed = ++seed;
    check.kv_scales_on_device = q_len == 4;
    check_fp8(check);
  }
}

TEST_CASE("e4m3 KV: head dims 256/32, split and concatenated (288-wide)", "[gpu][fp8]") {
  MLAJIT_REQUIRE_GPU();
  auto plain = make_random_case("e4m3 256/32 H16 page64 bf16 float-scale",
                                fp8_shape(16, 64, DType::kBFloat16, false, 256, 32), 4, 1, 1,
                                1100, 2301);
  check_fp8(plain);
  auto causal = make_random_case("e4m3 256/32 causal q2 H128 page1 f16 dev-scale",
                                 fp8_shape(128, 1, DType::kFloat16, true, 256, 32), 3, 2, 2, 800,
                                 2302);
  causal.kv_scales_on_device = true;
  check_fp8(causal);
  auto joined = make_random_case("e4m3 256/32 concat-288 H64 page16 bf16 float-scale",
                                 fp8_shape(64, 16, DType::kBFloat16, false, 256, 32), 4, 1, 1,
                                 1100, 2303);
  joined.concatenated_kv = true;
  check_fp8(joined);
}

// Narrow tiles over e4m3 on every tier: two code streams on tiers 1-2, on tier 3 codes in a
// ring of their own expanded a tile ahead (NarrowCodes; short requests: fewer tiles than
// stages). One token of 16 heads in bf16, two of 8 in f16.
TEST_CASE("e4m3 KV: narrow tiles on every tier forced", "[gpu][fp8]") {
  MLAJIT_REQUIRE_GPU();
  uint64_t seed = 2400;
  for (int tier : {1, 2, 3}) {
    for (int page : {1, 64}) {
      for (int q_len : {1, 2}) {
        const DType dtype = q_len > 1 ? DType::kFloat16 : DType::kBFloat16;
        auto check = make_random_case("e4m3 narrow tier " + std::to_string(tier) + " page" +
                                          std::to_string(page) + " H" + std::to_string(16 / q_len) +
                                          " q" + std::to_string(q_len),
                                      fp8_shape(16 / q_len, page, dtype, q_len > 1), 4, q_len, 1,
                                      1500, ++seed);
        check.kv_lens[0] = 40;
        check.options.force_tier = tier;
        check_fp8(check);
      }
    }
  }
}

// The cases above that force a tier are skipped by a family without tiers (the hopper family
// under MLAJIT_TEST_KERNEL): its concatenated cache and long, split requests are here.
TEST_CASE("e4m3 KV: no tier forced: one concatenated 576-wide cache, long split requests",
          "[gpu][fp8]") {
  MLAJIT_REQUIRE_GPU();
  auto joined = make_random_case("e4m3 concat-576 H128 page16 causal q2 dev-scale",
                                 fp8_shape(128, 16, DType::kBFloat16, true), 3, 2, 1, 1500, 2601);
  joined.concatenated_kv = true;
  joined.kv_scales_on_device = true;
  check_fp8(joined);
  auto split = make_random_case("e4m3 long split H128 page64 f16 float-scale",
                                fp8_shape(128, 64, DType::kFloat16), 2, 1, 6000, 12000, 2602);
  check_fp8(split);
}

// Tiles of at most 16 query rows (up to 16 heads of one token, 8 of two) read the codes
// straight from shared memory on tier 1: Q reordered, f16 products, scales on the fp32 scores
// and O, a ring of four stages. Long requests wrap the ring many times; kv lengths that are
// not multiples of 64 end on a masked tile.
TEST_CASE("e4m3 KV: tiles of at most 16 rows (1, 8 causal q2, 16 heads) read codes directly",
          "[gpu][fp8]") {
  MLAJIT_REQUIRE_GPU();
  auto one_head = make_random_case("e4m3 narrow H1 page64 bf16 float-scale", fp8_shape(1, 64), 3,
                                   1, 1, 5000, 2501);
  check_fp8(one_head);
  auto two_tokens = make_random_case("e4m3 narrow H8 causal q2 page16 f16 dev-scale",
                                     fp8_shape(8, 16, DType::kFloat16, true), 4, 2, 1, 3000, 2502);
  two_tokens.kv_scales_on_device = true;
  check_fp8(two_tokens);
  auto long_rows = make_random_case("e4m3 narrow H16 page64 bf16 dev-scale long",
                                    fp8_shape(16, 64), 3, 1, 4000, 9000, 2503);
  long_rows.kv_scales_on_device = true;
  check_fp8(long_rows);
  auto small_dims = make_random_case("e4m3 narrow 256/32 H16 page1 f16 float-scale",
                                     fp8_shape(16, 1, DType::kFloat16, false, 256, 32), 3, 1, 1,
                                     2000, 2504);
  check_fp8(small_dims);
}

TEST_CASE("e4m3 KV: a device scale is read when the kernel runs, also from a captured graph",
          "[gpu][fp8]") {
  MLAJIT_REQUIRE_GPU();
  auto check = make_random_case("e4m3 scale update H16 page16", fp8_shape(16, 16), 5, 1, 200,
                                1200, 2401);
  check.kv_scales_on_device = true;
  if (!testing::runs_on_family_under_test(check)) return;
  BatchMlaAttention attention(check.shape, check.options);
  auto problem = make_device_problem(check);
  attention.plan(problem->batch(), nullptr);
  attention.run(problem->args, nullptr);
  device_synchronize(0);
  report_check("e4m3 scale update: first scales", problem->compare_with_reference(),
               kBf16Tolerance);

  // New scales, the same args: the outputs of the first run no longer match the reference (so
  // a kernel that kept the first scales fails below), a second run's do.
  problem->set_kv_scales(check.kv_scale_ckv * 4, check.kv_scale_kpe / 2);
  const MlaCheckResult stale = problem->compare_with_reference();
  INFO("first outputs against the new scales' reference: " << stale.out_error);
  REQUIRE(stale.out_error > 0.1);
  problem->poison_outputs();
  attention.run(problem->args, nullptr);
  device_synchronize(0);
  report_check("e4m3 scale update: after a write, run()", problem->compare_with_reference(),
         kBf16Tolerance);

  // A graph captured now and replayed after another write follows it too.
  driver::Stream stream;
  driver::Graph::begin_capture(stream.get());
  attention.run(problem->args, stream.get());
  driver::Graph graph = driver::Graph::end_capture(stream.get());
  problem->set_kv_scales(check.kv_scale_ckv / 3, check.kv_scale_kpe * 5);
  problem->poison_outputs();
  graph.launch(stream.get());
  driver::stream_synchronize(stream.get());
  report_check("e4m3 scale update: after a write, graph replay", problem->compare_with_reference(),
         kBf16Tolerance);
}

}  // namespace mlajit

namespace mlajit {

// Small e4m3 shapes for compute-sanitizer (racecheck sees the in-place expansion of a KV tile
// over its own codes, and the narrow rows' ring of codes): each tier at 16 and 128 heads with
// two tokens (wide rows), and tier 1 with one token at 16 heads (narrow rows), hidden from
// the default run.
TEST_CASE("e4m3 KV: one small shape per tier and row layout", "[.sanitize-fp8]") {
  MLAJIT_REQUIRE_GPU();
  uint64_t seed = 2900;
  for (int tier : {1, 2, 3}) {
    for (int heads : {16, 128}) {
      auto check = make_random_case("sanitize e4m3 tier " + std::to_string(tier) + " H" +
                                        std::to_string(heads),
                                    fp8_shape(heads, 16, DType::kBFloat16, true), 2, 2, 100, 300,
                                    ++seed);
      check.options.force_tier = tier;
      check_fp8(check);
    }
  }
  // 16 heads of one token: tier 1's narrow rows read codes through the 4-stage ring; tier 3's
  // expand them in stages that lie partly in Q's free rows.
  for (int tier : {1, 3}) {
    auto narrow = make_random_case("sanitize e4m3 tier " + std::to_string(tier) + " H16 q1",
                                   fp8_shape(16, 16), 2, 1, 300, 700, ++seed);
    narrow.options.force_tier = tier;
    check_fp8(narrow);
  }
  // No tier forced: what a family without tiers runs under MLAJIT_TEST_KERNEL (hopper).
  for (int heads : {16, 128}) {
    auto any = make_random_case("sanitize e4m3 H" + std::to_string(heads) + " page16 causal q2",
                                fp8_shape(heads, 16, DType::kBFloat16, true), 2, 2, 100, 300,
                                ++seed);
    check_fp8(any);
  }
}

}  // namespace mlajit
