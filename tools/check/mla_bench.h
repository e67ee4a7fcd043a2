#pragma once
// Times BatchMlaAttention the way ../shared/perf/baseline.md timed the reference kernels:
// CUDA events around each launch, a spin kernel holding the GPU while all timed launches are
// queued (so host launch cost is excluded; both through time_launches, mlajit/timing.h),
// median of 30 launches after 5 warm-ups, the KV cache drawn from one ~4.5 GB pool under a
// random page permutation, consecutive launches reading disjoint page sets (so every launch
// reads HBM, not L2). The planner is not timed. An e4m3 (FP8) KV cache reads the same pool as
// codes, twice the tokens in the same bytes, dequantized by float scales of 1/448. Written against the public API, not part of
// libmlajit.so; what the times are compared with (peer timings) is the CLI's business.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "check/device_allocation.h"
#include "mlajit/attention.h"

namespace mlajit {

struct MlaBenchShape {
  int num_heads = 128;
  int batch = 64;
  int kv_len = 4096;
  int page_size = 64;
  int q_len = 1;
  DType dtype = DType::kBFloat16;          // of q and out
  std::optional<DType> kv_dtype;           // of the KV cache; unset: dtype (e4m3: FP8)
  KvScales kv_scales = KvScales::kPerTensor;  // e4m3: kPerToken128 reads DeepSeek-V3.2's 656-byte rows
  bool causal = false;
  int force_tier = 0;
  bool batch_invariant = false;     // MlaOptions::batch_invariant (default piece length)
  bool two_launch = false;          // MlaOptions::force_two_launch
  // Each launch's pages in pool order (consecutive page ids: a fresh cache's layout) instead
  // of a random permutation's: separates the DRAM's locality from the kernel's page handling.
  bool contiguous_pages = false;
  std::vector<int> ragged_kv_lens;  // when set, overrides batch/kv_len
  // > 0: sparse (top-k) decode, page size 1: each request selects kv_len distinct token ids, in
  // random order, from its own cache of this many tokens (a window of the pool); every launch
  // selects anew. 0: dense, the pages of each request drawn from the whole pool.
  int topk_cache_tokens = 0;
  std::string label;                // e.g. "ragged U[1,8192] seed 20260601"
};

// DSA's sparse decode: `batch` requests each selecting `top_k` of its `cache_tokens` (page 1).
MlaBenchShape top_k_bench_shape(int num_heads, int batch, int top_k, int cache_tokens);

// `batch` requests of `num_heads` heads with kv_len drawn uniformly from [min_kv, max_kv] by
// std::mt19937(seed): baseline.md's ragged batch is (128, 64, 1, 8192, 20260601).
MlaBenchShape ragged_bench_shape(int num_heads, int batch, int min_kv, int max_kv, uint32_t seed);

struct MlaBenchResult {
  MlaBenchShape shape;
  double median_us = 0, min_us = 0, max_us = 0;
  double gbps = 0, tflops = 0;
  std::string spec;
  MlaPlanInfo plan;
};

struct MlaBenchOptions {
  std::string kernel = "auto";  // MlaOptions::kernel of every shape
  int warmup = 5;
  int iterations = 30;
  double pool_gb = 4.53;  // KV pool size (must exceed L2 many times over)
  int device = 0;
};

// The KV pool lives as long as the object; run() times one shape at a time (refilling the
// pool first when the shape's KV dtype needs other contents than it holds).
class MlaBench {
 public:
  // Allocates and fills the pool; throws mlajit::Error without a GPU.
  explicit MlaBench(const MlaBenchOptions& options);
  MlaBenchResult run(const MlaBenchShape& shape);

 private:
  void hold_in_pool(const MlaBenchShape& shape);

  MlaBenchOptions options_;
  DeviceAllocation block16_;  // random bf16 values: the source of q and of a 16-bit pool
  DeviceAllocation pool_;     // [token][ckv + kpe] of pool_dtype_
  // bf16 bits (which f16 shapes read as they are: finite values of moderate size), e4m3
  // codes, or DeepSeek-V3.2's rows of codes, scales and bf16 kpe; 16-bit values read as e4m3
  // would include the NaN codes, codes read as scales any float.
  int pool_row_bytes_ = 0;  // the row of what the pool holds: 1152, 576 or 656
};

}  // namespace mlajit
