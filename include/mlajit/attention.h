#pragma once
// BatchMlaAttention: batched Multi-head Latent Attention (DeepSeek-V2/V3, Kimi-K2, MiniCPM3)
// over a paged, compressed KV cache, with the "absorbed" weights:
//   s[t]      = (q_nope[i,h,:] . ckv[t,:] + q_pe[i,h,:] . kpe[t,:]) * sm_scale
//   out[i,h,:] = sum_t softmax(s)[t] * ckv[t,:]
//   lse[i,h]   = log2 (or ln) sum_t exp(s[t])
// Usage: construct once per (shape, device); plan() on the host whenever the batch changes;
// run() on a stream as often as wanted. run() is CUDA-graph capturable; a graph stays valid
// across re-plans when the grid is pinned (MlaOptions::cluster_size) and the workspace does
// not have to grow (MlaOptions::workspace_bytes; with both set, a plan that would need more
// is refused naming the bytes instead of moving the workspace under the graph).
// Streams: the plan arrays, the partial rows and the grid barrier live in one workspace per
// object, so the plan() and run() calls of one object must be ordered on one stream (or the
// caller orders them with events); use one object per concurrent stream.
// Thread safety: one object must not be used from two threads at once; distinct objects may.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "mlajit/compile_mode.h"
#include "mlajit/error.h"
#include "mlajit/export.h"
#include "mlajit/kernel_spec.h"

namespace mlajit {

// What a BatchMlaAttention computes: fixed for the object's life.
struct MlaShape {
  int num_heads = 128;        // query heads, 1..128
  int head_dim_ckv = 512;     // compressed KV (and output) width: 512 (DeepSeek) or 256 (MiniCPM3)
  int head_dim_kpe = 64;      // rope part: 64 with 512, 32 with 256
  int page_size = 64;         // KV tokens per page, >= 1
  DType dtype = DType::kBFloat16;  // of the queries and the output: bf16 or f16
  std::optional<DType> kv_dtype;   // of the KV cache; unset: the same as dtype. e4m3 (FP8, with
                                   // scales in MlaRunArgs): both families
  // How an e4m3 cache is scaled (kernel_spec.h): per tensor, or DeepSeek-V3.2's fp32 scale per
  // 128 ckv values of each token with kpe in `dtype` (kPerToken128; ckv 512).
  KvScales kv_scales = KvScales::kPerTensor;
  bool causal = false;        // bottom-right aligned: query i of a request sees t <= kv_len - q_len + i

