// The MLA paged-attention kernel, FA2 style (after FlashInfer's BatchMLAPagedAttentionKernel).
//
// One CTA of 256 threads = 2 warpgroups x 4 warps. A CTA owns Q_TILE = 64 packed query rows
// (row r = token * num_heads + head). How the 8 warps share those rows is the tile's row
// layout (one KV loop, `attend`, runs either):
//  - WideRows (any tile): warp w of either warpgroup owns rows 16w..16w+15 in QK. With
//    QK_SHARD the two warpgroups take one half of the KV tile's columns each and exchange row
//    maxima and P through shared memory; without it both compute the whole (small) tile. PV:
//    with QK_SHARD all of P goes through shared memory and warp w of warpgroup g produces rows
//    16w.. and 16(w ^ 1).. x dim quarter 2g + w % 2 (each V fragment serves two m16 row
//    tiles); without it warpgroup g produces output dims [g * CKV / 2, (g + 1) * CKV / 2) of
//    its warp's 16 rows. Either way a thread holds 128 fp32 accumulators of O at CKV = 512.
//  - NarrowRows (tiles of at most 16 valid rows: decode with <= 16 heads): all 8 warps share
//    rows 0-15, splitting the KV tile's columns in QK and the output dims in PV.
//  - KV arrives through a NUM_STAGES-deep cp.async pipeline over the paged cache (KvRing). An
//    e4m3 cache lands in the top half of its stage and is dequantized in place (dequantize_kv).
//  - NarrowCodes (the same where the config has one stage, tier 3): codes in a ring of their
//    own in Q's free rows, expanded a tile ahead into two 16-bit tiles (narrow_codes.cuh).
//  - NarrowStreams (tiles of at most 16 rows over an e4m3 cache with per-tensor scales,
//    narrow_streams.cuh): the two
//    warpgroups take alternate KV tiles as two independent streams, read the codes and
//    convert them in registers, and merge their softmax states at the end.
// The host contract (work items, merge records, phases) is in mla_params.cuh.
#pragma once
#include "portable/portable_config.cuh"
#include "common/dependent_launch.cuh"
#include "common/grid_barrier.cuh"
#include "common/mla_merge.cuh"
#include "portable/narrow_codes.cuh"
#include "portable/narrow_rows.cuh"
#include "portable/narrow_streams.cuh"
#include "portable/pipeline.cuh"
#include "portable/wide_rows.cuh"

namespace mlajit_kernel {

// One work item: this CTA's 64 rows of a query tile against one KV chunk.
template <typename C>
__device__ __forceinline__ void attend_tile(const MlaParams& p, const SmemMap<C>& sm,
                                            const MlaWorkItem& item, const ThreadRole& role) {
  const TileContext t = make_context<C>(p, item, role);
  if (t.rows <= 0) return;  // the second CTA of a pair whose tile is short
  __syncthreads();  // the previous item's output staging has been read
  // Without NARROW_TILES no narrow layout is instantiated: its dead code moved the 64-row
  // loop's register allocation.
  if constexpr (C::kNarrowTiles) {
    if (t.narrow) {
      if constexpr (C::kNarrowStreams) {
        attend_streams<C>(p, sm, t);
      } else if constexpr (UsesNarrowCodes<C>::value) {
        attend_codes<C>(p, sm, t);
      } else {
        attend<C, NarrowRows<C>>(p, sm, t);
      }
      return;
    }
  }
  attend<C, WideRows<C>>(p, sm, t);
}

template <typename Config>
__global__ void __launch_bounds__(Config::kThreads, 1) mla_fa2_kernel(const __grid_constant__ MlaParams params) {
  extern __shared__ __align__(128) unsigned char mla_smem[];
  auto& storage = *reinterpret_cast<typename Config::SharedStorage*>(mla_smem);
  const ThreadRole role = ThreadRole::make();
  launch_dependents();  // a merge launch behind this one may be scheduled as SMs free up
  if (params.phase != 2) {
    const SmemMap<Config> sm = SmemMap<Config>::make(storage);
    const int32_t first = params.work_indptr[blockIdx.y];
    const int32_t last = params.work_indptr[blockIdx.y + 1];
#pragma unroll 1
    for (int32_t w = first; w < last; ++w) attend_tile<Config>(params, sm, params.work_items[w], role);
  }
  if (params.phase == 0) grid_barrier(params.barrier, gridDim.x * gridDim.y);
  if (params.phase != 1) {  // after the grid barrier's block barrier: the tiles are done
    if (params.phase == 2) wait_for_previous_grid();  // or after the attention launch's end
    static_assert(sizeof(typename Config::SharedStorage) >= kMergeScratchBytes<Config::kThreads>,
                  "the merge's scratch fits in the tiles' shared memory");
    merge_partials<typename Config::OType, Config::kHeadDimCkv, Config::kThreads>(
        params, reinterpret_cast<float*>(mla_smem));
  }
}

}  // namespace mlajit_kernel
