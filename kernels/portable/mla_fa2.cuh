// The MLA paged-attention kernel, FA2 style (after FlashInfer's BatchMLAPagedAttentionKernel).
//
// One CTA of 256 threads = 2 warpgroups x 4 warps. A CTA owns Q_TILE = 64 packed query rows
// (row r = token * num_heads + head); warp w of either warpgroup owns rows 16w..16w+15.
//  - QK^T over the ckv + kpe dims: with QK_SHARD the two warpgroups take one half of the KV
//    tile's columns each and exchange row maxima and P through shared memory; without it
//    both compute the whole (small) tile.
//  - PV: the value is the ckv row itself. With QK_SHARD all of P goes through shared memory
//    and warp w of warpgroup g produces rows 16w.. and 16(w ^ 1).. x dim quarter 2g + w % 2
//    (each V fragment serves two m16 row tiles); without it warpgroup g produces output dims
//    [g * CKV / 2, (g + 1) * CKV / 2) of its warp's 16 rows. Either way a thread holds 128
//    fp32 accumulators of O at CKV = 512.
//  - KV arrives through a NUM_STAGES-deep cp.async pipeline over the paged cache.
// The host contract (work items, merge records, phases) is in mla_params.cuh.
#pragma once
#include "common/grid_barrier.cuh"
#include "common/mla_merge.cuh"
#include "common/mla_params.cuh"
#include "common/ptx_cp_async.cuh"
#include "common/ptx_dtype.cuh"
#include "common/ptx_math.cuh"
#include "common/ptx_mma.cuh"
#include "common/smem_swizzle.cuh"

namespace mlajit_kernel {

template <typename DType_, int HEAD_DIM_CKV, int HEAD_DIM_KPE, bool CAUSAL, int NUM_STAGES,
          int KV_TILE, bool QK_SHARD, int Q_TILE>
struct MlaConfig {
  using DType = DType_;
  static constexpr int kHeadDimCkv = HEAD_DIM_CKV;
  static constexpr int kHeadDimKpe = HEAD_DIM_KPE;
  static constexpr bool kCausal = CAUSAL;
  static constexpr int kStages = NUM_STAGES;
  static constexpr int kKvTile = KV_TILE;
  static constexpr bool kQkShard = QK_SHARD;
  static constexpr int kQTile = Q_TILE;

  static constexpr int kThreads = 256;
  static constexpr int kWarpsPerGroup = 4;
  static constexpr int kGroups = 2;

  // Rows of 16-byte chunks (8 elements each).
  static constexpr int kCkvChunks = HEAD_DIM_CKV / 8;
  static constexpr int kKpeChunks = HEAD_DIM_KPE / 8;
  static constexpr int kPChunks = KV_TILE / 8;

  // QK: a warp computes 16 rows x kQkCols columns, as kQkBlocks 16x16 blocks.
  static constexpr int kQkCols = QK_SHARD ? KV_TILE / kGroups : KV_TILE;
  static constexpr int kQkBlocks = kQkCols / 16;
  // PV: a warp accumulates kPvMTiles * 16 rows x kOutDims dims, as kPvMTiles x kPvDimBlocks
  // 16x16 blocks (kPvBlocks in all). With QK_SHARD (P goes through shared memory anyway) the
  // 8 warps split PV as 2 row halves x 4 dim quarters, so each V fragment read from shared
  // memory serves two m16 row tiles: warp w of warpgroup g takes its own QK rows 16w.. and
  // those of warp w ^ 1 (row half w / 2), dim quarter 2g + w % 2. Without QK_SHARD, as 4 row
  // groups (the warps) x 2 dim halves (the warpgroups), P staying in registers.
  static constexpr bool kPvRowHalves = QK_SHARD;
  static constexpr int kPvMTiles = kPvRowHalves ? 2 : 1;
  static constexpr int kPvDimSplit = kPvRowHalves ? kWarpsPerGroup : kGroups;
  static constexpr int kOutDims = HEAD_DIM_CKV / kPvDimSplit;
  static constexpr int kPvDimBlocks = kOutDims / 16;
  static constexpr int kPvBlocks = kPvMTiles * kPvDimBlocks;
  static constexpr int kPvRows = 2 * kPvMTiles;  // accumulator rows of a thread in PV
  static constexpr int kPartnerRows = kPvRows - 2;  // of those, rows of another QK warp

  // Narrow tiles (at most 16 valid rows: decode with <= 16 heads) would leave 3 of the 4 warps
  // of each warpgroup multiplying padding. There all 8 warps share rows 0-15: QK splits the
  // KV tile's columns over kNarrowQkWarps warps (8 columns, one n8 mma block, each), PV splits
  // the output dims over all 8 warps (kNarrowPvBlocks 16-dim blocks each).
  static constexpr int kWarps = kThreads / 32;
  static constexpr int kNarrowRows = 16;
  static constexpr int kNarrowQkWarps = KV_TILE / 8 < kWarps ? KV_TILE / 8 : kWarps;
  static constexpr int kNarrowQkN8 = KV_TILE / 8 / kNarrowQkWarps;  // n8 blocks per QK warp
  static constexpr int kNarrowPvBlocks = HEAD_DIM_CKV / kWarps / 16;
#ifndef MLAJIT_DEV_NARROW_ALL_TIERS
  // Only the large tier (64-token tiles, 2 stages) takes the narrow path: on the H200 the
  // smaller tiers ran their 64-row tiles (128 heads) 7-8% slower once the narrow code was in
  // the kernel (register allocation), while their narrow tiles gained 1.6-1.8x.
  static constexpr bool kNarrowTiles = KV_TILE >= 64 && NUM_STAGES >= 2;
#else
  static constexpr bool kNarrowTiles = true;
#endif

#ifndef MLAJIT_DEV_NO_PAGE_PREFETCH
  static constexpr bool kPrefetchPageIds = true;
#else
  static constexpr bool kPrefetchPageIds = false;
#endif

  // Loaders: 8 lanes cover 128 contiguous bytes of one row; 32 rows per pass of the block.
  static constexpr int kLanesPerRow = 8;
  static constexpr int kRowsPerPass = kThreads / kLanesPerRow;
  static constexpr int kQPasses = Q_TILE / kRowsPerPass;
  static constexpr int kKvPasses = (KV_TILE + kRowsPerPass - 1) / kRowsPerPass;
  static constexpr int kCkvChunksPerLane = kCkvChunks / kLanesPerRow;
  static constexpr int kKpeChunksPerLane = (kKpeChunks + kLanesPerRow - 1) / kLanesPerRow;

  // The kpe tile of a stage is reused for the P tile (Q_TILE x KV_TILE) once QK is done.
  static constexpr int kKpePElems = KV_TILE * (HEAD_DIM_KPE > Q_TILE ? HEAD_DIM_KPE : Q_TILE);

  static_assert(Q_TILE == 16 * kWarpsPerGroup, "each warp of a warpgroup owns 16 query rows");
  static_assert(KV_TILE % (QK_SHARD ? 32 : 16) == 0, "KV tile must split into 16-token blocks");
  static_assert(!kPvRowHalves || kGroups * kPvMTiles * 16 == Q_TILE, "PV row halves cover the tile");
  static_assert(HEAD_DIM_CKV % (16 * kLanesPerRow) == 0 && HEAD_DIM_KPE % 16 == 0,
                "head dims must be multiples of 128 (ckv) and 16 (kpe)");
  static_assert(NUM_STAGES >= 1, "at least one KV stage");
  static_assert(kNarrowQkWarps * kNarrowRows <= kGroups * Q_TILE,
                "the narrow row exchange fits the row_exchange area");

