// The hopper kernel's scores warpgroup: Q K^T, the mask, the online softmax and the
// publication of the rescale factors and P, and its loop over an item's tiles.
#pragma once
#include "hopper/hopper_config.cuh"

namespace mlajit_kernel {

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

}  // namespace mlajit_kernel
