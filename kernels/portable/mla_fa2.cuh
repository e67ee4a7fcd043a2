// The MLA paged-attention kernel, FA2 style (after FlashInfer's BatchMLAPagedAttentionKernel).
//
// One CTA of 256 threads = 2 warpgroups x 4 warps. A CTA owns Q_TILE = 64 packed query rows
// (row r = token * num_heads + head). How the 8 warps share those rows is the tile's row
// layout (one KV loop, `attend`, runs either):
//  - WideRows (any tile): warp w of either warpgroup owns rows 16w..16w+15 in QK. With
//    QK_SHARD the two warpgroups take one half of the KV tile's columns each and exchange row
//    maxima and P through shared memory; without it both compute the whole (small) tile. PV:
//    with QK_SHARD all of P goes through shared memory and warp w of warpgroup g produces rows
//    16w.. and 16(w ^ 1).. x dim quarter 2g + w % 2 (each V fragment serves two m16 row
//    tiles); without it warpgroup g produces output dims [g * CKV / 2, (g + 1) * CKV / 2) of
//    its warp's 16 rows. Either way a thread holds 128 fp32 accumulators of O at CKV = 512.
//  - NarrowRows (tiles of at most 16 valid rows: decode with <= 16 heads): all 8 warps share
//    rows 0-15, splitting the KV tile's columns in QK and the output dims in PV.
//  - KV arrives through a NUM_STAGES-deep cp.async pipeline over the paged cache (KvRing). An
//    e4m3 cache lands in the top half of its stage and is dequantized in place (dequantize_kv).
//  - NarrowStreams (tiles of at most 16 rows over an e4m3 cache with per-tensor scales,
//    narrow_streams.cuh): the two
//    warpgroups take alternate KV tiles as two independent streams, read the codes and
//    convert them in registers, and merge their softmax states at the end.
// The host contract (work items, merge records, phases) is in mla_params.cuh.
#pragma once
#include "common/fp8_dequant.cuh"
#include "common/grid_barrier.cuh"
#include "common/mla_merge.cuh"
#include "common/mla_params.cuh"
#include "common/ptx_cp_async.cuh"
#include "common/ptx_dtype.cuh"
#include "common/ptx_math.cuh"
#include "common/ptx_mma.cuh"
#include "common/smem_swizzle.cuh"
#include "common/work_tile.cuh"

namespace mlajit_kernel {

template <typename A, typename B>
struct SameType {
  static constexpr bool value = false;
};
template <typename A>
struct SameType<A, A> {
  static constexpr bool value = true;
};

template <bool CONDITION, typename IfTrue, typename IfFalse>
struct Conditional {
  using type = IfTrue;
};
template <typename IfTrue, typename IfFalse>
struct Conditional<false, IfTrue, IfFalse> {
  using type = IfFalse;
};

// The last two parameters are code paths a spec can leave out (each costs a copy of the KV
// loop in the program); the host chooses them (src/family/portable).
//  - PAGE_IDS_AHEAD: each KV tile's page ids are fetched a tile ahead of its copies, into
//    registers. Worth it when pages are shorter than the KV tile (every row of a tile may lie
//    on its own page, and the id load would otherwise stall the copies): on the H200 page 1
//    ran 19-25% faster with it; page sizes >= KV tile gain nothing. Either way is correct for
//    every page size.
//  - NARROW_TILES: tiles of at most kNarrowRows valid rows take the NarrowRows layout (else the
//    64-row layout computes them too, correct and slower). Either way is correct for every
//    tile; the host leaves it out where no tile can be that small, and on tiers where it
//    slowed the 64-row tiles more than it helped the narrow ones.
template <typename QType_, typename KVType_, typename OType_, int HEAD_DIM_CKV, int HEAD_DIM_KPE,
          int NUM_STAGES, int KV_TILE, bool QK_SHARD, int Q_TILE,
          bool PAGE_IDS_AHEAD, bool NARROW_TILES>
struct MlaConfig {
  using QType = QType_;
  using KVType = KVType_;  // as stored in the cache
  using OType = OType_;
  // mma.sync multiplies Q by K and P by V in one 16-bit type, the queries' (P is rounded to
  // it); an e4m3 cache is dequantized to it in shared memory.
  using MmaType = QType_;
  // DeepSeek-V3.2's cache: ckv codes with a scale per token and 128 values (kept beside the
  // stages: SmemMap::token_scales), kpe in Q's type.
  static constexpr bool kTokenScales = SameType<KVType_, e4m3_token128_t>::value;
  static constexpr bool kFp8Kv = SameType<KVType_, e4m3_t>::value || kTokenScales;
  using KpeType = typename Conditional<kTokenScales, QType_, KVType_>::type;  // as stored
  static_assert(kFp8Kv || SameType<QType_, KVType_>::value,
                "mma.sync takes both operands in one 16-bit type: a 16-bit KVType must be QType "
                "(bf16_t or f16_t)");
  static_assert(sizeof(QType_) == 2 && sizeof(OType_) == 2,
                "ldmatrix/stmatrix move 16-bit elements: QType and OType are bf16_t or f16_t");

  static constexpr int kHeadDimCkv = HEAD_DIM_CKV;
  static constexpr int kHeadDimKpe = HEAD_DIM_KPE;
  static constexpr int kStages = NUM_STAGES;
  static constexpr int kKvTile = KV_TILE;
  static constexpr bool kQkShard = QK_SHARD;
  static constexpr int kQTile = Q_TILE;
  static constexpr bool kPageIdsAhead = PAGE_IDS_AHEAD;
  static constexpr bool kNarrowTiles = NARROW_TILES;
  // Narrow tiles over an e4m3 cache run as two streams reading codes (narrow_streams.cuh)
  // where two 16-bit stages hold their four stages of codes; else they expand the codes.
  // Not over per-token scales: the streams scale scores and O by one factor per operand.
  static constexpr bool kNarrowStreams =
      kNarrowTiles && kFp8Kv && !kTokenScales && NUM_STAGES == 2 && KV_TILE % 32 == 0;

  static constexpr int kThreads = 256;
  static constexpr int kWarpsPerGroup = 4;
  static constexpr int kGroups = 2;
  static constexpr int kWarps = kThreads / 32;

  // Rows of 16-byte chunks. Q, the KV tiles and P share one element size (MmaType's), O may not.
  static constexpr int kChunkElems = 16 / static_cast<int>(sizeof(MmaType));
  static constexpr int kOChunkElems = 16 / static_cast<int>(sizeof(OType_));
  static constexpr int kCkvChunks = HEAD_DIM_CKV / kChunkElems;
  static constexpr int kKpeChunks = HEAD_DIM_KPE / kChunkElems;
  static constexpr int kPChunks = KV_TILE / kChunkElems;
  static constexpr int kOChunks = HEAD_DIM_CKV / kOChunkElems;

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

  // Narrow tiles: QK splits the KV tile's columns over kNarrowQkWarps warps (8 columns, one
  // n8 mma block, each), PV splits the output dims over all 8 warps (kNarrowPvBlocks 16-dim
  // blocks each).
  static constexpr int kNarrowRows = 16;
  static constexpr int kNarrowQkWarps = KV_TILE / 8 < kWarps ? KV_TILE / 8 : kWarps;
  static constexpr int kNarrowQkN8 = KV_TILE / 8 / kNarrowQkWarps;  // n8 blocks per QK warp
  static constexpr int kNarrowPvBlocks = HEAD_DIM_CKV / kWarps / 16;

  // Loaders: 8 lanes cover 128 contiguous bytes of one row; 32 rows per pass of the block (Q
  // and O; a KV ring says its own, KvLoaders).
  static constexpr int kLanesPerRow = 8;
  static constexpr int kRowsPerPass = kThreads / kLanesPerRow;
  static constexpr int kQPasses = Q_TILE / kRowsPerPass;
  static constexpr int kCkvChunksPerLane = kCkvChunks / kLanesPerRow;
  static constexpr int kKpeChunksPerLane = (kKpeChunks + kLanesPerRow - 1) / kLanesPerRow;
  // The KV cache's rows as loaded: 16-byte chunks of its stored element (the 16-bit tiles'
  // chunks, or twice as many elements of e4m3).
  static constexpr int kKvLoadChunkElems = 16 / static_cast<int>(sizeof(KVType_));
  static constexpr int kKpeLoadChunkElems = 16 / static_cast<int>(sizeof(KpeType));
  static constexpr int kCkvLoadChunks = HEAD_DIM_CKV / kKvLoadChunkElems;
  static constexpr int kKpeLoadChunks = HEAD_DIM_KPE / kKpeLoadChunkElems;
  static constexpr int kCkvLoadChunksPerLane = kCkvLoadChunks / kLanesPerRow;
  static constexpr int kKpeLoadChunksPerLane = (kKpeLoadChunks + kLanesPerRow - 1) / kLanesPerRow;
  static constexpr int kOChunksPerLane = kOChunks / kLanesPerRow;

