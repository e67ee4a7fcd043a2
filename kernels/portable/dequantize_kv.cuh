// The portable kernel over an e4m3 cache in the 64-row layout: the codes of a stage expanded
// in place to 16 bits, scaled.
#pragma once
#include "portable/portable_config.cuh"

namespace mlajit_kernel {

// Dequantization factors of an e4m3 cache's two operands (dequant_factor). Read again for
// every tile rather than kept: at 255 registers two more live values spill.
struct KvDequant {
  float ckv, kpe;

  __device__ __forceinline__ static KvDequant make(const MlaParams& p) {
    return KvDequant{dequant_factor(p.kv_scale_ckv_device, p.kv_scale_ckv),
                     dequant_factor(p.kv_scale_kpe_device, p.kv_scale_kpe)};
  }
};

// Scores from raw code values: ckv factor * (q_nope . ckv) + kpe factor * (q_pe . kpe), into s
// (which holds the ckv part; pe the kpe part), for layouts that keep the scales off the operands.
template <int BLOCKS, int ACCS>
__device__ __forceinline__ void scale_code_scores(float (&s)[BLOCKS][ACCS], const float (&pe)[BLOCKS][ACCS],
                                                  const KvDequant& f) {
#pragma unroll
  for (int b = 0; b < BLOCKS; ++b)
#pragma unroll
    for (int r = 0; r < ACCS; ++r) s[b][r] = fmaf(s[b][r], f.ckv, pe[b][r] * f.kpe);
}

__device__ __forceinline__ void load_shared_16(uint32_t address, uint32_t (&v)[4]) {
  asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v[0]), "=r"(v[1]), "=r"(v[2]), "=r"(v[3])
               : "r"(address));
}

__device__ __forceinline__ void store_shared_16(uint32_t address, uint32_t a, uint32_t b, uint32_t c,
                                                uint32_t d) {
  asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};" ::"r"(address), "r"(a), "r"(b), "r"(c),
               "r"(d)
               : "memory");
}

// 16 expanded values of e4m3 chunk `chunk` of a row (v: 8 words), as 16-bit chunks 2 * chunk
// and 2 * chunk + 1 of that row. Lanes whose chunk has bit 2 set store the second one first, so
// that the 8 lanes of a quarter warp (8 consecutive chunks of one row) hit 8 different bank
// slots.
template <int ROW_CHUNKS>
__device__ __forceinline__ void store_expanded(uint32_t tile, int row, int chunk, const uint32_t (&v)[8]) {
  const bool swap = (chunk >> 2) & 1;
  const int first = 2 * chunk + (swap ? 1 : 0);
#pragma unroll
  for (int k = 0; k < 2; ++k) {
    const int half = swap ? 1 - k : k;
    store_shared_16(tile + Swizzle<ROW_CHUNKS>::byte_offset(row, first + (swap ? -k : k)),
                    half ? v[4] : v[0], half ? v[5] : v[1], half ? v[6] : v[2], half ? v[7] : v[3]);
  }
}

// The 16 values of e4m3 chunk `chunk` of a row times `factor`, in MmaType (store_expanded).
template <typename C, int ROW_CHUNKS>
__device__ __forceinline__ void store_dequantized(uint32_t tile, int row, int chunk,
                                                  const uint32_t (&codes)[4], float factor) {
  uint32_t v[8];
  dequantize_chunk<typename C::MmaType>(codes, factor, v);
  store_expanded<ROW_CHUNKS>(tile, row, chunk, v);
}

// Dequantizes e4m3 chunk tid + i * kThreads of the stage's ckv codes into the 16-bit tile,
// times the tensor's factor, or under per-token scales its token's scale for the 128 values
// the chunk lies in.
template <typename C, typename Ring>
__device__ __forceinline__ void dequantize_ckv_chunk(const SmemMap<C>& sm, int stage, int i,
                                                     const uint32_t (&codes)[4], float factor,
                                                     const ThreadRole& role) {
  const int q = role.tid + i * C::kThreads;
  const int row = q / C::kCkvLoadChunks, chunk = q % C::kCkvLoadChunks;
  if constexpr (C::kTokenScales) {
    const float* scales = sm.token_scales + stage * (C::kScaleStageBytes / 4) + row * (16 / 4);
    factor = scales[chunk * C::kKvLoadChunkElems / kCkvScaleBlock] * kF16PairFactor;
  }
  store_dequantized<C, C::kCkvChunks>(Ring::ckv(sm, stage), row, chunk, codes, factor);
}