  struct SharedStorage {
    union {
      struct {
        DType q_nope[Q_TILE * HEAD_DIM_CKV];
        DType q_pe[Q_TILE * HEAD_DIM_KPE];
        DType ckv[NUM_STAGES][KV_TILE * HEAD_DIM_CKV];
        DType kpe_p[NUM_STAGES][kKpePElems];
        float row_exchange[kGroups][Q_TILE];  // per-warpgroup row max, later row sum
      } attn;
      DType o[Q_TILE * HEAD_DIM_CKV];  // output staging for coalesced stores
    };
  };
  static constexpr int kSmemBytes = Q_TILE * (HEAD_DIM_CKV + HEAD_DIM_KPE) * 2 +
                                    NUM_STAGES * KV_TILE * HEAD_DIM_CKV * 2 + NUM_STAGES * kKpePElems * 2 +
                                    kGroups * Q_TILE * 4;
  static_assert(sizeof(SharedStorage) == kSmemBytes, "shared storage layout is the host's formula");
#ifdef MLAJIT_EXPECTED_SMEM_BYTES
  static_assert(sizeof(SharedStorage) == MLAJIT_EXPECTED_SMEM_BYTES,
                "the host computed a different shared-memory size for this configuration");
#endif
};

// Shared-memory addresses of the storage's regions (32-bit shared window).
template <typename C>
struct SmemMap {
  uint32_t q_nope, q_pe, ckv0, kpe_p0, o;
  float* row_exchange;

  __device__ __forceinline__ static SmemMap make(typename C::SharedStorage& s) {
    SmemMap m;
    m.q_nope = smem_address(s.attn.q_nope);
    m.q_pe = smem_address(s.attn.q_pe);
    m.ckv0 = smem_address(s.attn.ckv[0]);
    m.kpe_p0 = smem_address(s.attn.kpe_p[0]);
    m.o = smem_address(s.o);
    m.row_exchange = &s.attn.row_exchange[0][0];
    return m;
  }
  __device__ __forceinline__ uint32_t ckv(int stage) const {
    return ckv0 + stage * (C::kKvTile * C::kHeadDimCkv * 2);
  }
  __device__ __forceinline__ uint32_t kpe_p(int stage) const {
    return kpe_p0 + stage * (C::kKpePElems * 2);
  }
};

struct ThreadRole {
  int tid, lane, warp, group;  // warp: index within the warpgroup

  __device__ __forceinline__ static ThreadRole make() {
    ThreadRole r;
    r.tid = threadIdx.x;
    r.lane = r.tid & 31;
    r.warp = (r.tid >> 5) & 3;
    r.group = r.tid >> 7;
    return r;
  }
  // The same, from a read of the thread index that the compiler cannot move or merge.
  __device__ __forceinline__ static ThreadRole make_fresh() {
    uint32_t tid;
    asm volatile("mov.u32 %0, %%tid.x;" : "=r"(tid));
    ThreadRole r;
    r.tid = static_cast<int>(tid);
    r.lane = r.tid & 31;
    r.warp = (r.tid >> 5) & 3;
    r.group = r.tid >> 7;
    return r;
  }
  // Local query rows of this thread's accumulator rows j = 0, 1.
  __device__ __forceinline__ int acc_row(int j) const { return warp * 16 + (lane >> 2) + 8 * j; }
  // Local query rows of this thread's PV accumulator rows k = 2 * m-tile + j (row halves):
  // m-tile 0 is the warp's own QK rows, m-tile 1 those of warp w ^ 1.
  __device__ __forceinline__ int pv_row(int k) const {
    return 16 * (warp ^ (k >> 1)) + (lane >> 2) + 8 * (k & 1);
  }
  // Dim quarter of this warp in PV (row halves).
  __device__ __forceinline__ int pv_quarter() const { return 2 * group + (warp & 1); }
};

// What one CTA does for one work item, derived once.
struct TileContext {
  int32_t q_token_base, q_len, kv_page_base, kv_len;
  int32_t row0;          // packed row of local row 0
  int32_t rows;          // valid local rows
  int32_t kv_start;      // first token of the chunk
  int32_t kv_stop;       // one past the last token any row of the tile sees
  int32_t num_tiles;     // KV tiles in [kv_start, kv_stop)
  int32_t unmasked_end;  // tokens below this are visible to every row: no mask needed
  int32_t partial_row;
  bool narrow;           // rows <= 16: the narrow work split (MlaConfig::kNarrowRows)
  int32_t row_limit[2];  // this thread's accumulator rows see tokens < row_limit[j]
};

template <typename C>
__device__ __forceinline__ TileContext make_context(const MlaParams& p, const MlaWorkItem& item,
                                                    const ThreadRole& role) {
  TileContext t;
  const int32_t H = p.num_heads;
  t.q_token_base = item.q_token_base;
  t.q_len = item.q_len;
  t.kv_page_base = item.kv_page_base;
  t.kv_len = item.kv_len;
  t.row0 = item.packed_q_start + blockIdx.x * C::kQTile;
  t.rows = min(C::kQTile, item.q_len * H - t.row0);
  t.kv_start = item.kv_start;
  t.partial_row = item.partial_row;
  // Causal, bottom-right aligned: query token i sees tokens t <= kv_len - q_len + i.
  const int32_t shift = item.kv_len - item.q_len + 1;
  const int32_t last_token = (t.row0 + max(t.rows, 1) - 1) / H;
  t.kv_stop = C::kCausal ? min(item.kv_end, shift + last_token) : item.kv_end;
  t.unmasked_end = C::kCausal ? min(item.kv_end, shift + t.row0 / H) : item.kv_end;
  t.num_tiles = t.kv_stop > t.kv_start ? (t.kv_stop - t.kv_start + C::kKvTile - 1) / C::kKvTile : 0;
  t.narrow = C::kNarrowTiles && t.rows <= C::kNarrowRows;
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    const int local_row = t.narrow ? role.lane / 4 + 8 * j : role.acc_row(j);
    const int32_t token = (t.row0 + local_row) / H;
    t.row_limit[j] = C::kCausal ? min(item.kv_end, shift + token) : item.kv_end;
  }
  return t;
}

// Online-softmax state of this thread's two accumulator rows and its half of O.
template <typename C, int DIM_BLOCKS = C::kPvBlocks>
struct SoftmaxState {
  float o[DIM_BLOCKS][8];
  float m[2];  // running row max of the raw scores (unscaled)
  float d[2];  // this thread's share of the running row sum
  float m_pv[C::kPartnerRows > 0 ? C::kPartnerRows : 1];  // row halves: running max of pv_row(2 + j)

  __device__ __forceinline__ void init() {
#pragma unroll
    for (int b = 0; b < DIM_BLOCKS; ++b)
#pragma unroll
      for (int r = 0; r < 8; ++r) o[b][r] = 0.f;
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      m[j] = neg_inf();
      d[j] = 0.f;
    }
#pragma unroll
    for (int k = 0; k < C::kPartnerRows; ++k) m_pv[k] = neg_inf();
  }
};

