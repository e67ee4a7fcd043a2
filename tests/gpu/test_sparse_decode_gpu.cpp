// Sparse (top-k) MLA decode, as DeepSeek-V3.2's DSA runs it: page size 1, each request's
// kv_indices its selected token ids (distinct, unsorted, drawn from one larger cache) and
// kv_len their count. The unchanged kernel computes attention over the gathered tokens; the
// float64 reference gathers the same rows. k below, at and above a 64-token KV tile.
#include <cstdio>
#include <string>
#include <vector>

#include "check/mla_check.h"
#include "gpu_test_support.h"

namespace mlajit {
namespace {

constexpr double kBf16Tolerance = 1e-2;
constexpr double kFp16Tolerance = 3e-3;

MlaCheckCase top_k_case(int heads, DType dtype, std::vector<int> k, int64_t cache_tokens,
                        uint64_t seed) {
  MlaCheckCase check;
  check.shape.num_heads = heads;
  check.shape.page_size = 1;
  check.shape.dtype = dtype;
  check.q_lens.assign(k.size(), 1);
  check.kv_lens = std::move(k);
  check.pool_pages = cache_tokens;  // every request selects from the whole cache
  check.seed = seed;
  // The selected ids are checked on the host against the cache: the use DSA documents.
  check.options.validate_kv_indices = true;
  std::string ks;
  for (int n : check.kv_lens) ks += (ks.empty() ? "" : ",") + std::to_string(n);
  check.name = "top-k {" + ks + "} of " + std::to_string(cache_tokens) + " H" +
               std::to_string(heads) + " " + dtype_name(dtype);
  return check;
}

void check_top_k(const MlaCheckCase& check) {
  const MlaCheckResult result = run_mla_check(check);
  const double tolerance =
      check.shape.dtype == DType::kBFloat16 ? kBf16Tolerance : kFp16Tolerance;
  std::printf("%-62s out %.2e lse %.2e items %d %s%s\n", check.name.c_str(), result.out_error,
              result.lse_error, result.plan.work_items,
              result.plan.two_launch ? "two-launch" : "cooperative",
              result.passed(tolerance) ? "" : "  <-- FAIL");
  INFO(check.name << " seed " << check.seed << " out error " << result.out_error
                  << " lse error " << result.lse_error);
  CHECK(result.all_written);
  CHECK(result.lse_infinities_match);
  CHECK(result.out_error < tolerance);
  CHECK(result.lse_error < tolerance);
}

}  // namespace

TEST_CASE("top-k decode over page-size-1 selections matches the reference on the gathered KV",
          "[gpu][sparse]") {
  MLAJIT_REQUIRE_GPU();
  // k below, at and just above one 64-token tile, a few tiles, and DSA's 2048.
  check_top_k(top_k_case(128, DType::kBFloat16, {1, 37, 64, 65, 300, 2048}, 65536, 9001));
  check_top_k(top_k_case(16, DType::kBFloat16, {2048, 5, 64, 129}, 16384, 9002));
  check_top_k(top_k_case(128, DType::kFloat16, {2048, 2048, 100}, 16384, 9003));
  check_top_k(top_k_case(64, DType::kFloat16, {63, 1, 2047, 0}, 4096, 9004));
}

TEST_CASE("top-k decode with the whole batch selecting 2048 of 64k tokens", "[gpu][sparse]") {
  MLAJIT_REQUIRE_GPU();
  check_top_k(top_k_case(128, DType::kBFloat16, std::vector<int>(8, 2048), 65536, 9010));
}

}  // namespace mlajit
