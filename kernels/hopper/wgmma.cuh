// Warpgroup MMA (sm_90a) around the generated wgmma_ops.cuh: shared-memory operand layout,
// descriptors and the fences that order wgmma against ordinary instructions.
//
// Operands live in shared memory in the canonical 128-byte-swizzle layout: a matrix of ROWS
// rows x COLS 16-bit columns is cut into column regions of 64 (128 bytes per row); region r
// holds rows 0..ROWS-1 of columns [64 r, 64 r + 64) as ROWS x 128 bytes, and 16-byte chunk c
// of row x sits at chunk c ^ (x % 8). Region bases are 1024-byte aligned (the swizzle repeats
// every 8 rows = 1 KiB and is computed from address bits). The same bytes serve as a K-major
// operand (rows = M or N, columns = K: Q and P as A, K as B) and as an MN-major B operand
// (rows = K, columns = N: V, the ckv part of a KV tile, read transposed by the tensor cores).
#pragma once
#include "hopper/wgmma_ops.cuh"

namespace mlajit_kernel {

template <int ROWS>
struct Sw128Tile {
  static_assert(ROWS % 8 == 0, "a 128-byte-swizzled tile holds whole 8-row swizzle atoms");
  static constexpr uint32_t kRowBytes = 128;
  static constexpr uint32_t kRegionBytes = ROWS * kRowBytes;

  // Byte offset of 16-byte chunk `chunk` (of 8 per region row) of row `row` in region `region`.
  __device__ __forceinline__ static uint32_t chunk_offset(uint32_t region, uint32_t row,
                                                          uint32_t chunk) {
    return region * kRegionBytes + row * kRowBytes + ((chunk ^ (row & 7)) << 4);
  }
  // Byte offset of 16-byte column chunk `col_chunk` (8 elements) of row `row`.
  __device__ __forceinline__ static uint32_t offset(uint32_t row, uint32_t col_chunk) {
    return chunk_offset(col_chunk >> 3, row, col_chunk & 7);
  }
};

// The 64-bit shared-memory matrix descriptor: start address, leading and stride byte offsets
// (all in 16-byte units) and the 128-byte swizzle mode. Built from run-time addresses only:
// NVRTC 13.0 crashes on a wgmma whose descriptor is a compile-time constant.
__device__ __forceinline__ uint64_t sw128_descriptor(uint32_t smem_address, uint32_t leading_bytes,
                                                     uint32_t stride_bytes) {
  return static_cast<uint64_t>((smem_address & 0x3ffff) >> 4) |
         static_cast<uint64_t>((leading_bytes >> 4) & 0x3fff) << 16 |
         static_cast<uint64_t>((stride_bytes >> 4) & 0x3fff) << 32 | 1ull << 62;
}

// Byte offsets, from a Sw128Tile's base, of a K-major operand's k-step (16 columns: steps 0-3
// walk one region in 32-byte moves, then the next region) and of an MN-major operand's k-step
// (16 rows) from region `region0` on.
template <int ROWS>
__device__ __forceinline__ constexpr uint32_t k_major_offset(int k_step) {
  return (k_step >> 2) * Sw128Tile<ROWS>::kRegionBytes + (k_step & 3) * 32;
}
template <int ROWS>
__device__ __forceinline__ constexpr uint32_t mn_major_offset(int region0, int k_step) {
  return region0 * Sw128Tile<ROWS>::kRegionBytes + k_step * 16 * Sw128Tile<ROWS>::kRowBytes;
}

// K-major operand (A, or B of Q.K^T) starting at row `row0` of a Sw128Tile<ROWS> at `base`,
// k-step `k_step`. Rows repeat every 8 (stride 1 KiB); the leading offset is unused by this
// layout.
template <int ROWS>
__device__ __forceinline__ uint64_t k_major_descriptor(uint32_t base, int row0, int k_step) {
  const uint32_t start = base + row0 * Sw128Tile<ROWS>::kRowBytes + k_major_offset<ROWS>(k_step);
  return sw128_descriptor(start, 16, 1024);
}

// MN-major B operand (V of P.V): K rows (tokens) 16 k_step .. +15, N columns from region
// `region0` on. Along N the 64-column regions are kRegionBytes apart (leading offset); along K
// the 8-row atoms are 1 KiB apart (stride offset).
template <int ROWS>
__device__ __forceinline__ uint64_t mn_major_descriptor(uint32_t base, int region0, int k_step) {
  return sw128_descriptor(base + mn_major_offset<ROWS>(region0, k_step),
                         Sw128Tile<ROWS>::kRegionBytes, 1024);
}

// A copy of a shared-memory address the compiler cannot see through. Descriptors built from it
// where a wgmma is issued stay there: built from the plain address, the dozens of
// loop-invariant 64-bit descriptors of a KV loop get hoisted out of it and pin (or spill) the
// registers the accumulators need.
__device__ __forceinline__ uint32_t opaque_address(uint32_t address) {
  asm volatile("" : "+r"(address));
  return address;
}

// The descriptor of the operand `bytes` further on: only the start address changes, and its
// field cannot overflow (shared memory ends below 256 KiB).
__device__ __forceinline__ uint64_t advance_descriptor(uint64_t descriptor, uint32_t bytes) {
  const uint32_t low = static_cast<uint32_t>(descriptor) + (bytes >> 4);
  return (descriptor & 0xffffffff00000000ull) | low;
}

// Orders earlier register and shared-memory accesses of this warpgroup before its next wgmma.
__device__ __forceinline__ void wgmma_fence() {
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
}
__device__ __forceinline__ void wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}
// Waits until at most PENDING committed groups of this warpgroup are in flight.
template <int PENDING>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(PENDING) : "memory");
}

// Keeps the compiler from moving reads or writes of accumulators across a wgmma issue or wait
// (the registers change under an in-flight wgmma without the compiler seeing it).
template <int N>
__device__ __forceinline__ void fence_registers(float (&d)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i])::"memory");
}
template <int N>
__device__ __forceinline__ void fence_registers(uint32_t (&d)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+r"(d[i])::"memory");
}

// Makes this thread's ordinary shared-memory writes (st.shared, stmatrix, cp.async) visible to
// the async proxy (wgmma operands, TMA stores); a barrier must follow before another thread's
// wgmma reads them.
__device__ __forceinline__ void fence_proxy_async_shared() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

}  // namespace mlajit_kernel
