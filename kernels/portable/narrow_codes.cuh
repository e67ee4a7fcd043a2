// NarrowCodes: narrow tiles (<= 16 rows) over an e4m3 cache with per-tensor scales where the
// config has no code streams (one stage of 16-token tiles: tier 3, the sm_86/89/120-sized
// shared memory). The codes land in a ring of their own and are expanded a tile ahead into one
// of two 16-bit tiles, so that the expansion needs no barrier of its own and runs beside Q K^T,
// which occupies only kNarrowQkWarps (2) of the 8 warps; expanded in place (NarrowRows over
// NarrowRing) each tile cost two more barriers than a 16-bit one and ran 0.77x the bf16 speed.
//
// Memory, all in what a narrow tile leaves free: expanded tile 0 is the config's stage, tile 1
// the Q rows after the tile's 16, and the code stages the Q rows after those.
#pragma once
#include "portable/narrow_rows.cuh"
#include "portable/pipeline.cuh"

namespace mlajit_kernel {

// The rows of Q past the narrow tile's, and how many of them a buffer of BYTES takes in q_nope
// (NopeRows) and in q_pe (PeRows).
template <typename C>
struct FreeQRows {
  static constexpr int kQElemBytes = static_cast<int>(sizeof(typename C::QType));
  static constexpr int kNopeRowBytes = C::kHeadDimCkv * kQElemBytes;
  static constexpr int kPeRowBytes = C::kHeadDimKpe * kQElemBytes;
  static constexpr int kRows = C::kQTile - C::kNarrowRows;
  template <int BYTES>
  struct NopeRows {
    static constexpr int value = (BYTES + kNopeRowBytes - 1) / kNopeRowBytes;
  };
  template <int BYTES>
  struct PeRows {
    static constexpr int value = (BYTES + kPeRowBytes - 1) / kPeRowBytes;
  };
};

// The two 16-bit tiles QK and PV read: 0 in the config's stage 0, 1 in the first free Q rows.
template <typename C>
struct ExpandedPair {
  using Q = FreeQRows<C>;
  static constexpr int kNopeRows = Q::template NopeRows<C::kCkvStageBytes>::value;
  static constexpr int kPeRows = Q::template PeRows<C::kKpePStageBytes>::value;
  __device__ __forceinline__ static uint32_t ckv(const SmemMap<C>& sm, int tile) {
    return tile == 0 ? sm.ckv(0) : sm.q_nope + C::kNarrowRows * Q::kNopeRowBytes;
  }
  __device__ __forceinline__ static uint32_t kpe_p(const SmemMap<C>& sm, int tile) {
    return tile == 0 ? sm.kpe_p(0) : sm.q_pe + C::kNarrowRows * Q::kPeRowBytes;
  }
};

// The codes' ring: as many stages of one tile's codes as the Q rows after the expanded tile
// hold (four on tier 3 at head dims 512/64). Loaded by the whole CTA; codes land as they are.
template <typename C>
struct CodeRing : KvRing<C> {
  using Q = FreeQRows<C>;
  static constexpr int kCkvCodeBytes = C::kKvTile * C::kHeadDimCkv;
  static constexpr int kKpeCodeBytes = C::kKvTile * C::kHeadDimKpe;
  static constexpr int kNopeRows = Q::template NopeRows<kCkvCodeBytes>::value;
  static constexpr int kPeRows = Q::template PeRows<kKpeCodeBytes>::value;
  static constexpr int kNopeFree = Q::kRows - ExpandedPair<C>::kNopeRows;
  static constexpr int kPeFree = Q::kRows - ExpandedPair<C>::kPeRows;
  static constexpr int kStages =
      kNopeFree / kNopeRows < kPeFree / kPeRows ? kNopeFree / kNopeRows : kPeFree / kPeRows;
  static constexpr int kQRows = C::kNarrowRows;
  static constexpr int kCkvLanding = 0;
  static constexpr int kKpeLanding = 0;

