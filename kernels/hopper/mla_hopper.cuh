// The MLA paged-attention kernel of the `hopper` family (sm_90a): wgmma from shared memory,
// KV tiles brought in by TMA (or a cp.async gather for pages that do not hold whole tiles),
// four warpgroups with different roles.
//
// A CTA owns 64 packed query rows (row = token * num_heads + head) by 576 dims: the wgmma M.
// KV arrives in tiles of 64 tokens through a ring of two stages. Per tile:
//  - the scores warpgroup (0) computes S = Q K^T over all 576 dims (Q is read from shared
//    memory), the online softmax, and publishes P (in its own tile, free once the output
//    warpgroups are done with the tile before) in two halves of 32 tokens, the rows' rescale
//    factors before either: the output warpgroups rescale O while it exponentiates and start
//    P V on the first half while it computes the second. It does no P V: its chain per tile,
//    the kernel's critical path, is Q K^T, the exponentials and the publication;
//  - the output warpgroups (1: columns 0-255, 2: columns 256-511) accumulate P V from the
//    published P, each holding half of O;
//  - the producer warpgroup (3) refills a stage as soon as both output warpgroups are done
//    with it (an item's last stage, once they have also written O through it): one TMA thread
//    with the page ids read a tile ahead (joined, in launches bound by memory, by the other
//    threads' cp.async for the last regions); or 128 gathering threads, or over an e4m3 cache
//    128 threads that load the codes into registers and store their values in f16
//    (StageTypeOf: the scales apply to Q, the scores and O instead), which refill each token
//    half of a stage (rows 0-31 and 32-63 of every region) as soon as it is free: with two
//    stages a tile's refill can only start once the tile two before is multiplied, so the
//    first half's starts under the second half's P V.
// While the output warpgroups work on tile i, the scores warpgroup is already on tile i + 1.
// Per stage, mbarriers say the copy is full, the rescale factors and each half of P are
// published, and both output warpgroups are done with each token half of it. The host contract
// (work items, merge records, phases) is mla_params.cuh, as for the portable family: the
// planner, workspace and merge are shared.
#pragma once
#include "common/block_barrier.cuh"
#include "common/fp8_dequant.cuh"
#include "common/grid_barrier.cuh"
#include "common/mla_merge.cuh"
#include "common/mla_params.cuh"
#include "common/ptx_cp_async.cuh"
#include "common/ptx_dtype.cuh"
#include "common/ptx_math.cuh"
#include "common/ptx_mma.cuh"
#include "hopper/hopper_params.cuh"
#include "common/ptx_tma.cuh"
#include "common/work_tile.cuh"
#include "hopper/wgmma.cuh"

namespace mlajit_kernel {

// The 16-bit type of the stages and of both wgmma operands. A 16-bit cache is multiplied as it
// is, in Q's type. An e4m3 cache is multiplied as its raw values in f16 (exact: 4 exponent bits
// fit in 5, 3 mantissa bits in 10): one conversion instruction per pair of codes in the
// producer, where converting to the scaled value in Q's type took six (f16, f32, scale, pack)
// and set the tile's pace at 128 heads. The scales move out of the stages: the ckv scale into
// the scores' exponent and O's normalisation, the kpe / ckv ratio into q_pe; Q itself is
// converted to f16 in shared memory once per work item (convert_q_to_stage_type).
template <typename Q, typename KV>
struct StageTypeOf {
  static_assert(sizeof(KV) == 2 && Dtype16<Q>::kIsBf16 == Dtype16<KV>::kIsBf16,
                "wgmma multiplies Q and a 16-bit KV cache of one type");
  using type = Q;
};
template <typename Q>
struct StageTypeOf<Q, e4m3_t> {
#ifdef __CUDA_ARCH__  // (a host compiler's pass over this file sees Ampere's factor)
  static_assert(kF16PairFactor == 1.0f, "the hopper family converts codes in one instruction");
#endif
  using type = f16_t;
};
// DeepSeek-V3.2's cache: each token's codes times their own scales, which cannot leave the
// stages, so the producer dequantizes them to Q's type; kpe arrives in Q's type.
template <typename Q>
struct StageTypeOf<Q, e4m3_token128_t> {
  using type = Q;
};

template <typename QType_, typename KVType_, typename OType_, int HEAD_DIM_CKV, int HEAD_DIM_KPE>
struct HopperConfig {
  using QType = QType_;
  using KVType = KVType_;
  using OType = OType_;
  static constexpr int kHeadDimCkv = HEAD_DIM_CKV;
  static constexpr int kHeadDimKpe = HEAD_DIM_KPE;
  using StageType = typename StageTypeOf<QType_, KVType_>::type;
  static constexpr bool kKvCodes = sizeof(KVType_) == 1;
  static constexpr bool kTokenScales = HasTokenScales<KVType_>::value;

  static constexpr int kGroupThreads = 128;
  static constexpr int kOutputThreads = 2 * kGroupThreads;  // the two output warpgroups
  static constexpr int kProducerThreads = kGroupThreads;
  static constexpr int kThreads = 4 * kGroupThreads;
  // setmaxnreg: O's half is 128 of each output warpgroup's registers, the scores warpgroup
  // holds S and P; 120 + 2 x 160 + 56 = 496 <= 512 = 512 threads x 128, the CTA's allocation
  // at launch. Over an e4m3 cache the producer holds a whole tile of codes (72 registers),
  // which the scores warpgroup gives it: the f16 path leaves S, P and the row state within 80
  // (no spills, ptxas): 80 + 2 x 160 + 112 = 512.
  static constexpr int kScoresRegisters = kKvCodes ? 80 : 120;
  static constexpr int kOutputRegisters = 160;
  static constexpr int kProducerRegisters = kKvCodes ? 112 : 56;
  // The merge after the roles' loops runs in every thread at the launch's 128 registers
  // (65536 / kThreads), enough for kMergeBatch chunks' loads in flight.
  static constexpr int kMergeRegisters = 128;
  static constexpr int kMergeBatch = 8;
  static constexpr int kRows = 64;      // packed query rows per CTA: the wgmma M
  static constexpr int kTile = 64;      // KV tokens per tile: N of Q K^T, K of P V
  static constexpr int kStages = 2;
  static constexpr int kDim = HEAD_DIM_CKV + HEAD_DIM_KPE;
  static constexpr int kRegions = kDim / 64;            // 128-byte column regions of a row
  static constexpr int kKpeRegion = HEAD_DIM_CKV / 64;  // holds kpe, then P
  static constexpr int kOutCols = HEAD_DIM_CKV / 2;     // output columns of a warpgroup
  static constexpr int kOutRegions = kOutCols / 64;
  static constexpr int kQkSteps = kDim / 16;
  // With HopperTma::split_copies, regions [0, kSplitTmaRegions) come by TMA, the rest by
  // cp.async (measured on the H200 against 4 and 9 TMA regions: docs/PERF.md, 2026-12-02).
  static constexpr int kSplitTmaRegions = 6;
  static constexpr int kPvSteps = kTile / 16;

  static_assert(sizeof(QType) == 2 && sizeof(OType) == 2, "the hopper kernel takes 16-bit Q and O");
  static_assert(HEAD_DIM_KPE == 64, "the kpe part fills one 128-byte region (64 dims)");
  static_assert(HEAD_DIM_CKV % 128 == 0 && kOutCols <= 256,
                "each warpgroup's output half is whole regions and one wgmma N (<= 256)");

  using Tile = Sw128Tile<kRows>;
  static constexpr int kTileBytes = kRegions * Tile::kRegionBytes;  // Q, or one KV stage
  // A stage is released, and refilled, in two halves of its tokens (rows 0-31 and 32-63 of
  // every region): the first as soon as the P V of the tile's first 32 tokens is done.
  static constexpr int kTokenHalves = 2;
  static constexpr int kHalfTokens = kTile / kTokenHalves;
  // Q, the KV stages, P (one 64 x 64 K-major tile: the tile's probabilities, written while
  // the stage they came from refills), the rescale factors of the current tile, the final row
  // sums and the barriers; from a base rounded up to 1 KiB (the swizzle atom: the hardware
  // swizzles by address bits), hence the slack.
  static constexpr int kQOffset = 0;
  static constexpr int kKvOffset = kTileBytes;
  static constexpr int kPOffset = (1 + kStages) * kTileBytes;
  static constexpr int kAlphaOffset = kPOffset + Tile::kRegionBytes;
  static constexpr int kRowSumOffset = kAlphaOffset + kStages * kRows * 4;
  static constexpr int kBarrierOffset = kRowSumOffset + kRows * 4;
  static constexpr int kAlignSlack = 1024;
  // Per stage: full, empty for each token half, scaled and one ready barrier per half of P;
  // then the row sums' barriers (published, and read) and P's (read).
  static constexpr int kBarriers = 6 * kStages + 3;
  static constexpr int kSmemBytes = kBarrierOffset + kBarriers * 8 + kAlignSlack;
#ifdef MLAJIT_EXPECTED_SMEM_BYTES
  static_assert(kSmemBytes == MLAJIT_EXPECTED_SMEM_BYTES,
                "the host computed a different shared-memory size for this configuration");
#endif
#ifdef MLAJIT_EXPECTED_THREADS
  static_assert(kThreads == MLAJIT_EXPECTED_THREADS, "the host launches another block size");
#endif
};

// Named barriers, one private to each warpgroup that needs one (the whole CTA meets at
// block_barrier_across_roles, barrier 0, only at the start and in the grid barrier and merge).
enum HopperBarrier : uint32_t {
  kScoresOnly = 1,
  kOutputLeftOnly = 2,
  kOutputRightOnly = 3,
};

// Shared-memory addresses (32-bit shared window) of the storage.
template <typename C>
struct HopperSmem {
  uint32_t q, kv0, p, full0;
  float* alpha;    // [kStages][kRows]: rescale factors of each stage's tile
  float* row_sum;  // [kRows]: final row sums

