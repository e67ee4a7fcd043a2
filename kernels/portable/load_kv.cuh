// The portable kernel's KV copies: page ids fetched a tile ahead, the cp.async loaders of a
// tile's rows, and the pipeline that keeps NUM_STAGES - 1 tiles in flight.
#pragma once
#include "portable/portable_config.cuh"

namespace mlajit_kernel {

// Page id of request token `token` (the caller checks token < kv_stop).
__device__ __forceinline__ int32_t page_of(const MlaParams& p, const TileContext& t, int32_t token) {
  // Power-of-two pages (the usual case): a shift instead of a division.
  if ((p.page_size & (p.page_size - 1)) == 0) {
    return p.kv_indices[t.kv_page_base + (token >> __popc(p.page_size - 1))];
  }
  return p.kv_indices[t.kv_page_base + token / p.page_size];
}

// Page ids of one KV tile's rows, fetched a tile ahead of its copies (small pages, where every
// row of a tile may lie on its own page and the id load would otherwise stall the copies).
// One register per thread: a warp copies kRowsPerWarp rows per pass, and lane
// pass * kRowsPerWarp + i holds the id of the warp's row i of that pass; load_kv shuffles it to
// the 8 lanes copying that row.
template <typename C>
struct KvPageIds {
  static constexpr int kRowsPerWarp = 32 / C::kLanesPerRow;
  int32_t id;
};

// How a ring's loader threads cover a tile: 8 lanes a row, kRowsPerPass rows a pass.
template <typename C, typename Ring>
struct KvLoaders {
  static constexpr int kRowsPerPass = Ring::kLoaders / C::kLanesPerRow;
  static constexpr int kPasses = (C::kKvTile + kRowsPerPass - 1) / kRowsPerPass;
  static_assert(KvPageIds<C>::kRowsPerWarp * kPasses <= 32, "a warp's row ids fit one register per lane");
  __device__ __forceinline__ static int tid(const ThreadRole& role) { return role.tid % Ring::kLoaders; }
};

template <typename C, typename Ring>
__device__ __forceinline__ KvPageIds<C> fetch_page_ids(const MlaParams& p, const TileContext& t,
                                                       const ThreadRole& role, int tile) {
  using L = KvLoaders<C, Ring>;
  constexpr int kPerWarp = KvPageIds<C>::kRowsPerWarp;
  const int pass = role.lane / kPerWarp;
  const int row = (L::tid(role) / 32) * kPerWarp + role.lane % kPerWarp + pass * L::kRowsPerPass;
  const int32_t token = t.kv_start + tile * C::kKvTile + row;
  KvPageIds<C> ids;
  ids.id = 0;
  if (pass < L::kPasses && row < C::kKvTile && token < t.kv_stop) ids.id = page_of(p, t, token);
  return ids;
}

// Where one token's cache row lies: its ckv and kpe, and its ckv scales (per-token scales).
template <typename C>
struct KvRowSource {
  const typename C::KVType* ckv;
  const typename C::KpeType* kpe;
  const float* scales;