// ---------------------------------------------------------------------------------------
// Stage: load_q. 64 packed rows of q_nope and q_pe into swizzled shared memory; rows past
// the request's end are zero-filled.
template <typename C>
__device__ __forceinline__ void load_q(const MlaParams& p, const SmemMap<C>& sm,
                                       const TileContext& t, const ThreadRole& role) {
  using DType = typename C::DType;
  const int lane8 = role.tid % C::kLanesPerRow;
#pragma unroll
  for (int pass = 0; pass < C::kQPasses; ++pass) {
    const int row = role.tid / C::kLanesPerRow + pass * C::kRowsPerPass;
    const bool valid = row < t.rows;
    const int32_t packed = t.row0 + (valid ? row : 0);
    const int32_t token = t.q_token_base + packed / p.num_heads;
    const int32_t head = packed % p.num_heads;
    const DType* nope = static_cast<const DType*>(p.q_nope) + token * p.q_nope_stride_token +
                        head * p.q_nope_stride_head;
    const DType* pe =
        static_cast<const DType*>(p.q_pe) + token * p.q_pe_stride_token + head * p.q_pe_stride_head;
#pragma unroll
    for (int k = 0; k < C::kCkvChunksPerLane; ++k) {
      const int chunk = lane8 + k * C::kLanesPerRow;
      cp_async_16(sm.q_nope + Swizzle<C::kCkvChunks>::byte_offset(row, chunk), nope + chunk * 8,
                  valid);
    }
#pragma unroll
    for (int k = 0; k < C::kKpeChunksPerLane; ++k) {
      const int chunk = lane8 + k * C::kLanesPerRow;
      if (chunk < C::kKpeChunks) {
        cp_async_16(sm.q_pe + Swizzle<C::kKpeChunks>::byte_offset(row, chunk), pe + chunk * 8,
                    valid);
      }
    }
  }
}

// Page id of request token `token` (the caller checks token < kv_stop).
__device__ __forceinline__ int32_t page_of(const MlaParams& p, const TileContext& t, int32_t token) {
  // Power-of-two pages (the usual case): a shift instead of a division.
  if ((p.page_size & (p.page_size - 1)) == 0) {
    return p.kv_indices[t.kv_page_base + (token >> __popc(p.page_size - 1))];
  }
  return p.kv_indices[t.kv_page_base + token / p.page_size];
}

// Page ids of one KV tile's rows, fetched a tile ahead of its copies (small pages, where every
// row of a tile may lie on its own page and the id load would otherwise stall the copies).
// One register per thread: a warp copies kRowsPerWarp rows per pass, and lane
// pass * kRowsPerWarp + i holds the id of the warp's row i of that pass; load_kv shuffles it to
// the 8 lanes copying that row.
template <typename C>
struct KvPageIds {
  static constexpr int kRowsPerWarp = 32 / C::kLanesPerRow;
  static_assert(kRowsPerWarp * C::kKvPasses <= 32, "a warp's row ids fit one register per lane");
  int32_t id;
};

template <typename C>
__device__ __forceinline__ KvPageIds<C> fetch_page_ids(const MlaParams& p, const TileContext& t,
                                                       const ThreadRole& role, int tile) {
  constexpr int kPerWarp = KvPageIds<C>::kRowsPerWarp;
  const int pass = role.lane / kPerWarp;
  const int row = (role.tid / 32) * kPerWarp + role.lane % kPerWarp + pass * C::kRowsPerPass;
  const int32_t token = t.kv_start + tile * C::kKvTile + row;
  KvPageIds<C> ids;
  ids.id = 0;
  if (pass < C::kKvPasses && row < C::kKvTile && token < t.kv_stop) ids.id = page_of(p, t, token);
  return ids;
}

// Stage: load_kv. KV tile `tile` (tokens kv_start + tile * KV_TILE ...) into stage `stage`.
// Token t of the request is slot t % page_size of page kv_indices[kv_page_base + t / page_size];
// offsets are 64-bit since page * stride_page exceeds 2^31 on large pools. With PREFETCHED the
// page ids come from `ids` (fetch_page_ids of this tile), else from kv_indices here.
template <typename C, bool PREFETCHED = false>
__device__ __forceinline__ void load_kv(const MlaParams& p, const SmemMap<C>& sm,
                                        const TileContext& t, const ThreadRole& role, int tile,
                                        int stage, KvPageIds<C> ids = KvPageIds<C>{0}) {
  using DType = typename C::DType;
  const int lane8 = role.tid % C::kLanesPerRow;
  const uint32_t ckv_dst = sm.ckv(stage);
  const uint32_t kpe_dst = sm.kpe_p(stage);
#pragma unroll
  for (int pass = 0; pass < C::kKvPasses; ++pass) {
    const int row = role.tid / C::kLanesPerRow + pass * C::kRowsPerPass;
    int32_t prefetched = 0;
    if constexpr (PREFETCHED) {
      prefetched = __shfl_sync(0xffffffffu, ids.id, pass * KvPageIds<C>::kRowsPerWarp + role.lane / C::kLanesPerRow);
    }
    if (C::kKvTile % C::kRowsPerPass == 0 || row < C::kKvTile) {
      const int32_t token = t.kv_start + tile * C::kKvTile + row;
      const bool valid = token < t.kv_stop;
      int64_t page = 0;
      int32_t slot = 0;
      if (valid) {
        // Power-of-two pages (the usual case): shift and mask instead of two divisions. Kept
        // as one branch per case: folded into selects, the division runs for every page size.
        if ((p.page_size & (p.page_size - 1)) == 0) {
          const int shift = __popc(p.page_size - 1);
          page = PREFETCHED ? prefetched : p.kv_indices[t.kv_page_base + (token >> shift)];
          slot = token & (p.page_size - 1);
        } else {
          page = PREFETCHED ? prefetched : p.kv_indices[t.kv_page_base + token / p.page_size];
          slot = token % p.page_size;
        }
      }
      const DType* ckv = static_cast<const DType*>(p.ckv) + page * p.ckv_stride_page +
                         slot * p.ckv_stride_token;
      const DType* kpe = static_cast<const DType*>(p.kpe) + page * p.kpe_stride_page +
                         slot * p.kpe_stride_token;
#pragma unroll
      for (int k = 0; k < C::kCkvChunksPerLane; ++k) {
        const int chunk = lane8 + k * C::kLanesPerRow;
        cp_async_16(ckv_dst + Swizzle<C::kCkvChunks>::byte_offset(row, chunk), ckv + chunk * 8,
                    valid);
      }
#pragma unroll
      for (int k = 0; k < C::kKpeChunksPerLane; ++k) {
        const int chunk = lane8 + k * C::kLanesPerRow;
        if (chunk < C::kKpeChunks) {
          cp_async_16(kpe_dst + Swizzle<C::kKpeChunks>::byte_offset(row, chunk), kpe + chunk * 8,
                      valid);
        }
      }
    }
  }
}

