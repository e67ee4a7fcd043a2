// The hopper kernel's producer over an e4m3 cache: codes through registers into the stages,
// per-tensor scales (raw values in f16) and DeepSeek-V3.2's per-token scales (dequantized).
#pragma once
#include "hopper/hopper_config.cuh"

namespace mlajit_kernel {

// Stage: load_kv (producer warpgroup), e4m3 cache: each thread loads 16-byte chunks of codes
// into registers, converts them to their raw values in f16 (the scales apply elsewhere:
// StageTypeOf) and stores them into the stage. A stage need only be free for the stores:
// each thread holds a whole tile of codes, loaded while the stage is still read, so the
// refill after the wait is the conversions and the stores (on the H100 this beat holding half
// a tile by 2-7%: docs/PERF.md). Any page size; rows at or past kv_stop are stored as zeros
// (masked scores meet zeros).
//
// The halves are the stage's token halves (released and refilled apart): in half h, warp w
// covers rows 32 h + 8 w .. 32 h + 8 w + 7, lane l holds codes 16 (l % 4) .. 16 (l % 4) + 15
// of each region of row 32 h + 8 w + l / 4 and stores each chunk as two 16-byte pieces
// (pieces 2 (l % 4) and 2 (l % 4) + 1 of the region's row): the 8 lanes of a store phase, two
// rows of each parity times four pieces, meet all 32 banks under the 128-byte swizzle.
template <typename C>
struct CodeRows {
  static constexpr int kHalves = C::kTokenHalves;
  static_assert(C::kHalfTokens == 8 * (C::kProducerThreads / 32),
                "each warp stores 8 rows of a token half");
  __device__ __forceinline__ static int row(const HopperRole& role, int half) {
    return C::kHalfTokens * half + 8 * role.warp + role.lane / 4;
  }
};

// The page id of this thread's row in each half of a tile (-1 at or past kv_stop, or past the
// item's tiles), read a tile ahead.
template <typename C>
struct CodePages {
  int32_t page[CodeRows<C>::kHalves];

  __device__ __forceinline__ static CodePages fetch(const MlaParams& p, const HopperTile& t,
                                                    const HopperRole& role, int tile) {
    CodePages g;
#pragma unroll
    for (int half = 0; half < CodeRows<C>::kHalves; ++half) {
      const int32_t token = t.kv_start + tile * C::kTile + CodeRows<C>::row(role, half);
      g.page[half] = tile < t.num_tiles && token < t.kv_stop
                         ? p.kv_indices[t.kv_page_base + token / p.page_size]
                         : -1;
    }
    return g;
  }
};

// 16 bytes of codes, or zeros when `valid` is false; evict-first in L2 as the TMA copies are.
__device__ __forceinline__ void load_codes_16(uint32_t (&w)[4], const void* src, bool valid,
                                              uint64_t policy) {
  asm volatile(
      "{\n .reg .pred p;\n setp.ne.b32 p, %5, 0;\n"
      " mov.b32 %0, 0;\n mov.b32 %1, 0;\n mov.b32 %2, 0;\n mov.b32 %3, 0;\n"
      " @p ld.global.nc.L1::no_allocate.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %6;\n}"
      : "=r"(w[0]), "=r"(w[1]), "=r"(w[2]), "=r"(w[3])
      : "l"(src), "r"(static_cast<int>(valid)), "l"(policy));
}

// Where this thread's row of half `half` lies in tile `tile`: its page (0 where the row does
// not exist, past kv_stop or the item's tiles) and slot.
template <typename C>
struct RowPlace {
  int64_t page, slot;
  bool valid;
  __device__ __forceinline__ static RowPlace of(const MlaParams& p, const HopperTile& t,
                                                const CodePages<C>& pages, const HopperRole& role,
                                                int tile, int half) {
    RowPlace r;
    r.valid = pages.page[half] >= 0;
    r.page = r.valid ? pages.page[half] : 0;
    r.slot = (t.kv_start + tile * C::kTile + CodeRows<C>::row(role, half)) % p.page_size;
    return r;
  }
};

// Where this thread's 16 codes of region 0 of each of its rows of a tile lie, and whether the
// rows exist.
template <typename C>
struct CodeSources {
  const unsigned char* ckv[CodeRows<C>::kHalves];
  const unsigned char* kpe[CodeRows<C>::kHalves];
  bool valid[CodeRows<C>::kHalves];