  // The kpe tile of a stage is reused for the P tile (Q_TILE x KV_TILE) once QK is done.
  static constexpr int kKpePElems = KV_TILE * (HEAD_DIM_KPE > Q_TILE ? HEAD_DIM_KPE : Q_TILE);
  static constexpr int kCkvStageBytes = KV_TILE * HEAD_DIM_CKV * static_cast<int>(sizeof(MmaType));
  static constexpr int kKpePStageBytes = kKpePElems * static_cast<int>(sizeof(MmaType));
  // Where a stage's loads land in its buffers: the 16-bit tile itself, or an e4m3 tile at the
  // top, from where dequantize_kv expands it downwards (the same shared memory either way).
  static constexpr int kCkvLandingOffset = kFp8Kv ? kCkvStageBytes - KV_TILE * HEAD_DIM_CKV : 0;
  static constexpr int kKpeLandingOffset =
      kFp8Kv && !kTokenScales ? kKpePStageBytes - KV_TILE * HEAD_DIM_KPE : 0;
  // Per-token scales: a stage's tokens' scales, one 16-byte row each (a cp.async), placed past
  // the shared storage's union so that the output staging never overlays them.
  static constexpr int kScalesPerToken = HEAD_DIM_CKV / kCkvScaleBlock;
  static constexpr int kScaleStageBytes = kTokenScales ? KV_TILE * 16 : 0;
  static_assert(!kTokenScales || kScalesPerToken * 4 == 16,
                "a token's ckv scales are one 16-byte copy (head_dim_ckv 512)");

  static_assert(Q_TILE == 16 * kWarpsPerGroup, "each warp of a warpgroup owns 16 query rows");
  static_assert(KV_TILE % (QK_SHARD ? 32 : 16) == 0, "KV tile must split into 16-token blocks");
  static_assert(!kPvRowHalves || kGroups * kPvMTiles * 16 == Q_TILE, "PV row halves cover the tile");
  static_assert(kCkvChunks % kLanesPerRow == 0 && kOChunks % kLanesPerRow == 0 && HEAD_DIM_KPE % 16 == 0,
                "head dims must be multiples of 128 (ckv) and 16 (kpe)");
  static_assert(NUM_STAGES >= 1, "at least one KV stage");
  static_assert(kNarrowQkWarps * kNarrowRows <= kGroups * Q_TILE,
                "the narrow row exchange fits the row_exchange area");

  struct SharedStorage {
    union {
      struct {
        QType_ q_nope[Q_TILE * HEAD_DIM_CKV];
        QType_ q_pe[Q_TILE * HEAD_DIM_KPE];
        MmaType ckv[NUM_STAGES][KV_TILE * HEAD_DIM_CKV];
        MmaType kpe_p[NUM_STAGES][kKpePElems];
        float row_exchange[kGroups][Q_TILE];  // per-warpgroup row max, later row sum
      } attn;
      OType_ o[Q_TILE * HEAD_DIM_CKV];  // output staging for coalesced stores
    };
  };
  static constexpr int kAttnBytes =
      Q_TILE * (HEAD_DIM_CKV + HEAD_DIM_KPE) * static_cast<int>(sizeof(QType_)) +
      NUM_STAGES * (kCkvStageBytes + kKpePStageBytes) +
      kGroups * Q_TILE * static_cast<int>(sizeof(float));
  static constexpr int kOutputBytes = Q_TILE * HEAD_DIM_CKV * static_cast<int>(sizeof(OType_));
  static constexpr int kSmemBytes = kAttnBytes > kOutputBytes ? kAttnBytes : kOutputBytes;
  static_assert(sizeof(SharedStorage) == kSmemBytes, "shared storage layout is the host's formula");
  static constexpr int kDynamicSmemBytes = kSmemBytes + NUM_STAGES * kScaleStageBytes;
#ifdef MLAJIT_EXPECTED_SMEM_BYTES
  static_assert(kDynamicSmemBytes == MLAJIT_EXPECTED_SMEM_BYTES,
                "the host computed a different shared-memory size for this configuration");
#endif
#ifdef MLAJIT_EXPECTED_THREADS
  static_assert(kThreads == MLAJIT_EXPECTED_THREADS,
                "the host launches a different number of threads per block for this configuration");
#endif
};

// Shared-memory addresses of the storage's regions (32-bit shared window).
template <typename C>
struct SmemMap {
  uint32_t q_nope, q_pe, ckv0, kpe_p0, o, scales0;
  float* row_exchange;
  const float* token_scales;  // scales0's floats (per-token scales)

  __device__ __forceinline__ static SmemMap make(typename C::SharedStorage& s) {
    SmemMap m;
    const auto* base = reinterpret_cast<const unsigned char*>(&s);
    m.token_scales = reinterpret_cast<const float*>(base + C::kSmemBytes);
    m.scales0 = smem_address(m.token_scales);
    m.q_nope = smem_address(s.attn.q_nope);
    m.q_pe = smem_address(s.attn.q_pe);
    m.ckv0 = smem_address(s.attn.ckv[0]);
    m.kpe_p0 = smem_address(s.attn.kpe_p[0]);
    m.o = smem_address(s.o);
    m.row_exchange = &s.attn.row_exchange[0][0];
    return m;
  }

  __device__ __forceinline__ uint32_t ckv(int stage) const { return ckv0 + stage * C::kCkvStageBytes; }
  __device__ __forceinline__ uint32_t kpe_p(int stage) const { return kpe_p0 + stage * C::kKpePStageBytes; }
  __device__ __forceinline__ uint32_t scales(int stage) const { return scales0 + stage * C::kScaleStageBytes; }
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

  __device__ __forceinline__ int cta_warp() const { return tid / 32; }
  // Local query rows of this thread's accumulator rows j = 0, 1 (WideRows).
  __device__ __forceinline__ int acc_row(int j) const { return warp * 16 + (lane >> 2) + 8 * j; }
  // Local query rows of this thread's PV accumulator rows k = 2 * m-tile + j (row halves):
  // m-tile 0 is the warp's own QK rows, m-tile 1 those of warp w ^ 1.
  __device__ __forceinline__ int pv_row(int k) const {
    return 16 * (warp ^ (k >> 1)) + (lane >> 2) + 8 * (k & 1);
  }

  // Dim quarter of this warp in PV (row halves).
  __device__ __forceinline__ int pv_quarter() const { return 2 * group + (warp & 1); }
};

// The KV stage ring of the row layouts that the whole CTA runs: kStages tiles in Q's 16-bit
// type, loaded by all threads, tile t in stage t % kStages; an e4m3 tile lands in the top half
// of its stage and is expanded there. (NarrowStreams has a ring per stream.)
template <typename C>
struct KvRing {
  static constexpr int kStages = C::kStages;
  static constexpr int kLoaders = C::kThreads;  // threads that copy one tile
  static constexpr int kTileStride = 1;         // tiles between two of this ring
  // Tiles in one page take load_kv_one_page. Not here: the second copy of the loads costs the
  // 64-row loop registers (it spilled at 255), and its 2 passes a tile gain less.
  static constexpr bool kOnePageLoads = false;
  static constexpr int kCkvLanding = C::kCkvLandingOffset;
  static constexpr int kKpeLanding = C::kKpeLandingOffset;

  __device__ __forceinline__ static int first_tile(const ThreadRole&) { return 0; }
  __device__ __forceinline__ static int stage_of(const ThreadRole&, int tile) { return tile % kStages; }
  __device__ __forceinline__ static uint32_t ckv(const SmemMap<C>& sm, int stage) { return sm.ckv(stage); }
  __device__ __forceinline__ static uint32_t kpe_p(const SmemMap<C>& sm, int stage) { return sm.kpe_p(stage); }
  __device__ __forceinline__ static uint32_t scales(const SmemMap<C>& sm, int stage) { return sm.scales(stage); }
  __device__ __forceinline__ static void sync(const ThreadRole&) { __syncthreads(); }
};

// What one CTA does for one work item, derived once.
struct TileContext : WorkTile {
  bool narrow;           // rows <= 16 (and the config has NARROW_TILES): the NarrowRows layout
  int32_t row_limit[2];  // this thread's accumulator rows see tokens < row_limit[j]
};

template <typename C>
struct WideRows;
template <typename C>
struct NarrowRows;

template <typename C>
__device__ __forceinline__ TileContext make_context(const MlaParams& p, const MlaWorkItem& item,
                                                    const ThreadRole& role) {
  TileContext t;
  const int32_t H = p.num_heads;
  static_cast<WorkTile&>(t) = make_work_tile<C::kQTile, C::kKvTile>(item, H, p.causal != 0);
  t.narrow = C::kNarrowTiles && t.rows <= C::kNarrowRows;
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    const int local_row = t.narrow ? NarrowRows<C>::acc_row(role, j) : WideRows<C>::acc_row(role, j);
    t.row_limit[j] = work_row_limit(item, t, H, local_row, p.causal != 0);
  }
  return t;
}