// Keeps the pipeline NUM_STAGES - 1 tiles ahead and returns once tile `tile` is in shared
// memory for every thread. With one stage there is nothing to overlap: the single buffer is
// refilled after everyone has finished with it. With PREFETCHED, `ids` holds the page ids of
// the tile loaded here and is refilled with those of the tile after it.
template <typename C, bool PREFETCHED = false>
__device__ __forceinline__ void advance_pipeline(const MlaParams& p, const SmemMap<C>& sm,
                                                 const TileContext& t, const ThreadRole& role,
                                                 int tile, KvPageIds<C>& ids) {
  if constexpr (C::kStages == 1) {
    __syncthreads();
    load_kv<C, PREFETCHED>(p, sm, t, role, tile, 0, ids);
    cp_async_commit();
    if constexpr (PREFETCHED) ids = fetch_page_ids<C>(p, t, role, tile + 1);
    cp_async_wait<0>();
    __syncthreads();
  } else {
    cp_async_wait<C::kStages - 2>();
    __syncthreads();  // tile visible to all; the stage refilled below is no longer read
    const int ahead = tile + C::kStages - 1;
    if (ahead < t.num_tiles) {
      load_kv<C, PREFETCHED>(p, sm, t, role, ahead, ahead % C::kStages, ids);
      if constexpr (PREFETCHED) ids = fetch_page_ids<C>(p, t, role, ahead + 1);
    }
    cp_async_commit();  // possibly empty: keeps the group count uniform
  }
}

// Page ids of the first tile the KV loop loads (advance_pipeline's first `ahead`).
template <typename C, bool PREFETCHED>
__device__ __forceinline__ KvPageIds<C> first_page_ids(const MlaParams& p, const TileContext& t,
                                                       const ThreadRole& role) {
  KvPageIds<C> ids{0};
  if constexpr (PREFETCHED) ids = fetch_page_ids<C>(p, t, role, C::kStages - 1);
  return ids;
}

// Byte offsets, within one swizzled operand, of the ldmatrix rows a lane supplies for the
// first swizzle period of k-steps (2 chunks each); later periods add a constant.
template <int ROW_CHUNKS>
struct FragmentAddress {
  static constexpr int kSteps = Swizzle<ROW_CHUNKS>::kPeriod / 2;
  uint32_t at[kSteps];

  __device__ __forceinline__ FragmentAddress(int row, int chunk_select) {
#pragma unroll
    for (int s = 0; s < kSteps; ++s) at[s] = Swizzle<ROW_CHUNKS>::byte_offset(row, 2 * s + chunk_select);
  }
  // Offset of k-step `step` (chunks 2 * step, 2 * step + 1).
  __device__ __forceinline__ uint32_t step(int step) const {
    return at[step % kSteps] + (step / kSteps) * (kSteps * 2 * 16);
  }
};

// s += Q[16 rows of this warp] . K[kQkBlocks x 16 tokens]^T over one operand pair
// (q_pe / kpe or q_nope / ckv), ROW_CHUNKS 16-byte chunks per row.
template <typename C, int ROW_CHUNKS>
__device__ __forceinline__ void accumulate_qk(float (&s)[C::kQkBlocks][8], uint32_t q_base,
                                              uint32_t k_base, const ThreadRole& role) {
  using DType = typename C::DType;
  const FragmentAddress<ROW_CHUNKS> q_addr(role.warp * 16 + role.lane % 16, role.lane / 16);
  const int k_col0 = C::kQkShard ? role.group * C::kQkCols : 0;
  const FragmentAddress<ROW_CHUNKS> k_addr(k_col0 + 8 * (role.lane / 16) + role.lane % 8,
                                           (role.lane % 16) / 8);
#pragma unroll
  for (int step = 0; step < ROW_CHUNKS / 2; ++step) {
    uint32_t a[4];
    ldmatrix_x4(a, q_base + q_addr.step(step));
#pragma unroll
    for (int b = 0; b < C::kQkBlocks; ++b) {
      uint32_t k[4];
      ldmatrix_x4(k, k_base + k_addr.step(step) + b * 16 * ROW_CHUNKS * 16);
      mma_16x16x16<DType>(s[b], a, k);
    }
  }
}

// Stage: compute_qk. Raw scores of this warp's 16 rows against its share of the KV tile.
template <typename C>
__device__ __forceinline__ void compute_qk(float (&s)[C::kQkBlocks][8], const SmemMap<C>& sm,
                                           int stage, const ThreadRole& role) {
#pragma unroll
  for (int b = 0; b < C::kQkBlocks; ++b)
#pragma unroll
    for (int r = 0; r < 8; ++r) s[b][r] = 0.f;
  accumulate_qk<C, C::kKpeChunks>(s, sm.q_pe, sm.kpe_p(stage), role);
  accumulate_qk<C, C::kCkvChunks>(s, sm.q_nope, sm.ckv(stage), role);
}

// Scores of tokens a row may not see (past the chunk, or in its causal future) become -inf.
template <typename C>
__device__ __forceinline__ void mask_scores(float (&s)[C::kQkBlocks][8], const TileContext& t,
                                            int tile, const ThreadRole& role) {
  const int32_t col0 = t.kv_start + tile * C::kKvTile +
                       (C::kQkShard ? role.group * C::kQkCols : 0) + 2 * (role.lane % 4);
#pragma unroll
  for (int b = 0; b < C::kQkBlocks; ++b)
#pragma unroll
    for (int r = 0; r < 8; ++r) {
      const int32_t token = col0 + 16 * b + 8 * (r / 4) + (r % 2);
      if (token >= t.row_limit[(r % 4) / 2]) s[b][r] = neg_inf();
    }
}

// Stage: update_softmax_state. New row maxima (shared across warpgroups when sharded),
// rescale of O and the row sums, and s turned into unnormalised probabilities 2^(s*c - m*c).
template <typename C>
__device__ __forceinline__ void update_softmax_state(float (&s)[C::kQkBlocks][8],
                                                     SoftmaxState<C>& st, const SmemMap<C>& sm,
                                                     float scale_log2, const ThreadRole& role) {
  float m_tile[2];
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    float mx = st.m[j];
#pragma unroll
    for (int b = 0; b < C::kQkBlocks; ++b)
      mx = fmaxf(mx, fmaxf(fmaxf(s[b][2 * j], s[b][2 * j + 1]), fmaxf(s[b][2 * j + 4], s[b][2 * j + 5])));
    m_tile[j] = quad_max(mx);
  }
  if constexpr (C::kQkShard) {
    if (role.lane % 4 == 0) {
#pragma unroll
      for (int j = 0; j < 2; ++j) sm.row_exchange[role.group * C::kQTile + role.acc_row(j)] = m_tile[j];
    }
    __syncthreads();
#pragma unroll
    for (int j = 0; j < 2; ++j)
      m_tile[j] = fmaxf(sm.row_exchange[role.acc_row(j)], sm.row_exchange[C::kQTile + role.acc_row(j)]);
  }
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    // A row that has seen nothing yet keeps m = -inf; use 0 as the base so that
    // 2^(-inf - base) = 0 rather than 2^(-inf + inf) = NaN.
    const float base = m_tile[j] == neg_inf() ? 0.f : m_tile[j] * scale_log2;
    const float rescale = fast_exp2(st.m[j] * scale_log2 - base);
    st.m[j] = m_tile[j];
    st.d[j] *= rescale;
    {  // with row halves, m-tile 0 of O holds these rows
#pragma unroll
      for (int b = 0; b < C::kPvDimBlocks; ++b) {
        st.o[b][2 * j] *= rescale;
        st.o[b][2 * j + 1] *= rescale;
        st.o[b][2 * j + 4] *= rescale;
        st.o[b][2 * j + 5] *= rescale;
      }
    }