  __device__ __forceinline__ static HopperSmem make(unsigned char* dynamic_smem) {
    unsigned char* base = dynamic_smem + ((1024u - (smem_address(dynamic_smem) & 1023u)) & 1023u);
    HopperSmem s;
    s.q = smem_address(base + C::kQOffset);
    s.kv0 = smem_address(base + C::kKvOffset);
    s.p = smem_address(base + C::kPOffset);
    s.full0 = smem_address(base + C::kBarrierOffset);
    s.alpha = reinterpret_cast<float*>(base + C::kAlphaOffset);
    s.row_sum = reinterpret_cast<float*>(base + C::kRowSumOffset);
    return s;
  }
  __device__ __forceinline__ uint32_t kv(int stage) const { return kv0 + stage * C::kTileBytes; }
  // A stage's copy has landed / both output warpgroups are done reading token half `half`
  // of it.
  __device__ __forceinline__ uint32_t full(int stage) const { return full0 + stage * 8; }
  __device__ __forceinline__ uint32_t empty(int stage, int half) const {
    return full0 + (C::kStages + 2 * stage + half) * 8;
  }
  // The scores warpgroup has published the rescale factors of the stage's tile / half `half`
  // of its P (tokens 32 half .. 32 half + 31).
  __device__ __forceinline__ uint32_t scaled(int stage) const {
    return full0 + (3 * C::kStages + stage) * 8;
  }
  __device__ __forceinline__ uint32_t ready(int stage, int half) const {
    return full0 + (4 * C::kStages + 2 * stage + half) * 8;
  }
  // The scores warpgroup has written the work item's final row sums (one phase per item).
  __device__ __forceinline__ uint32_t sums() const { return full0 + 6 * C::kStages * 8; }
  __device__ __forceinline__ uint32_t sums_read() const { return sums() + 8; }
  // Both output warpgroups are done reading P (one phase per tile).
  __device__ __forceinline__ uint32_t p_read() const { return sums() + 16; }
};

// This thread's place: group (0 scores, 1 and 2 output, 3 producer), its index there, warp
// and lane. Accumulator rows (of S and O) are 16 warp + lane / 4 and that + 8.
struct HopperRole {
  int group, index, warp, lane;

  __device__ __forceinline__ static HopperRole make() {
    HopperRole r;
    r.group = threadIdx.x >> 7;
    r.index = threadIdx.x & 127;
    r.warp = r.index >> 5;
    r.lane = r.index & 31;
    return r;
  }
  // An output warpgroup's half of the columns: 0 left, 1 right.
  __device__ __forceinline__ int half() const { return group - 1; }
  __device__ __forceinline__ int row(int j) const { return 16 * warp + lane / 4 + 8 * j; }
  __device__ __forceinline__ int col(int n8) const { return 8 * n8 + 2 * (lane % 4); }
};

// Whether the producer copies tiles by TMA: the host's choice, never over an e4m3 cache (its
// codes come through registers).
template <typename C>
__device__ __forceinline__ bool tma_copies(const HopperTma& tma) {
  return !C::kKvCodes && tma.enabled;
}

// The scales of an e4m3 cache, applied outside the stages (StageTypeOf): `ckv` multiplies the
// scores (q_pe carries the ratio) and O; all ones over a 16-bit cache.
template <typename C>
struct CacheScales {
  float ckv, kpe_over_ckv;
  __device__ __forceinline__ static CacheScales of(const MlaParams& p) {
    if (!C::kKvCodes || C::kTokenScales) return CacheScales{1.f, 1.f};
    const float ckv = dequant_factor(p.kv_scale_ckv_device, p.kv_scale_ckv);
    return CacheScales{ckv, dequant_factor(p.kv_scale_kpe_device, p.kv_scale_kpe) / ckv};
  }
};

// What one CTA does for one work item, derived once.
struct HopperTile : WorkTile {
  int32_t row_limit[2];  // this thread's accumulator rows see tokens < row_limit[j]
};

template <typename C>
__device__ __forceinline__ HopperTile make_hopper_tile(const MlaParams& p, const MlaWorkItem& item,
                                                       const HopperRole& role) {
  HopperTile t;
  const int32_t heads = p.num_heads;
  static_cast<WorkTile&>(t) = make_work_tile<C::kRows, C::kTile>(item, heads, p.causal != 0);
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    t.row_limit[j] = work_row_limit(item, t, heads, role.row(j), p.causal != 0);
  }
  return t;
}

// Where a tile sits in the CTA's sequence of tiles: its stage and the parity of that stage's
// barrier phase (the ring keeps turning across work items).
struct StageSlot {
  int stage;
  uint32_t parity;
  __device__ __forceinline__ static StageSlot of(uint32_t sequence) {
    return StageSlot{static_cast<int>(sequence & 1u), (sequence >> 1) & 1u};
  }
};

// Waits until token half `half` of the stage of the CTA's tile `n` (in its sequence) is free:
// both output warpgroups are done with that half of tile n - kStages. The ring's first fills
// wait for nothing.
template <typename C>
__device__ __forceinline__ void wait_half_free(const HopperSmem<C>& sm, uint32_t n, int half) {
  if (n < C::kStages) return;
  mbarrier_wait(sm.empty(StageSlot::of(n).stage, half), StageSlot::of(n - C::kStages).parity);
}

// The same for both halves: the whole stage of the CTA's tile `n`.
template <typename C>
__device__ __forceinline__ void wait_stage_free(const HopperSmem<C>& sm, uint32_t n) {
  static_assert(C::kTokenHalves == 2, "a stage has two token halves");
  wait_half_free<C>(sm, n, 0);
  wait_half_free<C>(sm, n, 1);
}

// ---------------------------------------------------------------------------------------
// Stage: load_q (scores warpgroup). The tile's 64 packed rows of q_nope and q_pe into the Q
// tile; rows past the request's end are zero-filled. Eight threads cover a row's 128 bytes
// of one region.
template <typename C>
__device__ __forceinline__ void load_q(const MlaParams& p, const HopperSmem<C>& sm,
                                       const HopperTile& t, const HopperRole& role) {
  using QType = typename C::QType;
  const int lane8 = role.index % 8;
#pragma unroll 1
  for (int row = role.index / 8; row < C::kRows; row += C::kGroupThreads / 8) {
    const QRowSource<QType> q = q_row_source<QType>(p, t, row);
#pragma unroll
    for (int region = 0; region < C::kRegions; ++region) {
      const QType* src = region < C::kKpeRegion ? q.nope + region * 64 : q.pe;
      cp_async_16(sm.q + C::Tile::chunk_offset(region, row, lane8), src + lane8 * 8, q.valid);
    }
  }
  cp_async_commit();
}

// Two floats rounded to an f16 pair, saturating: a bf16 query beyond f16's range (+-65504)
// becomes +-65504, not inf.
__device__ __forceinline__ uint32_t pack_f16_saturating(float lo, float hi) {
  uint32_t packed;
  asm("cvt.rn.satfinite.f16x2.f32 %0, %1, %2;" : "=r"(packed) : "f"(hi), "f"(lo));
  return packed;
}

