#pragma once
// One end-to-end correctness check of BatchMlaAttention on a GPU against the float64 CPU
// reference: fresh random inputs (never zeros), outputs poisoned with NaN first, relative
// L2 errors reported. Shared by the GPU tests and `mlajit verify`; written against the public
// API (mlajit/attention.h, mlajit/device_memory.h) and not part of libmlajit.so.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "check/device_allocation.h"
#include "check/mla_reference.h"
#include "mlajit/attention.h"

namespace mlajit {

struct MlaCheckCase {
  std::string name;
  MlaShape shape;
  MlaOptions options;        // options.device -1 (the default) checks on device 0
  std::vector<int> q_lens;   // per request
  std::vector<int> kv_lens;  // per request
  bool concatenated_kv = false;  // one [page][token][ckv+kpe] cache instead of two tensors
  bool with_lse = true;
  uint64_t seed = 1;
  int extra_pages = 3;       // unused pages in the pool, so page ids are not just 0..n-1
  // > 0: a pool of this many pages from which every request draws its own pages, distinct and
  // in random order, independently of the others (with page_size 1: a top-k selection of
  // token ids over one cache, as sparse attention gives it); extra_pages is then unused.
  // 0: the requests share out used + extra_pages pages without overlap.
  int64_t pool_pages = 0;
  // An e4m3 KV cache (shape.kv_dtype) holds random codes, every non-NaN one equally likely,
  // dequantized by these per-tensor scales: the reference reads code x scale, the device the
  // codes. The scales are given to the kernel as floats, or with kv_scales_on_device as
  // pointers to one fp32 each. Unused with a 16-bit KV cache.
  float kv_scale_ckv = 0.0173f;
  float kv_scale_kpe = 0.0291f;
  bool kv_scales_on_device = false;

  int device() const { return options.device >= 0 ? options.device : 0; }
};

struct MlaCheckResult {
  double out_error = 0;      // ||out - ref|| / ||ref||
  double lse_error = 0;      // over entries where the reference is finite
  bool lse_infinities_match = true;  // -inf exactly where the reference has -inf
  bool all_written = true;   // no NaN poison left in out
  double seconds = 0;        // wall time of the GPU part (plan + run + sync), for logs only
  MlaPlanInfo plan;
  bool passed(double tolerance) const {
    return all_written && lse_infinities_match && out_error < tolerance && lse_error < tolerance;
  }
};

// Requires a GPU; throws mlajit::Error otherwise.
MlaCheckResult run_mla_check(const MlaCheckCase& check);

// The pieces of run_mla_check, for tests that drive BatchMlaAttention themselves (graph
// capture, several devices): a random problem, its device copy with poisoned outputs, and the
// comparison of what the GPU wrote with the reference.
struct MlaDeviceProblem;
std::unique_ptr<MlaDeviceProblem> make_device_problem(const MlaCheckCase& check);
struct MlaDeviceProblem {
  MlaCheckCase check;
  MlaReferenceProblem host;  // the inputs, exactly as uploaded
  int64_t num_pages = 0;
  std::vector<DeviceAllocation> buffers;  // on check.device()
  MlaRunArgs args;           // pointers into `buffers`
  MlaBatch batch() const;    // pointers into `host`
  // Fills out (and lse) with NaN and waits for it, so that work queued next on any stream
  // sees the poison.
  void poison_outputs() const;
  // Downloads the outputs and compares them with the reference of `host` as it is now.
  MlaCheckResult compare_with_reference() const;
  // e4m3 KV only: new dequantization scales, for the reference (host) and for the kernel
  // (args, or the device floats the args point to, written before this returns).
  void set_kv_scales(float ckv, float kpe);

  // e4m3 KV only: the codes as uploaded, from which set_kv_scales recomputes the reference.
  std::vector<uint8_t> ckv_codes, kpe_codes;
  float* kv_scale_ckv_device = nullptr;  // in `buffers`, with check.kv_scales_on_device
  float* kv_scale_kpe_device = nullptr;
};

// A random ragged batch: `batch` requests with kv_len drawn in [min_kv, max_kv].
MlaCheckCase make_random_case(std::string name, MlaShape shape, int batch, int q_len, int min_kv,
                              int max_kv, uint64_t seed);

}  // namespace mlajit
