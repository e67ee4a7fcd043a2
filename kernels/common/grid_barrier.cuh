// A grid-wide barrier for persistent kernels launched cooperatively (every block resident).
// Two words in global memory: an arrival counter and a generation. The last block to arrive
// resets the counter and bumps the generation; the others spin on the generation. It needs
// no reset between launches, so one zeroed pair serves every launch on a workspace, and it
// avoids cooperative_groups, whose header costs a second of NVRTC time per compile.
// Only ever call it from a cooperative launch: without co-residency it spins forever.
#pragma once

#include "common/block_barrier.cuh"

namespace mlajit_kernel {

__device__ __forceinline__ unsigned load_acquire_gpu(const unsigned* address) {
  unsigned value;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(value) : "l"(address) : "memory");
  return value;
}

// Its block barriers are block_barrier_across_roles: a warp-specialized kernel calls this from
// each role's own branch.
__device__ __forceinline__ void grid_barrier(unsigned* counter, unsigned* generation,
                                             unsigned num_blocks) {
  block_barrier_across_roles();
  if (threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0) {
    // Read the generation before arriving: it cannot move until this block has arrived.
    const unsigned arrival_generation = load_acquire_gpu(generation);
    __threadfence();  // publish this block's writes before announcing arrival
    const unsigned arrived = atomicAdd(counter, 1u);
    if (arrived == num_blocks - 1) {
      atomicExch(counter, 0u);
      __threadfence();
      atomicAdd(generation, 1u);
    } else {
      while (load_acquire_gpu(generation) == arrival_generation) {
        __nanosleep(32);
      }
    }
    __threadfence();
  }
  block_barrier_across_roles();
}

}  // namespace mlajit_kernel
