// The hopper kernel's configuration and the state its roles share: the stage type, tile and
// shared-memory layout (HopperConfig), the mbarriers and named barriers, each thread's role,
// the work tile of one item and the ring of stages. The roles' stages are in load_q.cuh,
// load_kv_copies.cuh, load_kv_codes.cuh, scores_stages.cuh, output_stages.cuh and
// write_output.cuh; mla_hopper.cuh puts them together.
#pragma once
#include "common/block_barrier.cuh"
#include "common/fp8_dequant.cuh"
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
// block_barrier_across_roles, barrier 0, only at the start).
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

}  // namespace mlajit_kernel
