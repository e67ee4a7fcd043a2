// merge_states on the GPU: each request's KV is cut into disjoint parts, run() computes every
// part into its own (NaN-poisoned) output and LSE, merge_states combines them, and the result
// is compared with the float64 reference of attention over the whole KV. Prints
// ||out - ref|| / ||ref|| and the LSE error of every case.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "check/merge_reference.h"
#include "check/mla_check.h"
#include "gpu_test_support.h"
#include "mlajit/device_memory.h"
#include "mlajit/merge_states.h"

namespace mlajit {
namespace {

constexpr double kBf16Tolerance = 1e-2;
constexpr double kFp16Tolerance = 3e-3;

struct MergeCase {
  std::string name;
  MlaCheckCase check;
  int num_parts = 2;
  int empty_part = -1;        // this part has no KV in any request
  bool poison_empty = false;  // NaN in the empty part's out after run(): must not be read
  bool in_place = false;      // merge into part 0's own out and lse
  bool merged_lse = true;     // ask merge_states for the merged lse
};

MlaShape shape_of(int heads, int page, DType dtype, int ckv = 512, int kpe = 64) {
  MlaShape shape;
  shape.num_heads = heads;
  shape.page_size = page;
  shape.dtype = dtype;
  shape.head_dim_ckv = ckv;
  shape.head_dim_kpe = kpe;
  return shape;
}

MergeCase merge_case(std::string name, MlaShape shape, LseBase base, int parts, int batch,
                     int max_kv, uint64_t seed) {
  MergeCase c;
  c.name = std::move(name);
  c.check = make_random_case(c.name, shape, batch, 1, 0, max_kv, seed);
  c.check.options.lse_base = base;
  c.num_parts = parts;
  return c;
}

// One part's inputs and outputs on the device.
struct DevicePart {
  DeviceAllocation kv_indices, out, lse;
  MlaKvPart kv;
};

DevicePart run_part(BatchMlaAttention& attention, const MlaDeviceProblem& problem,
                    const MlaKvPart& kv) {
  const MlaCheckCase& check = problem.check;
  const int device = check.device();
  const int64_t rows = problem.args.num_tokens * check.shape.num_heads;
  DevicePart part;
  part.kv = kv;
  // At least 16 bytes each, so that an empty part still has valid pointers.
  part.kv_indices = DeviceAllocation(device, std::max<size_t>(16, kv.kv_indices.size() * 4));
  if (!kv.kv_indices.empty()) {
    copy_to_device(part.kv_indices.data(), kv.kv_indices.data(), kv.kv_indices.size() * 4);
  }
  part.out = DeviceAllocation(device, std::max<size_t>(16, rows * check.shape.head_dim_ckv * 2));
  part.lse = DeviceAllocation(device, std::max<size_t>(16, rows * 4));
  device_memset(part.out.data(), 0xFF, part.out.size());  // NaN: shows what run() never wrote
  device_memset(part.lse.data(), 0xFF, part.lse.size());
  const MlaBatch batch{problem.host.qo_indptr.data(), kv.kv_indptr.data(), kv.kv_len.data(),
                       static_cast<int>(kv.kv_len.size()), kv.kv_indices.data(),
                       problem.num_pages};
  MlaRunArgs args = problem.args;
  args.kv_indices = static_cast<const int32_t*>(part.kv_indices.data());
  args.out = part.out.data();
  args.lse = static_cast<float*>(part.lse.data());
  attention.plan(batch, nullptr);
  attention.run(args, nullptr);
  device_synchronize(device);  // the next plan() reuses the object's workspace
  return part;
}

MergeStatesArgs merge_args(const MergeCase& c, const MlaDeviceProblem& problem,
                           const std::vector<AttentionState>& states) {
  const MlaShape& shape = c.check.shape;
  MergeStatesArgs m;
  m.parts = states.data();
  m.num_parts = static_cast<int>(states.size());
  m.out = problem.args.out;
  m.out_stride_token = problem.args.out_stride_token;
  m.out_stride_head = problem.args.out_stride_head;
  m.lse = c.merged_lse ? problem.args.lse : nullptr;
  m.num_tokens = problem.args.num_tokens;
  m.num_heads = shape.num_heads;
  m.head_dim = shape.head_dim_ckv;
  m.dtype = shape.dtype;
  m.lse_base = c.check.options.lse_base;
  m.device = c.check.device();
  return m;
}

void check_merge(const MergeCase& c) {
  BatchMlaAttention attention(c.check.shape, c.check.options);
  auto problem = make_device_problem(c.check);  // the union; its out and lse are poisoned
  std::vector<DevicePart> parts;
  std::vector<AttentionState> states;
  for (const MlaKvPart& kv : split_kv(problem->host, c.num_parts, c.check.seed, c.empty_part)) {
    parts.push_back(run_part(attention, *problem, kv));
  }
  for (const DevicePart& part : parts) {
    states.push_back({part.out.data(), problem->args.out_stride_token,
                      problem->args.out_stride_head, static_cast<const float*>(part.lse.data())});
  }
  if (c.poison_empty) device_memset(parts[c.empty_part].out.data(), 0xFF, parts[c.empty_part].out.size());
  if (c.in_place) {
    problem->args.out = parts[0].out.data();
    problem->args.lse = static_cast<float*>(parts[0].lse.data());
  }
  if (!c.merged_lse) problem->args.lse = nullptr;  // compare the output only
  merge_states(merge_args(c, *problem, states), nullptr);
  device_synchronize(c.check.device());

  const MlaCheckResult result = problem->compare_with_reference();
  const double tolerance =
      c.check.shape.dtype == DType::kBFloat16 ? kBf16Tolerance : kFp16Tolerance;
  std::printf("%-62s out %.2e lse %.2e%s\n", c.name.c_str(), result.out_error, result.lse_error,
              result.passed(tolerance) ? "" : "  <-- FAIL");
  INFO(c.name << " seed " << c.check.seed << " out error " << result.out_error << " lse error "
              << result.lse_error);
  CHECK(result.all_written);
  CHECK(result.lse_infinities_match);
  CHECK(result.out_error < tolerance);
  CHECK(result.lse_error < tolerance);
}

std::string base_name(LseBase base) { return base == LseBase::kNatural ? "lse e" : "lse 2"; }

}  // namespace

TEST_CASE("merging two KV parts gives attention over their union, both dtypes and LSE bases",
          "[gpu][merge]") {
  MLAJIT_REQUIRE_GPU();
  uint64_t seed = 5000;
  for (DType dtype : {DType::kBFloat16, DType::kFloat16}) {
    for (LseBase base : {LseBase::kBase2, LseBase::kNatural}) {
      const std::string tag = std::string(dtype_name(dtype)) + " " + base_name(base);
      check_merge(merge_case("merge 2 H16 page16 " + tag, shape_of(16, 16, dtype), base, 2, 6,
                             1500, ++seed));
      check_merge(merge_case("merge 2 H128 page64 " + tag, shape_of(128, 64, dtype), base, 2, 3,
                             3000, ++seed));
    }
  }
}

TEST_CASE("n-way merges of 1, 3 and 8 KV parts", "[gpu][merge]") {
  MLAJIT_REQUIRE_GPU();
  uint64_t seed = 5100;
  for (int parts : {1, 3, 8}) {
    for (DType dtype : {DType::kBFloat16, DType::kFloat16}) {
      for (LseBase base : {LseBase::kBase2, LseBase::kNatural}) {
        check_merge(merge_case("merge " + std::to_string(parts) + " H64 page16 " +
                                   dtype_name(dtype) + " " + base_name(base),
                               shape_of(64, 16, dtype), base, parts, 5, 2000, ++seed));
      }
    }
  }
  check_merge(merge_case("merge 8 H16 page1 bf16 lse 2", shape_of(16, 1, DType::kBFloat16),
                         LseBase::kBase2, 8, 4, 700, ++seed));
}

TEST_CASE("an empty part contributes nothing, even with NaN in its output", "[gpu][merge]") {
  MLAJIT_REQUIRE_GPU();
  uint64_t seed = 5200;
  for (DType dtype : {DType::kBFloat16, DType::kFloat16}) {
    for (LseBase base : {LseBase::kBase2, LseBase::kNatural}) {
      // Request 0 has no KV at all: every part is empty there (out 0, lse -inf).
      MergeCase c;
      c.name = std::string("empty part 1 of 3, a kv 0 request, ") + dtype_name(dtype) + " " +
               base_name(base);
      c.check.name = c.name;
      c.check.shape = shape_of(16, 16, dtype);
      c.check.options.lse_base = base;
      c.check.q_lens = {1, 1, 1, 1};
      c.check.kv_lens = {0, 1, 64, 1000};
      c.check.seed = ++seed;
      c.num_parts = 3;
      c.empty_part = 1;
      check_merge(c);
      c.name += ", NaN in its out";
      c.check.seed = ++seed;
      c.poison_empty = true;
      check_merge(c);
    }
  }
}

TEST_CASE("merges in place, without a merged lse, and at head_dim 256 with 2 queries",
          "[gpu][merge]") {
  MLAJIT_REQUIRE_GPU();
  auto in_place = merge_case("merge 3 in place into part 0 H16 bf16", shape_of(16, 16, DType::kBFloat16),
                             LseBase::kBase2, 3, 4, 1200, 5301);
  in_place.in_place = true;
  check_merge(in_place);
  auto no_lse = merge_case("merge 2 without merged lse H16 f16", shape_of(16, 16, DType::kFloat16),
                           LseBase::kNatural, 2, 4, 1200, 5302);
  no_lse.merged_lse = false;
  check_merge(no_lse);
  auto minicpm = merge_case("merge 4 256/32 q_len 2 H40 bf16",
                            shape_of(40, 16, DType::kBFloat16, 256, 32), LseBase::kBase2, 4, 3,
                            900, 5303);
  minicpm.check = make_random_case(minicpm.name, minicpm.check.shape, 3, 2, 1, 900, 5303);
  check_merge(minicpm);
}

}  // namespace mlajit
