// Batch invariance (MlaOptions::batch_invariant): one request's output and LSE are the same
// bits alone and inside ten random batches of its neighbours, which change how many pieces
// the balanced planner would cut it into and where they run. The batches are contiguous
// ranges of one uploaded problem around the request, so every run reads the same device
// inputs; a range's pointers are offset to its first request.
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "check/mla_check.h"
#include "gpu_test_support.h"
#include "mlajit/device_memory.h"

namespace mlajit {
namespace {

struct RequestBits {
  std::vector<uint16_t> out;
  std::vector<float> lse;
  MlaPlanInfo plan;
};

// Runs requests [first, last) of `problem` as one batch and returns request `target`'s rows.
RequestBits run_range(const MlaDeviceProblem& problem, const MlaOptions& options, int first,
                      int last, int target) {
  const MlaReferenceProblem& host = problem.host;
  std::vector<int32_t> qo_indptr, kv_indptr, kv_len;
  for (int b = first; b <= last; ++b) {
    qo_indptr.push_back(host.qo_indptr[b] - host.qo_indptr[first]);
    kv_indptr.push_back(host.kv_indptr[b] - host.kv_indptr[first]);
  }
  for (int b = first; b < last; ++b) kv_len.push_back(host.kv_len[b]);
  MlaBatch batch;
  batch.qo_indptr = qo_indptr.data();
  batch.kv_indptr = kv_indptr.data();
  batch.kv_len = kv_len.data();
  batch.batch_size = last - first;

  const MlaRunArgs& all = problem.args;
  const int64_t token0 = host.qo_indptr[first];
  const int elem = dtype_size(problem.check.shape.dtype);
  MlaRunArgs args = all;
  args.q_nope = static_cast<const char*>(all.q_nope) + token0 * all.q_nope_stride_token * elem;
  args.q_pe = static_cast<const char*>(all.q_pe) + token0 * all.q_pe_stride_token * elem;
  args.out = static_cast<char*>(all.out) + token0 * all.out_stride_token * elem;
  args.lse = all.lse + token0 * problem.check.shape.num_heads;
  args.kv_indices = all.kv_indices + host.kv_indptr[first];
  args.num_tokens = qo_indptr.back();

  problem.poison_outputs();
  BatchMlaAttention attention(problem.check.shape, options);
  attention.plan(batch, nullptr);
  attention.run(args, nullptr);
  device_synchronize(problem.check.device());

  const int heads = problem.check.shape.num_heads;
  const int64_t rows = int64_t{host.qo_indptr[target + 1] - host.qo_indptr[target]} * heads;
  const int64_t row0 = int64_t{host.qo_indptr[target]} * heads;
  RequestBits bits;
  bits.out.resize(rows * problem.check.shape.head_dim_ckv);
  bits.lse.resize(rows);
  copy_to_host(bits.out.data(),
               static_cast<const char*>(all.out) + row0 * problem.check.shape.head_dim_ckv * elem,
               bits.out.size() * sizeof(uint16_t));
  copy_to_host(bits.lse.data(), all.lse + row0, bits.lse.size() * sizeof(float));
  bits.plan = attention.plan_info();
  return bits;
}

bool same_bits(const RequestBits& a, const RequestBits& b) {
  return a.out.size() == b.out.size() && a.lse.size() == b.lse.size() &&
         std::memcmp(a.out.data(), b.out.data(), a.out.size() * sizeof(uint16_t)) == 0 &&
         std::memcmp(a.lse.data(), b.lse.data(), a.lse.size() * sizeof(float)) == 0;
}

// Alone and in ten random ranges around it; returns how many ranges gave other bits.
int differing_batches(const MlaDeviceProblem& problem, const MlaOptions& options, int target,
                      uint64_t seed, const char* label) {
  const int batch = static_cast<int>(problem.host.kv_len.size());
  const RequestBits alone = run_range(problem, options, target, target + 1, target);
  std::mt19937_64 rng(seed);
  int differing = 0;
  for (int trial = 0; trial < 10; ++trial) {
    const int first = std::uniform_int_distribution<int>(0, target)(rng);
    const int last = std::uniform_int_distribution<int>(target + 1, batch)(rng);
    const RequestBits inside = run_range(problem, options, first, last, target);
    const bool same = same_bits(alone, inside);
    differing += same ? 0 : 1;
    std::printf("%-10s request %d in [%d, %d): %d items, %d partial rows, %s\n", label, target,
                first, last, inside.plan.work_items, inside.plan.split_tiles_rows,
                same ? "same bits" : "other bits");
  }
  return differing;
}

}  // namespace

TEST_CASE("a batch-invariant request has the same bits alone and inside ten random batches",
          "[gpu][invariant]") {
  MLAJIT_REQUIRE_GPU();
  for (int heads : {128, 16}) {
    MlaShape shape;
    shape.num_heads = heads;
    shape.causal = true;
    // 24 requests; the one in the middle is long enough to be cut into several pieces.
    MlaCheckCase check = make_random_case("invariance H" + std::to_string(heads), shape, 24, 2, 1,
                                          6000, 3100 + heads);
    const int target = 12;
    check.kv_lens[target] = 9000;
    if (!testing::runs_on_family_under_test(check)) continue;
    const auto problem = make_device_problem(check);
    MlaOptions invariant = check.options;
    invariant.batch_invariant = true;
    CHECK(differing_batches(*problem, invariant, target, 77 + heads, "invariant") == 0);
    // The same batches under the balanced planner do change the request's bits, or the check
    // above could not tell invariance from luck.
    CHECK(differing_batches(*problem, check.options, target, 77 + heads, "balanced") > 0);
    // And the invariant plan is still attention: the whole batch against the reference.
    invariant.invariant_chunk_tokens = 1024;
    problem->poison_outputs();
    BatchMlaAttention attention(check.shape, invariant);
    attention.plan(problem->batch(), nullptr);
    attention.run(problem->args, nullptr);
    device_synchronize(check.device());
    const MlaCheckResult result = problem->compare_with_reference();
    std::printf("invariant H%d whole batch, 1024-token pieces: out %.2e lse %.2e\n", heads,
                result.out_error, result.lse_error);
    CHECK(result.passed(1e-2));
  }
}

}  // namespace mlajit