  __device__ __forceinline__ static int stage_of(const ThreadRole&, int tile) { return tile % kStages; }
  __device__ __forceinline__ static uint32_t ckv(const SmemMap<C>& sm, int stage) {
    return sm.q_nope + (C::kNarrowRows + ExpandedPair<C>::kNopeRows + stage * kNopeRows) * Q::kNopeRowBytes;
  }
  __device__ __forceinline__ static uint32_t kpe_p(const SmemMap<C>& sm, int stage) {
    return sm.q_pe + (C::kNarrowRows + ExpandedPair<C>::kPeRows + stage * kPeRows) * Q::kPeRowBytes;
  }
};

// Whether a config's narrow tiles take NarrowCodes: per-tensor e4m3 without the code streams,
// where three or more code stages fit (so that codes are two tiles ahead of their expansion).
template <typename C>
struct UsesNarrowCodes {
  static constexpr bool value =
      C::kNarrowTiles && C::kFp8Kv && !C::kTokenScales && !C::kNarrowStreams && CodeRing<C>::kStages >= 3;
};

// Stage: expand_codes. Tile `tile`'s codes (code stage `stage`) into expanded tile `tile % 2`,
// times the scales: each thread its chunks, no barrier (the codes stay where they are).
template <typename C>
__device__ __forceinline__ void expand_codes(const SmemMap<C>& sm, int stage, int tile, const KvDequant& f,
                                             const ThreadRole& role) {
  using Codes = CodeRing<C>;
  constexpr int kCkvCodeChunks = C::kKvTile * C::kCkvLoadChunks;
  constexpr int kKpeCodeChunks = C::kKvTile * C::kKpeLoadChunks;
  static_assert(kCkvCodeChunks % C::kThreads == 0 && kKpeCodeChunks <= C::kThreads,
                "each thread expands whole ckv chunks and at most one kpe chunk");
  const uint32_t ckv = ExpandedPair<C>::ckv(sm, tile % 2), kpe = ExpandedPair<C>::kpe_p(sm, tile % 2);
#pragma unroll
  for (int i = 0; i < kCkvCodeChunks / C::kThreads; ++i) {
    uint32_t codes[4];
    load_ckv_codes<C, Codes>(sm, stage, i, codes, role);
    const int q = role.tid + i * C::kThreads;
    store_dequantized<C, C::kCkvChunks>(ckv, q / C::kCkvLoadChunks, q % C::kCkvLoadChunks, codes, f.ckv);
  }
  if (role.tid < kKpeCodeChunks) {
    const int row = role.tid / C::kKpeLoadChunks, chunk = role.tid % C::kKpeLoadChunks;
    uint32_t codes[4];
    load_shared_16(Codes::kpe_p(sm, stage) + Swizzle<C::kKpeLoadChunks>::byte_offset(row, chunk), codes);
    store_dequantized<C, C::kKpeChunks>(kpe, row, chunk, codes, f.kpe);
  }
}

// The KV loop of a narrow tile over codes. Iteration `tile` begins at the barrier after which
// tile + 1's codes have landed (advance_pipeline's, which also refills the code stage that
// tile's expansion emptied) and tile's expansion is visible; it expands tile + 1 into the other
// 16-bit tile, freed by the previous iteration's P V, while two warps compute tile's Q K^T.
template <typename C>
__device__ __forceinline__ void attend_codes(const MlaParams& p, const SmemMap<C>& sm, const TileContext& t) {
  using Rows = NarrowRows<C, ExpandedPair<C>>;
  using Codes = CodeRing<C>;
  const ThreadRole role = ThreadRole::make_fresh();
  typename Rows::State st;
  st.init();
  KvPageIds<C> ids{0};
  if (t.num_tiles > 0) {
    start_pipeline<C, Codes>(p, sm, t, role);
    ids = first_page_ids<C, Codes>(p, t, role);
    advance_pipeline<C, Codes>(p, sm, t, role, 0, ids);
    expand_codes<C>(sm, Codes::stage_of(role, 0), 0, KvDequant::make(p), role);
  }
#pragma unroll 1
  for (int tile = 0; tile < t.num_tiles; ++tile) {
    advance_pipeline<C, Codes>(p, sm, t, role, tile + 1, ids);
    if (tile + 1 < t.num_tiles) {
      expand_codes<C>(sm, Codes::stage_of(role, tile + 1), tile + 1, KvDequant::make(p), role);
    }
    typename Rows::Scores s;
    if (Rows::computes_scores(role)) {
      compute_qk<C, Rows>(s, sm, tile % 2, role);
      if (tile_needs_mask<C>(t, tile)) mask_scores<C, Rows>(s, t, tile, role);
    }
    Rows::update_softmax_state(s, st, sm, tile % 2, p.sm_scale_log2, role);
    Rows::compute_pv(s, st, sm, tile % 2, role);
  }
  cp_async_wait<0>();
  float lse[Rows::kLseRows];
  Rows::normalize(st, sm, p.sm_scale_log2, lse, role);
  write_output<C, Rows>(p, st, lse, sm, t, role);
}

}  // namespace mlajit_kernel
