#pragma once
// Times BatchMlaAttention the way ../shared/perf/baseline.md timed the reference kernels:
// CUDA events around each launch, a spin kernel holding the GPU while all timed launches are
// queued (so host launch cost is excluded), median of 30 launches after 5 warm-ups, the KV
// cache drawn from one ~4.5 GB pool under a random page permutation, consecutive launches
// reading disjoint page sets (so every launch reads HBM, not L2). The planner is not timed.
#include <optional>
#include <string>
#include <vector>

#include "mlajit/attention.h"

namespace mlajit {

struct MlaBenchShape {
  int num_heads = 128;
  int batch = 64;
  int kv_len = 4096;
  int page_size = 64;
  int q_len = 1;
  DType dtype = DType::kBFloat16;
  bool causal = false;
  int force_tier = 0;
  std::vector<int> ragged_kv_lens;  // when set, overrides batch/kv_len
  std::string label;                // e.g. "ragged U[1,8192]"
};

struct MlaBenchResult {
  MlaBenchShape shape;
  double median_us = 0, min_us = 0, max_us = 0;
  double gbps = 0, tflops = 0;
  std::optional<double> reference_fa2_us;  // FlashInfer FA2 on the H200, same shape
  std::optional<double> reference_fa3_us;
  std::optional<double> reference_flashmla_us;
  std::string spec;
  MlaPlanInfo plan;
  int registers = 0;
};

struct MlaBenchOptions {
  std::string kernel = "auto";  // MlaOptions::kernel of every shape
  int warmup = 5;
  int iterations = 30;
  double pool_gb = 4.53;  // KV pool size (must exceed L2 many times over)
  int device = 0;
};

// The shapes of baseline.md (both tables), in its order.
std::vector<MlaBenchShape> baseline_bench_shapes();
// Ragged batch of baseline.md: H=128, B=64, kv_len ~ U[1, 8192] (our RNG, seed 20260601).
MlaBenchShape ragged_bench_shape();

// Throws mlajit::Error without a GPU.
std::vector<MlaBenchResult> run_mla_bench(const std::vector<MlaBenchShape>& shapes,
                                          const MlaBenchOptions& options);

}  // namespace mlajit
