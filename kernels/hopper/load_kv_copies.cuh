// The hopper kernel's producer over a 16-bit cache: a TMA box a tile where pages hold whole
// tiles, a box per page where pages of 16 or 32 tokens make up a tile, the cp.async gather
// otherwise, and the split copy (TMA and cp.async together) for launches bound by memory.
#pragma once
#include "hopper/hopper_config.cuh"

namespace mlajit_kernel {

// The TMA boxes of a tile: one box of 64 tokens where pages hold whole tiles, else one per
// page (tma.box_tokens = page size), lane i of the producer's first warp copying pages i and
// i + 32 of the tile.
template <typename C>
struct TmaBoxes {
  static constexpr int kPerLane = 2;
  static_assert(kPerLane * 32 >= C::kTile, "a tile of one-token pages has a box per token");
  __device__ __forceinline__ static int box(int lane, int i) { return lane + 32 * i; }
};

// The rows the producer gathers: eight threads copy a row's 128 bytes of one region, sixteen
// rows per pass.
template <typename C>
struct GatherRows {
  static constexpr int kRowsPerPass = C::kProducerThreads / 8;
  static constexpr int kPasses = C::kTile / kRowsPerPass;
  static constexpr int kPassesPerHalf = kPasses / C::kTokenHalves;
  __device__ __forceinline__ static int row(int index, int pass) { return index / 8 + pass * kRowsPerPass; }
};

// Page ids of the rows a producer lane copies next (one per gather pass, or those of its TMA
// boxes), read a tile ahead: with small pages every row may need its own id, and
// waiting for them before the copies would put a global-memory round trip in front of every
// tile. -1 marks rows at or past kv_stop.
template <typename C>
struct NextPages {
  static_assert(GatherRows<C>::kPasses >= TmaBoxes<C>::kPerLane, "ids of a lane's boxes fit");
  int32_t page[GatherRows<C>::kPasses];  // TMA: page[i] is box i's
  // Gather: each pass's row within its page, worked out with the id (a division by the run-time
  // page size), so that a refill's copies start as soon as the stage is free.
  int32_t slot[GatherRows<C>::kPasses];