// Online-softmax state of this thread's two accumulator rows and its half of O.
template <typename C, int DIM_BLOCKS>
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
  using QType = typename C::QType;
  const int lane8 = role.tid % C::kLanesPerRow;
#pragma unroll
  for (int pass = 0; pass < C::kQPasses; ++pass) {
    const int row = role.tid / C::kLanesPerRow + pass * C::kRowsPerPass;
    const QRowSource<QType> q = q_row_source<QType>(p, t, row);
#pragma unroll
    for (int k = 0; k < C::kCkvChunksPerLane; ++k) {
      const int chunk = lane8 + k * C::kLanesPerRow;
      cp_async_16(sm.q_nope + Swizzle<C::kCkvChunks>::byte_offset(row, chunk),
                  q.nope + chunk * C::kChunkElems, q.valid);
    }
#pragma unroll
    for (int k = 0; k < C::kKpeChunksPerLane; ++k) {
      const int chunk = lane8 + k * C::kLanesPerRow;
      if (chunk < C::kKpeChunks) {
        cp_async_16(sm.q_pe + Swizzle<C::kKpeChunks>::byte_offset(row, chunk),
                    q.pe + chunk * C::kChunkElems, q.valid);
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
  int32_t id;
};

// How a ring's loader threads cover a tile: 8 lanes a row, kRowsPerPass rows a pass.
template <typename C, typename Ring>
struct KvLoaders {
  static constexpr int kRowsPerPass = Ring::kLoaders / C::kLanesPerRow;
  static constexpr int kPasses = (C::kKvTile + kRowsPerPass - 1) / kRowsPerPass;
  static_assert(KvPageIds<C>::kRowsPerWarp * kPasses <= 32, "a warp's row ids fit one register per lane");
  __device__ __forceinline__ static int tid(const ThreadRole& role) { return role.tid % Ring::kLoaders; }
};

template <typename C, typename Ring>
__device__ __forceinline__ KvPageIds<C> fetch_page_ids(const MlaParams& p, const TileContext& t,
                                                       const ThreadRole& role, int tile) {
  using L = KvLoaders<C, Ring>;
  constexpr int kPerWarp = KvPageIds<C>::kRowsPerWarp;
  const int pass = role.lane / kPerWarp;
  const int row = (L::tid(role) / 32) * kPerWarp + role.lane % kPerWarp + pass * L::kRowsPerPass;
  const int32_t token = t.kv_start + tile * C::kKvTile + row;
  KvPageIds<C> ids;
  ids.id = 0;
  if (pass < L::kPasses && row < C::kKvTile && token < t.kv_stop) ids.id = page_of(p, t, token);
  return ids;
}

// Where one token's cache row lies: its ckv and kpe, and its ckv scales (per-token scales).
template <typename C>
struct KvRowSource {
  const typename C::KVType* ckv;
  const typename C::KpeType* kpe;
  const float* scales;

  __device__ __forceinline__ static KvRowSource at(const MlaParams& p, int64_t page, int64_t slot) {
    KvRowSource r;
    r.ckv = static_cast<const typename C::KVType*>(p.ckv) + page * p.ckv_stride_page + slot * p.ckv_stride_token;
    r.kpe = static_cast<const typename C::KpeType*>(p.kpe) + page * p.kpe_stride_page + slot * p.kpe_stride_token;
    if constexpr (C::kTokenScales) {
      r.scales = p.ckv_scales + page * p.ckv_scales_stride_page + slot * p.ckv_scales_stride_token;
    }
    return r;
  }
  // The row `tokens` further on in the same page.
  __device__ __forceinline__ KvRowSource advanced(const MlaParams& p, int64_t tokens) const {
    KvRowSource r;
    r.ckv = ckv + tokens * p.ckv_stride_token;
    r.kpe = kpe + tokens * p.kpe_stride_token;
    if constexpr (C::kTokenScales) r.scales = scales + tokens * p.ckv_scales_stride_token;
    return r;
  }
};

// The copies of one row of a KV tile from its cache row; zero-filled unless valid. A token's
// per-token scales (16 bytes) come with its first lane's copies.
template <typename C>
__device__ __forceinline__ void copy_kv_row(uint32_t ckv_dst, uint32_t kpe_dst, uint32_t scales_dst,
                                            int row, int lane8, const KvRowSource<C>& src, bool valid) {
  const typename C::KVType* ckv = src.ckv;
  const typename C::KpeType* kpe = src.kpe;
#pragma unroll
  for (int k = 0; k < C::kCkvLoadChunksPerLane; ++k) {
    const int chunk = lane8 + k * C::kLanesPerRow;
    cp_async_16(ckv_dst + Swizzle<C::kCkvLoadChunks>::byte_offset(row, chunk), ckv + chunk * C::kKvLoadChunkElems,
                valid);
  }
#pragma unroll
  for (int k = 0; k < C::kKpeLoadChunksPerLane; ++k) {
    const int chunk = lane8 + k * C::kLanesPerRow;
    if (chunk < C::kKpeLoadChunks) {
      cp_async_16(kpe_dst + Swizzle<C::kKpeLoadChunks>::byte_offset(row, chunk), kpe + chunk * C::kKpeLoadChunkElems,
                  valid);
    }
  }
  if constexpr (C::kTokenScales) {
    if (lane8 == 0) cp_async_16(scales_dst + row * 16, src.scales, valid);
  }
}

// A KV tile that lies in one (power-of-two) page: one page id and one row address, rows a
// constant stride apart. With PREFETCHED, lane 0 holds the id of the warp's first row (the
// warp's rows are all past the chunk when that one is, and then any page serves).
template <typename C, typename Ring, bool PREFETCHED>
__device__ __forceinline__ void load_kv_one_page(const MlaParams& p, const TileContext& t, const ThreadRole& role,
                                                 int32_t first, uint32_t ckv_dst, uint32_t kpe_dst,
                                                 uint32_t scales_dst, KvPageIds<C> ids) {
  using L = KvLoaders<C, Ring>;
  int64_t page;
  if constexpr (PREFETCHED) {
    page = __shfl_sync(0xffffffffu, ids.id, 0);
  } else {
    page = p.kv_indices[t.kv_page_base + (first >> __popc(p.page_size - 1))];
  }
  const int row0 = L::tid(role) / C::kLanesPerRow;
  const int64_t slot0 = (first & (p.page_size - 1)) + row0;
  const KvRowSource<C> src = KvRowSource<C>::at(p, page, slot0);
#pragma unroll
  for (int pass = 0; pass < L::kPasses; ++pass) {
    const int row = row0 + pass * L::kRowsPerPass;
    if (C::kKvTile % L::kRowsPerPass == 0 || row < C::kKvTile) {
      copy_kv_row<C>(ckv_dst, kpe_dst, scales_dst, row, role.tid % C::kLanesPerRow,
                     src.advanced(p, pass * L::kRowsPerPass), first + row < t.kv_stop);
    }
  }
}

// Stage: load_kv. KV tile `tile` (tokens kv_start + tile * KV_TILE ...) into stage `stage`.
// Token t of the request is slot t % page_size of page kv_indices[kv_page_base + t / page_size];
// offsets are 64-bit since page * stride_page exceeds 2^31 on large pools. With PREFETCHED the
// page ids come from `ids` (fetch_page_ids of this tile), else from kv_indices here.
template <typename C, typename Ring, bool PREFETCHED = false>
__device__ __forceinline__ void load_kv(const MlaParams& p, const SmemMap<C>& sm,
                                        const TileContext& t, const ThreadRole& role, int tile,
                                        int stage, KvPageIds<C> ids = KvPageIds<C>{0}) {
  using L = KvLoaders<C, Ring>;
  const int lane8 = role.tid % C::kLanesPerRow;
  const uint32_t ckv_dst = Ring::ckv(sm, stage) + Ring::kCkvLanding;
  const uint32_t kpe_dst = Ring::kpe_p(sm, stage) + Ring::kKpeLanding;
  uint32_t scales_dst = 0;
  if constexpr (C::kTokenScales) scales_dst = Ring::scales(sm, stage);
  const int32_t first = t.kv_start + tile * C::kKvTile;
  const bool pow2_pages = (p.page_size & (p.page_size - 1)) == 0;
  if constexpr (Ring::kOnePageLoads) {
    if (pow2_pages && (first & (p.page_size - 1)) + C::kKvTile <= p.page_size) {
      load_kv_one_page<C, Ring, PREFETCHED>(p, t, role, first, ckv_dst, kpe_dst, scales_dst, ids);
      return;
    }
  }
#pragma unroll
  for (int pass = 0; pass < L::kPasses; ++pass) {
    const int row = L::tid(role) / C::kLanesPerRow + pass * L::kRowsPerPass;
    int32_t prefetched = 0;
    if constexpr (PREFETCHED) {
      prefetched = __shfl_sync(0xffffffffu, ids.id, pass * KvPageIds<C>::kRowsPerWarp + role.lane / C::kLanesPerRow);
    }
    if (C::kKvTile % L::kRowsPerPass == 0 || row < C::kKvTile) {
      const int32_t token = first + row;
      const bool valid = token < t.kv_stop;
      int64_t page = 0;
      int32_t slot = 0;
      if (valid) {
        // Power-of-two pages (the usual case): shift and mask instead of two divisions. Kept
        // as one branch per case: folded into selects, the division runs for every page size.
        if (pow2_pages) {
          const int shift = __popc(p.page_size - 1);
          page = PREFETCHED ? prefetched : p.kv_indices[t.kv_page_base + (token >> shift)];
          slot = token & (p.page_size - 1);
        } else {
          page = PREFETCHED ? prefetched : p.kv_indices[t.kv_page_base + token / p.page_size];
          slot = token % p.page_size;
        }
      }
      copy_kv_row<C>(ckv_dst, kpe_dst, scales_dst, row, lane8, KvRowSource<C>::at(p, page, slot), valid);
    }
  }
}

// Keeps the pipeline NUM_STAGES - 1 tiles ahead and returns once tile `tile` is in shared
// memory for every thread. With one stage there is nothing to overlap: the single buffer is
// refilled after everyone has finished with it. With page ids fetched ahead, `ids` holds those
// of the tile loaded here and is refilled with those of the tile after it.
// Ring::sync is the barrier of the threads that share the ring; the tiles of a ring are
// Ring::kTileStride apart.
template <typename C, typename Ring>
__device__ __forceinline__ void advance_pipeline(const MlaParams& p, const SmemMap<C>& sm,
                                                 const TileContext& t, const ThreadRole& role,
                                                 int tile, KvPageIds<C>& ids) {
  constexpr int kStride = Ring::kTileStride;
  if constexpr (Ring::kStages == 1) {
    Ring::sync(role);
    load_kv<C, Ring, C::kPageIdsAhead>(p, sm, t, role, tile, Ring::stage_of(role, tile), ids);
    cp_async_commit();
    if constexpr (C::kPageIdsAhead) ids = fetch_page_ids<C, Ring>(p, t, role, tile + kStride);
    cp_async_wait<0>();
    Ring::sync(role);
  } else {
    cp_async_wait<Ring::kStages - 2>();
    Ring::sync(role);  // tile visible to all; the stage refilled below is no longer read
    const int ahead = tile + (Ring::kStages - 1) * kStride;
    if (ahead < t.num_tiles) {
      load_kv<C, Ring, C::kPageIdsAhead>(p, sm, t, role, ahead, Ring::stage_of(role, ahead), ids);
      if constexpr (C::kPageIdsAhead) ids = fetch_page_ids<C, Ring>(p, t, role, ahead + kStride);
    }
    cp_async_commit();  // possibly empty: keeps the group count uniform
  }
}

// Page ids of the first tile the KV loop loads (advance_pipeline's first `ahead`).
template <typename C, typename Ring>
__device__ __forceinline__ KvPageIds<C> first_page_ids(const MlaParams& p, const TileContext& t,
                                                       const ThreadRole& role) {
  KvPageIds<C> ids{0};
  if constexpr (C::kPageIdsAhead) {
    ids = fetch_page_ids<C, Ring>(p, t, role, Ring::first_tile(role) + (Ring::kStages - 1) * Ring::kTileStride);
  }
  return ids;
}

// Dequantization factors of an e4m3 cache's two operands (dequant_factor). Read again for
// every tile rather than kept: at 255 registers two more live values spill.
struct KvDequant {
  float ckv, kpe;

  __device__ __forceinline__ static KvDequant make(const MlaParams& p) {
    return KvDequant{dequant_factor(p.kv_scale_ckv_device, p.kv_scale_ckv),
                     dequant_factor(p.kv_scale_kpe_device, p.kv_scale_kpe)};
  }
};

__device__ __forceinline__ void load_shared_16(uint32_t address, uint32_t (&v)[4]) {
  asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v[0]), "=r"(v[1]), "=r"(v[2]), "=r"(v[3])
               : "r"(address));
}