  __device__ __forceinline__ static KvRowSource at(const MlaParams& p, int64_t page, int64_t slot) {
    KvRowSource r;
    r.ckv = static_cast<const typename C::KVType*>(p.ckv) + page * p.ckv_stride_page + slot * p.ckv_stride_token;
    r.kpe = static_cast<const typename C::KpeType*>(p.kpe) + page * p.kpe_stride_page + slot * p.kpe_stride_token;
    if constexpr (C::kTokenScales) {
      r.scales = p.ckv_scales + page * p.ckv_scales_stride_page + slot * p.ckv_scales_stride_token;
    }
    return r;
  }
  // The row `tokens` further on in the same page.
  __device__ __forceinline__ KvRowSource advanced(const MlaParams& p, int64_t tokens) const {
    KvRowSource r;
    r.ckv = ckv + tokens * p.ckv_stride_token;
    r.kpe = kpe + tokens * p.kpe_stride_token;
    if constexpr (C::kTokenScales) r.scales = scales + tokens * p.ckv_scales_stride_token;
    return r;
  }
};

// The copies of one row of a KV tile from its cache row; zero-filled unless valid. A token's
// per-token scales (16 bytes) come with its first lane's copies.
template <typename C>
__device__ __forceinline__ void copy_kv_row(uint32_t ckv_dst, uint32_t kpe_dst, uint32_t scales_dst,
                                            int row, int lane8, const KvRowSource<C>& src, bool valid) {
  const typename C::KVType* ckv = src.ckv;
  const typename C::KpeType* kpe = src.kpe;
#pragma unroll
  for (int k = 0; k < C::kCkvLoadChunksPerLane; ++k) {
    const int chunk = lane8 + k * C::kLanesPerRow;
    cp_async_16(ckv_dst + Swizzle<C::kCkvLoadChunks>::byte_offset(row, chunk), ckv + chunk * C::kKvLoadChunkElems,
                valid);
  }
#pragma unroll
  for (int k = 0; k < C::kKpeLoadChunksPerLane; ++k) {
    const int chunk = lane8 + k * C::kLanesPerRow;
    if (chunk < C::kKpeLoadChunks) {
      cp_async_16(kpe_dst + Swizzle<C::kKpeLoadChunks>::byte_offset(row, chunk), kpe + chunk * C::kKpeLoadChunkElems,
                  valid);
    }
  }
  if constexpr (C::kTokenScales) {
    if (lane8 == 0) cp_async_16(scales_dst + row * 16, src.scales, valid);
  }
}

// A KV tile that lies in one (power-of-two) page: one page id and one row address, rows a
// constant stride apart. With PREFETCHED, lane 0 holds the id of the warp's first row (the
// warp's rows are all past the chunk when that one is, and then any page serves).
template <typename C, typename Ring, bool PREFETCHED>
__device__ __forceinline__ void load_kv_one_page(const MlaParams& p, const TileContext& t, const ThreadRole& role,
                                                 int32_t first, uint32_t ckv_dst, uint32_t kpe_dst,
                                                 uint32_t scales_dst, KvPageIds<C> ids) {
  using L = KvLoaders<C, Ring>;
  int64_t page;
  if constexpr (PREFETCHED) {
    page = __shfl_sync(0xffffffffu, ids.id, 0);
  } else {
    page = p.kv_indices[t.kv_page_base + (first >> __popc(p.page_size - 1))];
  }
  const int row0 = L::tid(role) / C::kLanesPerRow;
  const int64_t slot0 = (first & (p.page_size - 1)) + row0;
  const KvRowSource<C> src = KvRowSource<C>::at(p, page, slot0);
#pragma unroll
  for (int pass = 0; pass < L::kPasses; ++pass) {
    const int row = row0 + pass * L::kRowsPerPass;
    if (C::kKvTile % L::kRowsPerPass == 0 || row < C::kKvTile) {
      copy_kv_row<C>(ckv_dst, kpe_dst, scales_dst, row, role.tid % C::kLanesPerRow,
                     src.advanced(p, pass * L::kRowsPerPass), first + row < t.kv_stop);
    }
  }
}

// Stage: load_kv. KV tile `tile` (tokens kv_start + tile * KV_TILE ...) into stage `stage`.
// Token t of the request is slot t % page_size of page kv_indices[kv_page_base + t / page_size];
// offsets are 64-bit since page * stride_page exceeds 2^31 on large pools. With PREFETCHED the
// page ids come from `ids` (fetch_page_ids of this tile), else from kv_indices here.
template <typename C, typename Ring, bool PREFETCHED = false>
__device__ __forceinline__ void load_kv(const MlaParams& p, const SmemMap<C>& sm,
                                        const TileContext& t, const ThreadRole& role, int tile,
                                        int stage, KvPageIds<C> ids = KvPageIds<C>{0}) {
  using L = KvLoaders<C, Ring>;
  const int lane8 = role.tid % C::kLanesPerRow;
  const uint32_t ckv_dst = Ring::ckv(sm, stage) + Ring::kCkvLanding;
  const uint32_t kpe_dst = Ring::kpe_p(sm, stage) + Ring::kKpeLanding;
  uint32_t scales_dst = 0;
  if constexpr (C::kTokenScales) scales_dst = Ring::scales(sm, stage);
  const int32_t first = t.kv_start + tile * C::kKvTile;
  const bool pow2_pages = (p.page_size & (p.page_size - 1)) == 0;
  if constexpr (Ring::kOnePageLoads) {
    if (pow2_pages && (first & (p.page_size - 1)) + C::kKvTile <= p.page_size) {
      load_kv_one_page<C, Ring, PREFETCHED>(p, t, role, first, ckv_dst, kpe_dst, scales_dst, ids);
      return;
    }
  }
#pragma unroll
  for (int pass = 0; pass < L::kPasses; ++pass) {
    const int row = L::tid(role) / C::kLanesPerRow + pass * L::kRowsPerPass;
    int32_t prefetched = 0;
    if constexpr (PREFETCHED) {
      prefetched = __shfl_sync(0xffffffffu, ids.id, pass * KvPageIds<C>::kRowsPerWarp + role.lane / C::kLanesPerRow);
    }
    if (C::kKvTile % L::kRowsPerPass == 0 || row < C::kKvTile) {
      const int32_t token = first + row;
      const bool valid = token < t.kv_stop;
      int64_t page = 0;
      int32_t slot = 0;
      if (valid) {
        // Power-of-two pages (the usual case): shift and mask instead of two divisions. Kept
        // as one branch per case: folded into selects, the division runs for every page size.
        if (pow2_pages) {
          const int shift = __popc(p.page_size - 1);
          page = PREFETCHED ? prefetched : p.kv_indices[t.kv_page_base + (token >> shift)];
          slot = token & (p.page_size - 1);
        } else {
          page = PREFETCHED ? prefetched : p.kv_indices[t.kv_page_base + token / p.page_size];
          slot = token % p.page_size;
        }
      }
      copy_kv_row<C>(ckv_dst, kpe_dst, scales_dst, row, lane8, KvRowSource<C>::at(p, page, slot), valid);
    }
  }
}

// Keeps the pipeline NUM_STAGES - 1 tiles ahead and returns once tile `tile` is in shared
// memory for every thread. With one stage there is nothing to overlap: the single buffer is
// refilled after everyone has finished with it. With page ids fetched ahead, `ids` holds those
// of the tile loaded here and is refilled with those of the tile after it.
// Ring::sync is the barrier of the threads that share the ring; the tiles of a ring are
// Ring::kTileStride apart.
template <typename C, typename Ring>
__device__ __forceinline__ void advance_pipeline(const MlaParams& p, const SmemMap<C>& sm,
                                                 const TileContext& t, const ThreadRole& role,
                                                 int tile, KvPageIds<C>& ids) {
  constexpr int kStride = Ring::kTileStride;
  if constexpr (Ring::kStages == 1) {
    Ring::sync(role);
    load_kv<C, Ring, C::kPageIdsAhead>(p, sm, t, role, tile, Ring::stage_of(role, tile), ids);
    cp_async_commit();
    if constexpr (C::kPageIdsAhead) ids = fetch_page_ids<C, Ring>(p, t, role, tile + kStride);
    cp_async_wait<0>();
    Ring::sync(role);
  } else {
    cp_async_wait<Ring::kStages - 2>();
    Ring::sync(role);  // tile visible to all; the stage refilled below is no longer read
    const int ahead = tile + (Ring::kStages - 1) * kStride;
    if (ahead < t.num_tiles) {
      load_kv<C, Ring, C::kPageIdsAhead>(p, sm, t, role, ahead, Ring::stage_of(role, ahead), ids);
      if constexpr (C::kPageIdsAhead) ids = fetch_page_ids<C, Ring>(p, t, role, ahead + kStride);
    }
    cp_async_commit();  // possibly empty: keeps the group count uniform
  }
}

// Page ids of the first tile the KV loop loads (advance_pipeline's first `ahead`).
template <typename C, typename Ring>
__device__ __forceinline__ KvPageIds<C> first_page_ids(const MlaParams& p, const TileContext& t,
                                                       const ThreadRole& role) {
  KvPageIds<C> ids{0};
  if constexpr (C::kPageIdsAhead) {
    ids = fetch_page_ids<C, Ring>(p, t, role, Ring::first_tile(role) + (Ring::kStages - 1) * Ring::kTileStride);
  }
  return ids;
}

}  // namespace mlajit_kernel
