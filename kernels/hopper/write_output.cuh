// The hopper kernel's output, once per item: O through the item's last stage into whole rows
// of the output or of the partial rows.
#pragma once
#include "common/mla_merge.cuh"
#include "hopper/hopper_config.cuh"

namespace mlajit_kernel {

// Stage: write_output, in two steps. Written from the accumulator fragments, a warp's stores
// would each touch 8 rows in 16-byte pieces: on the H100 that took 7,800-15,000 cycles an
// item (the CTA's whole output, longer when every SM writes at once), while the next item's
// P V waited. So each output warpgroup first stages its half of O, scaled by 1 / row sum, in
// its own V regions of the item's last stage, then writes whole 512-byte row halves from
// there, and only then releases the stage to the producer. Those regions are free: a wgmma is
// one operation of the whole warpgroup, so a warp past its wait on the last P V knows all four
// warps' reads of them done; the other output warpgroup reads other regions, and the scores
// warpgroup's Q K^T of that tile was done before it published P.
template <typename C>
__device__ __forceinline__ void stage_output(const float (&o)[C::kOutCols / 2], const float (&l)[2],
                                             float scale, uint32_t staging, const HopperRole& role) {
  using OType = typename C::OType;
  const float inv[2] = {l[0] > 0.f ? scale / l[0] : 0.f, l[1] > 0.f ? scale / l[1] : 0.f};
  // stmatrix x4: lanes 8m..8m+7 address the rows of matrix m = (rows 8 (m & 1) of the warp's
  // 16, column chunk n8 + m / 2); register m holds this lane's pair of it.
  const int matrix = role.lane / 8;
  const int row = 16 * role.warp + 8 * (matrix & 1) + role.lane % 8;
#pragma unroll
  for (int n8 = 0; n8 < C::kOutCols / 8; n8 += 2) {
    const uint32_t packed[4] = {
        Dtype16<OType>::pack(o[4 * n8] * inv[0], o[4 * n8 + 1] * inv[0]),
        Dtype16<OType>::pack(o[4 * n8 + 2] * inv[1], o[4 * n8 + 3] * inv[1]),
        Dtype16<OType>::pack(o[4 * n8 + 4] * inv[0], o[4 * n8 + 5] * inv[0]),
        Dtype16<OType>::pack(o[4 * n8 + 6] * inv[1], o[4 * n8 + 7] * inv[1])};
    stmatrix_x4(staging + C::Tile::offset(row, n8 + matrix / 2), packed);
  }
}

// A warp writes one 512-byte row half per step (lane i its 16-byte chunk i), from the staging
// area, or zeros where the item had no tile (kv_len 0: no stage, and O is 0).
template <typename C>
__device__ __forceinline__ void store_output_rows(const MlaParams& p, const HopperTile& t,
                                                  uint32_t staging, bool staged,
                                                  const HopperRole& role) {
  using OType = typename C::OType;
  static_assert(C::kOutCols / 8 == 32, "a warp's 32 lanes write one row half, 16 bytes each");
  const bool partial = t.partial_row >= 0;
  const int32_t partial_row0 = t.partial_row + blockIdx.x * C::kRows;
  const int col = role.half() * C::kOutCols + 8 * role.lane;
#pragma unroll 4
  for (int row = role.warp; row < C::kRows; row += C::kGroupThreads / 32) {
    if (row >= t.rows) break;
    Chunk16 v{};
    if (staged) {
      asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];"
                   : "=r"(v.w[0]), "=r"(v.w[1]), "=r"(v.w[2]), "=r"(v.w[3])
                   : "r"(staging + C::Tile::offset(row, role.lane)));
    }
    OType* dst = partial ? static_cast<OType*>(p.partial_o) +
                               static_cast<int64_t>(partial_row0 + row) * C::kHeadDimCkv
                         : static_cast<OType*>(p.out) + final_row_offset(p, t.q_token_base, t.row0 + row);
    *reinterpret_cast<Chunk16*>(dst + col) = v;
  }
}

// `last_stage`: the stage of the item's last tile, still held by this warpgroup (-1: none).
// O is scaled by the cache's ckv scale (CacheScales) with its normalisation.
template <typename C>
__device__ __forceinline__ void write_output(const MlaParams& p, const float (&o)[C::kOutCols / 2],
                                             const float (&l)[2], const HopperTile& t,
                                             const HopperSmem<C>& sm, int last_stage,
                                             const HopperRole& role) {
  const bool staged = last_stage >= 0;
  const uint32_t staging =
      sm.kv(staged ? last_stage : 0) + role.half() * C::kOutRegions * C::Tile::kRegionBytes;
  const uint32_t own_barrier = role.half() == 0 ? kOutputLeftOnly : kOutputRightOnly;
  if (staged) {
    stage_output<C>(o, l, CacheScales<C>::of(p).ckv, staging, role);
    named_barrier_sync(own_barrier, C::kGroupThreads);
  }
  store_output_rows<C>(p, t, staging, staged, role);
  if (staged) {
    // A TMA fill of the stage is the async proxy's: order this warpgroup's use of it first.
    fence_proxy_async_shared();
    mbarrier_arrive(sm.empty(last_stage, 0));
    mbarrier_arrive(sm.empty(last_stage, 1));
  }
}

}  // namespace mlajit_kernel