__device__ __forceinline__ void store_shared_16(uint32_t address, uint32_t a, uint32_t b, uint32_t c,
                                                uint32_t d) {
  asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};" ::"r"(address), "r"(a), "r"(b), "r"(c),
               "r"(d)
               : "memory");
}

// The 16 values of e4m3 chunk `chunk` of a row, as 16-bit chunks 2 * chunk and 2 * chunk + 1
// of that row. Lanes whose chunk has bit 2 set store the second one first, so that the 8 lanes
// of a quarter warp (8 consecutive chunks of one row) hit 8 different bank slots.
template <typename C, int ROW_CHUNKS>
__device__ __forceinline__ void store_dequantized(uint32_t tile, int row, int chunk,
                                                  const uint32_t (&codes)[4], float factor) {
  uint32_t v[8];
  dequantize_chunk<typename C::MmaType>(codes, factor, v);
  const bool swap = (chunk >> 2) & 1;
  const int first = 2 * chunk + (swap ? 1 : 0);
#pragma unroll
  for (int k = 0; k < 2; ++k) {
    const int half = swap ? 1 - k : k;
    store_shared_16(tile + Swizzle<ROW_CHUNKS>::byte_offset(row, first + (swap ? -k : k)),
                    half ? v[4] : v[0], half ? v[5] : v[1], half ? v[6] : v[2], half ? v[7] : v[3]);
  }
}

// Dequantizes e4m3 chunk tid + i * kThreads of the stage's ckv codes into the 16-bit tile,
// times the tensor's factor, or under per-token scales its token's scale for the 128 values
// the chunk lies in.
template <typename C>
__device__ __forceinline__ void dequantize_ckv_chunk(const SmemMap<C>& sm, int stage, int i,
                                                     const uint32_t (&codes)[4], float factor,
                                                     const ThreadRole& role) {
  const int q = role.tid + i * C::kThreads;
  const int row = q / C::kCkvLoadChunks, chunk = q % C::kCkvLoadChunks;
  if constexpr (C::kTokenScales) {
    const float* scales = sm.token_scales + stage * (C::kScaleStageBytes / 4) + row * (16 / 4);
    factor = scales[chunk * C::kKvLoadChunkElems / kCkvScaleBlock] * kF16PairFactor;
  }
  store_dequantized<C, C::kCkvChunks>(sm.ckv(stage), row, chunk, codes, factor);
}

template <typename C>
__device__ __forceinline__ void load_ckv_codes(const SmemMap<C>& sm, int stage, int i,
                                               uint32_t (&codes)[4], const ThreadRole& role) {
  const int q = role.tid + i * C::kThreads;
  load_shared_16(sm.ckv(stage) + C::kCkvLandingOffset +
                     Swizzle<C::kCkvLoadChunks>::byte_offset(q / C::kCkvLoadChunks, q % C::kCkvLoadChunks),
                 codes);
}

// Stage: dequantize_kv (e4m3 cache only). The stage's e4m3 tile, landed in the top half of
// its buffers, into the 16-bit tiles that QK and PV read, times the scales. Expanded rows
// overlay codes: rows [0, 1/2) land below every code and are written as they are read; rows
// [1/2, 3/4) land on the codes of [0, 1/2), written after a barrier; rows [3/4, 1) land on
// their own codes and those of [1/2, 3/4), so their codes are held in registers across a
// second barrier. Thread tid takes chunks tid + i * kThreads, in row order.
template <typename C>
__device__ __forceinline__ void dequantize_kv(const SmemMap<C>& sm, int stage, const KvDequant& f,
                                              const ThreadRole& role) {
  constexpr int kCkvCodeChunks = C::kKvTile * C::kCkvLoadChunks;
  constexpr int kKpeCodeChunks = C::kTokenScales ? 0 : C::kKvTile * C::kKpeLoadChunks;
  constexpr int kPerThread = kCkvCodeChunks / C::kThreads;
  static_assert(kCkvCodeChunks % C::kThreads == 0 && kKpeCodeChunks <= C::kThreads,
                "each thread dequantizes whole ckv chunks and at most one kpe chunk");
  // Chunk counts that do not split into halves or quarters hold everything (one barrier).
  constexpr int kHalf = kPerThread % 2 == 0 ? kPerThread / 2 : 0;
  constexpr int kThreeQuarters = kPerThread % 4 == 0 ? 3 * kPerThread / 4 : kHalf;
  uint32_t kpe[4];
  const bool has_kpe = role.tid < kKpeCodeChunks;  // none under per-token scales: kpe is 16-bit
  const int kpe_row = role.tid / C::kKpeLoadChunks, kpe_chunk = role.tid % C::kKpeLoadChunks;
  if (has_kpe) {
    load_shared_16(sm.kpe_p(stage) + C::kKpeLandingOffset +
                       Swizzle<C::kKpeLoadChunks>::byte_offset(kpe_row, kpe_chunk),
                   kpe);
  }
#pragma unroll
  for (int i = 0; i < kHalf; ++i) {
    uint32_t codes[4];
    load_ckv_codes<C>(sm, stage, i, codes, role);
    dequantize_ckv_chunk<C>(sm, stage, i, codes, f.ckv, role);
  }
  uint32_t held[kPerThread - kThreeQuarters][4];
#pragma unroll
  for (int i = kThreeQuarters; i < kPerThread; ++i) load_ckv_codes<C>(sm, stage, i, held[i - kThreeQuarters], role);
  if constexpr (kThreeQuarters > kHalf) {
    __syncthreads();
#pragma unroll
    for (int i = kHalf; i < kThreeQuarters; ++i) {
      uint32_t codes[4];
      load_ckv_codes<C>(sm, stage, i, codes, role);
      dequantize_ckv_chunk<C>(sm, stage, i, codes, f.ckv, role);
    }
  }
  __syncthreads();
#pragma unroll
  for (int i = kThreeQuarters; i < kPerThread; ++i) {
    dequantize_ckv_chunk<C>(sm, stage, i, held[i - kThreeQuarters], f.ckv, role);
  }
  if (has_kpe) store_dequantized<C, C::kKpeChunks>(sm.kpe_p(stage), kpe_row, kpe_chunk, kpe, f.kpe);
  __syncthreads();
}

