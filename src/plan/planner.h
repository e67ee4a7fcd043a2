#pragma once
// The split-KV planner: pure host code, no CUDA types, deterministic. Turns a ragged batch
// into per-CTA work lists (MlaWorkItem) and merge records for split tiles, balanced by
// longest-work-first over the CTA pairs, sized from the batch (no fixed capacity).
#include <cstddef>
#include <cstdint>
#include <vector>

// mla_params.cuh needs int32_t etc. in the global namespace: <cstdint> above provides them.
#include "kernels/common/mla_params.cuh"

namespace mlajit::plan {

using mlajit_kernel::MlaMergeRecord;
using mlajit_kernel::MlaWorkItem;

// The most packed rows a merge record (piece) holds. The kernel gives each row head_dim_ckv /
// 8 threads (a 256-thread CTA merges 4 rows of 512, or 8 of 256, per pass) and shares a row's
// chunks between those row groups when a piece has fewer rows than the CTA has groups and its
// rows more than 32 chunks (merge_slices in kernels/common/mla_merge.cuh); pieces shrink
// (Plan::merge_piece_rows) until there are about as many as CTAs.
inline constexpr int kMergePieceRows = 8;

// The planner's cost model, in KV-token units: what one work item costs beyond its tokens by
// default, and the shortest chunk a tile's KV is cut into.
inline constexpr int64_t kItemOverheadTokens = 96;
inline constexpr int64_t kMinChunkTokens = 64;
inline constexpr int64_t kMaxItemOverheadTokens = 1 << 16;

struct PlanInput {
  const int32_t* qo_indptr = nullptr;  // [batch + 1], query tokens, qo_indptr[0] == 0
  const int32_t* kv_indptr = nullptr;  // [batch + 1], pages into kv_indices
  const int32_t* kv_len = nullptr;     // [batch], valid KV tokens of each request
  int batch_size = 0;
  int num_heads = 0;                   // 1..128
  int page_size = 0;                   // >= 1
  bool causal = false;
  int num_ctas = 0;        // total CTAs the device can hold at once (occupancy x SMs)
  int cta_tile_q = 64;     // packed query rows per CTA
  int kv_tile = 64;        // KV tokens per kernel tile (chunk lengths are rounded to it)
  int cluster_size = 0;    // 0: choose (2 when the mean packed query length > cta_tile_q), 1 or 2: pinned
  // > 0: batch-invariant plan. Every tile's KV is cut at multiples of this many tokens (a
  // kv_tile multiple) from the request's start, whatever the batch; 0: the balanced plan.
  int64_t fixed_chunk_tokens = 0;
  // What a work item costs beyond its KV tokens, in KV tokens (0..kMaxItemOverheadTokens):
  // the kernel's fixed work per item (Q, pipeline fill, output) over its work per token. A
  // kernel whose tiles are cheaper (an e4m3 cache read as codes) has a larger one.
  int64_t item_overhead_tokens = kItemOverheadTokens;
};

struct Plan {
  int cluster_size = 1;   // CTAs sharing one query tile (grid x)
  int grid_y = 0;         // CTA pairs (grid y); grid = cluster_size * grid_y CTAs
  int tile_rows = 64;     // packed rows per work item = cta_tile_q * cluster_size
  std::vector<int32_t> work_indptr;         // [grid_y + 1]
  std::vector<MlaWorkItem> work_items;
  std::vector<int32_t> merge_indptr;        // [cluster_size * grid_y + 1], by flat CTA id
  std::vector<MlaMergeRecord> merge_records;
  int64_t partial_rows = 0;                 // rows of partial_o / partial_lse needed
  std::vector<int64_t> cta_cost;            // modelled cost per CTA pair (for tests/bench)
  int64_t kv_chunk = 0;                     // chunk length limit chosen (tokens, kv_tile multiple)
  int64_t item_overhead_tokens = kItemOverheadTokens;  // the input's, which cta_cost counts
  // Rows of each merge piece of a split tile (its last piece: the rest), 1..kMergePieceRows;
  // kMergePieceRows in a batch-invariant plan, where a row's summation order follows it.
  int merge_piece_rows = kMergePieceRows;
};

// Modelled cost of one work item: KV tokens it reads plus a fixed per-item overhead
// (PlanInput::item_overhead_tokens; Plan::item_overhead_tokens of the plan it is from).
int64_t work_item_cost(const MlaWorkItem& item, int64_t item_overhead_tokens);

// Validates the input (throws mlajit::Error(kInvalidArgument) naming the field, index and
// values) and builds the plan.
Plan make_plan(const PlanInput& input);

}  // namespace mlajit::plan
