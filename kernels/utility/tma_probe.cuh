// A probe of the driver's TMA tensor maps (tests/gpu/test_driver_launch_gpu.cpp): each block
// loads one box of a 2-D tensor of 2-byte elements through TMA with the 128B swizzle, waits on
// an mbarrier, and writes the box back un-swizzled to `out`, a row-major array of
// (gridDim.y * kTmaProbeBoxRows) x (gridDim.x * kTmaProbeBoxCols) elements. Boxes that reach
// past the tensor's edges come back zero-filled there, so the host checks every element of
// `out`: the source inside the tensor, zero outside. Reading the box through Swizzle<8> also
// pins that smem_swizzle.cuh's layout is the one TMA writes.
// Launch with kTmaProbeThreads threads, grid (ceil(cols / 64), ceil(rows / 32)), no dynamic
// shared memory; `misaligned` (one zeroed word) counts blocks whose box was not 1024-aligned.
//
// The host may include this file (after <cstdint>) for the box constants: the device code is
// compiled only by NVRTC / nvcc, for sm_90 or newer.
#pragma once

namespace mlajit_kernel {

constexpr int kTmaProbeBoxCols = 64;  // 64 x 2 B = 128 B: one row is one 128B swizzle span
constexpr int kTmaProbeBoxRows = 32;
constexpr int kTmaProbeThreads = 128;

}  // namespace mlajit_kernel

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#include "common/ptx_cp_async.cuh"  // smem_address
#include "common/ptx_tma.cuh"
#include "common/smem_swizzle.cuh"

namespace mlajit_kernel {

__global__ void __launch_bounds__(kTmaProbeThreads)
    tma_probe(const __grid_constant__ TensorMapBytes map, uint16_t* out, uint32_t* misaligned) {
  // The 128B swizzle XORs shared-address bits 4-6 with bits 7-9: only a box that starts on a
  // 1024-byte boundary has the row-relative layout Swizzle<8> describes.
  __shared__ alignas(1024) uint16_t box[kTmaProbeBoxRows * kTmaProbeBoxCols];
  __shared__ alignas(8) uint64_t barrier;
  const uint32_t box_address = smem_address(box);
  const uint32_t barrier_address = smem_address(&barrier);
  const int32_t x0 = blockIdx.x * kTmaProbeBoxCols;
  const int32_t y0 = blockIdx.y * kTmaProbeBoxRows;
  if (threadIdx.x == 0) {
    if (box_address % 1024 != 0) atomicAdd(misaligned, 1u);
    mbarrier_init(barrier_address, 1);
    fence_barrier_init();
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    mbarrier_arrive_expect_tx(barrier_address, sizeof(box));
    tma_load_2d(box_address, &map, x0, y0, barrier_address);
  }
  mbarrier_wait(barrier_address, 0);
  const uint32_t out_cols = gridDim.x * kTmaProbeBoxCols;
  for (int i = threadIdx.x; i < kTmaProbeBoxRows * kTmaProbeBoxCols; i += kTmaProbeThreads) {
    const uint32_t row = i / kTmaProbeBoxCols;
    const uint32_t col = i % kTmaProbeBoxCols;
    const uint32_t element = Swizzle<8>::chunk_index(row, col / 8) * 8 + col % 8;  // 8 per chunk
    out[static_cast<uint64_t>(y0 + row) * out_cols + x0 + col] = box[element];
  }
}

}  // namespace mlajit_kernel
#endif
