// The contract between the host (planner, BatchMlaAttention) and the MLA kernels.
// This file is compiled twice: by the host C++ compiler (src/ includes it) and by NVRTC as
// part of every MLA program, so it uses only fixed-width integer types, which the host gets
// from <cstdint> and NVRTC from the generated prelude. Layout changes here change every
// cache key (the file is part of the hashed source), so old cubins can never see new params.
#pragma once

namespace mlajit_kernel {

// One unit of work for one CTA pair ("cluster" of the reference, not a hardware cluster):
// a tile of packed query rows of one request, against KV tokens [kv_start, kv_end).
// Packed row r of a request is query token r / num_heads, head r % num_heads.
struct MlaWorkItem {
  int32_t q_token_base;    // global index of the request's first query token (qo_indptr[b])
  int32_t q_len;           // query tokens of the request
  int32_t kv_page_base;    // offset of the request's first page in kv_indices (kv_indptr[b])
  int32_t kv_len;          // valid KV tokens of the request
  int32_t packed_q_start;  // first packed row of the tile (relative to the request)
  int32_t kv_start;        // first KV token of this chunk (relative to the request)
  int32_t kv_end;          // one past the last KV token of this chunk
  int32_t partial_row;     // -1: write final output; else first row of this chunk in partial_o
};

// After the grid barrier, the partial results of one split tile are merged into the final
// output. Chunk c of the tile wrote its rows at partial_row_base + c * partial_stride + i.
struct MlaMergeRecord {
  int32_t q_token_base;      // as in MlaWorkItem
  int32_t packed_q_start;    // first packed row of the tile (relative to the request)
  int32_t num_rows;          // valid packed rows in the tile (<= tile rows)
  int32_t partial_row_base;  // row of chunk 0, row 0 in partial_o / partial_lse
  int32_t num_chunks;        // >= 2
  int32_t partial_stride;    // rows between consecutive chunks (the tile's row count)
  int32_t reserved0;
  int32_t reserved1;
};

// Kernel arguments, passed by value (__grid_constant__). Strides are in elements.
// The shared memory the merge of split tiles (mla_merge.cuh) takes for a block of NUM_THREADS:
// a merge state (running max, sum and 8 output values) a thread. A merge launch of its own
// (merge/mla_merge_launch.cuh) asks for it as its dynamic shared memory.
constexpr int kMergeStateFloats = 10;
template <int NUM_THREADS>
constexpr int kMergeScratchBytes = kMergeStateFloats * NUM_THREADS * 4;

struct MlaParams {
  // Inputs.
  const void* q_nope;  // [tokens][heads][head_dim_ckv] with the strides below
  const void* q_pe;    // [tokens][heads][head_dim_kpe]
  const void* ckv;     // [pages][page_size][head_dim_ckv]
  const void* kpe;     // [pages][page_size][head_dim_kpe]
  const int32_t* kv_indices;  // page ids, CSR over requests (offsets in MlaWorkItem)
  // Outputs.
  void* out;           // [tokens][heads][head_dim_ckv]
  float* lse;          // [tokens][heads], may be null
  void* partial_o;     // [partial rows][head_dim_ckv], output dtype
  float* partial_lse;  // [partial rows], base 2
  // Plan (device workspace).
  const int32_t* work_indptr;           // [ctas_y + 1]: work items of CTA pair y
  const MlaWorkItem* work_items;
  const int32_t* merge_indptr;          // [ctas_y * ctas_x + 1]: merge records per CTA
  const MlaMergeRecord* merge_records;
  uint32_t* barrier;                    // the grid barrier's word (zeroed once)

  int64_t q_nope_stride_token, q_nope_stride_head;
  int64_t q_pe_stride_token, q_pe_stride_head;
  int64_t ckv_stride_page, ckv_stride_token;
  int64_t kpe_stride_page, kpe_stride_token;
  int64_t out_stride_token, out_stride_head;

  int32_t num_heads;
  int32_t page_size;
  float sm_scale_log2;  // sm_scale * log2(e)
  int32_t lse_base_e;   // 1: write lse in natural log, 0: base 2
  int32_t phase;        // 0: attention + barrier + merge; 1: attention only; 2: merge only
                        // (a kernel that merges itself; the hopper kernel only attends)
  int32_t causal;     // 1: bottom-right aligned causal mask (a run-time value: one cubin
                      // serves both, and with q_len 1 the two are the same)

  // An e4m3 KV cache holds ckv / kv_scale_ckv and kpe / kv_scale_kpe. A scale is read through
  // its device pointer when that is set (the caller's tensor, updated between graph replays),
  // else it is the float. Unused for a 16-bit cache.
  const float* kv_scale_ckv_device;
  const float* kv_scale_kpe_device;
  float kv_scale_ckv;
  float kv_scale_kpe;
  // KV scales per token (DeepSeek-V3.2's layout, MlaConfig's e4m3_token128_t cache): ckv value
  // c of a token is its code times ckv_scales[page][slot][c / 128]; strides in floats. Null
  // otherwise.
  const float* ckv_scales;
  int64_t ckv_scales_stride_page, ckv_scales_stride_token;
};

}  // namespace mlajit_kernel