// Stage: convert_q_to_stage_type (scores warpgroup, e4m3 cache only), once the item's Q tile
// has landed: Q in place to the stage type f16, q_pe times the kpe / ckv scale ratio. A bf16
// query is exact in f16 within f16's range (10 mantissa bits against 7); beyond it saturates,
// and below 2^-24 it flushes to zero. An f16 query needs only its q_pe scaled, and nothing when
// the ratio is one.
template <typename C>
__device__ __forceinline__ void convert_q_to_stage_type(const HopperSmem<C>& sm, float kpe_ratio,
                                                        const HopperRole& role) {
  using QType = typename C::QType;
  constexpr bool kBf16 = Dtype16<QType>::kIsBf16;
  constexpr int kPeChunk = C::kKpeRegion * C::Tile::kRegionBytes / 16;  // q_pe's first chunk
  constexpr int kChunks = C::kTileBytes / 16;
  if (!kBf16 && kpe_ratio == 1.f) return;
#pragma unroll 4
  for (int c = (kBf16 ? 0 : kPeChunk) + role.index; c < kChunks; c += C::kGroupThreads) {
    const float factor = c >= kPeChunk ? kpe_ratio : 1.f;
    const uint32_t address = sm.q + 16 * c;
    uint32_t w[4];
    asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(w[0]), "=r"(w[1]), "=r"(w[2]), "=r"(w[3])
                 : "r"(address));
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      float lo, hi;
      unpack2<QType>(w[i], lo, hi);
      w[i] = pack_f16_saturating(lo * factor, hi * factor);
    }
    asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};" ::"r"(address), "r"(w[0]), "r"(w[1]),
                 "r"(w[2]), "r"(w[3])
                 : "memory");
  }
}

// Stage: load_kv (producer warpgroup), TMA: lane 0 copies regions [0, REGIONS) of the tile as
// boxes of 64 columns x 64 tokens of page `page` (its id read a tile ahead); the stage barrier
// completes on their bytes.
template <typename C, int REGIONS>
__device__ __forceinline__ void load_kv_tma(const MlaParams& p, const HopperTma& tma,
                                            const HopperSmem<C>& sm, const HopperTile& t,
                                            int32_t page, int tile, int stage) {
  const int32_t slot = (t.kv_start + tile * C::kTile) % p.page_size;
  const uint32_t dst = sm.kv(stage), barrier = sm.full(stage);
  const uint64_t policy = l2_evict_first_policy();
  mbarrier_arrive_expect_tx(barrier, REGIONS * C::Tile::kRegionBytes);
#pragma unroll
  for (int region = 0; region < REGIONS; ++region) {
    if (region == C::kKpeRegion) {
      tma_load_3d(dst + region * C::Tile::kRegionBytes, &tma.kpe, 0, slot, page, barrier, policy);
    } else {
      tma_load_3d(dst + region * C::Tile::kRegionBytes, &tma.ckv, region * 64, slot, page,
                  barrier, policy);
    }
  }
}

// The rows the producer gathers: eight threads copy a row's 128 bytes of one region, sixteen
// rows per pass.
template <typename C>
struct GatherRows {
  static constexpr int kRowsPerPass = C::kProducerThreads / 8;
  static constexpr int kPasses = C::kTile / kRowsPerPass;
  static constexpr int kPassesPerHalf = kPasses / C::kTokenHalves;
  __device__ __forceinline__ static int row(int index, int pass) { return index / 8 + pass * kRowsPerPass; }
};

// Page ids of the rows a producer lane copies next (one per gather pass, or the one id of a
// TMA tile), read a tile ahead: with small pages every row may need its own id, and
// waiting for them before the copies would put a global-memory round trip in front of every
// tile. -1 marks rows at or past kv_stop.
template <typename C>
struct NextPages {
  int32_t page[GatherRows<C>::kPasses];

  __device__ __forceinline__ static NextPages fetch(const MlaParams& p, const HopperTma& tma,
                                                    const HopperTile& t, int index, int tile) {
    NextPages g;
    const int32_t tile_start = t.kv_start + tile * C::kTile;
    if (tma.enabled) {
      g.page[0] = tile < t.num_tiles ? p.kv_indices[t.kv_page_base + tile_start / p.page_size] : -1;
      return g;
    }
#pragma unroll
    for (int pass = 0; pass < GatherRows<C>::kPasses; ++pass) {
      const int32_t token = tile_start + GatherRows<C>::row(index, pass);
      g.page[pass] = token < t.kv_stop ? p.kv_indices[t.kv_page_base + token / p.page_size] : -1;
    }
    return g;
  }
};

// Stage: load_kv (producer warpgroup), gather: token t of the request is slot t % page_size of
// page kv_indices[kv_page_base + t / page_size]. Rows at or past kv_stop are zero-filled, so
// that masked scores meet zeros, never stale values that could make 0 * x a NaN. Token half
// `half` of the tile; the caller arrives on the stage barrier once both are issued.
template <typename C>
__device__ __forceinline__ void load_kv_gather(const MlaParams& p, const HopperSmem<C>& sm,
                                               const HopperTile& t, const NextPages<C>& pages,
                                               int index, int tile, int stage, int half) {
  using KVType = typename C::KVType;
  const int lane8 = index % 8;
  const uint32_t dst = sm.kv(stage);
  constexpr int kPasses = GatherRows<C>::kPassesPerHalf;
#pragma unroll
  for (int pass = half * kPasses; pass < (half + 1) * kPasses; ++pass) {
    const int row = GatherRows<C>::row(index, pass);
    const bool valid = pages.page[pass] >= 0;
    const int64_t page = valid ? pages.page[pass] : 0;
    const int32_t slot = valid ? (t.kv_start + tile * C::kTile + row) % p.page_size : 0;
    const KVType* ckv = static_cast<const KVType*>(p.ckv) + page * p.ckv_stride_page +
                        slot * p.ckv_stride_token;
    const KVType* kpe = static_cast<const KVType*>(p.kpe) + page * p.kpe_stride_page +
                        slot * p.kpe_stride_token;
#pragma unroll
    for (int region = 0; region < C::kRegions; ++region) {
      const KVType* src = region < C::kKpeRegion ? ckv + region * 64 : kpe;
      cp_async_16(dst + C::Tile::chunk_offset(region, row, lane8), src + lane8 * 8, valid);
    }
  }
}

// Stage: load_kv (producer warpgroup), the cp.async share of a split copy: regions
// [kSplitTmaRegions, kRegions) of token half `half` of the tile, whose rows all lie in page
// `page`; the caller arrives on the stage barrier once both are issued (beside the TMA bytes).
// Rows past kv_stop are copied as they are, as TMA copies them: clear_tail_rows zeroes them
// where P V would read them.
template <typename C>
__device__ __forceinline__ void load_kv_split_rest(const MlaParams& p, const HopperSmem<C>& sm,
                                                   const HopperTile& t, int32_t page, int index,
                                                   int tile, int stage, int half) {
  using KVType = typename C::KVType;
  const int lane8 = index % 8;
  const uint32_t dst = sm.kv(stage);
  const int32_t slot0 = (t.kv_start + tile * C::kTile) % p.page_size;
  constexpr int kPasses = GatherRows<C>::kPassesPerHalf;
#pragma unroll
  for (int pass = half * kPasses; pass < (half + 1) * kPasses; ++pass) {
    const int row = GatherRows<C>::row(index, pass);
    const int64_t token = slot0 + row;
    const KVType* ckv = static_cast<const KVType*>(p.ckv) +
                        static_cast<int64_t>(page) * p.ckv_stride_page + token * p.ckv_stride_token;
    const KVType* kpe = static_cast<const KVType*>(p.kpe) +
                        static_cast<int64_t>(page) * p.kpe_stride_page + token * p.kpe_stride_token;
#pragma unroll
    for (int region = C::kSplitTmaRegions; region < C::kRegions; ++region) {
      const KVType* src = region < C::kKpeRegion ? ckv + region * 64 : kpe;
      cp_async_16(dst + C::Tile::chunk_offset(region, row, lane8), src + lane8 * 8, true);
    }
  }
}

// ---------------------------------------------------------------------------------------
// Stage: load_kv (producer warpgroup), e4m3 cache: each thread loads 16-byte chunks of codes
// into registers, converts them to their raw values in f16 (the scales apply elsewhere:
// StageTypeOf) and stores them into the stage. A stage need only be free for the stores:
// each thread holds a whole tile of codes, loaded while the stage is still read, so the
// refill after the wait is the conversions and the stores (on the H100 this beat holding half
// a tile by 2-7%: docs/PERF.md). Any page size; rows at or past kv_stop are stored as zeros
// (masked scores meet zeros).
//
// The halves are the stage's token halves (released and refilled apart): in half h, warp w
// covers rows 32 h + 8 w .. 32 h + 8 w + 7, lane l holds codes 16 (l % 4) .. 16 (l % 4) + 15
// of each region of row 32 h + 8 w + l / 4 and stores each chunk as two 16-byte pieces
// (pieces 2 (l % 4) and 2 (l % 4) + 1 of the region's row): the 8 lanes of a store phase, two
// rows of each parity times four pieces, meet all 32 banks under the 128-byte swizzle.
template <typename C>
struct CodeRows {
  static constexpr int kHalves = C::kTokenHalves;
  static_assert(C::kHalfTokens == 8 * (C::kProducerThreads / 32),
                "each warp stores 8 rows of a token half");
  __device__ __forceinline__ static int row(const HopperRole& role, int half) {
    return C::kHalfTokens * half + 8 * role.warp + role.lane / 4;
  }
};