  __device__ __forceinline__ static NextPages fetch(const MlaParams& p, const HopperTma& tma,
                                                    const HopperTile& t, int index, int tile) {
    NextPages g;
    const int32_t tile_start = t.kv_start + tile * C::kTile;
    if (tma.enabled) {
      // The first warp issues the boxes; with split copies (pages of whole tiles) each warp's
      // lane 0 also reads the tile's page for its cp.async share.
      const bool reads = index < 32 || tma.split_copies;
#pragma unroll
      for (int i = 0; i < TmaBoxes<C>::kPerLane; ++i) {
        const int box = TmaBoxes<C>::box(index % 32, i);
        const int32_t token = tile_start + box * tma.box_tokens;
        const bool copied = reads && box * tma.box_tokens < C::kTile && tile < t.num_tiles &&
                            token < t.kv_stop;
        g.page[i] = copied ? p.kv_indices[t.kv_page_base + token / p.page_size] : -1;
      }
      return g;
    }
#pragma unroll
    for (int pass = 0; pass < GatherRows<C>::kPasses; ++pass) {
      const int32_t token = tile_start + GatherRows<C>::row(index, pass);
      const bool valid = token < t.kv_stop;
      g.page[pass] = valid ? p.kv_indices[t.kv_page_base + token / p.page_size] : -1;
      g.slot[pass] = valid ? token % p.page_size : 0;
    }
    return g;
  }
};

// Regions [0, REGIONS) of one TMA box (64 columns of each; as many tokens as the maps' box)
// from page `page` at slot `slot` into the stage at `dst`, completing `barrier`.
template <typename C, int REGIONS>
__device__ __forceinline__ void copy_tma_box(const HopperTma& tma, uint32_t dst, int32_t slot,
                                             int32_t page, uint32_t barrier, uint64_t policy) {
#pragma unroll
  for (int region = 0; region < REGIONS; ++region) {
    const uint32_t box_dst = dst + region * C::Tile::kRegionBytes;
    if (region == C::kKpeRegion) {
      tma_load_3d(box_dst, &tma.kpe, 0, slot, page, barrier, policy);
    } else {
      tma_load_3d(box_dst, &tma.ckv, region * 64, slot, page, barrier, policy);
    }
  }
}

// Stage: load_kv (producer warpgroup, lane 0), TMA over pages of whole tiles: regions
// [0, REGIONS) of the tile as one box of 64 tokens each, from page `page`; the stage barrier
// completes on their bytes.
template <typename C, int REGIONS>
__device__ __forceinline__ void load_kv_tma_tile(const MlaParams& p, const HopperTma& tma,
                                                 const HopperSmem<C>& sm, const HopperTile& t,
                                                 int32_t page, int tile, int stage) {
  const int32_t slot = (t.kv_start + tile * C::kTile) % p.page_size;
  const uint32_t barrier = sm.full(stage);
  mbarrier_arrive_expect_tx(barrier, REGIONS * C::Tile::kRegionBytes);
  copy_tma_box<C, REGIONS>(tma, sm.kv(stage), slot, page, barrier, l2_evict_first_policy());
}

// Stage: load_kv (producer warpgroup, first warp), TMA over smaller pages (tma.box_tokens = page
// size): every region of the tile as a box per page, lane i copying pages i and i + 32 of the
// tile (ids read a tile ahead; -1 past kv_stop, not copied: clear_tail_rows zeroes those rows
// where P V reads them). Each box's rows start a 128-byte row of every region, and the copy
// swizzles by address. Lane 0 announces the bytes of every box; the stage barrier completes on
// them.
template <typename C>
__device__ __forceinline__ void load_kv_tma_pages(const HopperTma& tma, const HopperSmem<C>& sm,
                                                  const HopperTile& t, const NextPages<C>& pages,
                                                  int lane, int tile, int stage) {
  const uint32_t barrier = sm.full(stage);
  if (lane == 0) {
    const int32_t tokens = min(C::kTile, t.kv_stop - (t.kv_start + tile * C::kTile));
    const int32_t boxes = (tokens + tma.box_tokens - 1) / tma.box_tokens;
    mbarrier_arrive_expect_tx(barrier, boxes * C::kRegions * tma.box_tokens * C::Tile::kRowBytes);
  }
  const uint64_t policy = l2_evict_first_policy();
#pragma unroll
  for (int i = 0; i < TmaBoxes<C>::kPerLane; ++i) {
    if (pages.page[i] < 0) continue;
    const uint32_t rows = TmaBoxes<C>::box(lane, i) * tma.box_tokens * C::Tile::kRowBytes;
    copy_tma_box<C, C::kRegions>(tma, sm.kv(stage) + rows, 0, pages.page[i], barrier, policy);
  }
}

// Stage: load_kv (producer warpgroup), gather: token t of the request is slot t % page_size of
// page kv_indices[kv_page_base + t / page_size]. Rows at or past kv_stop are zero-filled, so
// that masked scores meet zeros, never stale values that could make 0 * x a NaN. Token half
// `half` of the tile; the caller arrives on the stage barrier once both are issued. Evict-first
// in L2, as the TMA copies: the KV is read once, the query tiles and partial rows again (H100,
// 128 heads: pages 1-24 3% faster).
template <typename C>
__device__ __forceinline__ void load_kv_gather(const MlaParams& p, const HopperSmem<C>& sm,
                                               const HopperTile& t, const NextPages<C>& pages,
                                               int index, int tile, int stage, int half) {
  using KVType = typename C::KVType;
  const int lane8 = index % 8;
  const uint32_t dst = sm.kv(stage);
  const uint64_t policy = l2_evict_first_policy();
  constexpr int kPasses = GatherRows<C>::kPassesPerHalf;
#pragma unroll
  for (int pass = half * kPasses; pass < (half + 1) * kPasses; ++pass) {
    const int row = GatherRows<C>::row(index, pass);
    const bool valid = pages.page[pass] >= 0;
    const int64_t page = valid ? pages.page[pass] : 0;
    const int64_t slot = pages.slot[pass];
    const KVType* ckv = static_cast<const KVType*>(p.ckv) + page * p.ckv_stride_page +
                        slot * p.ckv_stride_token;
    const KVType* kpe = static_cast<const KVType*>(p.kpe) + page * p.kpe_stride_page +
                        slot * p.kpe_stride_token;
#pragma unroll
    for (int region = 0; region < C::kRegions; ++region) {
      const KVType* src = region < C::kKpeRegion ? ckv + region * 64 : kpe;
      cp_async_16(dst + C::Tile::chunk_offset(region, row, lane8), src + lane8 * 8, valid, policy);
    }
  }
}

// Stage: load_kv (producer warpgroup), the cp.async share of a split copy: regions
// [kSplitTmaRegions, kRegions) of token half `half` of the tile, whose rows all lie in page
// `page`; the caller arrives on the stage barrier once both are issued (beside the TMA bytes).
// Rows past kv_stop are copied as they are, as TMA copies them: clear_tail_rows zeroes them
// where P V would read them.
template <typename C>
__device__ __forceinline__ void load_kv_split_rest(const MlaParams& p, const HopperSmem<C>& sm,
                                                   const HopperTile& t, int32_t page, int index,
                                                   int tile, int stage, int half) {
  using KVType = typename C::KVType;
  const int lane8 = index % 8;
  const uint32_t dst = sm.kv(stage);
  const int32_t slot0 = (t.kv_start + tile * C::kTile) % p.page_size;
  constexpr int kPasses = GatherRows<C>::kPassesPerHalf;
#pragma unroll
  for (int pass = half * kPasses; pass < (half + 1) * kPasses; ++pass) {
    const int row = GatherRows<C>::row(index, pass);
    const int64_t token = slot0 + row;
    const KVType* ckv = static_cast<const KVType*>(p.ckv) +
                        static_cast<int64_t>(page) * p.ckv_stride_page + token * p.ckv_stride_token;
    const KVType* kpe = static_cast<const KVType*>(p.kpe) +
                        static_cast<int64_t>(page) * p.kpe_stride_page + token * p.kpe_stride_token;
#pragma unroll
    for (int region = C::kSplitTmaRegions; region < C::kRegions; ++region) {
      const KVType* src = region < C::kKpeRegion ? ckv + region * 64 : kpe;
      cp_async_16(dst + C::Tile::chunk_offset(region, row, lane8), src + lane8 * 8, true);
    }
  }
}

// The producer warpgroup's loop over the tiles of a work item of a 16-bit cache: a stage is
// refilled once both output warpgroups are done with the tile before it in the CTA's sequence
// (read it, or for an item's last tile also written O through it), whichever item that tile
// belonged to. The gather refills each token half as soon as it is free (on the H100: page 1
// 4-7% faster at 128 heads); TMA copies wait for the whole stage, whose bytes arrive at the
// memory's pace either way (refilling by halves measured no faster, and 11% slower at B16
// L4096).
template <typename C>
__device__ __forceinline__ void producer_loop_copies(const MlaParams& p, const HopperTma& tma,
                                                     const HopperSmem<C>& sm, const HopperTile& t,
                                                     uint32_t sequence, const HopperRole& role) {
  NextPages<C> pages = NextPages<C>::fetch(p, tma, t, role.index, 0);
#pragma unroll 1
  for (int tile = 0; tile < t.num_tiles; ++tile) {
    const StageSlot slot = StageSlot::of(sequence + tile);
    if (tma.enabled) wait_stage_free<C>(sm, sequence + tile);
    if (tma.enabled && tma.split_copies) {
      // Split copies come with pages of whole tiles: one box, whose page each warp's lane 0 read.
      const int32_t page = __shfl_sync(0xffffffffu, pages.page[0], 0);
      if (role.index == 0) {
        load_kv_tma_tile<C, C::kSplitTmaRegions>(p, tma, sm, t, page, tile, slot.stage);
      }
#pragma unroll
      for (int half = 0; half < C::kTokenHalves; ++half) {
        load_kv_split_rest<C>(p, sm, t, page, role.index, tile, slot.stage, half);
      }
    } else if (tma.enabled && tma.box_tokens == C::kTile) {
      if (role.index == 0) {
        load_kv_tma_tile<C, C::kRegions>(p, tma, sm, t, pages.page[0], tile, slot.stage);
      }
    } else if (tma.enabled) {
      if (role.index < 32) load_kv_tma_pages<C>(tma, sm, t, pages, role.index, tile, slot.stage);
    } else {
#pragma unroll
      for (int half = 0; half < C::kTokenHalves; ++half) {
        wait_half_free<C>(sm, sequence + tile, half);
        load_kv_gather<C>(p, sm, t, pages, role.index, tile, slot.stage, half);
      }
    }
    if (!tma.enabled || tma.split_copies) cp_async_mbarrier_arrive(sm.full(slot.stage));
    pages = NextPages<C>::fetch(p, tma, t, role.index, tile + 1);
  }
}

}  // namespace mlajit_kernel