// Byte offsets, within one swizzled operand, of the ldmatrix rows a lane supplies for the
// first swizzle period of steps (CHUNKS chunks each: a k-step of 16-bit values, or up to four
// of e4m3 codes); later periods add a constant.
template <int ROW_CHUNKS, int CHUNKS = 2>
struct FragmentAddress {
  static constexpr int kSteps = Swizzle<ROW_CHUNKS>::kPeriod / CHUNKS;
  static_assert(kSteps >= 1, "a step lies in one swizzle period");
  uint32_t at[kSteps];

  __device__ __forceinline__ FragmentAddress(int row, int chunk_select) {
#pragma unroll
    for (int s = 0; s < kSteps; ++s) at[s] = Swizzle<ROW_CHUNKS>::byte_offset(row, CHUNKS * s + chunk_select);
  }

  // Offset of step `step` (chunks CHUNKS * step ...).
  __device__ __forceinline__ uint32_t step(int step) const {
    return at[step % kSteps] + (step / kSteps) * (kSteps * CHUNKS * 16);
  }
};

// One mma block of QK scores: 16 query rows x N KV columns, N / 2 fp32 accumulators a thread
// (the fragment layout of ptx_mma.cuh). Its K fragment is one ldmatrix per k-step.
template <int N>
struct QkBlock;

template <>
struct QkBlock<16> {
  static constexpr int kAccs = 8;
  // ldmatrix.x4: lanes 0-7 give tokens 0-7 of the k-step's first chunk, 8-15 the same tokens'
  // second chunk, 16-31 the same for tokens 8-15.
  __device__ __forceinline__ static int k_row(int lane) { return 8 * (lane / 16) + lane % 8; }
  __device__ __forceinline__ static int k_chunk(int lane) { return (lane % 16) / 8; }
  template <typename T>
  __device__ __forceinline__ static void accumulate(float (&s)[kAccs], const uint32_t (&a)[4],
                                                    uint32_t k_addr) {
    uint32_t k[4];
    ldmatrix_x4(k, k_addr);
    mma_16x16x16<T>(s, a, k);
  }
};

template <>
struct QkBlock<8> {
  static constexpr int kAccs = 4;
  // ldmatrix.x2: lanes 0-7 give tokens 0-7 of the k-step's first chunk, lanes 8-15 the second.
  __device__ __forceinline__ static int k_row(int lane) { return lane % 8; }
  __device__ __forceinline__ static int k_chunk(int lane) { return (lane / 8) % 2; }
  template <typename T>
  __device__ __forceinline__ static void accumulate(float (&s)[kAccs], const uint32_t (&a)[4],
                                                    uint32_t k_addr) {
    uint32_t k[2];
    ldmatrix_x2(k, k_addr);
    mma_16x8x16<T>(s, a, k[0], k[1]);
  }
};

// This quad's maximum of accumulator row j (0: row lane / 4, 1: that + 8) over n8 score
// blocks (QkBlock<8>'s layout: accumulators 2j and 2j + 1), in every lane of the quad.
template <int BLOCKS>
__device__ __forceinline__ float quad_row_max(const float (&s)[BLOCKS][QkBlock<8>::kAccs], int j) {
  float mx = neg_inf();
#pragma unroll
  for (int b = 0; b < BLOCKS; ++b) mx = fmaxf(mx, fmaxf(s[b][2 * j], s[b][2 * j + 1]));
  return quad_max(mx);
}

// Accumulator row j (0: row lane / 4, 1: row lane / 4 + 8) of blocks o[first, first + N) *= factor.
template <int N, int BLOCKS>
__device__ __forceinline__ void scale_row(float (&o)[BLOCKS][8], int first, int j, float factor) {
#pragma unroll
  for (int b = 0; b < N; ++b) {
    o[first + b][2 * j] *= factor;
    o[first + b][2 * j + 1] *= factor;
    o[first + b][2 * j + 4] *= factor;
    o[first + b][2 * j + 5] *= factor;
  }
}

// o += P(16 rows x 16 tokens, fragment p) . ckv[kv_row0 .. +16, this warp's dims].
template <typename C, int DIM_BLOCKS>
__device__ __forceinline__ void accumulate_pv_block(SoftmaxState<C, DIM_BLOCKS>& st, const uint32_t (&p)[4],
                                                    uint32_t v_base, int kv_row0,
                                                    const FragmentAddress<C::kCkvChunks>& v_addr) {
  const uint32_t block_base = v_base + kv_row0 * (C::kCkvChunks * 16);
#pragma unroll
  for (int b = 0; b < DIM_BLOCKS; ++b) {
    uint32_t v[4];
    ldmatrix_x4_trans(v, block_base + v_addr.step(b));
    mma_16x16x16<typename C::MmaType>(st.o[b], p, v);
  }
}

// Helpers of the softmax stages of both layouts.

// The exp2 base of a row whose running max is m. A row that has seen nothing yet keeps
// m = -inf; 0 is its base, so that 2^(-inf - base) = 0 rather than 2^(-inf + inf) = NaN.
__device__ __forceinline__ float exp2_base(float m, float scale_log2) {
  return m == neg_inf() ? 0.f : m * scale_log2;
}

// Of a row with running max m and row sum d: its base-2 LSE and the factor 1 / d of its O
// (-inf and 0 for a row that saw nothing).
__device__ __forceinline__ float finish_row(float m, float d, float scale_log2, float& lse) {
  const bool empty = m == neg_inf() || !(d > 0.f);
  const float inv = empty ? 0.f : 1.f / d;
  lse = empty ? neg_inf() : m * scale_log2 + fast_log2(d);
  return inv;
}

// The P tile of a stage lives in its kpe buffer, KV_TILE columns (at least 2 chunks) a row.
template <typename C>
using PSwizzle = Swizzle<(C::kPChunks < 2 ? 2 : C::kPChunks)>;

// ---------------------------------------------------------------------------------------
// Row layouts: which rows and KV columns each warp computes, and how warps exchange row
// statistics. Each provides the stages that differ (update_softmax_state, compute_pv,
// normalize) and the coordinates the shared stages (compute_qk, mask_scores, write_output)
// need; `attend` runs the same pipeline over either.

// Any tile: QK rows 16w.. of warp w of either warpgroup (see the top of this file).
template <typename C>
struct WideRows {
  static constexpr int kQkN = 16;
  static constexpr int kQkBlocks = C::kQkBlocks;
  using Scores = float[kQkBlocks][QkBlock<kQkN>::kAccs];
  using State = SoftmaxState<C, C::kPvBlocks>;
  static constexpr int kLseRows = C::kPvRows;
  static constexpr int kOutMTiles = C::kPvMTiles;
  static constexpr int kOutDimBlocks = C::kPvDimBlocks;

  __device__ __forceinline__ static bool computes_scores(const ThreadRole&) { return true; }
  __device__ __forceinline__ static int q_row0(const ThreadRole& role) { return role.warp * 16; }
  __device__ __forceinline__ static int qk_col0(const ThreadRole& role) {
    return C::kQkShard ? role.group * C::kQkCols : 0;
  }

  __device__ __forceinline__ static int acc_row(const ThreadRole& role, int j) { return role.acc_row(j); }
  // Output m-tile i holds the rows of warp w ^ i (row halves; i = 0 only otherwise).
  __device__ __forceinline__ static int out_row(const ThreadRole& role, int i) {
    return (role.warp ^ i) * 16 + role.lane % 16;
  }