// The page id of this thread's row in each half of a tile (-1 at or past kv_stop, or past the
// item's tiles), read a tile ahead.
template <typename C>
struct CodePages {
  int32_t page[CodeRows<C>::kHalves];

  __device__ __forceinline__ static CodePages fetch(const MlaParams& p, const HopperTile& t,
                                                    const HopperRole& role, int tile) {
    CodePages g;
#pragma unroll
    for (int half = 0; half < CodeRows<C>::kHalves; ++half) {
      const int32_t token = t.kv_start + tile * C::kTile + CodeRows<C>::row(role, half);
      g.page[half] = tile < t.num_tiles && token < t.kv_stop
                         ? p.kv_indices[t.kv_page_base + token / p.page_size]
                         : -1;
    }
    return g;
  }
};

// 16 bytes of codes, or zeros when `valid` is false; evict-first in L2 as the TMA copies are.
__device__ __forceinline__ void load_codes_16(uint32_t (&w)[4], const void* src, bool valid,
                                              uint64_t policy) {
  asm volatile(
      "{\n .reg .pred p;\n setp.ne.b32 p, %5, 0;\n"
      " mov.b32 %0, 0;\n mov.b32 %1, 0;\n mov.b32 %2, 0;\n mov.b32 %3, 0;\n"
      " @p ld.global.nc.L1::no_allocate.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %6;\n}"
      : "=r"(w[0]), "=r"(w[1]), "=r"(w[2]), "=r"(w[3])
      : "l"(src), "r"(static_cast<int>(valid)), "l"(policy));
}

// Where this thread's row of half `half` lies in tile `tile`: its page (0 where the row does
// not exist, past kv_stop or the item's tiles) and slot.
template <typename C>
struct RowPlace {
  int64_t page, slot;
  bool valid;
  __device__ __forceinline__ static RowPlace of(const MlaParams& p, const HopperTile& t,
                                                const CodePages<C>& pages, const HopperRole& role,
                                                int tile, int half) {
    RowPlace r;
    r.valid = pages.page[half] >= 0;
    r.page = r.valid ? pages.page[half] : 0;
    r.slot = (t.kv_start + tile * C::kTile + CodeRows<C>::row(role, half)) % p.page_size;
    return r;
  }
};

// Where this thread's 16 codes of region 0 of each of its rows of a tile lie, and whether the
// rows exist.
template <typename C>
struct CodeSources {
  const unsigned char* ckv[CodeRows<C>::kHalves];
  const unsigned char* kpe[CodeRows<C>::kHalves];
  bool valid[CodeRows<C>::kHalves];

  __device__ __forceinline__ static CodeSources make(const MlaParams& p, const HopperTile& t,
                                                     const CodePages<C>& pages,
                                                     const HopperRole& role, int tile) {
    CodeSources c;
    const int piece = 16 * (role.lane % 4);
#pragma unroll
    for (int half = 0; half < CodeRows<C>::kHalves; ++half) {
      const RowPlace<C> at = RowPlace<C>::of(p, t, pages, role, tile, half);
      c.valid[half] = at.valid;
      c.ckv[half] = static_cast<const unsigned char*>(p.ckv) + at.page * p.ckv_stride_page +
                    at.slot * p.ckv_stride_token + piece;
      c.kpe[half] = static_cast<const unsigned char*>(p.kpe) + at.page * p.kpe_stride_page +
                    at.slot * p.kpe_stride_token + piece;
    }
    return c;
  }
};

// This thread's chunk of `region` of its row in half `half` into `w`.
template <typename C>
__device__ __forceinline__ void load_code_chunk(uint32_t (&w)[4], const CodeSources<C>& src,
                                                int half, int region, uint64_t policy) {
  const unsigned char* from = region < C::kKpeRegion ? src.ckv[half] + region * 64 : src.kpe[half];
  load_codes_16(w, from, src.valid[half], policy);
}

// Eight words (16 values of the stage type) of `region` of this thread's row in half `half`
// into the stage: pieces 2 (lane % 4) and the next of the region's row.
template <typename C>
__device__ __forceinline__ void store_row_chunk(const uint32_t (&v)[8], const HopperSmem<C>& sm,
                                                const HopperRole& role, int stage, int half,
                                                int region) {
  const int row = CodeRows<C>::row(role, half);
  const int piece = 2 * (role.lane % 4);
  const uint32_t dst = sm.kv(stage);
  asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};" ::"r"(
                   dst + C::Tile::chunk_offset(region, row, piece)),
               "r"(v[0]), "r"(v[1]), "r"(v[2]), "r"(v[3])
               : "memory");
  asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};" ::"r"(
                   dst + C::Tile::chunk_offset(region, row, piece + 1)),
               "r"(v[4]), "r"(v[5]), "r"(v[6]), "r"(v[7])
               : "memory");
}

// Chunk `region` of half `half`, converted, into the stage.
template <typename C>
__device__ __forceinline__ void store_code_chunk(const uint32_t (&w)[4], const HopperSmem<C>& sm,
                                                 const HopperRole& role, int stage, int half,
                                                 int region) {
  uint32_t v[8];
  convert_chunk_f16(w, v);
  store_row_chunk<C>(v, sm, role, stage, half, region);
}

// The producer warpgroup's loop over a work item's tiles of e4m3 codes (every thread). Each
// thread holds a whole tile of codes (18 chunks, 72 registers) and loads a chunk of the next
// tile as soon as it has stored that register: the codes are in flight while the stage is
// still read, and its refill after `empty` is the conversions and stores. Page ids are read
// two tiles ahead of their stores (one ahead of their codes' loads).
template <typename C>
__device__ __forceinline__ void producer_loop_codes(const MlaParams& p, const HopperSmem<C>& sm,
                                                    const HopperTile& t, uint32_t sequence,
                                                    const HopperRole& role) {
  const uint64_t policy = l2_evict_first_policy();
  uint32_t codes[CodeRows<C>::kHalves][C::kRegions][4];
  {
    const CodeSources<C> first =
        CodeSources<C>::make(p, t, CodePages<C>::fetch(p, t, role, 0), role, 0);
#pragma unroll
    for (int half = 0; half < CodeRows<C>::kHalves; ++half)
#pragma unroll
      for (int region = 0; region < C::kRegions; ++region)
        load_code_chunk<C>(codes[half][region], first, half, region, policy);
  }
  CodePages<C> pages = CodePages<C>::fetch(p, t, role, 1);
#pragma unroll 1
  for (int tile = 0; tile < t.num_tiles; ++tile) {
    const StageSlot slot = StageSlot::of(sequence + tile);
    const CodeSources<C> next = CodeSources<C>::make(p, t, pages, role, tile + 1);
    pages = CodePages<C>::fetch(p, t, role, tile + 2);
#pragma unroll
    for (int half = 0; half < CodeRows<C>::kHalves; ++half) {
      wait_half_free<C>(sm, sequence + tile, half);
#pragma unroll
      for (int region = 0; region < C::kRegions; ++region) {
        store_code_chunk<C>(codes[half][region], sm, role, slot.stage, half, region);
        // The next tile's chunk (zeros past the item's tiles: never stored).
        load_code_chunk<C>(codes[half][region], next, half, region, policy);
      }
    }
    // The stores are the generic proxy's; wgmma reads through the async proxy.
    fence_proxy_async_shared();
    mbarrier_arrive(sm.full(slot.stage));
  }
}

// DeepSeek-V3.2's cache (e4m3_token128_t), one row of a thread's tile in registers: the ckv
// codes of regions 0 .. kKpeRegion - 1 (16 a region) and the row's four ckv scales. (Its kpe,
// already in the stage type, goes by cp.async: copy_token_kpe.)
template <typename C>
struct TokenRowCodes {
  uint32_t codes[C::kKpeRegion][4];
  float scales[C::kHeadDimCkv / kCkvScaleBlock];
};

// Loads a row's codes and scales (zeros where the row does not exist).
template <typename C>
__device__ __forceinline__ void load_token_row(TokenRowCodes<C>& r, const MlaParams& p,
                                               const RowPlace<C>& at, const HopperRole& role,
                                               uint64_t policy) {
  static_assert(C::kHeadDimCkv / kCkvScaleBlock == 4, "one 16-byte load of a row's scales");
  const unsigned char* ckv = static_cast<const unsigned char*>(p.ckv) +
                             at.page * p.ckv_stride_page + at.slot * p.ckv_stride_token +
                             16 * (role.lane % 4);
#pragma unroll
  for (int region = 0; region < C::kKpeRegion; ++region) {
    load_codes_16(r.codes[region], ckv + region * 64, at.valid, policy);
  }
  uint32_t scales[4];
  load_codes_16(scales,
                p.ckv_scales + at.page * p.ckv_scales_stride_page + at.slot * p.ckv_scales_stride_token,
                at.valid, policy);
#pragma unroll
  for (int b = 0; b < 4; ++b) r.scales[b] = __uint_as_float(scales[b]);
}