#pragma unroll
    for (int b = 0; b < C::kQkBlocks; ++b) {
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        s[b][2 * j + r] = fast_exp2(s[b][2 * j + r] * scale_log2 - base);
        s[b][2 * j + 4 + r] = fast_exp2(s[b][2 * j + 4 + r] * scale_log2 - base);
        st.d[j] += s[b][2 * j + r] + s[b][2 * j + 4 + r];
      }
    }
  }
  if constexpr (C::kPvRowHalves) {
    // M-tile 1 of O holds rows of QK warp w ^ 1: their new maxima are the same max of the
    // two exchanged values (each already holds the old max), so the rescale factors follow
    // here without another exchange. The reads precede compute_pv's barrier.
#pragma unroll
    for (int j = 0; j < C::kPartnerRows; ++j) {
      const int row = role.pv_row(2 + j);
      const float mn = fmaxf(sm.row_exchange[row], sm.row_exchange[C::kQTile + row]);
      const float base = mn == neg_inf() ? 0.f : mn * scale_log2;
      const float rescale = fast_exp2(st.m_pv[j] * scale_log2 - base);
      st.m_pv[j] = mn;
#pragma unroll
      for (int b = 0; b < C::kPvDimBlocks; ++b) {
        float(&o)[8] = st.o[C::kPvDimBlocks + b];
        o[2 * j] *= rescale;
        o[2 * j + 1] *= rescale;
        o[2 * j + 4] *= rescale;
        o[2 * j + 5] *= rescale;
      }
    }
  }
}

// o += P(16 rows x 16 tokens, fragment p) . ckv[kv_row0 .. +16, this warpgroup's dims].
template <typename C, int DIM_BLOCKS = C::kPvBlocks>
__device__ __forceinline__ void accumulate_pv_block(SoftmaxState<C, DIM_BLOCKS>& st, const uint32_t (&p)[4],
                                                    uint32_t v_base, int kv_row0,
                                                    const FragmentAddress<C::kCkvChunks>& v_addr) {
  using DType = typename C::DType;
  const uint32_t block_base = v_base + kv_row0 * (C::kCkvChunks * 16);
#pragma unroll
  for (int b = 0; b < DIM_BLOCKS; ++b) {
    uint32_t v[4];
    ldmatrix_x4_trans(v, block_base + v_addr.step(b));
    mma_16x16x16<DType>(st.o[b], p, v);
  }
}

// compute_pv as 4 row groups (warps) x 2 dim halves (warpgroups). With QK_SHARD the other
// warpgroup's probabilities come through shared memory (the stage's kpe buffer, free once both
// warpgroups are past the row-max exchange).
template <typename C>
__device__ __forceinline__ void compute_pv_split_dims(const float (&s)[C::kQkBlocks][8], SoftmaxState<C>& st,
                                                      const SmemMap<C>& sm, int stage, const ThreadRole& role) {
  using DType = typename C::DType;
  using PSwizzle = Swizzle<(C::kPChunks < 2 ? 2 : C::kPChunks)>;
  const uint32_t v_base = sm.ckv(stage);
  // ldmatrix.trans rows are tokens, chunks this warpgroup's output dims.
  const FragmentAddress<C::kCkvChunks> v_addr(role.lane % 16,
                                              role.group * (C::kCkvChunks / 2) + role.lane / 16);
  const int own_col0 = C::kQkShard ? role.group * C::kQkCols : 0;
  uint32_t p[C::kQkBlocks][4];
#pragma unroll
  for (int b = 0; b < C::kQkBlocks; ++b) pack_fragment<DType>(p[b], s[b]);
  if constexpr (C::kQkShard) {
    const uint32_t p_base = sm.kpe_p(stage);
    const int prow = role.warp * 16 + role.lane % 16;
#pragma unroll
    for (int b = 0; b < C::kQkBlocks; ++b)
      stmatrix_x4(p_base + PSwizzle::byte_offset(prow, (own_col0 + 16 * b) / 8 + role.lane / 16), p[b]);
  }
#pragma unroll
  for (int b = 0; b < C::kQkBlocks; ++b) accumulate_pv_block<C>(st, p[b], v_base, own_col0 + 16 * b, v_addr);
  if constexpr (C::kQkShard) {
    __syncthreads();  // the other warpgroup's P is in shared memory
    const uint32_t p_base = sm.kpe_p(stage);
    const int other_col0 = (1 - role.group) * C::kQkCols;
    const int prow = role.warp * 16 + role.lane % 16;
#pragma unroll
    for (int b = 0; b < C::kQkBlocks; ++b) {
      uint32_t q[4];
      ldmatrix_x4(q, p_base + PSwizzle::byte_offset(prow, (other_col0 + 16 * b) / 8 + role.lane / 16));
      accumulate_pv_block<C>(st, q, v_base, other_col0 + 16 * b, v_addr);
    }
  }
}


// Row halves: o += P[rows 16w.., 16(w ^ 1).., tokens 16kk..+16] . V[those tokens, this warp's
// dim quarter]; each V fragment serves both m16 row tiles.
template <typename C>
__device__ __forceinline__ void accumulate_pv_halves(SoftmaxState<C>& st, uint32_t p_base, uint32_t v_base,
                                                     const FragmentAddress<C::kCkvChunks>& v_addr, int kk,
                                                     const ThreadRole& role) {
  using DType = typename C::DType;
  using PSwizzle = Swizzle<(C::kPChunks < 2 ? 2 : C::kPChunks)>;
  uint32_t a[C::kPvMTiles][4];
#pragma unroll
  for (int i = 0; i < C::kPvMTiles; ++i)
    ldmatrix_x4(a[i], p_base + PSwizzle::byte_offset(16 * (role.warp ^ i) + role.lane % 16, 2 * kk + role.lane / 16));
  const uint32_t block_base = v_base + kk * 16 * (C::kCkvChunks * 16);
#pragma unroll
  for (int b = 0; b < C::kPvDimBlocks; ++b) {
    uint32_t v[4];
    ldmatrix_x4_trans(v, block_base + v_addr.step(b));
#pragma unroll
    for (int i = 0; i < C::kPvMTiles; ++i) mma_16x16x16<DType>(st.o[i * C::kPvDimBlocks + b], a[i], v);
  }
}