  DType effective_kv_dtype() const { return kv_dtype.value_or(dtype); }
  // The kpe half of the cache: the KV dtype, but unquantized (the queries') under kPerToken128.
  DType kpe_dtype() const {
    return kv_scales == KvScales::kPerToken128 ? dtype : effective_kv_dtype();
  }
};

enum class LseBase : int { kBase2 = 0, kNatural = 1 };

struct MlaOptions {
  int device = -1;              // CUDA device ordinal; -1: the current context's device, else 0
  std::string kernel = "auto";  // kernel family: "auto" (the best that serves the shape on the
                                // device) or a name from kernel_families() (runtime.h), e.g.
                                // "portable"; an unknown name is Error(kInvalidArgument), a family
                                // that cannot serve the shape Error(kUnsupported) saying why
  int force_tier = 0;           // 0: from the device's shared memory; 1..3: force a tile tier (debug)
  int cluster_size = 0;         // 0: chosen per plan; 1 or 2: pinned (keeps the grid and the
                                // launch sequence fixed across plans: use it with CUDA graphs)
  bool force_two_launch = false;  // use the non-cooperative attention + merge path
  LseBase lse_base = LseBase::kBase2;
  uint64_t workspace_bytes = 0;   // reserve this much device workspace up front (0: grow on
                                  // demand); nearly all of it holds partial rows (ckv outputs of
                                  // the output dtype + 4 B each: 512 x 2 + 4 B for DeepSeek bf16):
                                  // B=128 decode at L=16384 needs ~16 MiB on an H200
  bool validate_kv_indices = false;  // plan() requires host kv_indices and checks every page id
  // Where this object's kernel compiles, on a cache miss (compile_mode.h): kDefault follows
  // MLAJIT_COMPILE_MODE (default: a helper process, so an NVRTC crash is an Error).
  CompileMode compile_mode = CompileMode::kDefault;
  // Batch-invariant results: a request's output and LSE are bitwise the same whatever else is
  // in the batch and however many CTAs the device holds. Its KV is cut at multiples of
  // invariant_chunk_tokens counted from its own start (not at all when shorter), whatever the
  // load balance would prefer; the pieces merge in order; two CTAs share a query tile only when
  // cluster_size says so (0 means 1 here). The price in speed is in docs/PERF.md.
  bool batch_invariant = false;
  int invariant_chunk_tokens = 0;  // 0: kDefaultInvariantChunkTokens; else a multiple of 64
};

// The KV piece length of batch-invariant plans when MlaOptions leaves it 0.
inline constexpr int kDefaultInvariantChunkTokens = 2048;

// Device pointers and strides (in elements) for one run. The last dimension of every tensor
// must be contiguous; pointers 16-byte aligned and strides multiples of 16 bytes (8 elements
// of a 16-bit dtype), so that one concatenated [page][token][ckv+kpe] cache works
// (kpe = ckv + head_dim_ckv). q_nope, q_pe and out are of the shape's dtype, ckv and kpe of
// its KV dtype (so an e4m3 cache's strides are multiples of 16 elements); under
// KvScales::kPerToken128 kpe is of the shape's dtype.
struct MlaRunArgs {
  const void* q_nope = nullptr;  // [num_tokens][num_heads][head_dim_ckv]
  int64_t q_nope_stride_token = 0, q_nope_stride_head = 0;
  const void* q_pe = nullptr;    // [num_tokens][num_heads][head_dim_kpe]
  int64_t q_pe_stride_token = 0, q_pe_stride_head = 0;
  const void* ckv = nullptr;     // [num_pages][page_size][head_dim_ckv]
  int64_t ckv_stride_page = 0, ckv_stride_token = 0;
  const void* kpe = nullptr;     // [num_pages][page_size][head_dim_kpe]
  int64_t kpe_stride_page = 0, kpe_stride_token = 0;
  const int32_t* kv_indices = nullptr;  // page ids, CSR by kv_indptr given to plan()
  void* out = nullptr;           // [num_tokens][num_heads][head_dim_ckv]
  int64_t out_stride_token = 0, out_stride_head = 0;
  float* lse = nullptr;          // optional, [num_tokens][num_heads] dense
  int64_t num_tokens = 0;        // rows of q/out: must equal qo_indptr[batch] of the plan
  float sm_scale = 0;            // e.g. 1/sqrt(192) for DeepSeek (before absorption dims)
  // Dequantization of an e4m3 KV cache: the kernel reads ckv[t] * scale and kpe[t] * scale
  // (per-tensor scales, as vLLM's and SGLang's k_scale). Each is given either as a float
  // (finite and > 0) or as a device pointer to one fp32 value, read by the kernel at run time
  // so that a captured CUDA graph follows later updates; a pointer needs the float left at 1.
  // A 16-bit KV cache takes neither (floats 1, pointers null).
  float kv_scale_ckv = 1.0f;
  float kv_scale_kpe = 1.0f;
  const float* kv_scale_ckv_device = nullptr;  // 4-byte aligned
  const float* kv_scale_kpe_device = nullptr;
  // KvScales::kPerToken128 only (and then required, with the four above left at their
  // defaults): ckv[t][c] reads code * ckv_scales[t][c / 128], fp32, 16-byte aligned, strides in
  // floats, multiples of 4. DeepSeek-V3.2's 656-byte token row of one cache buffer `row`:
  // ckv = row, ckv_scales = row + 512 B, kpe = row + 528 B (bf16), token strides 656 B (656
  // codes, 164 floats, 328 bf16).
  const float* ckv_scales = nullptr;  // [num_pages][page_size][head_dim_ckv / 128]
  int64_t ckv_scales_stride_page = 0, ckv_scales_stride_token = 0;
};

// Ragged batch description, all host arrays (read during plan() only).
struct MlaBatch {
  const int32_t* qo_indptr = nullptr;  // [batch_size + 1] query tokens, qo_indptr[0] = 0
  const int32_t* kv_indptr = nullptr;  // [batch_size + 1] offsets into kv_indices (pages)
  const int32_t* kv_len = nullptr;     // [batch_size] valid KV tokens of each request
  int batch_size = 0;
  const int32_t* kv_indices = nullptr;  // host copy; required with validate_kv_indices
  int64_t num_pages = 0;                // pages in the cache; required with validate_kv_indices
};

// Figures about the current plan, for logs, tests and benchmarks.
struct MlaPlanInfo {
  int cluster_size = 0;
  int grid_ctas = 0;
  int work_items = 0;
  int split_tiles_rows = 0;  // partial rows in use
  int tier = 0;              // 1..3 (0: the family has no tiers)
  bool two_launch = false;
  double busiest_to_mean = 0;  // modelled load balance over CTA pairs
  uint64_t workspace_bytes = 0;         // device workspace allocated now
  // The smallest MlaOptions::workspace_bytes that holds this plan without growing: plan the
  // largest batch once to learn what to reserve for CUDA-graph capture.
  uint64_t workspace_bytes_needed = 0;
};

class MLAJIT_API BatchMlaAttention {
 public:
  explicit BatchMlaAttention(const MlaShape& shape, const MlaOptions& options = {});
  ~BatchMlaAttention();
  BatchMlaAttention(BatchMlaAttention&&) noexcept;
  BatchMlaAttention& operator=(BatchMlaAttention&&) noexcept;

  // Validates the batch, builds the work lists and copies them to the device workspace with
  // one async copy on `stream` (a CUstream; nullptr = legacy default stream). The host waits
  // only for the previous plan's copy to have left the pinned buffer (and, when the workspace
  // grows, for the free of the old one). Throws Error(kInvalidArgument) naming the bad field;
  // after any failure run() refuses until a plan() succeeds.
  void plan(const MlaBatch& batch, void* stream);

  // Launches on `stream`. Throws Error(kInvalidArgument) for bad arguments or when called
  // before plan(); Error(kCudaError) when the launch fails.
  void run(const MlaRunArgs& args, void* stream);

  MlaPlanInfo plan_info() const;
  const MlaShape& shape() const;
  std::string spec_text() const;  // the kernel spec this object runs

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mlajit
