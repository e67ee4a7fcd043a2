// The JIT demo: a small persistent kernel whose answer is wrong without its grid barrier.
//   phase 1: block b sums its contiguous slice of `input` into partials[b];
//   grid barrier;
//   phase 2: every block sums all partials and writes what it got to totals[b].
// With the barrier every totals[b] equals the sum of the input; without it (skip_barrier = 1,
// a control) blocks read partials that others have not written yet. Fill `partials` with a
// poison value before a launch so that stale values from an earlier launch cannot hide that.
// Launch cooperatively only (see grid_barrier.cuh), BLOCK threads per block, no dynamic
// shared memory. Sums are 64-bit integers: exact, so the check is equality.
//
// The host may include this file (after <cstdint>) for DemoParams: the device code is
// compiled only by NVRTC / nvcc.
#pragma once

namespace mlajit_kernel {

struct DemoParams {
  const uint32_t* input;  // [n]
  uint64_t* partials;     // [gridDim.x], written in phase 1
  uint64_t* totals;       // [gridDim.x], the total each block computed in phase 2
  uint32_t* barrier;      // the grid barrier's word (zeroed once)
  int64_t n;
  int32_t skip_barrier;   // 1: control run without the barrier (its answer goes wrong)
  int32_t reserved;
};

}  // namespace mlajit_kernel

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#include "common/grid_barrier.cuh"

namespace mlajit_kernel {

// Tree sum over the block; every thread passes its value, thread 0 gets the total.
template <int BLOCK>
__device__ __forceinline__ uint64_t block_sum(uint64_t* scratch, uint64_t value) {
  static_assert(BLOCK >= 32 && (BLOCK & (BLOCK - 1)) == 0, "BLOCK must be a power of two");
  scratch[threadIdx.x] = value;
  __syncthreads();
  for (int width = BLOCK / 2; width > 0; width /= 2) {
    if (threadIdx.x < width) scratch[threadIdx.x] += scratch[threadIdx.x + width];
    __syncthreads();
  }
  const uint64_t total = scratch[0];
  __syncthreads();  // scratch is reused by the next call
  return total;
}

// Bypasses L1: the partials were written by other blocks, on other SMs.
__device__ __forceinline__ uint64_t load_relaxed_gpu(const uint64_t* address) {
  uint64_t value;
  asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];" : "=l"(value) : "l"(address) : "memory");
  return value;
}

template <int BLOCK>
__device__ __forceinline__ void sum_slice(const DemoParams& p, uint64_t* scratch) {
  const int64_t slice = (p.n + gridDim.x - 1) / gridDim.x;
  const int64_t begin = slice * blockIdx.x;
  const int64_t end = begin + slice < p.n ? begin + slice : p.n;
  uint64_t sum = 0;
  for (int64_t i = begin + threadIdx.x; i < end; i += BLOCK) sum += p.input[i];
  sum = block_sum<BLOCK>(scratch, sum);
  if (threadIdx.x == 0) p.partials[blockIdx.x] = sum;
}

template <int BLOCK>
__device__ __forceinline__ void sum_partials(const DemoParams& p, uint64_t* scratch) {
  uint64_t sum = 0;
  for (unsigned b = threadIdx.x; b < gridDim.x; b += BLOCK) sum += load_relaxed_gpu(p.partials + b);
  sum = block_sum<BLOCK>(scratch, sum);
  if (threadIdx.x == 0) p.totals[blockIdx.x] = sum;
}

template <int BLOCK>
__global__ void __launch_bounds__(BLOCK) grid_barrier_demo(const __grid_constant__ DemoParams p) {
  __shared__ uint64_t scratch[BLOCK];
  sum_slice<BLOCK>(p, scratch);
  if (!p.skip_barrier) grid_barrier(p.barrier, gridDim.x);
  sum_partials<BLOCK>(p, scratch);
}

}  // namespace mlajit_kernel
#endif
