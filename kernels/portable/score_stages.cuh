// The portable kernel's score stages, the same over either row layout: Q K^T and the mask.
#pragma once
#include "portable/fragments.cuh"
#include "portable/portable_config.cuh"

namespace mlajit_kernel {

// s += Q[16 rows from Rows::q_row0] . K[Rows::kQkBlocks blocks of kQkN tokens from
// Rows::qk_col0]^T over one operand pair (q_pe / kpe or q_nope / ckv), ROW_CHUNKS 16-byte
// chunks per row. The k-steps go round Rows::kQkChains accumulators (summed at the end): a
// warp with one score block would otherwise wait out each mma's latency in turn.
template <typename C, typename Rows, int ROW_CHUNKS>
__device__ __forceinline__ void accumulate_qk(typename Rows::Scores& s, uint32_t q_base,
                                              uint32_t k_base, const ThreadRole& role) {
  using Block = QkBlock<Rows::kQkN>;
  constexpr int kSteps = ROW_CHUNKS / 2;
  constexpr int kChains = Rows::kQkChains < kSteps ? Rows::kQkChains : kSteps;
  const FragmentAddress<ROW_CHUNKS> q_addr(Rows::q_row0(role) + role.lane % 16, role.lane / 16);
  const FragmentAddress<ROW_CHUNKS> k_addr(Rows::qk_col0(role) + Block::k_row(role.lane),
                                           Block::k_chunk(role.lane));
  if constexpr (kChains == 1) {
#pragma unroll
    for (int step = 0; step < kSteps; ++step) {
      uint32_t a[4];
      ldmatrix_x4(a, q_base + q_addr.step(step));
#pragma unroll
      for (int b = 0; b < Rows::kQkBlocks; ++b) {
        Block::template accumulate<typename C::MmaType>(
            s[b], a, k_base + k_addr.step(step) + b * Rows::kQkN * ROW_CHUNKS * 16);
      }
    }
  } else {
    typename Rows::Scores chain[kChains];
#pragma unroll
    for (int c = 0; c < kChains; ++c)
#pragma unroll
      for (int b = 0; b < Rows::kQkBlocks; ++b)
#pragma unroll
        for (int r = 0; r < Block::kAccs; ++r) chain[c][b][r] = 0.f;
#pragma unroll
    for (int step = 0; step < kSteps; ++step) {
      uint32_t a[4];
      ldmatrix_x4(a, q_base + q_addr.step(step));
#pragma unroll
      for (int b = 0; b < Rows::kQkBlocks; ++b) {
        Block::template accumulate<typename C::MmaType>(
            chain[step % kChains][b], a, k_base + k_addr.step(step) + b * Rows::kQkN * ROW_CHUNKS * 16);
      }
    }
#pragma unroll
    for (int c = 0; c < kChains; ++c)
#pragma unroll
      for (int b = 0; b < Rows::kQkBlocks; ++b)
#pragma unroll
        for (int r = 0; r < Block::kAccs; ++r) s[b][r] += chain[c][b][r];
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
  using Ring = typename Rows::Ring;
  accumulate_qk<C, Rows, C::kKpeChunks>(s, sm.q_pe, Ring::kpe_p(sm, stage), role);
  accumulate_qk<C, Rows, C::kCkvChunks>(s, sm.q_nope, Ring::ckv(sm, stage), role);
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

}  // namespace mlajit_kernel
