// The portable kernel's narrow layout (NarrowRows), for tiles of at most 16 rows.
#pragma once
#include "portable/fragments.cuh"
#include "portable/portable_config.cuh"

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
  // Where row `row` of q_nope / q_pe lies (rows kNarrowRows.. are the free ones).
  __device__ __forceinline__ static uint32_t nope_row(const SmemMap<C>& sm, int row) {
    return sm.q_nope + row * kNopeRowBytes;
  }
  __device__ __forceinline__ static uint32_t pe_row(const SmemMap<C>& sm, int row) {
    return sm.q_pe + row * kPeRowBytes;
  }
};

// The KV ring of narrow tiles: the config's stages, then kQStages more in the rows of Q that a
// narrow tile leaves empty (rows kNarrowRows.. of q_nope for the ckv tiles, of q_pe for the
// kpe / P tiles). On the small tiers, whose one or two stages hide little of a tile's copy,
// this deepens the pipeline without shared memory: tier 3 (one stage of 16 tokens) runs four
// stages, tier 2 three; tier 1's 64-token stages do not fit the 48 free rows and keep KvRing's
// code. Not under per-token scales, whose scales have a row per config stage past the storage.
template <typename C>
struct NarrowRing : KvRing<C> {
 private:
  using Q = FreeQRows<C>;
  static constexpr int kCkvFit = Q::kRows * Q::kNopeRowBytes / C::kCkvStageBytes;
  static constexpr int kKpeFit = Q::kRows * Q::kPeRowBytes / C::kKpePStageBytes;

 public:
  static constexpr int kQStages = C::kTokenScales ? 0 : (kCkvFit < kKpeFit ? kCkvFit : kKpeFit);
  static constexpr int kStages = C::kStages + kQStages;
  static constexpr int kQRows = kQStages > 0 ? C::kNarrowRows : C::kQTile;

  __device__ __forceinline__ static int stage_of(const ThreadRole&, int tile) { return tile % kStages; }
  __device__ __forceinline__ static uint32_t ckv(const SmemMap<C>& sm, int stage) {
    if constexpr (kQStages == 0) return sm.ckv(stage);
    return stage < C::kStages ? sm.ckv(stage)
                              : Q::nope_row(sm, C::kNarrowRows) + (stage - C::kStages) * C::kCkvStageBytes;
  }
  __device__ __forceinline__ static uint32_t kpe_p(const SmemMap<C>& sm, int stage) {
    if constexpr (kQStages == 0) return sm.kpe_p(stage);
    return stage < C::kStages ? sm.kpe_p(stage)
                              : Q::pe_row(sm, C::kNarrowRows) + (stage - C::kStages) * C::kKpePStageBytes;
  }
};

// Tiles of at most 16 valid rows. Every warp works on local rows 0-15; warp n of the CTA
// (0..7) owns KV columns [8 n, 8 n + 8) in QK (when n < kNarrowQkWarps) and output dims
// [n CKV / 8, (n + 1) CKV / 8) in PV. The accumulator rows of a thread are lane / 4 and
// lane / 4 + 8, in QK (m16n8 blocks) and in PV.
// RING: where a tile's 16-bit stage lies (NarrowRing, or the expanded pair of NarrowCodes).
template <typename C, typename RING>
struct NarrowRows {
  using Ring = RING;
  static constexpr int kQkN = 8;
  static constexpr int kQkBlocks = C::kNarrowQkN8;
  // Accumulators Q K^T's k-steps take in turn: with one score block a warp's mmas would each
  // wait for the one before (36 in a row at head dims 512/64), while most warps wait for it.
  static constexpr int kQkChains = kQkBlocks >= 4 ? 1 : 4 / kQkBlocks;
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
    const uint32_t p_base = Ring::kpe_p(sm, stage);
#pragma unroll
    for (int kk = 0; kk < C::kKvTile / 16; ++kk) {
      uint32_t p[4];
      ldmatrix_x4(p, p_base + PSwizzle<C>::byte_offset(role.lane % 16, 2 * kk + role.lane / 16));
      accumulate_pv_block<C>(st, p, Ring::ckv(sm, stage), 16 * kk, v_addr);
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
    const uint32_t p_base = Ring::kpe_p(sm, stage);
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

}  // namespace mlajit_kernel
