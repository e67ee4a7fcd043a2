// NarrowCodes: narrow tiles (<= 16 rows) over an e4m3 cache with per-tensor scales where the
// config has no code streams (one stage of 16-token tiles: tier 3, the sm_86/89/120-sized
// shared memory). The codes land in a ring of their own and are expanded a tile ahead into one
// of two 16-bit tiles, with no barrier of their own, beside Q K^T (which occupies only
// kNarrowQkWarps, 2, of the 8 warps). They expand to their raw values in f16 (one conversion a
// pair, exact), and the tile is computed in f16 (Fp16Compute: Q rounded to f16 once per item, P
// in f16) with the scales on the fp32 scores and O, as the code streams do: dequantized to the
// queries' type times the scale, a pair took six conversion-pipe instructions, and tier 3 ran
// at 0.75x its bf16 speed (H100).
//
// Memory, all in what a narrow tile leaves free: expanded tile 0 is the config's stage, tile 1
// the Q rows after the tile's 16, and the code stages the Q rows after those.
#pragma once
#include "common/fp8_fragments.cuh"
#include "portable/narrow_rows.cuh"
#include "portable/pipeline.cuh"

namespace mlajit_kernel {

// The two 16-bit tiles QK and PV read: 0 in the config's stage 0, 1 in the first free Q rows.
template <typename C>
struct ExpandedPair {
  using Q = FreeQRows<C>;
  static constexpr int kNopeRows = Q::template NopeRows<C::kCkvStageBytes>::value;
  static constexpr int kPeRows = Q::template PeRows<C::kKpePStageBytes>::value;
  __device__ __forceinline__ static uint32_t ckv(const SmemMap<C>& sm, int tile) {
    return tile == 0 ? sm.ckv(0) : Q::nope_row(sm, C::kNarrowRows);
  }
  __device__ __forceinline__ static uint32_t kpe_p(const SmemMap<C>& sm, int tile) {
    return tile == 0 ? sm.kpe_p(0) : Q::pe_row(sm, C::kNarrowRows);
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
    return Q::nope_row(sm, C::kNarrowRows + ExpandedPair<C>::kNopeRows + stage * kNopeRows);
  }
  __device__ __forceinline__ static uint32_t kpe_p(const SmemMap<C>& sm, int stage) {
    return Q::pe_row(sm, C::kNarrowRows + ExpandedPair<C>::kPeRows + stage * kPeRows);
  }
};

// Whether a config's narrow tiles take NarrowCodes: per-tensor e4m3 without the code streams,
// where three or more code stages fit (so that codes are two tiles ahead of their expansion).
template <typename C>
struct UsesNarrowCodes {
  static constexpr bool value =
      C::kNarrowTiles && C::kFp8Kv && !C::kTokenScales && !C::kNarrowStreams && CodeRing<C>::kStages >= 3;
};

// Stage: expand_codes. Tile `tile`'s codes (code stage `stage`) into expanded tile `tile % 2`
// as their raw values in f16: each thread its chunks, no barrier (the codes stay where they are).
template <typename C>
__device__ __forceinline__ void expand_codes(const SmemMap<C>& sm, int stage, int tile, const ThreadRole& role) {
  using Codes = CodeRing<C>;
  constexpr int kCkvCodeChunks = C::kKvTile * C::kCkvLoadChunks;
  constexpr int kKpeCodeChunks = C::kKvTile * C::kKpeLoadChunks;
  static_assert(kCkvCodeChunks % C::kThreads == 0 && kKpeCodeChunks <= C::kThreads,
                "each thread expands whole ckv chunks and at most one kpe chunk");
  const uint32_t ckv = ExpandedPair<C>::ckv(sm, tile % 2), kpe = ExpandedPair<C>::kpe_p(sm, tile % 2);
#pragma unroll
  for (int i = 0; i < kCkvCodeChunks / C::kThreads; ++i) {
    uint32_t codes[4], v[8];
    load_ckv_codes<C, Codes>(sm, stage, i, codes, role);
    convert_chunk_f16(codes, v);
    const int q = role.tid + i * C::kThreads;
    store_expanded<C::kCkvChunks>(ckv, q / C::kCkvLoadChunks, q % C::kCkvLoadChunks, v);
  }
  if (role.tid < kKpeCodeChunks) {
    const int row = role.tid / C::kKpeLoadChunks, chunk = role.tid % C::kKpeLoadChunks;
    uint32_t codes[4], v[8];
    load_shared_16(Codes::kpe_p(sm, stage) + Swizzle<C::kKpeLoadChunks>::byte_offset(row, chunk), codes);
    convert_chunk_f16(codes, v);
    store_expanded<C::kKpeChunks>(kpe, row, chunk, v);
  }
}

// The config a NarrowCodes tile computes in: C's, with f16 queries (the f16 mma over the raw
// code values). Its shared storage is C's byte for byte.
template <typename C>
using Fp16Compute = MlaConfig<f16_t, typename C::KVType, typename C::OType, C::kHeadDimCkv, C::kHeadDimKpe,
                              C::kStages, C::kKvTile, C::kQkShard, C::kQTile, C::kPageIdsAhead, C::kNarrowTiles>;

// Stage: round_q_to_f16 (once per item, Q landed and visible; bf16 queries only). Rows 0-15 of
// q_nope and q_pe to f16 in place (the swizzle moves whole chunks, so a chunk stays where it is).
template <typename C, typename QType>
__device__ __forceinline__ void round_q_to_f16(const SmemMap<C>& sm, const ThreadRole& role) {
  if constexpr (Dtype16<QType>::kIsBf16) {
    constexpr int kNopeChunks = C::kNarrowRows * C::kCkvChunks;
    constexpr int kChunks = kNopeChunks + C::kNarrowRows * C::kKpeChunks;
#pragma unroll 1
    for (int i = role.tid; i < kChunks; i += C::kThreads) {
      const uint32_t at = i < kNopeChunks ? sm.q_nope + 16 * i : sm.q_pe + 16 * (i - kNopeChunks);
      uint32_t v[4];
      load_shared_16(at, v);
      store_shared_16(at, to_f16_pair<QType>(v[0]), to_f16_pair<QType>(v[1]), to_f16_pair<QType>(v[2]),
                      to_f16_pair<QType>(v[3]));
    }
  }
}

// Stage: compute_qk over raw code values: ckv factor * (q_nope . ckv) + kpe factor * (q_pe . kpe).
template <typename C, typename Rows>
__device__ __forceinline__ void compute_code_qk(typename Rows::Scores& s, const SmemMap<C>& sm, int tile,
                                                const KvDequant& f, const ThreadRole& role) {
  using Block = QkBlock<Rows::kQkN>;
  typename Rows::Scores pe;
#pragma unroll
  for (int b = 0; b < Rows::kQkBlocks; ++b)
#pragma unroll
    for (int r = 0; r < Block::kAccs; ++r) s[b][r] = pe[b][r] = 0.f;
  accumulate_qk<C, Rows, C::kKpeChunks>(pe, sm.q_pe, Rows::Ring::kpe_p(sm, tile), role);
  accumulate_qk<C, Rows, C::kCkvChunks>(s, sm.q_nope, Rows::Ring::ckv(sm, tile), role);
  scale_code_scores(s, pe, f);
}

// The KV loop of a narrow tile over codes. Iteration `tile` begins at the barrier after which
// tile + 1's codes have landed (advance_pipeline's, which also refills the code stage that
// tile's expansion emptied) and tile's expansion is visible; it expands tile + 1 into the other
// 16-bit tile, freed by the previous iteration's P V, while two warps compute tile's Q K^T.
template <typename C>
__device__ __forceinline__ void attend_codes(const MlaParams& p, const SmemMap<C>& sm_c, const TileContext& t) {
  using F = Fp16Compute<C>;
  using Rows = NarrowRows<F, ExpandedPair<F>>;
  using Codes = CodeRing<F>;
  const SmemMap<F> sm = SmemMap<F>::of(sm_c);
  const ThreadRole role = ThreadRole::make_fresh();
  typename Rows::State st;
  st.init();
  KvPageIds<F> ids{0};
  if (t.num_tiles > 0) {
    start_pipeline<F, Codes>(p, sm, t, role);
    ids = first_page_ids<F, Codes>(p, t, role);
    advance_pipeline<F, Codes>(p, sm, t, role, 0, ids);  // Q and tile 0's codes landed
    round_q_to_f16<F, typename C::QType>(sm, role);
    expand_codes<F>(sm, Codes::stage_of(role, 0), 0, role);
  }
#pragma unroll 1
  for (int tile = 0; tile < t.num_tiles; ++tile) {
    advance_pipeline<F, Codes>(p, sm, t, role, tile + 1, ids);
    if (tile + 1 < t.num_tiles) expand_codes<F>(sm, Codes::stage_of(role, tile + 1), tile + 1, role);
    typename Rows::Scores s;
    if (Rows::computes_scores(role)) {
      compute_code_qk<F, Rows>(s, sm, tile % 2, KvDequant::make(p), role);
      if (tile_needs_mask<F>(t, tile)) mask_scores<F, Rows>(s, t, tile, role);
    }
    Rows::update_softmax_state(s, st, sm, tile % 2, p.sm_scale_log2, role);
    Rows::compute_pv(s, st, sm, tile % 2, role);
  }
  cp_async_wait<0>();
  float lse[Rows::kLseRows];
  Rows::normalize(st, sm, p.sm_scale_log2, lse, role);
  // P V summed raw ckv values: O takes the ckv factor here.
  const float ckv_factor = KvDequant::make(p).ckv;
#pragma unroll
  for (int b = 0; b < Rows::kOutDimBlocks; ++b)
#pragma unroll
    for (int r = 0; r < 8; ++r) st.o[b][r] *= ckv_factor;
  write_output<F, Rows>(p, st, lse, sm, t, role);
}

}  // namespace mlajit_kernel