// Stage: compute_pv. With QK_SHARD P goes through shared memory (the stage's kpe buffer, free
// once all warps are past the row-max exchange) and PV runs as 2 row halves x 4 dim quarters.
template <typename C>
__device__ __forceinline__ void compute_pv(const float (&s)[C::kQkBlocks][8], SoftmaxState<C>& st,
                                           const SmemMap<C>& sm, int stage, const ThreadRole& role) {
  using DType = typename C::DType;
  using PSwizzle = Swizzle<(C::kPChunks < 2 ? 2 : C::kPChunks)>;
  const uint32_t v_base = sm.ckv(stage);
  if constexpr (C::kPvRowHalves) {
    // All of P goes through shared memory; warp (g, w) then multiplies rows 16w.. and
    // 16(w ^ 1).. (two m16 tiles) by dim quarter 2g + w % 2 of V, each V fragment serving both.
    const uint32_t p_base = sm.kpe_p(stage);
    const int own_col0 = role.group * C::kQkCols;
    const int prow = role.warp * 16 + role.lane % 16;
#pragma unroll
    for (int b = 0; b < C::kQkBlocks; ++b) {
      uint32_t p[4];
      pack_fragment<DType>(p, s[b]);
      stmatrix_x4(p_base + PSwizzle::byte_offset(prow, (own_col0 + 16 * b) / 8 + role.lane / 16), p);
    }
    __syncthreads();  // all of P is in shared memory
    const FragmentAddress<C::kCkvChunks> v_addr(role.lane % 16,
                                                role.pv_quarter() * (C::kCkvChunks / C::kPvDimSplit) + role.lane / 16);
    // Fully unrolled, the causal tier-1 kernel spilled 12 bytes (255 registers); two k-steps
    // per iteration keep it at 243 without spills (H200: 1-2% slower than full unrolling on
    // the full-attention shapes, which do not spill).
    if constexpr (C::kCausal) {
#pragma unroll 2
      for (int kk = 0; kk < C::kKvTile / 16; ++kk) accumulate_pv_halves<C>(st, p_base, v_base, v_addr, kk, role);
    } else {
#pragma unroll
      for (int kk = 0; kk < C::kKvTile / 16; ++kk) accumulate_pv_halves<C>(st, p_base, v_base, v_addr, kk, role);
    }
  } else {
    compute_pv_split_dims<C>(s, st, sm, stage, role);
  }
}
// Stage: normalize. Completes the row sums (quad, then across warpgroups), scales O by 1/d
// and returns the base-2 LSE of each accumulator row (-inf for rows that saw nothing).
template <typename C>
__device__ __forceinline__ void normalize(SoftmaxState<C>& st, const SmemMap<C>& sm,
                                          float scale_log2, float (&lse)[C::kPvRows], const ThreadRole& role) {
  float d[2];
#pragma unroll
  for (int j = 0; j < 2; ++j) d[j] = quad_sum(st.d[j]);
  if constexpr (C::kQkShard) {
    // The last reads of the max exchange are separated from these writes by compute_pv's barrier.
    if (role.lane % 4 == 0) {
#pragma unroll
      for (int j = 0; j < 2; ++j) sm.row_exchange[role.group * C::kQTile + role.acc_row(j)] = d[j];
    }
    __syncthreads();
  }
  // Row k of the PV accumulators: 0, 1 this warp's QK rows, 2, 3 (row halves) warp w ^ 1's.
#pragma unroll
  for (int k = 0; k < C::kPvRows; ++k) {
    const int j = k & 1;
    float dk = d[j];
    if constexpr (C::kQkShard) {
      const int row = role.pv_row(k);
      dk = sm.row_exchange[row] + sm.row_exchange[C::kQTile + row];
    }
    const float mk = k < 2 ? st.m[j] : st.m_pv[k < 2 ? 0 : k - 2];
    const bool empty = mk == neg_inf() || !(dk > 0.f);
    const float inv = empty ? 0.f : 1.f / dk;
    lse[k] = empty ? neg_inf() : mk * scale_log2 + fast_log2(dk);
#pragma unroll
    for (int b = 0; b < C::kPvDimBlocks; ++b) {
      float(&o)[8] = st.o[(k >> 1) * C::kPvDimBlocks + b];
      o[2 * j] *= inv;
      o[2 * j + 1] *= inv;
      o[2 * j + 4] *= inv;
      o[2 * j + 5] *= inv;
    }
  }
}

// ---------------------------------------------------------------------------------------
// Narrow tiles (at most 16 valid rows). Every warp works on local rows 0-15; warp n of the
// CTA (0..7) owns KV columns [8 n, 8 n + 8) in QK (when n < kNarrowQkWarps) and output dims
// [n CKV / 8, (n + 1) CKV / 8) in PV. The accumulator rows of a thread are lane / 4 and
// lane / 4 + 8, in QK (m16n8 blocks: [0,1] row lane / 4, [2,3] row lane / 4 + 8) and in PV.
template <typename C>
using NarrowState = SoftmaxState<C, C::kNarrowPvBlocks>;

__device__ __forceinline__ int cta_warp(const ThreadRole& role) { return role.tid / 32; }

template <typename C>
__device__ __forceinline__ bool narrow_qk_warp(const ThreadRole& role) {
  return C::kNarrowQkWarps == C::kWarps || cta_warp(role) < C::kNarrowQkWarps;
}

template <typename C, int ROW_CHUNKS>
__device__ __forceinline__ void accumulate_qk_narrow(float (&s)[C::kNarrowQkN8][4], uint32_t q_base,
                                                     uint32_t k_base, const ThreadRole& role) {
  using DType = typename C::DType;
  const FragmentAddress<ROW_CHUNKS> q_addr(role.lane % 16, role.lane / 16);
  // ldmatrix.x2: lanes 0-7 give tokens 0-7 of the k-step's first chunk, lanes 8-15 the second.
  const FragmentAddress<ROW_CHUNKS> k_addr(cta_warp(role) * 8 * C::kNarrowQkN8 + role.lane % 8,
                                           (role.lane / 8) % 2);
#pragma unroll
  for (int step = 0; step < ROW_CHUNKS / 2; ++step) {
    uint32_t a[4];
    ldmatrix_x4(a, q_base + q_addr.step(step));
#pragma unroll
    for (int b = 0; b < C::kNarrowQkN8; ++b) {
      uint32_t k[2];
      ldmatrix_x2(k, k_base + k_addr.step(step) + b * 8 * ROW_CHUNKS * 16);
      mma_16x8x16<DType>(s[b], a, k[0], k[1]);
    }
  }
}

template <typename C>
__device__ __forceinline__ void compute_qk_narrow(float (&s)[C::kNarrowQkN8][4], const SmemMap<C>& sm,
                                                  int stage, const ThreadRole& role) {
#pragma unroll
  for (int b = 0; b < C::kNarrowQkN8; ++b)
#pragma unroll
    for (int r = 0; r < 4; ++r) s[b][r] = 0.f;
  accumulate_qk_narrow<C, C::kKpeChunks>(s, sm.q_pe, sm.kpe_p(stage), role);
  accumulate_qk_narrow<C, C::kCkvChunks>(s, sm.q_nope, sm.ckv(stage), role);
}

template <typename C>
__device__ __forceinline__ void mask_scores_narrow(float (&s)[C::kNarrowQkN8][4], const TileContext& t,
                                                   int tile, const ThreadRole& role) {
  const int32_t col0 = t.kv_start + tile * C::kKvTile + cta_warp(role) * 8 * C::kNarrowQkN8 +
                       2 * (role.lane % 4);
#pragma unroll
  for (int b = 0; b < C::kNarrowQkN8; ++b)
#pragma unroll
    for (int r = 0; r < 4; ++r)
      if (col0 + 8 * b + (r % 2) >= t.row_limit[r / 2]) s[b][r] = neg_inf();
}