// The row's 16 kpe values of this thread (32 bytes, pieces 2 (lane % 4) and the next of the
// kpe region, as store_row_chunk places a chunk) by cp.async into the stage.
template <typename C>
__device__ __forceinline__ void copy_token_kpe(const MlaParams& p, const RowPlace<C>& at,
                                               const HopperSmem<C>& sm, const HopperRole& role,
                                               int stage, int half) {
  const auto* kpe = static_cast<const typename C::QType*>(p.kpe) + at.page * p.kpe_stride_page +
                    at.slot * p.kpe_stride_token + 16 * (role.lane % 4);
  const int row = CodeRows<C>::row(role, half);
  const int piece = 2 * (role.lane % 4);
#pragma unroll
  for (int k = 0; k < 2; ++k) {
    cp_async_16(sm.kv(stage) + C::Tile::chunk_offset(C::kKpeRegion, row, piece + k), kpe + 8 * k,
                at.valid);
  }
}

// A row's chunk of `region`, dequantized with the row's scale for the 128 values it lies in,
// into the stage (store_row_chunk).
template <typename C>
__device__ __forceinline__ void store_token_chunk(const TokenRowCodes<C>& r,
                                                  const HopperSmem<C>& sm, const HopperRole& role,
                                                  int stage, int half, int region) {
  uint32_t v[8];
  dequantize_chunk<typename C::StageType>(
      r.codes[region], r.scales[region * 64 / kCkvScaleBlock] * kF16PairFactor, v);
  store_row_chunk<C>(v, sm, role, stage, half, region);
}

// The producer warpgroup's loop over a work item's tiles of DeepSeek-V3.2's cache: as
// producer_loop_codes (a whole tile of codes, and the rows' scales, held a tile ahead), with
// each chunk dequantized by its token's scale into Q's type, and kpe copied by cp.async once
// the stage is free (landed before the stage's arrival).
template <typename C>
__device__ __forceinline__ void producer_loop_token_codes(const MlaParams& p,
                                                          const HopperSmem<C>& sm,
                                                          const HopperTile& t, uint32_t sequence,
                                                          const HopperRole& role) {
  const uint64_t policy = l2_evict_first_policy();
  TokenRowCodes<C> rows[CodeRows<C>::kHalves];
  CodePages<C> now = CodePages<C>::fetch(p, t, role, 0);
#pragma unroll
  for (int half = 0; half < CodeRows<C>::kHalves; ++half) {
    load_token_row<C>(rows[half], p, RowPlace<C>::of(p, t, now, role, 0, half), role, policy);
  }
  CodePages<C> next = CodePages<C>::fetch(p, t, role, 1);
#pragma unroll 1
  for (int tile = 0; tile < t.num_tiles; ++tile) {
    const StageSlot slot = StageSlot::of(sequence + tile);
    // The whole stage first: storing each half as it frees takes registers this role lacks.
    wait_stage_free<C>(sm, sequence + tile);
#pragma unroll
    for (int half = 0; half < CodeRows<C>::kHalves; ++half) {
      copy_token_kpe<C>(p, RowPlace<C>::of(p, t, now, role, tile, half), sm, role,
                        slot.stage, half);
    }
    cp_async_commit();
#pragma unroll
    for (int half = 0; half < CodeRows<C>::kHalves; ++half) {
#pragma unroll
      for (int region = 0; region < C::kKpeRegion; ++region) {
        store_token_chunk<C>(rows[half], sm, role, slot.stage, half, region);
      }
      // The next tile's row (zeros past the item's tiles: never stored).
      load_token_row<C>(rows[half], p, RowPlace<C>::of(p, t, next, role, tile + 1, half),
                        role, policy);
    }
    now = next;
    next = CodePages<C>::fetch(p, t, role, tile + 2);
    cp_async_wait<0>();
    // The stores and copies are the generic proxy's; wgmma reads through the async proxy.
    fence_proxy_async_shared();
    mbarrier_arrive(sm.full(slot.stage));
  }
}

// The producer warpgroup's loop over the tiles of a work item of a 16-bit cache: a stage is
// refilled once both output warpgroups are done with the tile before it in the CTA's sequence
// (read it, or for an item's last tile also written O through it), whichever item that tile
// belonged to. The gather refills each token half as soon as it is free (on the H100: page 1
// 4-7% faster at 128 heads); TMA copies wait for the whole stage, whose bytes arrive at the
// memory's pace either way (refilling by halves measured no faster, and 11% slower at B16
// L4096).
template <typename C>
__device__ __forceinline__ void producer_loop_copies(const MlaParams& p, const HopperTma& tma,
                                                     const HopperSmem<C>& sm, const HopperTile& t,
                                                     uint32_t sequence, const HopperRole& role) {
  NextPages<C> pages = NextPages<C>::fetch(p, tma, t, role.index, 0);
#pragma unroll 1
  for (int tile = 0; tile < t.num_tiles; ++tile) {
    const StageSlot slot = StageSlot::of(sequence + tile);
    if (tma.enabled) wait_stage_free<C>(sm, sequence + tile);
    if (tma.enabled && tma.split_copies) {
      if (role.index == 0) {
        load_kv_tma<C, C::kSplitTmaRegions>(p, tma, sm, t, pages.page[0], tile, slot.stage);
      }
#pragma unroll
      for (int half = 0; half < C::kTokenHalves; ++half) {
        load_kv_split_rest<C>(p, sm, t, pages.page[0], role.index, tile, slot.stage, half);
      }
    } else if (tma.enabled) {
      if (role.index == 0) {
        load_kv_tma<C, C::kRegions>(p, tma, sm, t, pages.page[0], tile, slot.stage);
      }
    } else {
#pragma unroll
      for (int half = 0; half < C::kTokenHalves; ++half) {
        wait_half_free<C>(sm, sequence + tile, half);
        load_kv_gather<C>(p, sm, t, pages, role.index, tile, slot.stage, half);
      }
    }
    if (!tma.enabled || tma.split_copies) cp_async_mbarrier_arrive(sm.full(slot.stage));
    pages = NextPages<C>::fetch(p, tma, t, role.index, tile + 1);
  }
}

template <typename C>
__device__ __forceinline__ void producer_loop(const MlaParams& p, const HopperTma& tma,
                                              const HopperSmem<C>& sm, const HopperTile& t,
                                              uint32_t sequence, const HopperRole& role) {
  if constexpr (C::kTokenScales) {
    producer_loop_token_codes<C>(p, sm, t, sequence, role);
  } else if constexpr (C::kKvCodes) {
    producer_loop_codes<C>(p, sm, t, sequence, role);
  } else {
    producer_loop_copies<C>(p, tma, sm, t, sequence, role);
  }
}

// TMA copies whole boxes: rows of a tile's last page past kv_stop hold whatever the cache
// holds there (other tokens, or garbage that may be NaN). Their scores are masked, but P V
// would still multiply 0 by them: each output warpgroup zeroes those rows of the V regions it
// reads (after the tile's Q K^T, before its P V).
template <typename C>
__device__ __forceinline__ void clear_tail_rows(const HopperSmem<C>& sm, const HopperTile& t,
                                                const HopperRole& role, int tile, int stage) {
  const int32_t valid = t.kv_stop - (t.kv_start + tile * C::kTile);
  if (valid >= C::kTile) return;
  const int region0 = role.half() * C::kOutRegions;
  const int lane8 = role.index % 8;
  for (int row = max(valid, 0) + role.index / 8; row < C::kTile; row += C::kGroupThreads / 8) {
#pragma unroll
    for (int r = 0; r < C::kOutRegions; ++r) {
      const uint32_t address = sm.kv(stage) + C::Tile::chunk_offset(region0 + r, row, lane8);
      asm volatile("st.shared.v4.u32 [%0], {%1, %1, %1, %1};" ::"r"(address), "r"(0u) : "memory");
    }
  }
  fence_proxy_async_shared();
  named_barrier_sync(role.half() == 0 ? kOutputLeftOnly : kOutputRightOnly, C::kGroupThreads);
}

// ---------------------------------------------------------------------------------------
// Stage: compute_qk (scores warpgroup). s = Q . K^T of the tile in `stage`: 64 rows x 64
// tokens over all dims. Issued only: the caller waits.
template <typename C>
__device__ __forceinline__ void issue_qk(float (&s)[32], const HopperSmem<C>& sm, int stage) {
  const uint32_t k = sm.kv(stage);
  wgmma_fence();
#pragma unroll
  for (int step = 0; step < C::kQkSteps; ++step) {
    wgmma_ss<typename C::StageType, 64, 0>(s, k_major_descriptor<C::kRows>(sm.q, 0, step),
                                       k_major_descriptor<C::kRows>(k, 0, step), step > 0);
  }
  wgmma_commit();
}

