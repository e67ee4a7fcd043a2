// The hopper kernel's output warpgroups: the tail rows of a TMA tile cleared, O rescaled,
// P V, and their loop over an item's tiles.
#pragma once
#include "hopper/hopper_config.cuh"

namespace mlajit_kernel {

// TMA copies whole boxes: rows of a tile's last page past kv_stop hold whatever the cache
// holds there (other tokens, or garbage that may be NaN). Their scores are masked, but P V
// would still multiply 0 by them: each output warpgroup zeroes those rows of the V regions it
// reads (after the tile's Q K^T, before its P V).
template <typename C>
__device__ __forceinline__ void clear_tail_rows(const HopperSmem<C>& sm, const HopperTile& t,
                                                const HopperRole& role, int tile, int stage) {
  const int32_t valid = t.kv_stop - (t.kv_start + tile * C::kTile);
  if (valid >= C::kTile) return;
  const int region0 = role.half() * C::kOutRegions;
  const int lane8 = role.index % 8;
  for (int row = max(valid, 0) + role.index / 8; row < C::kTile; row += C::kGroupThreads / 8) {
#pragma unroll
    for (int r = 0; r < C::kOutRegions; ++r) {
      const uint32_t address = sm.kv(stage) + C::Tile::chunk_offset(region0 + r, row, lane8);
      asm volatile("st.shared.v4.u32 [%0], {%1, %1, %1, %1};" ::"r"(address), "r"(0u) : "memory");
    }
  }
  fence_proxy_async_shared();
  named_barrier_sync(role.half() == 0 ? kOutputLeftOnly : kOutputRightOnly, C::kGroupThreads);
}

// O (kOutCols columns of 64 rows: the warpgroup's half) scaled row-wise; skipped by a warp
// whose rows' maxima all stayed (the common case once a row has seen its largest scores).
template <typename C>
__device__ __forceinline__ void rescale_o(float (&o)[C::kOutCols / 2], const float (&alpha)[2]) {
  if (!__any_sync(0xffffffffu, alpha[0] != 1.f || alpha[1] != 1.f)) return;
#pragma unroll
  for (int n8 = 0; n8 < C::kOutCols / 8; ++n8)
#pragma unroll
    for (int e = 0; e < 4; ++e) o[4 * n8 + e] *= alpha[e >> 1];
}

// Stage: compute_pv (output warpgroup): O[:, its columns] += P . V over tokens 32 HALF ..
// 32 HALF + 31. Issued and committed only.
template <typename C, int HALF>
__device__ __forceinline__ void issue_pv(float (&o)[C::kOutCols / 2], const HopperSmem<C>& sm,
                                         int stage, const HopperRole& role) {
  const uint64_t pd = k_major_descriptor<C::kRows>(opaque_address(sm.p), 0, 0);
  const uint64_t v = mn_major_descriptor<C::kRows>(opaque_address(sm.kv(stage)), 0, 0);
  // Two products of half the columns each: the CTA's 512 threads start with 128 registers,
  // and ptxas places each wgmma within that (a 64 x 256 accumulator needs 154).
  constexpr int kCols = C::kOutCols / 2;
  float(&o_left)[kCols / 2] = *reinterpret_cast<float(*)[kCols / 2]>(&o[0]);
  float(&o_right)[kCols / 2] = *reinterpret_cast<float(*)[kCols / 2]>(&o[kCols / 2]);
  const int region0 = role.half() * C::kOutRegions;
  wgmma_fence();
#pragma unroll
  for (int k = 2 * HALF; k < 2 * HALF + 2; ++k) {
    const uint64_t pk = advance_descriptor(pd, k_major_offset<C::kRows>(k));
    wgmma_ss<typename C::StageType, kCols, 1>(
        o_left, pk, advance_descriptor(v, mn_major_offset<C::kRows>(region0, k)), 1);
    wgmma_ss<typename C::StageType, kCols, 1>(
        o_right, pk, advance_descriptor(v, mn_major_offset<C::kRows>(region0 + kCols / 64, k)), 1);
  }
  wgmma_commit();
}

// An output warpgroup's loop: P V of each tile's half of the columns, then the release of P
// and of the stage's token halves, each as soon as its product is done; the item's last stage
// is released by write_output, which stages O in it.
template <typename C>
__device__ __forceinline__ void output_loop(const HopperTma& tma, const HopperSmem<C>& sm,
                                            const HopperTile& t, uint32_t sequence,
                                            float (&o)[C::kOutCols / 2], const HopperRole& role) {
#pragma unroll 1
  for (int tile = 0; tile < t.num_tiles; ++tile) {
    const StageSlot slot = StageSlot::of(sequence + tile);
    mbarrier_wait(sm.scaled(slot.stage), slot.parity);
    mbarrier_wait(sm.full(slot.stage), slot.parity);  // the copy's bytes, seen by this proxy too
    const float alpha[2] = {sm.alpha[slot.stage * C::kRows + role.row(0)],
                            sm.alpha[slot.stage * C::kRows + role.row(1)]};
    if (tma_copies<C>(tma)) clear_tail_rows<C>(sm, t, role, tile, slot.stage);
    rescale_o<C>(o, alpha);
    mbarrier_wait(sm.ready(slot.stage, 0), slot.parity);
    issue_pv<C, 0>(o, sm, slot.stage, role);
    mbarrier_wait(sm.ready(slot.stage, 1), slot.parity);
    issue_pv<C, 1>(o, sm, slot.stage, role);
    const bool last = tile + 1 == t.num_tiles;
    // The first token half is free once its product is done: its refill starts while the
    // second half is multiplied. The waits stay unconditional: a wgmma.wait_group in a
    // divergent path makes ptxas serialize every wgmma of the kernel (C7518, docs/PERF.md).
    wgmma_wait<1>();
    if (!last) mbarrier_arrive(sm.empty(slot.stage, 0));
    wgmma_wait<0>();
    fence_registers(o);
    mbarrier_arrive(sm.p_read());
    if (!last) mbarrier_arrive(sm.empty(slot.stage, 1));
  }
}

}  // namespace mlajit_kernel
