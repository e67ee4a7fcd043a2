// The portable kernel's 64-row layout (WideRows), for any tile.
#pragma once
#include "portable/fragments.cuh"
#include "portable/portable_config.cuh"

namespace mlajit_kernel {

// Row layouts: which rows and KV columns each warp computes, and how warps exchange row
// statistics. Each provides the stages that differ (update_softmax_state, compute_pv,
// normalize) and the coordinates the shared stages (compute_qk, mask_scores, write_output)
// need; `attend` runs the same pipeline over either.

// Any tile: QK rows 16w.. of warp w of either warpgroup (see the top of mla_fa2.cuh).
template <typename C>
struct WideRows {
  using Ring = KvRing<C>;
  static constexpr int kQkN = 16;
  static constexpr int kQkBlocks = C::kQkBlocks;
  static constexpr int kQkChains = 1;  // kQkBlocks independent blocks already
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
      const uint32_t p_base = Ring::kpe_p(sm, stage);
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
#pragma unroll C::kPvUnroll
      for (int kk = 0; kk < C::kKvTile / 16; ++kk) accumulate_pv_halves(st, p_base, Ring::ckv(sm, stage), v_addr, kk, role);
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
    for (int b = 0; b < kQkBlocks; ++b) accumulate_pv_block<C>(st, p[b], Ring::ckv(sm, stage), 16 * b, v_addr);
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

}  // namespace mlajit_kernel