// Scores of tokens a row may not see (past the chunk, or in its causal future) become -inf.
template <typename C>
__device__ __forceinline__ void mask_scores(float (&s)[32], const HopperTile& t, int tile,
                                            const HopperRole& role) {
  const int32_t tile_start = t.kv_start + tile * C::kTile;
#pragma unroll
  for (int n8 = 0; n8 < 8; ++n8)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int32_t token = tile_start + role.col(n8) + (e & 1);
      if (token >= t.row_limit[e >> 1]) s[4 * n8 + e] = neg_inf();
    }
}

// Online-softmax state of a scores-warpgroup thread: its rows' running max (raw scores)
// and partial row sums.
struct SoftmaxRows {
  float m[2];
  float l[2];
  __device__ __forceinline__ void init() {
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      m[j] = neg_inf();
      l[j] = 0.f;
    }
  }
};

// Stage: update_softmax_state, in three steps. First the new row maxima and the rescale
// factor of each row (O's and l's); then each half of s (tokens 32 h .. 32 h + 31) turned into
// the unnormalised probabilities 2^(s c - m c), packed as the A operand of P V (one m64k16
// fragment per 16 tokens), so that the first half can be published while the second is
// computed.
struct RowBases {
  float base[2];  // m c of each row, 0 for a row that has seen nothing
};

__device__ __forceinline__ RowBases update_row_max(const float (&s)[32], float (&alpha)[2],
                                                   SoftmaxRows& st, float scale_log2) {
  RowBases b;
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    float mx = st.m[j];
#pragma unroll
    for (int n8 = 0; n8 < 8; ++n8) mx = fmaxf(mx, fmaxf(s[4 * n8 + 2 * j], s[4 * n8 + 2 * j + 1]));
    mx = quad_max(mx);
    // A row that has seen nothing keeps m = -inf: base 0 makes 2^(-inf - 0) = 0, not NaN.
    b.base[j] = mx == neg_inf() ? 0.f : mx * scale_log2;
    alpha[j] = fast_exp2(st.m[j] * scale_log2 - b.base[j]);
    st.m[j] = mx;
    st.l[j] *= alpha[j];
  }
  return b;
}

template <typename C, int HALF>
__device__ __forceinline__ void exponentiate_half(float (&s)[32], uint32_t (&p)[4][4],
                                                  const RowBases& b, SoftmaxRows& st,
                                                  float scale_log2) {
#pragma unroll
  for (int j = 0; j < 2; ++j) {
#pragma unroll
    for (int n8 = 4 * HALF; n8 < 4 * HALF + 4; ++n8) {
      s[4 * n8 + 2 * j] = fast_exp2(s[4 * n8 + 2 * j] * scale_log2 - b.base[j]);
      s[4 * n8 + 2 * j + 1] = fast_exp2(s[4 * n8 + 2 * j + 1] * scale_log2 - b.base[j]);
      st.l[j] += s[4 * n8 + 2 * j] + s[4 * n8 + 2 * j + 1];
    }
  }
#pragma unroll
  for (int k = 2 * HALF; k < 2 * HALF + 2; ++k) {
    // Tokens 16k..16k+15: n8 blocks 2k (cols 0-7) and 2k+1 (cols 8-15), rows r and r + 8.
    p[k][0] = Dtype16<typename C::StageType>::pack(s[8 * k], s[8 * k + 1]);
    p[k][1] = Dtype16<typename C::StageType>::pack(s[8 * k + 2], s[8 * k + 3]);
    p[k][2] = Dtype16<typename C::StageType>::pack(s[8 * k + 4], s[8 * k + 5]);
    p[k][3] = Dtype16<typename C::StageType>::pack(s[8 * k + 6], s[8 * k + 7]);
  }
}

// Stage: publish_alpha. The rescale factors into their slot, as soon as the row maxima are
// known: the output warpgroups rescale O while the probabilities are computed.
template <typename C>
__device__ __forceinline__ void publish_alpha(const float (&alpha)[2], const HopperSmem<C>& sm,
                                              int stage, const HopperRole& role) {
  if (role.lane % 4 == 0) {
    sm.alpha[stage * C::kRows + role.row(0)] = alpha[0];
    sm.alpha[stage * C::kRows + role.row(1)] = alpha[1];
  }
  mbarrier_arrive(sm.scaled(stage));
}

// Stage: publish_p, for half HALF of P: its fragments into P's tile (K-major, the A operand of
// the output wgmma). stmatrix lane l addresses row l % 8 of 8x8 matrix l / 8.
template <typename C, int HALF>
__device__ __forceinline__ void publish_p(const uint32_t (&p)[4][4], const HopperSmem<C>& sm,
                                          int stage, const HopperRole& role) {
  const int matrix = role.lane / 8;
  const int row = 16 * role.warp + (matrix & 1) * 8 + role.lane % 8;
#pragma unroll
  for (int k = 2 * HALF; k < 2 * HALF + 2; ++k) {
    stmatrix_x4(sm.p + C::Tile::offset(row, 2 * k + (matrix >> 1)), p[k]);
  }
  fence_proxy_async_shared();
  mbarrier_arrive(sm.ready(stage, HALF));
}

// O (kOutCols columns of 64 rows: the warpgroup's half) scaled row-wise; skipped by a warp
// whose rows' maxima all stayed (the common case once a row has seen its largest scores).
template <typename C>
__device__ __forceinline__ void rescale_o(float (&o)[C::kOutCols / 2], const float (&alpha)[2]) {
  if (!__any_sync(0xffffffffu, alpha[0] != 1.f || alpha[1] != 1.f)) return;
#pragma unroll
  for (int n8 = 0; n8 < C::kOutCols / 8; ++n8)
#pragma unroll
    for (int e = 0; e < 4; ++e) o[4 * n8 + e] *= alpha[e >> 1];
}

// Stage: compute_pv (output warpgroup): O[:, its columns] += P . V over tokens 32 HALF ..
// 32 HALF + 31. Issued and committed only.
template <typename C, int HALF>
__device__ __forceinline__ void issue_pv(float (&o)[C::kOutCols / 2], const HopperSmem<C>& sm,
                                         int stage, const HopperRole& role) {
  const uint64_t pd = k_major_descriptor<C::kRows>(opaque_address(sm.p), 0, 0);
  const uint64_t v = mn_major_descriptor<C::kRows>(opaque_address(sm.kv(stage)), 0, 0);
  // Two products of half the columns each: the CTA's 512 threads start with 128 registers,
  // and ptxas places each wgmma within that (a 64 x 256 accumulator needs 154).
  constexpr int kCols = C::kOutCols / 2;
  float(&o_left)[kCols / 2] = *reinterpret_cast<float(*)[kCols / 2]>(&o[0]);
  float(&o_right)[kCols / 2] = *reinterpret_cast<float(*)[kCols / 2]>(&o[kCols / 2]);
  const int region0 = role.half() * C::kOutRegions;
  wgmma_fence();
#pragma unroll
  for (int k = 2 * HALF; k < 2 * HALF + 2; ++k) {
    const uint64_t pk = advance_descriptor(pd, k_major_offset<C::kRows>(k));
    wgmma_ss<typename C::StageType, kCols, 1>(
        o_left, pk, advance_descriptor(v, mn_major_offset<C::kRows>(region0, k)), 1);
    wgmma_ss<typename C::StageType, kCols, 1>(
        o_right, pk, advance_descriptor(v, mn_major_offset<C::kRows>(region0 + kCols / 64, k)), 1);
  }
  wgmma_commit();
}

// ---------------------------------------------------------------------------------------
// The scores warpgroup's KV loop over a work item's tiles.
template <typename C>
__device__ __forceinline__ void scores_loop(const HopperSmem<C>& sm, const HopperTile& t,
                                            uint32_t sequence, float scale_log2, SoftmaxRows& st,
                                            const HopperRole& role) {
#pragma unroll 1
  for (int tile = 0; tile < t.num_tiles; ++tile) {
    const StageSlot slot = StageSlot::of(sequence + tile);
    mbarrier_wait(sm.full(slot.stage), slot.parity);
    float s[32];
    issue_qk<C>(s, sm, slot.stage);
    wgmma_wait<0>();
    fence_registers(s);
    if (t.kv_start + (tile + 1) * C::kTile > t.unmasked_end) mask_scores<C>(s, t, tile, role);
    uint32_t pa[4][4];
    float alpha[2];
    const RowBases bases = update_row_max(s, alpha, st, scale_log2);
    // The scaled and ready barriers are never waited on here, yet never arrived on twice in
    // one phase: the stage's next fill waits (through both halves' empty) for the output
    // warpgroups, which wait for these phases first.
    publish_alpha<C>(alpha, sm, slot.stage, role);
    exponentiate_half<C, 0>(s, pa, bases, st, scale_log2);
    // P's tile is free once both output warpgroups are done with the CTA's tile before.
    if (sequence + tile > 0) mbarrier_wait(sm.p_read(), (sequence + tile - 1) & 1u);
    publish_p<C, 0>(pa, sm, slot.stage, role);
    exponentiate_half<C, 1>(s, pa, bases, st, scale_log2);
    publish_p<C, 1>(pa, sm, slot.stage, role);
  }
}