  __device__ __forceinline__ static CodeSources make(const MlaParams& p, const HopperTile& t,
                                                     const CodePages<C>& pages,
                                                     const HopperRole& role, int tile) {
    CodeSources c;
    const int piece = 16 * (role.lane % 4);
#pragma unroll
    for (int half = 0; half < CodeRows<C>::kHalves; ++half) {
      const RowPlace<C> at = RowPlace<C>::of(p, t, pages, role, tile, half);
      c.valid[half] = at.valid;
      c.ckv[half] = static_cast<const unsigned char*>(p.ckv) + at.page * p.ckv_stride_page +
                    at.slot * p.ckv_stride_token + piece;
      c.kpe[half] = static_cast<const unsigned char*>(p.kpe) + at.page * p.kpe_stride_page +
                    at.slot * p.kpe_stride_token + piece;
    }
    return c;
  }
};

// This thread's chunk of `region` of its row in half `half` into `w`.
template <typename C>
__device__ __forceinline__ void load_code_chunk(uint32_t (&w)[4], const CodeSources<C>& src,
                                                int half, int region, uint64_t policy) {
  const unsigned char* from = region < C::kKpeRegion ? src.ckv[half] + region * 64 : src.kpe[half];
  load_codes_16(w, from, src.valid[half], policy);
}

// Eight words (16 values of the stage type) of `region` of this thread's row in half `half`
// into the stage: pieces 2 (lane % 4) and the next of the region's row.
template <typename C>
__device__ __forceinline__ void store_row_chunk(const uint32_t (&v)[8], const HopperSmem<C>& sm,
                                                const HopperRole& role, int stage, int half,
                                                int region) {
  const int row = CodeRows<C>::row(role, half);
  const int piece = 2 * (role.lane % 4);
  const uint32_t dst = sm.kv(stage);
  asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};" ::"r"(
                   dst + C::Tile::chunk_offset(region, row, piece)),
               "r"(v[0]), "r"(v[1]), "r"(v[2]), "r"(v[3])
               : "memory");
  asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};" ::"r"(
                   dst + C::Tile::chunk_offset(region, row, piece + 1)),
               "r"(v[4]), "r"(v[5]), "r"(v[6]), "r"(v[7])
               : "memory");
}

// Chunk `region` of half `half`, converted, into the stage.
template <typename C>
__device__ __forceinline__ void store_code_chunk(const uint32_t (&w)[4], const HopperSmem<C>& sm,
                                                 const HopperRole& role, int stage, int half,
                                                 int region) {
  uint32_t v[8];
  convert_chunk_f16(w, v);
  store_row_chunk<C>(v, sm, role, stage, half, region);
}

// The producer warpgroup's loop over a work item's tiles of e4m3 codes (every thread). Each
// thread holds a whole tile of codes (18 chunks, 72 registers) and loads a chunk of the next
// tile as soon as it has stored that register: the codes are in flight while the stage is
// still read, and its refill after `empty` is the conversions and stores. Page ids are read
// two tiles ahead of their stores (one ahead of their codes' loads).
template <typename C>
__device__ __forceinline__ void producer_loop_codes(const MlaParams& p, const HopperSmem<C>& sm,
                                                    const HopperTile& t, uint32_t sequence,
                                                    const HopperRole& role) {
  const uint64_t policy = l2_evict_first_policy();
  uint32_t codes[CodeRows<C>::kHalves][C::kRegions][4];
  {
    const CodeSources<C> first =
        CodeSources<C>::make(p, t, CodePages<C>::fetch(p, t, role, 0), role, 0);
#pragma unroll
    for (int half = 0; half < CodeRows<C>::kHalves; ++half)
#pragma unroll
      for (int region = 0; region < C::kRegions; ++region)
        load_code_chunk<C>(codes[half][region], first, half, region, policy);
  }
  CodePages<C> pages = CodePages<C>::fetch(p, t, role, 1);
#pragma unroll 1
  for (int tile = 0; tile < t.num_tiles; ++tile) {
    const StageSlot slot = StageSlot::of(sequence + tile);
    const CodeSources<C> next = CodeSources<C>::make(p, t, pages, role, tile + 1);
    pages = CodePages<C>::fetch(p, t, role, tile + 2);
#pragma unroll
    for (int half = 0; half < CodeRows<C>::kHalves; ++half) {
      wait_half_free<C>(sm, sequence + tile, half);
#pragma unroll
      for (int region = 0; region < C::kRegions; ++region) {
        store_code_chunk<C>(codes[half][region], sm, role, slot.stage, half, region);
        // The next tile's chunk (zeros past the item's tiles: never stored).
        load_code_chunk<C>(codes[half][region], next, half, region, policy);
      }
    }
    // The stores are the generic proxy's; wgmma reads through the async proxy.
    fence_proxy_async_shared();
    mbarrier_arrive(sm.full(slot.stage));
  }
}

// DeepSeek-V3.2's cache (e4m3_token128_t), one row of a thread's tile in registers: the ckv
// codes of regions 0 .. kKpeRegion - 1 (16 a region) and the row's four ckv scales. (Its kpe,
// already in the stage type, goes by cp.async: copy_token_kpe.)
template <typename C>
struct TokenRowCodes {
  uint32_t codes[C::kKpeRegion][4];
  float scales[C::kHeadDimCkv / kCkvScaleBlock];
};