  __device__ __forceinline__ static int out_chunk0(const ThreadRole& role) {
    return C::kPvRowHalves ? role.pv_quarter() * (C::kOChunks / C::kPvDimSplit)
                           : role.group * (C::kOChunks / 2);
  }

  __device__ __forceinline__ static bool writes_lse(const ThreadRole& role) { return role.group == 0; }

  // Stage: update_softmax_state. New row maxima (shared across warpgroups when sharded),
  // rescale of O and the row sums, and s turned into unnormalised probabilities 2^(s*c - m*c).
  __device__ __forceinline__ static void update_softmax_state(Scores& s, State& st,
                                                              const SmemMap<C>& sm, int,
                                                              float scale_log2,
                                                              const ThreadRole& role) {
    float m_tile[2];
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      float mx = st.m[j];
#pragma unroll
      for (int b = 0; b < kQkBlocks; ++b)
        mx = fmaxf(mx, fmaxf(fmaxf(s[b][2 * j], s[b][2 * j + 1]), fmaxf(s[b][2 * j + 4], s[b][2 * j + 5])));
      m_tile[j] = quad_max(mx);
    }
    if constexpr (C::kQkShard) {
      exchange_rows(m_tile, sm, role);
#pragma unroll
      for (int j = 0; j < 2; ++j)
        m_tile[j] = fmaxf(sm.row_exchange[role.acc_row(j)], sm.row_exchange[C::kQTile + role.acc_row(j)]);
    }
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const float base = exp2_base(m_tile[j], scale_log2);
      const float rescale = fast_exp2(st.m[j] * scale_log2 - base);
      st.m[j] = m_tile[j];
      st.d[j] *= rescale;
      scale_row<C::kPvDimBlocks>(st.o, 0, j, rescale);  // with row halves, m-tile 0 holds these rows
#pragma unroll
      for (int b = 0; b < kQkBlocks; ++b) {
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          s[b][2 * j + r] = fast_exp2(s[b][2 * j + r] * scale_log2 - base);
          s[b][2 * j + 4 + r] = fast_exp2(s[b][2 * j + 4 + r] * scale_log2 - base);
          st.d[j] += s[b][2 * j + r] + s[b][2 * j + 4 + r];
        }
      }
    }
    if constexpr (C::kPvRowHalves) rescale_partner_rows(st, sm, scale_log2, role);
  }

  // Stage: compute_pv. With QK_SHARD all of P goes through shared memory (the stage's kpe
  // buffer, free once all warps are past the row-max exchange); warp (g, w) then multiplies rows
  // 16w.. and 16(w ^ 1).. (two m16 tiles) by dim quarter 2g + w % 2 of V, each V fragment
  // serving both.
  __device__ __forceinline__ static void compute_pv(const Scores& s, State& st,
                                                    const SmemMap<C>& sm, int stage,
                                                    const ThreadRole& role) {
    if constexpr (!C::kPvRowHalves) {
      compute_pv_split_dims(s, st, sm, stage, role);
    } else {
      const uint32_t p_base = sm.kpe_p(stage);
      const int own_col0 = role.group * C::kQkCols;
      const int prow = role.warp * 16 + role.lane % 16;
#pragma unroll
      for (int b = 0; b < kQkBlocks; ++b) {
        uint32_t p[4];
        pack_fragment<typename C::MmaType>(p, s[b]);
        stmatrix_x4(p_base + PSwizzle<C>::byte_offset(prow, (own_col0 + 16 * b) / 8 + role.lane / 16), p);
      }
      __syncthreads();  // all of P is in shared memory
      const FragmentAddress<C::kCkvChunks> v_addr(role.lane % 16,
                                                  role.pv_quarter() * (C::kCkvChunks / C::kPvDimSplit) + role.lane / 16);
      // Two k-steps per iteration (what the causal kernel took when the mask was a template
      // parameter): fully unrolled, the tier-1 specs spill 4-40 bytes at 255 registers on
      // sm_90 (e4m3), sm_100, sm_103 and sm_110; unrolled by two, only sm_100-110's per-token
      // e4m3 specs and sm_110's tier 2 spill (4-32 bytes, as the causal kernel did).
#pragma unroll 2
      for (int kk = 0; kk < C::kKvTile / 16; ++kk) accumulate_pv_halves(st, p_base, sm.ckv(stage), v_addr, kk, role);
    }
  }

  // Stage: normalize. Completes the row sums (quad, then across warpgroups), scales O by 1/d
  // and returns the base-2 LSE of each accumulator row (-inf for rows that saw nothing).
  __device__ __forceinline__ static void normalize(State& st, const SmemMap<C>& sm,
                                                   float scale_log2, float (&lse)[kLseRows],
                                                   const ThreadRole& role) {
    float d[2];
#pragma unroll
    for (int j = 0; j < 2; ++j) d[j] = quad_sum(st.d[j]);
    // The last reads of the max exchange are separated from these writes by compute_pv's barrier.
    if constexpr (C::kQkShard) exchange_rows(d, sm, role);
    // Row k of the PV accumulators: 0, 1 this warp's QK rows, 2, 3 (row halves) warp w ^ 1's.
#pragma unroll
    for (int k = 0; k < kLseRows; ++k) {
      const int j = k & 1;
      float dk = d[j];
      if constexpr (C::kQkShard) {
        const int row = role.pv_row(k);
        dk = sm.row_exchange[row] + sm.row_exchange[C::kQTile + row];
      }
      const float mk = k < 2 ? st.m[j] : st.m_pv[k < 2 ? 0 : k - 2];
      scale_row<C::kPvDimBlocks>(st.o, (k >> 1) * C::kPvDimBlocks, j, finish_row(mk, dk, scale_log2, lse[k]));
    }
  }

 private:
  // This warpgroup's values of the thread's two QK rows into row_exchange[group], then a
  // barrier: row r's values of both warpgroups are then row_exchange[r] and [kQTile + r].
  __device__ __forceinline__ static void exchange_rows(const float (&v)[2], const SmemMap<C>& sm,
                                                       const ThreadRole& role) {
    if (role.lane % 4 == 0) {
#pragma unroll
      for (int j = 0; j < 2; ++j) sm.row_exchange[role.group * C::kQTile + role.acc_row(j)] = v[j];
    }
    __syncthreads();
  }

  // Row halves: m-tile 1 of O holds rows of QK warp w ^ 1. Their new maxima are the same max of
  // the two exchanged values (each already holds the old max), so the rescale factors follow
  // without another exchange. The reads precede compute_pv's barrier.
  __device__ __forceinline__ static void rescale_partner_rows(State& st, const SmemMap<C>& sm,
                                                              float scale_log2,
                                                              const ThreadRole& role) {
#pragma unroll
    for (int j = 0; j < C::kPartnerRows; ++j) {
      const int row = role.pv_row(2 + j);
      const float mn = fmaxf(sm.row_exchange[row], sm.row_exchange[C::kQTile + row]);
      const float rescale = fast_exp2(st.m_pv[j] * scale_log2 - exp2_base(mn, scale_log2));
      st.m_pv[j] = mn;
      scale_row<C::kPvDimBlocks>(st.o, C::kPvDimBlocks, j, rescale);
    }
  }

  // compute_pv as 4 row groups (warps) x 2 dim halves (warpgroups), P in registers (no QK_SHARD:
  // each warpgroup has all of its rows' scores).
  __device__ __forceinline__ static void compute_pv_split_dims(const Scores& s, State& st,
                                                               const SmemMap<C>& sm, int stage,
                                                               const ThreadRole& role) {
    static_assert(!C::kQkShard, "sharded QK splits PV into row halves");
    // ldmatrix.trans rows are tokens, chunks this warpgroup's output dims.
    const FragmentAddress<C::kCkvChunks> v_addr(role.lane % 16,
                                                role.group * (C::kCkvChunks / 2) + role.lane / 16);
    uint32_t p[kQkBlocks][4];
#pragma unroll
    for (int b = 0; b < kQkBlocks; ++b) pack_fragment<typename C::MmaType>(p[b], s[b]);
#pragma unroll
    for (int b = 0; b < kQkBlocks; ++b) accumulate_pv_block<C>(st, p[b], sm.ckv(stage), 16 * b, v_addr);
  }

  // Row halves: o += P[rows 16w.., 16(w ^ 1).., tokens 16kk..+16] . V[those tokens, this warp's
  // dim quarter]; each V fragment serves both m16 row tiles.
  __device__ __forceinline__ static void accumulate_pv_halves(State& st, uint32_t p_base,
                                                              uint32_t v_base,
                                                              const FragmentAddress<C::kCkvChunks>& v_addr,
                                                              int kk, const ThreadRole& role) {
    uint32_t a[C::kPvMTiles][4];
#pragma unroll
    for (int i = 0; i < C::kPvMTiles; ++i)
      ldmatrix_x4(a[i], p_base + PSwizzle<C>::byte_offset(16 * (role.warp ^ i) + role.lane % 16, 2 * kk + role.lane / 16));
    const uint32_t block_base = v_base + kk * 16 * (C::kCkvChunks * 16);
#pragma unroll
    for (int b = 0; b < C::kPvDimBlocks; ++b) {
      uint32_t v[4];
      ldmatrix_x4_trans(v, block_base + v_addr.step(b));
#pragma unroll
      for (int i = 0; i < C::kPvMTiles; ++i)
        mma_16x16x16<typename C::MmaType>(st.o[i * C::kPvDimBlocks + b], a[i], v);
    }
  }
};