// Row maxima of all QK warps through shared memory, rescale of O and the row sums, and the
// probabilities of this warp's columns into the stage's P tile (rows 0-15).
template <typename C>
__device__ __forceinline__ void update_softmax_narrow(float (&s)[C::kNarrowQkN8][4], NarrowState<C>& st,
                                                      const SmemMap<C>& sm, int stage, float scale_log2,
                                                      const ThreadRole& role) {
  using DType = typename C::DType;
  const int w8 = cta_warp(role);
  const bool qk_warp = narrow_qk_warp<C>(role);
  if (qk_warp) {
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      float mx = neg_inf();
#pragma unroll
      for (int b = 0; b < C::kNarrowQkN8; ++b) mx = fmaxf(mx, fmaxf(s[b][2 * j], s[b][2 * j + 1]));
      mx = quad_max(mx);
      if (role.lane % 4 == 0) sm.row_exchange[w8 * 16 + role.lane / 4 + 8 * j] = mx;
    }
  }
  __syncthreads();
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    float m_tile = st.m[j];
#pragma unroll
    for (int w = 0; w < C::kNarrowQkWarps; ++w)
      m_tile = fmaxf(m_tile, sm.row_exchange[w * 16 + role.lane / 4 + 8 * j]);
    const float base = m_tile == neg_inf() ? 0.f : m_tile * scale_log2;
    const float rescale = fast_exp2(st.m[j] * scale_log2 - base);
    st.m[j] = m_tile;
    st.d[j] *= rescale;
#pragma unroll
    for (int b = 0; b < C::kNarrowPvBlocks; ++b) {
      st.o[b][2 * j] *= rescale;
      st.o[b][2 * j + 1] *= rescale;
      st.o[b][2 * j + 4] *= rescale;
      st.o[b][2 * j + 5] *= rescale;
    }
    if (qk_warp) {
#pragma unroll
      for (int b = 0; b < C::kNarrowQkN8; ++b) {
        s[b][2 * j] = fast_exp2(s[b][2 * j] * scale_log2 - base);
        s[b][2 * j + 1] = fast_exp2(s[b][2 * j + 1] * scale_log2 - base);
        st.d[j] += s[b][2 * j] + s[b][2 * j + 1];
      }
    }
  }
  if (qk_warp) {
    using PSwizzle = Swizzle<(C::kPChunks < 2 ? 2 : C::kPChunks)>;
    const uint32_t p_base = sm.kpe_p(stage);  // free: every warp is past QK (barrier above)
#pragma unroll
    for (int b = 0; b < C::kNarrowQkN8; ++b) {
      const int chunk = w8 * C::kNarrowQkN8 + b;
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const uint32_t addr = p_base + PSwizzle::byte_offset(role.lane / 4 + 8 * j, chunk) + 4 * (role.lane % 4);
        const uint32_t v = Dtype16<DType>::pack(s[b][2 * j], s[b][2 * j + 1]);
        asm volatile("st.shared.b32 [%0], %1;" ::"r"(addr), "r"(v) : "memory");
      }
    }
  }
}

// o(16 rows x this warp's dims) += P(16 x KV_TILE, from shared memory) . ckv.
template <typename C>
__device__ __forceinline__ void compute_pv_narrow(NarrowState<C>& st, const SmemMap<C>& sm, int stage,
                                                  const ThreadRole& role) {
  using PSwizzle = Swizzle<(C::kPChunks < 2 ? 2 : C::kPChunks)>;
  __syncthreads();  // every warp's P is in shared memory
  const FragmentAddress<C::kCkvChunks> v_addr(role.lane % 16,
                                              cta_warp(role) * (C::kCkvChunks / C::kWarps) + role.lane / 16);
  const uint32_t p_base = sm.kpe_p(stage);
#pragma unroll
  for (int kk = 0; kk < C::kKvTile / 16; ++kk) {
    uint32_t p[4];
    ldmatrix_x4(p, p_base + PSwizzle::byte_offset(role.lane % 16, 2 * kk + role.lane / 16));
    accumulate_pv_block<C, C::kNarrowPvBlocks>(st, p, sm.ckv(stage), 16 * kk, v_addr);
  }
}

// Row sums over the QK warps, then as normalize.
template <typename C>
__device__ __forceinline__ void normalize_narrow(NarrowState<C>& st, const SmemMap<C>& sm,
                                                 float scale_log2, float (&lse)[2], const ThreadRole& role) {
  // The last reads of the max exchange are separated from these writes by the P barrier.
  if (narrow_qk_warp<C>(role)) {
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const float d = quad_sum(st.d[j]);
      if (role.lane % 4 == 0) sm.row_exchange[cta_warp(role) * 16 + role.lane / 4 + 8 * j] = d;
    }
  }
  __syncthreads();
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    float d = 0.f;
#pragma unroll
    for (int w = 0; w < C::kNarrowQkWarps; ++w) d += sm.row_exchange[w * 16 + role.lane / 4 + 8 * j];
    const bool empty = st.m[j] == neg_inf() || !(d > 0.f);
    const float inv = empty ? 0.f : 1.f / d;
    lse[j] = empty ? neg_inf() : st.m[j] * scale_log2 + fast_log2(d);
#pragma unroll
    for (int b = 0; b < C::kNarrowPvBlocks; ++b) {
      st.o[b][2 * j] *= inv;
      st.o[b][2 * j + 1] *= inv;
      st.o[b][2 * j + 4] *= inv;
      st.o[b][2 * j + 5] *= inv;
    }
  }
}

// Stage: write_output. O goes through shared memory so that global stores are whole 128-byte
// rows; the final output or the partial buffer, and the LSE (written by warpgroup 0).
template <typename C, bool NARROW>
__device__ __forceinline__ void write_output(const MlaParams& p,
                                             SoftmaxState<C, NARROW ? C::kNarrowPvBlocks : C::kPvBlocks>& st,
                                             const float (&lse)[NARROW ? 2 : C::kPvRows], const SmemMap<C>& sm,
                                             const TileContext& t, const ThreadRole& role) {
  using DType = typename C::DType;
  using OSwizzle = Swizzle<C::kCkvChunks>;
  __syncthreads();  // everyone is done with Q / KV, which the staging area overlays
  // The staging addresses are derived from a fresh read of the thread index: derived from
  // `role`, the compiler hoists all of them to the kernel's start and, at 255 registers in the
  // wide tier-1 loop, keeps them in local memory.
  const ThreadRole fresh = ThreadRole::make_fresh();
  constexpr bool kHalves = !NARROW && C::kPvRowHalves;
  constexpr int kDimBlocks = NARROW ? C::kNarrowPvBlocks : C::kPvDimBlocks;
  constexpr int kMTiles = NARROW ? 1 : C::kPvMTiles;
  const int ochunk0 = NARROW    ? cta_warp(fresh) * (C::kCkvChunks / C::kWarps)
                      : kHalves ? fresh.pv_quarter() * (C::kCkvChunks / C::kPvDimSplit)
                                : fresh.group * (C::kCkvChunks / 2);
#pragma unroll
  for (int i = 0; i < kMTiles; ++i) {
    // M-tile i holds the rows of warp w ^ i (row halves; i = 0 only otherwise).
    const int orow = NARROW ? fresh.lane % 16 : (fresh.warp ^ i) * 16 + fresh.lane % 16;
#pragma unroll
    for (int b = 0; b < kDimBlocks; ++b) {
      uint32_t packed[4];
      pack_fragment<DType>(packed, st.o[i * kDimBlocks + b]);
      stmatrix_x4(sm.o + OSwizzle::byte_offset(orow, ochunk0 + 2 * b + role.lane / 16), packed);
    }
  }
  const bool partial = t.partial_row >= 0;
  const int32_t partial_row0 = t.partial_row + blockIdx.x * C::kQTile;
  // lse[0], lse[1] are the rows of the thread's own QK accumulators (acc_row) in the wide modes.
  if ((NARROW ? cta_warp(role) == 0 : role.group == 0) && role.lane % 4 == 0) {
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const int row = NARROW ? role.lane / 4 + 8 * j : role.acc_row(j);
      if (row < t.rows) {
        if (partial) {
          p.partial_lse[partial_row0 + row] = lse[j];
        } else {
          write_final_lse(p, t.q_token_base, t.row0 + row, lse[j]);
        }
      }
    }
  }
  __syncthreads();
  const int lane8 = role.tid % C::kLanesPerRow;
