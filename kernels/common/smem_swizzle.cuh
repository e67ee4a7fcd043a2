// XOR swizzle for row-major tiles in shared memory, in units of 16-byte chunks.
//
// ldmatrix reads one chunk from each of 8 consecutive rows; without a swizzle, rows of 128 B
// or more put all 8 in the same banks. The 8 chunk slots of one 128-byte bank window must be
// hit once each: rows of >= 8 chunks XOR the chunk with row % 8; narrower rows (64-bit KPE,
// 32-token P tiles) share a 128-byte window between 8 / ROW_CHUNKS rows, so they XOR with
// the window index instead. Chunks 8 apart keep their distance (the XOR only touches the low
// three bits), which lets callers step through a row by adding constant offsets.
#pragma once

namespace mlajit_kernel {

template <int ROW_CHUNKS>
struct Swizzle {
  static_assert(ROW_CHUNKS >= 2 && (ROW_CHUNKS & (ROW_CHUNKS - 1)) == 0,
                "swizzled rows must be a power of two of at least 2 chunks (32 bytes)");
  static constexpr int kRowsPerWindow = ROW_CHUNKS >= 8 ? 1 : 8 / ROW_CHUNKS;
  static constexpr int kMask = ROW_CHUNKS >= 8 ? 7 : ROW_CHUNKS - 1;
  // Chunks per swizzle period along a row: offsets repeat (plus a constant) after this.
  static constexpr int kPeriod = ROW_CHUNKS >= 8 ? 8 : ROW_CHUNKS;

  __device__ __forceinline__ static uint32_t chunk_index(uint32_t row, uint32_t chunk) {
    return row * ROW_CHUNKS + (chunk ^ ((row / kRowsPerWindow) & kMask));
  }
  __device__ __forceinline__ static uint32_t byte_offset(uint32_t row, uint32_t chunk) {
    return chunk_index(row, chunk) * 16u;
  }
};

}  // namespace mlajit_kernel
