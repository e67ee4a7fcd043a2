// The portable kernel's configuration and the state its stages share: the tile tier and row
// layouts a spec builds (MlaConfig), the shared-memory map, each thread's role, the KV stage
// ring, the work tile of one item and the online-softmax state. The stages are in load_q.cuh,
// load_kv.cuh, dequantize_kv.cuh, fragments.cuh, wide_rows.cuh, narrow_rows.cuh,
// score_stages.cuh and narrow_streams.cuh; mla_fa2.cuh puts them together.
#pragma once
#include "common/fp8_dequant.cuh"
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
//    tile; the host leaves it out where no tile can be that small (head counts that are
//    multiples of 32), since it costs the 64-row tiles registers (7-8% on tiers 2-3).
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
  // k-steps of the 64-row P V loop unrolled at a time: all of them where sm_90 stays
  // spill-free so, two elsewhere. On the H100 (2026-12-07) the whole loop ran tier 1 at 128
  // heads 2-3% faster than two steps, over bf16 and over e4m3; in the e4m3 kernel with the
  // narrow layout it spilled 4 bytes and the 16-head launch ran 3% slower, and per-token scales
  // would spill 56. On sm_100-110 it spills 4-40 bytes over any cache (two steps: only over
  // per-token scales and on sm_110's tier 2, 4-32 bytes); no Blackwell GPU has timed either.
  // (An enumerator: a static member named by the pragma is emitted into the cubin.)
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ == 900
  enum : int { kPvUnroll = kTokenScales || (kFp8Kv && kNarrowTiles) ? 2 : KV_TILE / 16 };
#else
  enum : int { kPvUnroll = 2 };
#endif

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

  // The same storage seen by a config of the same layout (NarrowCodes computes in f16).
  template <typename D>
  __device__ __forceinline__ static SmemMap of(const SmemMap<D>& other) {
    static_assert(C::kSmemBytes == D::kSmemBytes && C::kCkvStageBytes == D::kCkvStageBytes &&
                      C::kKpePStageBytes == D::kKpePStageBytes,
                  "the two configs lay out shared memory alike");
    SmemMap m;
    m.q_nope = other.q_nope;
    m.q_pe = other.q_pe;
    m.ckv0 = other.ckv0;
    m.kpe_p0 = other.kpe_p0;
    m.o = other.o;
    m.scales0 = other.scales0;
    m.row_exchange = other.row_exchange;
    m.token_scales = other.token_scales;
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
  static constexpr int kQRows = C::kQTile;  // rows of Q that load_q fills (the rest hold stages)
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
struct NarrowRing;
template <typename C, typename RING = NarrowRing<C>>
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

}  // namespace mlajit_kernel