// An output warpgroup's loop: P V of each tile's half of the columns, then the release of P
// and of the stage's token halves, each as soon as its product is done; the item's last stage
// is released by write_output, which stages O in it.
template <typename C>
__device__ __forceinline__ void output_loop(const HopperTma& tma, const HopperSmem<C>& sm,
                                            const HopperTile& t, uint32_t sequence,
                                            float (&o)[C::kOutCols / 2], const HopperRole& role) {
#pragma unroll 1
  for (int tile = 0; tile < t.num_tiles; ++tile) {
    const StageSlot slot = StageSlot::of(sequence + tile);
    mbarrier_wait(sm.scaled(slot.stage), slot.parity);
    mbarrier_wait(sm.full(slot.stage), slot.parity);  // the copy's bytes, seen by this proxy too
    const float alpha[2] = {sm.alpha[slot.stage * C::kRows + role.row(0)],
                            sm.alpha[slot.stage * C::kRows + role.row(1)]};
    if (tma_copies<C>(tma)) clear_tail_rows<C>(sm, t, role, tile, slot.stage);
    rescale_o<C>(o, alpha);
    mbarrier_wait(sm.ready(slot.stage, 0), slot.parity);
    issue_pv<C, 0>(o, sm, slot.stage, role);
    mbarrier_wait(sm.ready(slot.stage, 1), slot.parity);
    issue_pv<C, 1>(o, sm, slot.stage, role);
    const bool last = tile + 1 == t.num_tiles;
    // The first token half is free once its product is done: its refill starts while the
    // second half is multiplied. The waits stay unconditional: a wgmma.wait_group in a
    // divergent path makes ptxas serialize every wgmma of the kernel (C7518, docs/PERF.md).
    wgmma_wait<1>();
    if (!last) mbarrier_arrive(sm.empty(slot.stage, 0));
    wgmma_wait<0>();
    fence_registers(o);
    mbarrier_arrive(sm.p_read());
    if (!last) mbarrier_arrive(sm.empty(slot.stage, 1));
  }
}

// Stage: write_output, in two steps. Written from the accumulator fragments, a warp's stores
// would each touch 8 rows in 16-byte pieces: on the H100 that took 7,800-15,000 cycles an
// item (the CTA's whole output, longer when every SM writes at once), while the next item's
// P V waited. So each output warpgroup first stages its half of O, scaled by 1 / row sum, in
// its own V regions of the item's last stage, then writes whole 512-byte row halves from
// there, and only then releases the stage to the producer. Those regions are free: a wgmma is
// one operation of the whole warpgroup, so a warp past its wait on the last P V knows all four
// warps' reads of them done; the other output warpgroup reads other regions, and the scores
// warpgroup's Q K^T of that tile was done before it published P.
template <typename C>
__device__ __forceinline__ void stage_output(const float (&o)[C::kOutCols / 2], const float (&l)[2],
                                             float scale, uint32_t staging, const HopperRole& role) {
  using OType = typename C::OType;
  const float inv[2] = {l[0] > 0.f ? scale / l[0] : 0.f, l[1] > 0.f ? scale / l[1] : 0.f};
  // stmatrix x4: lanes 8m..8m+7 address the rows of matrix m = (rows 8 (m & 1) of the warp's
  // 16, column chunk n8 + m / 2); register m holds this lane's pair of it.
  const int matrix = role.lane / 8;
  const int row = 16 * role.warp + 8 * (matrix & 1) + role.lane % 8;
#pragma unroll
  for (int n8 = 0; n8 < C::kOutCols / 8; n8 += 2) {
    const uint32_t packed[4] = {
        Dtype16<OType>::pack(o[4 * n8] * inv[0], o[4 * n8 + 1] * inv[0]),
        Dtype16<OType>::pack(o[4 * n8 + 2] * inv[1], o[4 * n8 + 3] * inv[1]),
        Dtype16<OType>::pack(o[4 * n8 + 4] * inv[0], o[4 * n8 + 5] * inv[0]),
        Dtype16<OType>::pack(o[4 * n8 + 6] * inv[1], o[4 * n8 + 7] * inv[1])};
    stmatrix_x4(staging + C::Tile::offset(row, n8 + matrix / 2), packed);
  }
}

// A warp writes one 512-byte row half per step (lane i its 16-byte chunk i), from the staging
// area, or zeros where the item had no tile (kv_len 0: no stage, and O is 0).
template <typename C>
__device__ __forceinline__ void store_output_rows(const MlaParams& p, const HopperTile& t,
                                                  uint32_t staging, bool staged,
                                                  const HopperRole& role) {
  using OType = typename C::OType;
  static_assert(C::kOutCols / 8 == 32, "a warp's 32 lanes write one row half, 16 bytes each");
  const bool partial = t.partial_row >= 0;
  const int32_t partial_row0 = t.partial_row + blockIdx.x * C::kRows;
  const int col = role.half() * C::kOutCols + 8 * role.lane;
#pragma unroll 4
  for (int row = role.warp; row < C::kRows; row += C::kGroupThreads / 32) {
    if (row >= t.rows) break;
    Chunk16 v{};
    if (staged) {
      asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];"
                   : "=r"(v.w[0]), "=r"(v.w[1]), "=r"(v.w[2]), "=r"(v.w[3])
                   : "r"(staging + C::Tile::offset(row, role.lane)));
    }
    OType* dst = partial ? static_cast<OType*>(p.partial_o) +
                               static_cast<int64_t>(partial_row0 + row) * C::kHeadDimCkv
                         : static_cast<OType*>(p.out) + final_row_offset(p, t.q_token_base, t.row0 + row);
    *reinterpret_cast<Chunk16*>(dst + col) = v;
  }
}

// `last_stage`: the stage of the item's last tile, still held by this warpgroup (-1: none).
// O is scaled by the cache's ckv scale (CacheScales) with its normalisation.
template <typename C>
__device__ __forceinline__ void write_output(const MlaParams& p, const float (&o)[C::kOutCols / 2],
                                             const float (&l)[2], const HopperTile& t,
                                             const HopperSmem<C>& sm, int last_stage,
                                             const HopperRole& role) {
  const bool staged = last_stage >= 0;
  const uint32_t staging =
      sm.kv(staged ? last_stage : 0) + role.half() * C::kOutRegions * C::Tile::kRegionBytes;
  const uint32_t own_barrier = role.half() == 0 ? kOutputLeftOnly : kOutputRightOnly;
  if (staged) {
    stage_output<C>(o, l, CacheScales<C>::of(p).ckv, staging, role);
    named_barrier_sync(own_barrier, C::kGroupThreads);
  }
  store_output_rows<C>(p, t, staging, staged, role);
  if (staged) {
    // A TMA fill of the stage is the async proxy's: order this warpgroup's use of it first.
    fence_proxy_async_shared();
    mbarrier_arrive(sm.empty(last_stage, 0));
    mbarrier_arrive(sm.empty(last_stage, 1));
  }
}

// The CTA's first item after `w` with rows here (items without rows are skipped by every
// role), and its tile; w == last when there is none.
struct ItemCursor {
  int32_t w;
  HopperTile t;
};

template <typename C>
__device__ __forceinline__ ItemCursor next_item(const MlaParams& p, int32_t w, int32_t last,
                                                const HopperRole& role) {
  ItemCursor c;
  for (c.w = w + 1; c.w < last; ++c.w) {
    c.t = make_hopper_tile<C>(p, p.work_items[c.w], role);
    if (c.t.rows > 0) break;
  }
  return c;
}