// Tiles of at most 16 valid rows. Every warp works on local rows 0-15; warp n of the CTA
// (0..7) owns KV columns [8 n, 8 n + 8) in QK (when n < kNarrowQkWarps) and output dims
// [n CKV / 8, (n + 1) CKV / 8) in PV. The accumulator rows of a thread are lane / 4 and
// lane / 4 + 8, in QK (m16n8 blocks) and in PV.
template <typename C>
struct NarrowRows {
  static constexpr int kQkN = 8;
  static constexpr int kQkBlocks = C::kNarrowQkN8;
  using Scores = float[kQkBlocks][QkBlock<kQkN>::kAccs];
  using State = SoftmaxState<C, C::kNarrowPvBlocks>;
  static constexpr int kLseRows = 2;
  static constexpr int kOutMTiles = 1;
  static constexpr int kOutDimBlocks = C::kNarrowPvBlocks;

  __device__ __forceinline__ static bool computes_scores(const ThreadRole& role) {
    return C::kNarrowQkWarps == C::kWarps || role.cta_warp() < C::kNarrowQkWarps;
  }

  __device__ __forceinline__ static int q_row0(const ThreadRole&) { return 0; }
  __device__ __forceinline__ static int qk_col0(const ThreadRole& role) {
    return role.cta_warp() * 8 * kQkBlocks;
  }

  __device__ __forceinline__ static int acc_row(const ThreadRole& role, int j) {
    return role.lane / 4 + 8 * j;
  }

  __device__ __forceinline__ static int out_row(const ThreadRole& role, int) { return role.lane % 16; }
  __device__ __forceinline__ static int out_chunk0(const ThreadRole& role) {
    return role.cta_warp() * (C::kOChunks / C::kWarps);
  }

  __device__ __forceinline__ static bool writes_lse(const ThreadRole& role) { return role.cta_warp() == 0; }

  // Stage: update_softmax_state. Row maxima of all QK warps through shared memory, rescale of O
  // and the row sums, and the probabilities of this warp's columns into the stage's P tile.
  __device__ __forceinline__ static void update_softmax_state(Scores& s, State& st,
                                                              const SmemMap<C>& sm, int stage,
                                                              float scale_log2,
                                                              const ThreadRole& role) {
    const bool qk_warp = computes_scores(role);
    if (qk_warp) {
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const float mx = quad_row_max(s, j);
        if (role.lane % 4 == 0) sm.row_exchange[role.cta_warp() * 16 + acc_row(role, j)] = mx;
      }
    }
    __syncthreads();
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      float m_tile = st.m[j];
#pragma unroll
      for (int w = 0; w < C::kNarrowQkWarps; ++w) m_tile = fmaxf(m_tile, sm.row_exchange[w * 16 + acc_row(role, j)]);
      const float base = exp2_base(m_tile, scale_log2);
      const float rescale = fast_exp2(st.m[j] * scale_log2 - base);
      st.m[j] = m_tile;
      st.d[j] *= rescale;
      scale_row<C::kNarrowPvBlocks>(st.o, 0, j, rescale);
      if (qk_warp) {
#pragma unroll
        for (int b = 0; b < kQkBlocks; ++b) {
          s[b][2 * j] = fast_exp2(s[b][2 * j] * scale_log2 - base);
          s[b][2 * j + 1] = fast_exp2(s[b][2 * j + 1] * scale_log2 - base);
          st.d[j] += s[b][2 * j] + s[b][2 * j + 1];
        }
      }
    }
    if (qk_warp) store_probabilities(s, sm, stage, role);
  }

  // Stage: compute_pv. o(16 rows x this warp's dims) += P(16 x KV_TILE, from shared memory) . ckv.
  __device__ __forceinline__ static void compute_pv(const Scores&, State& st, const SmemMap<C>& sm,
                                                    int stage, const ThreadRole& role) {
    __syncthreads();  // every warp's P is in shared memory
    const FragmentAddress<C::kCkvChunks> v_addr(role.lane % 16,
                                                role.cta_warp() * (C::kCkvChunks / C::kWarps) + role.lane / 16);
    const uint32_t p_base = sm.kpe_p(stage);
#pragma unroll
    for (int kk = 0; kk < C::kKvTile / 16; ++kk) {
      uint32_t p[4];
      ldmatrix_x4(p, p_base + PSwizzle<C>::byte_offset(role.lane % 16, 2 * kk + role.lane / 16));
      accumulate_pv_block<C>(st, p, sm.ckv(stage), 16 * kk, v_addr);
    }
  }

  // Stage: normalize. Row sums over the QK warps, then O scaled by 1/d and the base-2 LSE.
  __device__ __forceinline__ static void normalize(State& st, const SmemMap<C>& sm,
                                                   float scale_log2, float (&lse)[kLseRows],
                                                   const ThreadRole& role) {
    // The last reads of the max exchange are separated from these writes by the P barrier.
    if (computes_scores(role)) {
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const float d = quad_sum(st.d[j]);
        if (role.lane % 4 == 0) sm.row_exchange[role.cta_warp() * 16 + acc_row(role, j)] = d;
      }
    }
    __syncthreads();
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      float d = 0.f;
#pragma unroll
      for (int w = 0; w < C::kNarrowQkWarps; ++w) d += sm.row_exchange[w * 16 + acc_row(role, j)];
      scale_row<C::kNarrowPvBlocks>(st.o, 0, j, finish_row(st.m[j], d, scale_log2, lse[j]));
    }
  }

 private:
  // This warp's probabilities into rows 0-15 of the stage's P tile (free: every warp is past QK,
  // by the barrier of the max exchange).
  __device__ __forceinline__ static void store_probabilities(const Scores& s, const SmemMap<C>& sm,
                                                             int stage, const ThreadRole& role) {
    const uint32_t p_base = sm.kpe_p(stage);
#pragma unroll
    for (int b = 0; b < kQkBlocks; ++b) {
      const int chunk = role.cta_warp() * kQkBlocks + b;
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const uint32_t addr = p_base + PSwizzle<C>::byte_offset(acc_row(role, j), chunk) + 4 * (role.lane % 4);
        const uint32_t v = Dtype16<typename C::MmaType>::pack(s[b][2 * j], s[b][2 * j + 1]);
        asm volatile("st.shared.b32 [%0], %1;" ::"r"(addr), "r"(v) : "memory");
      }
    }
  }
};

// ---------------------------------------------------------------------------------------
// Stages shared by the layouts.

// s += Q[16 rows from Rows::q_row0] . K[Rows::kQkBlocks blocks of kQkN tokens from
// Rows::qk_col0]^T over one operand pair (q_pe / kpe or q_nope / ckv), ROW_CHUNKS 16-byte
// chunks per row.
template <typename C, typename Rows, int ROW_CHUNKS>
__device__ __forceinline__ void accumulate_qk(typename Rows::Scores& s, uint32_t q_base,
                                              uint32_t k_base, const ThreadRole& role) {
  using Block = QkBlock<Rows::kQkN>;
  const FragmentAddress<ROW_CHUNKS> q_addr(Rows::q_row0(role) + role.lane % 16, role.lane / 16);
  const FragmentAddress<ROW_CHUNKS> k_addr(Rows::qk_col0(role) + Block::k_row(role.lane),
                                           Block::k_chunk(role.lane));
#pragma unroll
  for (int step = 0; step < ROW_CHUNKS / 2; ++step) {
    uint32_t a[4];
    ldmatrix_x4(a, q_base + q_addr.step(step));
#pragma unroll
    for (int b = 0; b < Rows::kQkBlocks; ++b) {
      Block::template accumulate<typename C::MmaType>(
          s[b], a, k_base + k_addr.step(step) + b * Rows::kQkN * ROW_CHUNKS * 16);
    }
  }
}

// Stage: compute_qk. Raw scores of this warp's rows against its share of the KV tile.
template <typename C, typename Rows>
__device__ __forceinline__ void compute_qk(typename Rows::Scores& s, const SmemMap<C>& sm, int stage,
                                           const ThreadRole& role) {
#pragma unroll
  for (int b = 0; b < Rows::kQkBlocks; ++b)
#pragma unroll
    for (int r = 0; r < QkBlock<Rows::kQkN>::kAccs; ++r) s[b][r] = 0.f;
  accumulate_qk<C, Rows, C::kKpeChunks>(s, sm.q_pe, sm.kpe_p(stage), role);
  accumulate_qk<C, Rows, C::kCkvChunks>(s, sm.q_nope, sm.ckv(stage), role);
}

