// DeepSeek-V3.2's FP8 KV cache (KvScales::kPerToken128): ckv in e4m3 with one fp32 scale per
// 128 values of each token, kpe in the queries' dtype, as three tensors or as one buffer of
// 656-byte token rows. Against the float64 reference on the dequantized values (code x its
// token's scale), outputs poisoned first (mla_check.h); the scales are drawn per token and
// block over a decade, so a scale applied to the wrong block or token fails. Select with
// "[fp8-token]".
#include <cstdio>
#include <string>
#include <vector>

#include "check/mla_check.h"
#include "gpu_test_support.h"

namespace mlajit {
namespace {

constexpr double kBf16Tolerance = 1e-2;
constexpr double kFp16Tolerance = 3e-3;

MlaShape v32_shape(int heads, int page_size, DType dtype = DType::kBFloat16, bool causal = false) {
  MlaShape shape;
  shape.num_heads = heads;
  shape.page_size = page_size;
  shape.dtype = dtype;
  shape.kv_dtype = DType::kFloat8E4M3;
  shape.kv_scales = KvScales::kPerToken128;
  shape.causal = causal;
  return shape;
}

std::string layout_word(bool joined) { return joined ? " rows-656" : " split"; }

void check_token_scales(MlaCheckCase check) {
  if (!testing::runs_on_family_under_test(check)) return;
  INFO(check.name << " seed " << check.seed);
  const double tolerance =
      check.shape.dtype == DType::kBFloat16 ? kBf16Tolerance : kFp16Tolerance;
  testing::report_check(check.name, run_mla_check(check), tolerance);
}

}  // namespace

TEST_CASE("e4m3 per-token scales: decode at 128 and 16 heads, pages 64 and 1, bf16 and f16",
          "[gpu][fp8][fp8-token]") {
  MLAJIT_REQUIRE_GPU();
  uint64_t seed = 3000;
  for (bool joined : {true, false}) {
    for (const auto& [heads, page] : std::vector<std::pair<int, int>>{{128, 64}, {16, 64}, {16, 1}}) {
      const DType dtype = heads == 16 && page == 1 ? DType::kFloat16 : DType::kBFloat16;
      auto check = make_random_case("e4m3-t128 decode H" + std::to_string(heads) + " page" +
                                        std::to_string(page) + " " + dtype_name(dtype) +
                                        layout_word(joined),
                                    v32_shape(heads, page, dtype), 4, 1, 1, 1500, ++seed);
      check.concatenated_kv = joined;
      check_token_scales(check);
    }
  }
}

TEST_CASE("e4m3 per-token scales: every tier forced, causal q_len 2 on tier 2",
          "[gpu][fp8][fp8-token]") {
  MLAJIT_REQUIRE_GPU();
  uint64_t seed = 3100;
  for (int tier : {1, 2, 3}) {
    for (int heads : {128, 16}) {
      auto check = make_random_case("e4m3-t128 tier " + std::to_string(tier) + " H" +
                                        std::to_string(heads) + (tier == 2 ? " causal q2" : "") +
                                        layout_word(tier != 3),
                                    v32_shape(heads, 16, DType::kBFloat16, tier == 2), 3,
                                    tier == 2 ? 2 : 1, 1, 1300, ++seed);
      check.options.force_tier = tier;
      check.concatenated_kv = tier != 3;
      check_token_scales(check);
    }
  }
}

TEST_CASE("e4m3 per-token scales: causal q_len 2 to 4 with an empty request, long split requests",
          "[gpu][fp8][fp8-token]") {
  MLAJIT_REQUIRE_GPU();
  uint64_t seed = 3200;
  for (int q_len : {2, 3, 4}) {
    const bool small = q_len == 3;
    MlaCheckCase check;
    check.name = "e4m3-t128 causal q" + std::to_string(q_len) + " kv 0/short/long H" +
                 (small ? "16 page1 f16" : "128 page64 bf16");
    check.shape = v32_shape(small ? 16 : 128, small ? 1 : 64,
                            small ? DType::kFloat16 : DType::kBFloat16, true);
    check.q_lens = {q_len, q_len, q_len, q_len};
    check.kv_lens = {0, q_len + 3, 700, 1300};
    check.seed = ++seed;
    check.concatenated_kv = q_len != 3;
    check_token_scales(check);
  }
  auto split = make_random_case("e4m3-t128 long split H128 page64 bf16 rows-656",
                                v32_shape(128, 64), 2, 1, 6000, 12000, ++seed);
  split.concatenated_kv = true;
  check_token_scales(split);
  auto narrow = make_random_case("e4m3-t128 long H16 page64 bf16 rows-656 natural lse",
                                 v32_shape(16, 64), 3, 1, 4000, 9000, ++seed);
  narrow.concatenated_kv = true;
  narrow.options.lse_base = LseBase::kNatural;
  check_token_scales(narrow);
}

// Small per-token-scaled shapes for compute-sanitizer (the scales' copies beside the codes,
// read while the tile expands over its own codes), hidden from the default run.
TEST_CASE("e4m3 per-token scales: one small shape per tier", "[.sanitize-fp8]") {
  MLAJIT_REQUIRE_GPU();
  uint64_t seed = 3900;
  for (int tier : {0, 1, 2, 3}) {  // 0: the family's own choice (hopper's only tile at 128 heads)
    for (int heads : {16, 128}) {
      auto check = make_random_case("sanitize e4m3-t128 tier " + std::to_string(tier) + " H" +
                                        std::to_string(heads),
                                    v32_shape(heads, 16, DType::kBFloat16, true), 2, 2, 100, 300,
                                    ++seed);
      check.options.force_tier = tier;
      check.concatenated_kv = true;
      check_token_scales(check);
    }
  }
}

}  // namespace mlajit