template <typename C, typename Ring>
__device__ __forceinline__ void load_ckv_codes(const SmemMap<C>& sm, int stage, int i,
                                               uint32_t (&codes)[4], const ThreadRole& role) {
  const int q = role.tid + i * C::kThreads;
  load_shared_16(Ring::ckv(sm, stage) + Ring::kCkvLanding +
                     Swizzle<C::kCkvLoadChunks>::byte_offset(q / C::kCkvLoadChunks, q % C::kCkvLoadChunks),
                 codes);
}

// Stage: dequantize_kv (e4m3 cache only). The stage's e4m3 tile, landed in the top half of
// its buffers, into the 16-bit tiles that QK and PV read, times the scales. Expanded rows
// overlay codes: rows [0, 1/2) land below every code and are written as they are read; rows
// [1/2, 3/4) land on the codes of [0, 1/2), written after a barrier; rows [3/4, 1) land on
// their own codes and those of [1/2, 3/4), so their codes are held in registers across a
// second barrier. Thread tid takes chunks tid + i * kThreads, in row order.
template <typename C, typename Ring>
__device__ __forceinline__ void dequantize_kv(const SmemMap<C>& sm, int stage, const KvDequant& f,
                                              const ThreadRole& role) {
  constexpr int kCkvCodeChunks = C::kKvTile * C::kCkvLoadChunks;
  constexpr int kKpeCodeChunks = C::kTokenScales ? 0 : C::kKvTile * C::kKpeLoadChunks;
  constexpr int kPerThread = kCkvCodeChunks / C::kThreads;
  static_assert(kCkvCodeChunks % C::kThreads == 0 && kKpeCodeChunks <= C::kThreads,
                "each thread dequantizes whole ckv chunks and at most one kpe chunk");
  // Chunk counts that do not split into halves or quarters hold everything (one barrier).
  constexpr int kHalf = kPerThread % 2 == 0 ? kPerThread / 2 : 0;
  constexpr int kThreeQuarters = kPerThread % 4 == 0 ? 3 * kPerThread / 4 : kHalf;
  uint32_t kpe[4];
  const bool has_kpe = role.tid < kKpeCodeChunks;  // none under per-token scales: kpe is 16-bit
  const int kpe_row = role.tid / C::kKpeLoadChunks, kpe_chunk = role.tid % C::kKpeLoadChunks;
  if (has_kpe) {
    load_shared_16(Ring::kpe_p(sm, stage) + Ring::kKpeLanding +
                       Swizzle<C::kKpeLoadChunks>::byte_offset(kpe_row, kpe_chunk),
                   kpe);
  }
#pragma unroll
  for (int i = 0; i < kHalf; ++i) {
    uint32_t codes[4];
    load_ckv_codes<C, Ring>(sm, stage, i, codes, role);
    dequantize_ckv_chunk<C, Ring>(sm, stage, i, codes, f.ckv, role);
  }
  uint32_t held[kPerThread - kThreeQuarters][4];
#pragma unroll
  for (int i = kThreeQuarters; i < kPerThread; ++i) load_ckv_codes<C, Ring>(sm, stage, i, held[i - kThreeQuarters], role);
  if constexpr (kThreeQuarters > kHalf) {
    __syncthreads();
#pragma unroll
    for (int i = kHalf; i < kThreeQuarters; ++i) {
      uint32_t codes[4];
      load_ckv_codes<C, Ring>(sm, stage, i, codes, role);
      dequantize_ckv_chunk<C, Ring>(sm, stage, i, codes, f.ckv, role);
    }
  }
  __syncthreads();
#pragma unroll
  for (int i = kThreeQuarters; i < kPerThread; ++i) {
    dequantize_ckv_chunk<C, Ring>(sm, stage, i, held[i - kThreeQuarters], f.ckv, role);
  }
  if (has_kpe) store_dequantized<C, C::kKpeChunks>(Ring::kpe_p(sm, stage), kpe_row, kpe_chunk, kpe, f.kpe);
  __syncthreads();
}

}  // namespace mlajit_kernel