// One work item, in each role (scores_item, output_item, producer_item): this CTA's 64 rows
// of a query tile against one KV chunk. `sequence` counts the tiles the CTA has run so far
// (the stage ring and its barrier phases), `items` the work items (the row sums' barrier
// phases).
// The scores warpgroup's item, which returns the next one (`last`: the CTA's end; its tile is
// then unset). Its Q was issued at the end of the previous item when `q_loaded`: this
// warpgroup loads the next item's Q as soon as its last Q K^T of this one is done (only it
// reads Q; a wgmma is one operation of the whole warpgroup, so a warp past its wait knows all
// four warps' reads of Q done), so that the copies go out before the output warpgroups'
// stores of this item's output.
template <typename C>
__device__ __forceinline__ ItemCursor scores_item(const MlaParams& p, const HopperSmem<C>& sm,
                                                  const ItemCursor& item, int32_t last,
                                                  uint32_t& sequence, uint32_t& items,
                                                  bool& q_loaded, const HopperRole& role) {
  const HopperTile& t = item.t;
  const CacheScales<C> scales = CacheScales<C>::of(p);
  const float scale_log2 = p.sm_scale_log2 * scales.ckv;
  SoftmaxRows st;
  st.init();
  if (t.num_tiles > 0) {
    if (!q_loaded) load_q<C>(p, sm, t, role);
    cp_async_wait<0>();
    if (C::kKvCodes && !C::kTokenScales) {
      named_barrier_sync(kScoresOnly, C::kGroupThreads);  // every thread's chunks have landed
      convert_q_to_stage_type<C>(sm, scales.kpe_over_ckv, role);
    }
    fence_proxy_async_shared();
    named_barrier_sync(kScoresOnly, C::kGroupThreads);
  }
  scores_loop<C>(sm, t, sequence, scale_log2, st, role);
  const ItemCursor next = next_item<C>(p, item.w, last, role);
  q_loaded = next.w < last && next.t.num_tiles > 0;
  if (q_loaded) load_q<C>(p, sm, next.t, role);
  const bool partial = t.partial_row >= 0;
  const int32_t partial_row0 = t.partial_row + blockIdx.x * C::kRows;
  // The output warpgroups have read the previous item's row sums.
  if (items > 0) mbarrier_wait(sm.sums_read(), (items - 1) & 1u);
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    const int row = role.row(j);
    const float l = quad_sum(st.l[j]);
    if (role.lane % 4 == 0) sm.row_sum[row] = l;
    const float lse = st.m[j] == neg_inf() || l <= 0.f ? neg_inf()
                                                       : st.m[j] * scale_log2 + fast_log2(l);
    if (role.lane % 4 == 0 && row < t.rows) {
      if (partial) {
        p.partial_lse[partial_row0 + row] = lse;
      } else {
        write_final_lse(p, t.q_token_base, t.row0 + row, lse);
      }
    }
  }
  // The output warpgroups read the row sums after this phase, and say so on sums_read: with
  // both barriers each side is at most one item ahead of the other.
  mbarrier_arrive(sm.sums());
  sequence += t.num_tiles;
  ++items;
  return next;
}

template <typename C>
__device__ __forceinline__ void output_item(const MlaParams& p, const HopperTma& tma,
                                            const HopperSmem<C>& sm, const MlaWorkItem& item,
                                            uint32_t& sequence, uint32_t& items,
                                            const HopperRole& role) {
  const HopperTile t = make_hopper_tile<C>(p, item, role);
  if (t.rows <= 0) return;
  float o[C::kOutCols / 2];
#pragma unroll
  for (int i = 0; i < C::kOutCols / 2; ++i) o[i] = 0.f;
  output_loop<C>(tma, sm, t, sequence, o, role);
  const int last_stage = t.num_tiles > 0 ? StageSlot::of(sequence + t.num_tiles - 1).stage : -1;
  sequence += t.num_tiles;
  mbarrier_wait(sm.sums(), items & 1u);
  ++items;
  const float l[2] = {sm.row_sum[role.row(0)], sm.row_sum[role.row(1)]};
  mbarrier_arrive(sm.sums_read());
  write_output<C>(p, o, l, t, sm, last_stage, role);
}

// No role waits for another at an item's start: the producer goes on to the next item's tiles
// as soon as their stages are free, the scores warpgroup as soon as they land.
template <typename C>
__device__ __forceinline__ void producer_item(const MlaParams& p, const HopperTma& tma,
                                              const HopperSmem<C>& sm, const MlaWorkItem& item,
                                              uint32_t& sequence, const HopperRole& role) {
  const HopperTile t = make_hopper_tile<C>(p, item, role);
  if (t.rows <= 0) return;
  producer_loop<C>(p, tma, sm, t, sequence, role);
  sequence += t.num_tiles;
}

// Every role runs its own loop over the CTA's work items.
enum class HopperRoleKind { kScores, kOutput, kProducer };

template <typename C, HopperRoleKind ROLE>
__device__ __forceinline__ void for_each_item(const MlaParams& p, const HopperTma& tma,
                                              const HopperSmem<C>& sm, const HopperRole& role) {
  uint32_t sequence = 0, items = 0;
  const int32_t first = p.work_indptr[blockIdx.y];
  const int32_t last = p.work_indptr[blockIdx.y + 1];
  if constexpr (ROLE == HopperRoleKind::kScores) {
    bool q_loaded = false;
    ItemCursor item = next_item<C>(p, first - 1, last, role);
#pragma unroll 1
    while (item.w < last) item = scores_item<C>(p, sm, item, last, sequence, items, q_loaded, role);
  } else {
#pragma unroll 1
    for (int32_t w = first; w < last; ++w) {
      if constexpr (ROLE == HopperRoleKind::kOutput) {
        output_item<C>(p, tma, sm, p.work_items[w], sequence, items, role);
      } else {
        producer_item<C>(p, tma, sm, p.work_items[w], sequence, role);
      }
    }
  }
}

// The grid barrier (cooperative launch) and the merge of split tiles, by every thread at the
// registers of a CTA at launch (each role sets them back to kMergeRegisters first), with
// BATCH chunks' loads in flight per thread.
// Its scratch is the start of the dynamic shared memory (the alignment slack and Q's tile),
// free once the grid barrier's block barrier has passed the last item.
template <typename C>
__device__ __forceinline__ void merge_phase(const MlaParams& params, unsigned char* dynamic_smem) {
  static_assert(C::kTileBytes >= kMergeScratchBytes<C::kThreads>, "the merge's scratch fits in Q's tile");
  if (params.phase == 0) grid_barrier(params.barrier, gridDim.x * gridDim.y);
  if (params.phase != 1) {
    merge_partials<typename C::OType, C::kHeadDimCkv, C::kThreads, C::kMergeBatch>(
        params, reinterpret_cast<float*>(dynamic_smem));
  }
}

// Each role is one branch of one if/else chain, whole, with its setmaxnreg first: the form in
// which ptxas honours setmaxnreg (otherwise it keeps the entry cap of 168 registers and spills).
// The CTA meets once every role holds its registers: a role that went back to
// kMergeRegisters before the output warpgroups had taken theirs (a CTA without work items, or
// the merge launch) would take registers they wait for, and the CTA would hang.
template <typename Config>
__global__ void __launch_bounds__(Config::kThreads, 1)
    mla_hopper_kernel(const __grid_constant__ MlaParams params, const __grid_constant__ HopperTma tma) {
  extern __shared__ __align__(128) unsigned char hopper_smem[];
  const HopperRole role = HopperRole::make();
  const HopperSmem<Config> sm = HopperSmem<Config>::make(hopper_smem);
  if (params.phase != 2 && threadIdx.x == 0) {
    for (int stage = 0; stage < Config::kStages; ++stage) {
      // Arrivals: the TMA thread's, and each producer thread's cp.async.
      mbarrier_init(sm.full(stage), !tma_copies<Config>(tma) ? Config::kProducerThreads
                                    : tma.split_copies ? 1 + Config::kProducerThreads
                                                       : 1);
      mbarrier_init(sm.empty(stage, 0), Config::kOutputThreads);
      mbarrier_init(sm.empty(stage, 1), Config::kOutputThreads);
      mbarrier_init(sm.scaled(stage), Config::kGroupThreads);
      mbarrier_init(sm.ready(stage, 0), Config::kGroupThreads);
      mbarrier_init(sm.ready(stage, 1), Config::kGroupThreads);
    }
    mbarrier_init(sm.sums(), Config::kGroupThreads);
    mbarrier_init(sm.sums_read(), Config::kOutputThreads);
    mbarrier_init(sm.p_read(), Config::kOutputThreads);
    fence_barrier_init();
  }
  __syncthreads();
  // The tensor maps into the descriptor cache before the producer's first copy.
  if (params.phase != 2 && tma_copies<Config>(tma) && threadIdx.x == 3 * Config::kGroupThreads) {
    prefetch_tensor_map(&tma.ckv);
    prefetch_tensor_map(&tma.kpe);
  }
  const bool attend = params.phase != 2;
  if (role.group == 0) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(Config::kScoresRegisters));
    block_barrier_across_roles();
    if (attend) for_each_item<Config, HopperRoleKind::kScores>(params, tma, sm, role);
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(Config::kMergeRegisters));
  } else if (role.group == 1) {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(Config::kOutputRegisters));
    block_barrier_across_roles();
    if (attend) for_each_item<Config, HopperRoleKind::kOutput>(params, tma, sm, role);
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(Config::kMergeRegisters));
  } else if (role.group == 2) {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(Config::kOutputRegisters));
    block_barrier_across_roles();
    if (attend) for_each_item<Config, HopperRoleKind::kOutput>(params, tma, sm, role);
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(Config::kMergeRegisters));
  } else {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(Config::kProducerRegisters));
    block_barrier_across_roles();
    if (attend) for_each_item<Config, HopperRoleKind::kProducer>(params, tma, sm, role);
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(Config::kMergeRegisters));
  }
  merge_phase<Config>(params, hopper_smem);
}

}  // namespace mlajit_kernel