#pragma unroll
  for (int pass = 0; pass < C::kQPasses; ++pass) {
    const int row = role.tid / C::kLanesPerRow + pass * C::kRowsPerPass;
    if (row < t.rows) {
      DType* dst = partial ? static_cast<DType*>(p.partial_o) +
                                 static_cast<int64_t>(partial_row0 + row) * C::kHeadDimCkv
                           : static_cast<DType*>(p.out) + final_row_offset(p, t.q_token_base, t.row0 + row);
#pragma unroll
      for (int k = 0; k < C::kCkvChunksPerLane; ++k) {
        const int chunk = lane8 + k * C::kLanesPerRow;
        Chunk16 v;
        asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];"
                     : "=r"(v.w[0]), "=r"(v.w[1]), "=r"(v.w[2]), "=r"(v.w[3])
                     : "r"(sm.o + OSwizzle::byte_offset(row, chunk)));
        *reinterpret_cast<Chunk16*>(dst + chunk * 8) = v;
      }
    }
  }
}

// The KV loop of a narrow tile (rows <= 16), normalisation and output.
template <typename C, bool PREFETCHED>
__device__ __forceinline__ void attend_narrow(const MlaParams& p, const SmemMap<C>& sm,
                                                   const TileContext& t) {
  // Addresses derived from the thread index are recomputed per work item: derived from the
  // kernel's ThreadRole they are hoisted to its start, stay live across every KV loop copy and
  // spill at 255 registers (and the wide loop ran 5% slower with them).
  const ThreadRole role = ThreadRole::make_fresh();
  NarrowState<C> st;
  st.init();
  KvPageIds<C> ids = first_page_ids<C, PREFETCHED>(p, t, role);
#pragma unroll 1
  for (int tile = 0; tile < t.num_tiles; ++tile) {
    advance_pipeline<C, PREFETCHED>(p, sm, t, role, tile, ids);
    const int stage = tile % C::kStages;
    float s[C::kNarrowQkN8][4];
    if (narrow_qk_warp<C>(role)) {
      compute_qk_narrow<C>(s, sm, stage, role);
      if (t.kv_start + (tile + 1) * C::kKvTile > t.unmasked_end) mask_scores_narrow<C>(s, t, tile, role);
    }
    update_softmax_narrow<C>(s, st, sm, stage, p.sm_scale_log2, role);
    compute_pv_narrow<C>(st, sm, stage, role);
  }
  cp_async_wait<0>();
  float lse[2];
  normalize_narrow<C>(st, sm, p.sm_scale_log2, lse, role);
  write_output<C, true>(p, st, lse, sm, t, role);
}

// The KV loop of a full tile, normalisation and output.
template <typename C, bool PREFETCHED>
__device__ __forceinline__ void attend_wide(const MlaParams& p, const SmemMap<C>& sm,
                                            const TileContext& t) {
  // Addresses derived from the thread index are recomputed per work item: derived from the
  // kernel's ThreadRole they are hoisted to its start, stay live across every KV loop copy and
  // spill at 255 registers (and the wide loop ran 5% slower with them).
  const ThreadRole role = ThreadRole::make_fresh();
  SoftmaxState<C> st;
  st.init();
  KvPageIds<C> ids = first_page_ids<C, PREFETCHED>(p, t, role);
#pragma unroll 1
  for (int tile = 0; tile < t.num_tiles; ++tile) {
    advance_pipeline<C, PREFETCHED>(p, sm, t, role, tile, ids);
    const int stage = tile % C::kStages;
    float s[C::kQkBlocks][8];
    compute_qk<C>(s, sm, stage, role);
    if (t.kv_start + (tile + 1) * C::kKvTile > t.unmasked_end) mask_scores<C>(s, t, tile, role);
    update_softmax_state<C>(s, st, sm, p.sm_scale_log2, role);
    compute_pv<C>(s, st, sm, stage, role);
  }
  cp_async_wait<0>();
  float lse[C::kPvRows];
  normalize<C>(st, sm, p.sm_scale_log2, lse, role);
  write_output<C, false>(p, st, lse, sm, t, role);
}

// One work item: this CTA's 64 rows of a query tile against one KV chunk.
template <typename C>
__device__ __forceinline__ void attend_tile(const MlaParams& p, const SmemMap<C>& sm,
                                            const MlaWorkItem& item, const ThreadRole& role) {
  const TileContext t = make_context<C>(p, item, role);
  if (t.rows <= 0) return;  // the second CTA of a pair whose tile is short
  __syncthreads();  // the previous item's output staging has been read
  if (t.num_tiles > 0) {
    load_q<C>(p, sm, t, role);  // joins the first KV tile's cp.async group
#pragma unroll
    for (int tile = 0; tile < C::kStages - 1; ++tile) {
      if (tile < t.num_tiles) load_kv<C>(p, sm, t, role, tile, tile);
      cp_async_commit();
    }
  }
  // Pages shorter than a KV tile: every row may need its own page id, so the ids are fetched
  // a tile ahead (a second copy of the KV loop; the usual large pages keep the plain one).
  const bool small_pages = C::kPrefetchPageIds && p.page_size < C::kKvTile;
  if (C::kNarrowTiles && t.narrow) {
    if (small_pages) {
      attend_narrow<C, C::kPrefetchPageIds>(p, sm, t);
    } else {
      attend_narrow<C, false>(p, sm, t);
    }
  } else {
    if (small_pages) {
      attend_wide<C, C::kPrefetchPageIds>(p, sm, t);
    } else {
      attend_wide<C, false>(p, sm, t);
    }
  }
}

template <typename Config>
__global__ void __launch_bounds__(256, 1) mla_fa2_kernel(const __grid_constant__ MlaParams params) {
  extern __shared__ __align__(128) unsigned char mla_smem[];
  auto& storage = *reinterpret_cast<typename Config::SharedStorage*>(mla_smem);
  const ThreadRole role = ThreadRole::make();
  if (params.phase != 2) {
    const SmemMap<Config> sm = SmemMap<Config>::make(storage);
    const int32_t first = params.work_indptr[blockIdx.y];
    const int32_t last = params.work_indptr[blockIdx.y + 1];
#pragma unroll 1
    for (int32_t w = first; w < last; ++w) attend_tile<Config>(params, sm, params.work_items[w], role);
  }
  if (params.phase == 0) grid_barrier(params.barrier, params.barrier + 1, gridDim.x * gridDim.y);
  if (params.phase != 1) {
    merge_partials<typename Config::DType, Config::kHeadDimCkv, Config::kThreads>(params);
  }
}

}  // namespace mlajit_kernel