// Loads a row's codes and scales (zeros where the row does not exist).
template <typename C>
__device__ __forceinline__ void load_token_row(TokenRowCodes<C>& r, const MlaParams& p,
                                               const RowPlace<C>& at, const HopperRole& role,
                                               uint64_t policy) {
  static_assert(C::kHeadDimCkv / kCkvScaleBlock == 4, "one 16-byte load of a row's scales");
  const unsigned char* ckv = static_cast<const unsigned char*>(p.ckv) +
                             at.page * p.ckv_stride_page + at.slot * p.ckv_stride_token +
                             16 * (role.lane % 4);
#pragma unroll
  for (int region = 0; region < C::kKpeRegion; ++region) {
    load_codes_16(r.codes[region], ckv + region * 64, at.valid, policy);
  }
  uint32_t scales[4];
  load_codes_16(scales,
                p.ckv_scales + at.page * p.ckv_scales_stride_page + at.slot * p.ckv_scales_stride_token,
                at.valid, policy);
#pragma unroll
  for (int b = 0; b < 4; ++b) r.scales[b] = __uint_as_float(scales[b]);
}

// The row's 16 kpe values of this thread (32 bytes, pieces 2 (lane % 4) and the next of the
// kpe region, as store_row_chunk places a chunk) by cp.async into the stage.
template <typename C>
__device__ __forceinline__ void copy_token_kpe(const MlaParams& p, const RowPlace<C>& at,
                                               const HopperSmem<C>& sm, const HopperRole& role,
                                               int stage, int half) {
  const auto* kpe = static_cast<const typename C::QType*>(p.kpe) + at.page * p.kpe_stride_page +
                    at.slot * p.kpe_stride_token + 16 * (role.lane % 4);
  const int row = CodeRows<C>::row(role, half);
  const int piece = 2 * (role.lane % 4);
#pragma unroll
  for (int k = 0; k < 2; ++k) {
    cp_async_16(sm.kv(stage) + C::Tile::chunk_offset(C::kKpeRegion, row, piece + k), kpe + 8 * k,
                at.valid);
  }
}

// A row's chunk of `region`, dequantized with the row's scale for the 128 values it lies in,
// into the stage (store_row_chunk).
template <typename C>
__device__ __forceinline__ void store_token_chunk(const TokenRowCodes<C>& r,
                                                  const HopperSmem<C>& sm, const HopperRole& role,
                                                  int stage, int half, int region) {
  uint32_t v[8];
  dequantize_chunk<typename C::StageType>(
      r.codes[region], r.scales[region * 64 / kCkvScaleBlock] * kF16PairFactor, v);
  store_row_chunk<C>(v, sm, role, stage, half, region);
}

// The producer warpgroup's loop over a work item's tiles of DeepSeek-V3.2's cache: as
// producer_loop_codes (a whole tile of codes, and the rows' scales, held a tile ahead), with
// each chunk dequantized by its token's scale into Q's type, and kpe copied by cp.async once
// the stage is free (landed before the stage's arrival).
template <typename C>
__device__ __forceinline__ void producer_loop_token_codes(const MlaParams& p,
                                                          const HopperSmem<C>& sm,
                                                          const HopperTile& t, uint32_t sequence,
                                                          const HopperRole& role) {
  const uint64_t policy = l2_evict_first_policy();
  TokenRowCodes<C> rows[CodeRows<C>::kHalves];
  CodePages<C> now = CodePages<C>::fetch(p, t, role, 0);
#pragma unroll
  for (int half = 0; half < CodeRows<C>::kHalves; ++half) {
    load_token_row<C>(rows[half], p, RowPlace<C>::of(p, t, now, role, 0, half), role, policy);
  }
  CodePages<C> next = CodePages<C>::fetch(p, t, role, 1);
#pragma unroll 1
  for (int tile = 0; tile < t.num_tiles; ++tile) {
    const StageSlot slot = StageSlot::of(sequence + tile);
    // The whole stage first: storing each half as it frees takes registers this role lacks.
    wait_stage_free<C>(sm, sequence + tile);
#pragma unroll
    for (int half = 0; half < CodeRows<C>::kHalves; ++half) {
      copy_token_kpe<C>(p, RowPlace<C>::of(p, t, now, role, tile, half), sm, role,
                        slot.stage, half);
    }
    cp_async_commit();
#pragma unroll
    for (int half = 0; half < CodeRows<C>::kHalves; ++half) {
#pragma unroll
      for (int region = 0; region < C::kKpeRegion; ++region) {
        store_token_chunk<C>(rows[half], sm, role, slot.stage, half, region);
      }
      // The next tile's row (zeros past the item's tiles: never stored).
      load_token_row<C>(rows[half], p, RowPlace<C>::of(p, t, next, role, tile + 1, half),
                        role, policy);
    }
    now = next;
    next = CodePages<C>::fetch(p, t, role, tile + 2);
    cp_async_wait<0>();
    // The stores and copies are the generic proxy's; wgmma reads through the async proxy.
    fence_proxy_async_shared();
    mbarrier_arrive(sm.full(slot.stage));
  }
}

}  // namespace mlajit_kernel
