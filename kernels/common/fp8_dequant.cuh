// The e4m3 KV element (PyTorch's float8_e4m3fn) and its conversion, times a scale, to the
// 16-bit type the tensor cores multiply. The conversion is exact up to the final rounding of
// value * scale to 16 bits: e4m3 values are exact in f16 (4 exponent bits fit in 5, 3 mantissa
// bits in 10; subnormals included), and the product is taken in fp32.
#pragma once
#include "common/ptx_dtype.cuh"

namespace mlajit_kernel {

struct e4m3_t {
  unsigned char bits;
};

// An e4m3 ckv cache with one fp32 scale per 128 values of each token (MlaParams::ckv_scales)
// and kpe unquantized in the queries' type: DeepSeek-V3.2's layout. Its elements are e4m3_t's.
struct e4m3_token128_t {
  unsigned char bits;
};

// ckv values that share one scale in an e4m3_token128_t cache (the host's kCkvScaleBlock).
constexpr int kCkvScaleBlock = 128;

// Whether a cache type carries per-token scales (e4m3_token128_t).
template <typename KV>
struct HasTokenScales {
  static constexpr bool value = false;
};
template <>
struct HasTokenScales<e4m3_token128_t> {
  static constexpr bool value = true;
};

// Two e4m3 codes (low byte first) as an f16 pair: their values divided by `kF16PairFactor`.
#if __CUDA_ARCH__ >= 890
// Ada and later convert pairs in one instruction, exactly.
constexpr float kF16PairFactor = 1.0f;
__device__ __forceinline__ uint32_t e4m3x2_to_f16x2(uint32_t two_codes) {
  uint32_t pair;
  const unsigned short codes = static_cast<unsigned short>(two_codes);
  asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(pair) : "h"(codes));
  return pair;
}
// Four codes as two f16 pairs (codes 0-1, codes 2-3), each instruction reading its half of
// the word directly.
__device__ __forceinline__ void e4m3x4_to_f16x2x2(uint32_t four_codes, uint32_t& low, uint32_t& high) {
  asm("{\n .reg .b16 lo, hi;\n mov.b32 {lo, hi}, %2;\n cvt.rn.f16x2.e4m3x2 %0, lo;\n"
      " cvt.rn.f16x2.e4m3x2 %1, hi;\n}"
      : "=r"(low), "=r"(high)
      : "r"(four_codes));
}
#else
// Ampere has no FP8 conversion: the code's exponent and mantissa bits, moved under f16's, read
// as the value times 2^-8 (exponent bias 7 against 15; e4m3 subnormals land on f16
// subnormals with the same factor). The 2^8 goes into the scale.
constexpr float kF16PairFactor = 256.0f;
__device__ __forceinline__ uint32_t e4m3x2_to_f16x2(uint32_t two_codes) {
  const uint32_t shifted = __byte_perm(two_codes, 0u, 0x1404);  // code 0 in byte 1, code 1 in byte 3
  return (shifted & 0x80008000u) | ((shifted & 0x7f007f00u) >> 1);
}
__device__ __forceinline__ void e4m3x4_to_f16x2x2(uint32_t four_codes, uint32_t& low, uint32_t& high) {
  low = e4m3x2_to_f16x2(four_codes);
  high = e4m3x2_to_f16x2(four_codes >> 16);
}
#endif

// Scale of one KV operand: the caller's device value when given, else the float; times the
// f16 pair factor, so that a converted pair times it is the dequantized value.
__device__ __forceinline__ float dequant_factor(const float* device_scale, float scale) {
  return (device_scale != nullptr ? *device_scale : scale) * kF16PairFactor;
}

// 16 e4m3 codes (one 16-byte chunk, words[0] holding codes 0-3) times `factor`
// (dequant_factor) into 16 values of T: out[0..3] holds codes 0-7, out[4..7] codes 8-15.
template <typename T>
__device__ __forceinline__ void dequantize_chunk(const uint32_t (&codes)[4], float factor,
                                                 uint32_t (&out)[8]) {
#pragma unroll
  for (int w = 0; w < 4; ++w) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const uint32_t f16x2 = e4m3x2_to_f16x2(codes[w] >> (16 * half));
      float a, b;
      unpack2<f16_t>(f16x2, a, b);
      out[2 * w + half] = Dtype16<T>::pack(a * factor, b * factor);
    }
  }
}

// 16 e4m3 codes as their values (divided by kF16PairFactor) in f16, unscaled: out[0..3] holds
// codes 0-7, out[4..7] codes 8-15. Where the pair conversion is one instruction this is a
// sixth of dequantize_chunk's work (no f32 round trip, no scale, no repack), for a consumer
// that applies the scales elsewhere.
__device__ __forceinline__ void convert_chunk_f16(const uint32_t (&codes)[4], uint32_t (&out)[8]) {
#pragma unroll
  for (int w = 0; w < 4; ++w) e4m3x4_to_f16x2x2(codes[w], out[2 * w], out[2 * w + 1]);
}

}  // namespace mlajit_kernel
