// The share of a work item that one CTA computes, the same for every family: its packed query
// rows (ROWS of them from item.packed_q_start + blockIdx.x * ROWS) and the KV tiles they see.
// Causal masks are bottom-right aligned: query token i of a request sees tokens
// t <= kv_len - q_len + i.
#pragma once

#include "common/mla_params.cuh"

namespace mlajit_kernel {

struct WorkTile {
  int32_t q_token_base, q_len, kv_page_base, kv_len;
  int32_t row0;          // packed row of local row 0
  int32_t rows;          // valid local rows
  int32_t kv_start;      // first token of the chunk
  int32_t kv_stop;       // one past the last token any row of the tile sees
  int32_t num_tiles;     // KV tiles in [kv_start, kv_stop)
  int32_t unmasked_end;  // tokens below this are visible to every row: no mask needed
  int32_t partial_row;
};

// Query token i of the item sees tokens < min(kv_end, mask_shift + i). Without the causal mask
// the shift is kv_end itself, so that one formula (the causal kernel's, which fits its registers
// where a branch on the mask did not) serves both; kv_end + q_len cannot overflow: a cache of
// 2^31 tokens is terabytes.
__device__ __forceinline__ int32_t mask_shift(const MlaWorkItem& item, bool causal) {
  return causal ? item.kv_len - item.q_len + 1 : item.kv_end;
}

template <int ROWS, int KV_TILE>
__device__ __forceinline__ WorkTile make_work_tile(const MlaWorkItem& item, int32_t heads,
                                                   bool causal) {
  WorkTile t;
  t.q_token_base = item.q_token_base;
  t.q_len = item.q_len;
  t.kv_page_base = item.kv_page_base;
  t.kv_len = item.kv_len;
  t.row0 = item.packed_q_start + blockIdx.x * ROWS;
  t.rows = min(ROWS, item.q_len * heads - t.row0);
  t.kv_start = item.kv_start;
  t.partial_row = item.partial_row;
  const int32_t shift = mask_shift(item, causal);
  const int32_t last_token = (t.row0 + max(t.rows, 1) - 1) / heads;
  t.kv_stop = min(item.kv_end, shift + last_token);
  t.unmasked_end = min(item.kv_end, shift + t.row0 / heads);
  t.num_tiles = t.kv_stop > t.kv_start ? (t.kv_stop - t.kv_start + KV_TILE - 1) / KV_TILE : 0;
  return t;
}

// Where local row `local_row` of the tile reads its query: its q_nope and q_pe rows. A row
// past the tile's valid rows reads row 0's (valid = false: the caller zero-fills it), so
// that no address leaves the request.
template <typename QType>
struct QRowSource {
  const QType* nope;
  const QType* pe;
  bool valid;
};

template <typename QType>
__device__ __forceinline__ QRowSource<QType> q_row_source(const MlaParams& p, const WorkTile& t,
                                                          int local_row) {
  QRowSource<QType> source;
  source.valid = local_row < t.rows;
  const int32_t packed = t.row0 + (source.valid ? local_row : 0);
  const int64_t token = t.q_token_base + packed / p.num_heads;
  const int32_t head = packed % p.num_heads;
  source.nope = static_cast<const QType*>(p.q_nope) + token * p.q_nope_stride_token +
                head * p.q_nope_stride_head;
  source.pe = static_cast<const QType*>(p.q_pe) + token * p.q_pe_stride_token +
              head * p.q_pe_stride_head;
  return source;
}

// One past the last token that local row `local_row` of the tile sees.
__device__ __forceinline__ int32_t work_row_limit(const MlaWorkItem& item, const WorkTile& t,
                                                  int32_t heads, int local_row, bool causal) {
  const int32_t token = (t.row0 + local_row) / heads;
  return min(item.kv_end, mask_shift(item, causal) + token);
}

}  // namespace mlajit_kernel
