// Warp-level tensor-core primitives: ldmatrix / stmatrix between swizzled shared memory and
// mma fragments, and mma.sync m16n8k16 with fp32 accumulators for bf16 and f16 inputs.
//
// Fragment layout used throughout (g = lane / 4, c = lane % 4), for a 16x16 tile held in
// eight floats: [0,1] row g, cols 2c..2c+1; [2,3] row g+8, same cols; [4,5] row g,
// cols 8+2c..; [6,7] row g+8, cols 8+2c... The matching 16x16 A operand is four packed
// registers in the order [0,1] [2,3] [4,5] [6,7].
#pragma once
#include "common/ptx_dtype.cuh"

namespace mlajit_kernel {

// Four 8x8 b16 matrices; lane i supplies the row address of matrix i / 8, row i % 8.
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t smem_addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr));
}

// Two 8x8 b16 matrices; lanes 0-15 supply the row addresses (the others' are ignored).
__device__ __forceinline__ void ldmatrix_x2(uint32_t (&r)[2], uint32_t smem_addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(smem_addr));
}

__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t smem_addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr));
}

// The inverse of ldmatrix_x4: the same addressing, the same register order. stmatrix is an
// sm_90 instruction; before that each lane fetches the row address it writes to (lane l holds
// row l / 4, columns 2 (l % 4) .. +1 of every matrix) and stores its 4 bytes itself.
__device__ __forceinline__ void stmatrix_x4(uint32_t smem_addr, const uint32_t (&r)[4]) {
#if __CUDA_ARCH__ >= 900
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};" ::"r"(smem_addr),
               "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3])
               : "memory");
#else
  uint32_t lane;
  asm("mov.u32 %0, %%laneid;" : "=r"(lane));
#pragma unroll
  for (int m = 0; m < 4; ++m) {
    const uint32_t row_addr = __shfl_sync(0xffffffffu, smem_addr, 8 * m + lane / 4);
    asm volatile("st.shared.b32 [%0], %1;" ::"r"(row_addr + 4 * (lane % 4)), "r"(r[m]) : "memory");
  }
#endif
}

// c[0..3] += A(16x16, row-major fragment a) * B(16x8, col-major fragment b0, b1).
template <typename T>
__device__ __forceinline__ void mma_16x8x16(float* c, const uint32_t (&a)[4], uint32_t b0,
                                            uint32_t b1) {
  if constexpr (Dtype16<T>::kIsBf16) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, "
        "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, "
        "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

// c (16x16 accumulator, eight floats) += A(16x16) * B(16x16), B given as the four registers
// of one ldmatrix_x4 over [n 0-7 | n 8-15] x [k 0-7 | k 8-15] (b[0], b[1] for n 0-7).
template <typename T>
__device__ __forceinline__ void mma_16x16x16(float (&c)[8], const uint32_t (&a)[4],
                                             const uint32_t (&b)[4]) {
  mma_16x8x16<T>(c, a, b[0], b[1]);
  mma_16x8x16<T>(c + 4, a, b[2], b[3]);
}

// Packs a 16x16 fp32 accumulator into the A operand (or stmatrix registers) of type T.
template <typename T>
__device__ __forceinline__ void pack_fragment(uint32_t (&a)[4], const float (&c)[8]) {
  a[0] = Dtype16<T>::pack(c[0], c[1]);
  a[1] = Dtype16<T>::pack(c[2], c[3]);
  a[2] = Dtype16<T>::pack(c[4], c[5]);
  a[3] = Dtype16<T>::pack(c[6], c[7]);
}

}  // namespace mlajit_kernel
