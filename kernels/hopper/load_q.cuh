// The hopper kernel's Q stages (scores warpgroup): the tile's query rows into shared memory,
// and over an e4m3 cache their conversion to the stage type.
#pragma once
#include "hopper/hopper_config.cuh"

namespace mlajit_kernel {

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

}  // namespace mlajit_kernel