// Tokens below unmasked_end are visible to every row of the tile.
template <typename C>
__device__ __forceinline__ bool tile_needs_mask(const TileContext& t, int tile) {
  return t.kv_start + (tile + 1) * C::kKvTile > t.unmasked_end;
}

// Stage: mask_scores. Scores of tokens a row may not see (past the chunk, or in its causal
// future) become -inf. Accumulator r of a block: column 8 (r / 4) + r % 2 + 2 (lane % 4), row j = (r % 4) / 2.
template <typename C, typename Rows>
__device__ __forceinline__ void mask_scores(typename Rows::Scores& s, const TileContext& t, int tile,
                                            const ThreadRole& role) {
  const int32_t col0 = t.kv_start + tile * C::kKvTile + Rows::qk_col0(role) + 2 * (role.lane % 4);
#pragma unroll
  for (int b = 0; b < Rows::kQkBlocks; ++b)
#pragma unroll
    for (int r = 0; r < QkBlock<Rows::kQkN>::kAccs; ++r) {
      const int32_t token = col0 + Rows::kQkN * b + 8 * (r / 4) + (r % 2);
      if (token >= t.row_limit[(r % 4) / 2]) s[b][r] = neg_inf();
    }
}

// ---------------------------------------------------------------------------------------
// The pipeline.

// The staged O rows from shared memory to the output or the partial buffer, 128 bytes a row.
template <typename C>
__device__ __forceinline__ void store_output_rows(const MlaParams& p, const SmemMap<C>& sm,
                                                  const TileContext& t, const ThreadRole& role) {
  using OType = typename C::OType;
  using OSwizzle = Swizzle<C::kOChunks>;
  const bool partial = t.partial_row >= 0;
  const int32_t partial_row0 = t.partial_row + blockIdx.x * C::kQTile;
  const int lane8 = role.tid % C::kLanesPerRow;
#pragma unroll
  for (int pass = 0; pass < C::kQPasses; ++pass) {
    const int row = role.tid / C::kLanesPerRow + pass * C::kRowsPerPass;
    if (row < t.rows) {
      OType* dst = partial ? static_cast<OType*>(p.partial_o) +
                                 static_cast<int64_t>(partial_row0 + row) * C::kHeadDimCkv
                           : static_cast<OType*>(p.out) + final_row_offset(p, t.q_token_base, t.row0 + row);
#pragma unroll
      for (int k = 0; k < C::kOChunksPerLane; ++k) {
        const int chunk = lane8 + k * C::kLanesPerRow;
        Chunk16 v;
        asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];"
                     : "=r"(v.w[0]), "=r"(v.w[1]), "=r"(v.w[2]), "=r"(v.w[3])
                     : "r"(sm.o + OSwizzle::byte_offset(row, chunk)));
        *reinterpret_cast<Chunk16*>(dst + chunk * C::kOChunkElems) = v;
      }
    }
  }
}

// Stage: write_output. O goes through shared memory so that global stores are whole 128-byte
// rows; the final output or the partial buffer, and the LSE.
template <typename C, typename Rows>
__device__ __forceinline__ void write_output(const MlaParams& p, typename Rows::State& st,
                                             const float (&lse)[Rows::kLseRows], const SmemMap<C>& sm,
                                             const TileContext& t, const ThreadRole& role) {
  using OSwizzle = Swizzle<C::kOChunks>;
  __syncthreads();  // everyone is done with Q / KV, which the staging area overlays
  // The staging addresses are derived from a fresh read of the thread index: derived from
  // `role`, the compiler hoists all of them to the kernel's start and, at 255 registers in the
  // wide tier-1 loop, keeps them in local memory.
  const ThreadRole fresh = ThreadRole::make_fresh();
  const int ochunk0 = Rows::out_chunk0(fresh);
#pragma unroll
  for (int i = 0; i < Rows::kOutMTiles; ++i) {
    const int orow = Rows::out_row(fresh, i);
#pragma unroll
    for (int b = 0; b < Rows::kOutDimBlocks; ++b) {
      uint32_t packed[4];
      pack_fragment<typename C::OType>(packed, st.o[i * Rows::kOutDimBlocks + b]);
      stmatrix_x4(sm.o + OSwizzle::byte_offset(orow, ochunk0 + 2 * b + role.lane / 16), packed);
    }
  }
  const bool partial = t.partial_row >= 0;
  const int32_t partial_row0 = t.partial_row + blockIdx.x * C::kQTile;
  if (Rows::writes_lse(role) && role.lane % 4 == 0) {
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const int row = Rows::acc_row(role, j);
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
  store_output_rows<C>(p, sm, t, role);
}

// Q and the ring's first kStages - 1 KV tiles on their way (Q joins the first tile's group).
template <typename C, typename Ring>
__device__ __forceinline__ void start_pipeline(const MlaParams& p, const SmemMap<C>& sm, const TileContext& t,
                                               const ThreadRole& role) {
  load_q<C>(p, sm, t, role);
#pragma unroll
  for (int i = 0; i < Ring::kStages - 1; ++i) {
    const int tile = Ring::first_tile(role) + i * Ring::kTileStride;
    if (tile < t.num_tiles) load_kv<C, Ring>(p, sm, t, role, tile, Ring::stage_of(role, tile));
    cp_async_commit();
  }
}

// The KV loop of one tile in row layout Rows, normalisation and output.
template <typename C, typename Rows>
__device__ __forceinline__ void attend(const MlaParams& p, const SmemMap<C>& sm, const TileContext& t) {
  // Addresses derived from the thread index are recomputed per work item: derived from the
  // kernel's ThreadRole they are hoisted to its start, stay live across every KV loop copy and
  // spill at 255 registers (and the wide loop ran 5% slower with them).
  using Ring = KvRing<C>;
  const ThreadRole role = ThreadRole::make_fresh();
  if (t.num_tiles > 0) start_pipeline<C, Ring>(p, sm, t, role);
  typename Rows::State st;
  st.init();
  KvPageIds<C> ids = first_page_ids<C, Ring>(p, t, role);
#pragma unroll 1
  for (int tile = 0; tile < t.num_tiles; ++tile) {
    advance_pipeline<C, Ring>(p, sm, t, role, tile, ids);
    const int stage = tile % C::kStages;
    if constexpr (C::kFp8Kv) dequantize_kv<C>(sm, stage, KvDequant::make(p), role);
    typename Rows::Scores s;
    if (Rows::computes_scores(role)) {
      compute_qk<C, Rows>(s, sm, stage, role);
      if (tile_needs_mask<C>(t, tile)) mask_scores<C, Rows>(s, t, tile, role);
    }
    Rows::update_softmax_state(s, st, sm, stage, p.sm_scale_log2, role);
    Rows::compute_pv(s, st, sm, stage, role);
  }
  cp_async_wait<0>();
  float lse[Rows::kLseRows];
  Rows::normalize(st, sm, p.sm_scale_log2, lse, role);
  write_output<C, Rows>(p, st, lse, sm, t, role);
}

}  // namespace mlajit_kernel

#include "portable/narrow_streams.cuh"

namespace mlajit_kernel {

// One work item: this CTA's 64 rows of a query tile against one KV chunk.
template <typename C>
__device__ __forceinline__ void attend_tile(const MlaParams& p, const SmemMap<C>& sm,
                                            const MlaWorkItem& item, const ThreadRole& role) {
  const TileContext t = make_context<C>(p, item, role);
  if (t.rows <= 0) return;  // the second CTA of a pair whose tile is short
  __syncthreads();  // the previous item's output staging has been read
  if (t.narrow) {
    if constexpr (C::kNarrowStreams) {
      attend_streams<C>(p, sm, t);
    } else {
      attend<C, NarrowRows<C>>(p, sm, t);
    }
  } else {
    attend<C, WideRows<C>>(p, sm, t);
  }
}

template <typename Config>
__global__ void __launch_bounds__(Config::kThreads, 1) mla_fa2_kernel(const __grid_constant__ MlaParams params) {
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
  if (params.phase == 0) grid_barrier(params.barrier, gridDim.x * gridDim.y);
  if (params.phase != 1) {  // after the grid barrier's block barrier: the tiles are done
    static_assert(sizeof(typename Config::SharedStorage) >= kMergeScratchBytes<Config::kThreads>,
                  "the merge's scratch fits in the tiles' shared memory");
    merge_partials<typename Config::OType, Config::kHeadDimCkv, Config::kThreads>(
        params, reinterpret_cast<float*>(mla_smem));
  }
}

}  // namespace mlajit_kernel
