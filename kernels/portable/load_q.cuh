// The portable kernel's Q stage.
#pragma once
#include "portable/portable_config.cuh"

namespace mlajit_kernel {

// Stage: load_q. The first ROWS packed rows of q_nope and q_pe into swizzled shared memory;
// rows past the request's end are zero-filled. (A narrow tile's KV ring holds stages in the
// rest: NarrowRing.)
template <typename C, int ROWS = C::kQTile>
__device__ __forceinline__ void load_q(const MlaParams& p, const SmemMap<C>& sm,
                                       const TileContext& t, const ThreadRole& role) {
  using QType = typename C::QType;
  const int lane8 = role.tid % C::kLanesPerRow;
#pragma unroll
  for (int pass = 0; pass < C::kQPasses; ++pass) {
    const int row = role.tid / C::kLanesPerRow + pass * C::kRowsPerPass;
    if (ROWS < C::kQTile && row >= ROWS) continue;
    const QRowSource<QType> q = q_row_source<QType>(p, t, row);
#pragma unroll
    for (int k = 0; k < C::kCkvChunksPerLane; ++k) {
      const int chunk = lane8 + k * C::kLanesPerRow;
      cp_async_16(sm.q_nope + Swizzle<C::kCkvChunks>::byte_offset(row, chunk),
                  q.nope + chunk * C::kChunkElems, q.valid);
    }
#pragma unroll
    for (int k = 0; k < C::kKpeChunksPerLane; ++k) {
      const int chunk = lane8 + k * C::kLanesPerRow;
      if (chunk < C::kKpeChunks) {
        cp_async_16(sm.q_pe + Swizzle<C::kKpeChunks>::byte_offset(row, chunk),
                    q.pe + chunk * C::kChunkElems, q.valid);
      }
    }
  }
}

}  // namespace mlajit_kernel
