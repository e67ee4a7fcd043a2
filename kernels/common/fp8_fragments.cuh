// mma.sync operands taken straight from e4m3 codes in shared memory: ldmatrix moves the codes
// as b16 pairs and the conversion to f16 happens in registers, so a tile of codes is never
// expanded in shared memory. With lane (g, c) = (lane / 4, lane % 4):
//
// K (QK, k = head dim): ldmatrix without .trans over 16-code chunks of token rows gives lane
// (g, c) the codes of dims 4c..4c+3 of token g: one k16 step's B fragment, two f16 pairs,
// when the step's k order is 2c, 2c+1, 8+2c, 9+2c <-> dims 4c..4c+3. The A operand must then
// hold Q in that order: order_q_step rewrites a 16-dim step of a 16-bit Q row to it.
//
// V (PV, k = token): ldmatrix .trans over the same chunks gives lane (g, c) the codes of
// tokens 2c, 2c+1 x dims 2g, 2g+1. Bytes {0, 2} are the even dim's token pair and {1, 3} the
// odd dim's, so a 16-dim chunk is two n8 mma blocks, one over its even and one over its odd
// dims: accumulator columns 2c, 2c+1 of the even block are dims 4c, 4c+2, of the odd block
// 4c+1, 4c+3. Together a lane holds dims 4c..4c+3 of its rows.
//
// The pairs are the codes' values divided by kF16PairFactor (fp8_dequant.cuh); the scales and
// that factor are applied to the fp32 products, never to the 16-bit operands.
#pragma once
#include "common/fp8_dequant.cuh"
#include "common/ptx_dtype.cuh"

namespace mlajit_kernel {

// The K fragment of one k16 step from the codes of dims 4c..4c+3 (one ldmatrix register).
__device__ __forceinline__ void k_code_pairs(uint32_t codes, uint32_t& b0, uint32_t& b1) {
  e4m3x4_to_f16x2x2(codes, b0, b1);
}

// The even dim's and the odd dim's token pair of one ldmatrix .trans register of codes.
__device__ __forceinline__ void v_code_pairs(uint32_t codes, uint32_t& even, uint32_t& odd) {
  const uint32_t split = __byte_perm(codes, 0u, 0x3120);  // bytes 0, 2 low; 1, 3 high
  e4m3x4_to_f16x2x2(split, even, odd);
}

// A pair of T as an f16 pair.
template <typename T>
__device__ __forceinline__ uint32_t to_f16_pair(uint32_t pair) {
  if constexpr (Dtype16<T>::kIsBf16) {
    float lo, hi;
    unpack2<T>(pair, lo, hi);
    return Dtype16<f16_t>::pack(lo, hi);
  } else {
    return pair;
  }
}

// One 16-dim k step of a Q row (16-byte chunks `lo` = dims 0-7, `hi` = dims 8-15, each word a
// pair 2i, 2i+1) into the K code fragments' k order, as f16: lo takes pairs 0, 2, 4, 6 (dims
// 0, 1, 4, 5, 8, 9, 12, 13) and hi pairs 1, 3, 5, 7.
template <typename T>
__device__ __forceinline__ void order_q_step(uint32_t (&lo)[4], uint32_t (&hi)[4]) {
  uint32_t pairs[8];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    pairs[i] = to_f16_pair<T>(lo[i]);
    pairs[4 + i] = to_f16_pair<T>(hi[i]);
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    lo[i] = pairs[2 * i];
    hi[i] = pairs[2 * i + 1];
  }
}

}  // namespace mlajit_kernel
