// The portable kernel's mma fragments and softmax arithmetic, shared by the row layouts:
// ldmatrix addresses, QK blocks, row maxima, O rescaling and the LSE.
#pragma once
#include "portable/portable_config.cuh"

namespace mlajit_kernel {

// Byte offsets, within one swizzled operand, of the ldmatrix rows a lane supplies for the
// first swizzle period of steps (CHUNKS chunks each: a k-step of 16-bit values, or up to four
// of e4m3 codes); later periods add a constant.
template <int ROW_CHUNKS, int CHUNKS = 2>
struct FragmentAddress {
  static constexpr int kSteps = Swizzle<ROW_CHUNKS>::kPeriod / CHUNKS;
  static_assert(kSteps >= 1, "a step lies in one swizzle period");
  uint32_t at[kSteps];

  __device__ __forceinline__ FragmentAddress(int row, int chunk_select) {
#pragma unroll
    for (int s = 0; s < kSteps; ++s) at[s] = Swizzle<ROW_CHUNKS>::byte_offset(row, CHUNKS * s + chunk_select);
  }

  // Offset of step `step` (chunks CHUNKS * step ...).
  __device__ __forceinline__ uint32_t step(int step) const {
    return at[step % kSteps] + (step / kSteps) * (kSteps * CHUNKS * 16);
  }
};

// One mma block of QK scores: 16 query rows x N KV columns, N / 2 fp32 accumulators a thread
// (the fragment layout of ptx_mma.cuh). Its K fragment is one ldmatrix per k-step.
template <int N>
struct QkBlock;

template <>
struct QkBlock<16> {
  static constexpr int kAccs = 8;
  // ldmatrix.x4: lanes 0-7 give tokens 0-7 of the k-step's first chunk, 8-15 the same tokens'
  // second chunk, 16-31 the same for tokens 8-15.
  __device__ __forceinline__ static int k_row(int lane) { return 8 * (lane / 16) + lane % 8; }
  __device__ __forceinline__ static int k_chunk(int lane) { return (lane % 16) / 8; }
  template <typename T>
  __device__ __forceinline__ static void accumulate(float (&s)[kAccs], const uint32_t (&a)[4],
                                                    uint32_t k_addr) {
    uint32_t k[4];
    ldmatrix_x4(k, k_addr);
    mma_16x16x16<T>(s, a, k);
  }
};

template <>
struct QkBlock<8> {
  static constexpr int kAccs = 4;
  // ldmatrix.x2: lanes 0-7 give tokens 0-7 of the k-step's first chunk, lanes 8-15 the second.
  __device__ __forceinline__ static int k_row(int lane) { return lane % 8; }
  __device__ __forceinline__ static int k_chunk(int lane) { return (lane / 8) % 2; }
  template <typename T>
  __device__ __forceinline__ static void accumulate(float (&s)[kAccs], const uint32_t (&a)[4],
                                                    uint32_t k_addr) {
    uint32_t k[2];
    ldmatrix_x2(k, k_addr);
    mma_16x8x16<T>(s, a, k[0], k[1]);
  }
};

// This quad's maximum of accumulator row j (0: row lane / 4, 1: that + 8) over n8 score
// blocks (QkBlock<8>'s layout: accumulators 2j and 2j + 1), in every lane of the quad.
template <int BLOCKS>
__device__ __forceinline__ float quad_row_max(const float (&s)[BLOCKS][QkBlock<8>::kAccs], int j) {
  float mx = neg_inf();
#pragma unroll
  for (int b = 0; b < BLOCKS; ++b) mx = fmaxf(mx, fmaxf(s[b][2 * j], s[b][2 * j + 1]));
  return quad_max(mx);
}

// Accumulator row j (0: row lane / 4, 1: row lane / 4 + 8) of blocks o[first, first + N) *= factor.
template <int N, int BLOCKS>
__device__ __forceinline__ void scale_row(float (&o)[BLOCKS][8], int first, int j, float factor) {
#pragma unroll
  for (int b = 0; b < N; ++b) {
    o[first + b][2 * j] *= factor;
    o[first + b][2 * j + 1] *= factor;
    o[first + b][2 * j + 4] *= factor;
    o[first + b][2 * j + 5] *= factor;
  }
}

// o += P(16 rows x 16 tokens, fragment p) . ckv[kv_row0 .. +16, this warp's dims].
template <typename C, int DIM_BLOCKS>
__device__ __forceinline__ void accumulate_pv_block(SoftmaxState<C, DIM_BLOCKS>& st, const uint32_t (&p)[4],
                                                    uint32_t v_base, int kv_row0,
                                                    const FragmentAddress<C::kCkvChunks>& v_addr) {
  const uint32_t block_base = v_base + kv_row0 * (C::kCkvChunks * 16);
#pragma unroll
  for (int b = 0; b < DIM_BLOCKS; ++b) {
    uint32_t v[4];
    ldmatrix_x4_trans(v, block_base + v_addr.step(b));
    mma_16x16x16<typename C::MmaType>(st.o[b], p, v);
  }
}

// Helpers of the softmax stages of both layouts.

// The exp2 base of a row whose running max is m. A row that has seen nothing yet keeps
// m = -inf; 0 is its base, so that 2^(-inf - base) = 0 rather than 2^(-inf + inf) = NaN.
__device__ __forceinline__ float exp2_base(float m, float scale_log2) {
  return m == neg_inf() ? 0.f : m * scale_log2;
}

// Of a row with running max m and row sum d: its base-2 LSE and the factor 1 / d of its O
// (-inf and 0 for a row that saw nothing).
__device__ __forceinline__ float finish_row(float m, float d, float scale_log2, float& lse) {
  const bool empty = m == neg_inf() || !(d > 0.f);
  const float inv = empty ? 0.f : 1.f / d;
  lse = empty ? neg_inf() : m * scale_log2 + fast_log2(d);
  return inv;
}

// The P tile of a stage lives in its kpe buffer, KV_TILE columns (at least 2 chunks) a row.
template <typename C>
using PSwizzle = Swizzle<(C::kPChunks < 2 ? 2 : C::kPChunks)>;

}  // namespace mlajit_kernel
