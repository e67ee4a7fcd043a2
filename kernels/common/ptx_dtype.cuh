// The 16-bit element types Q, KV and O share, and their conversions to and from fp32.
// Plain 16-bit wrappers rather than cuda_bf16.h / cuda_fp16.h: those headers cost NVRTC
// about a second per compile, and the kernel only ever needs the conversions below.
#pragma once

namespace mlajit_kernel {

struct bf16_t {
  unsigned short bits;
};
struct f16_t {
  unsigned short bits;
};

template <typename T>
struct Dtype16;

template <>
struct Dtype16<bf16_t> {
  static constexpr bool kIsBf16 = true;
  // Round two floats to nearest-even and pack them; `lo` lands in the low half (lower address).
  __device__ __forceinline__ static uint32_t pack(float lo, float hi) {
    uint32_t packed;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(packed) : "f"(hi), "f"(lo));
    return packed;
  }
  __device__ __forceinline__ static float to_float(uint32_t bits16) {
    return __int_as_float(static_cast<int>(bits16 << 16));
  }
};

template <>
struct Dtype16<f16_t> {
  static constexpr bool kIsBf16 = false;
  __device__ __forceinline__ static uint32_t pack(float lo, float hi) {
    uint32_t packed;
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(packed) : "f"(hi), "f"(lo));
    return packed;
  }
  __device__ __forceinline__ static float to_float(uint32_t bits16) {
    float value;
    const unsigned short half = static_cast<unsigned short>(bits16);
    asm("cvt.f32.f16 %0, %1;" : "=f"(value) : "h"(half));
    return value;
  }
};

// Both halves of a packed pair as floats.
template <typename T>
__device__ __forceinline__ void unpack2(uint32_t packed, float& lo, float& hi) {
  lo = Dtype16<T>::to_float(packed & 0xffffu);
  hi = Dtype16<T>::to_float(packed >> 16);
}

}  // namespace mlajit_kernel
