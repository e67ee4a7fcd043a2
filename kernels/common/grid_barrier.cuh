// A grid-wide barrier for persistent kernels launched cooperatively (every block resident).
// One word in global memory, zeroed once: block (0, 0) adds 2^31 - (num_blocks - 1) and every
// other block adds 1, so the word's top bit flips exactly when the last block arrives and its
// low bits are back where they were: it needs no reset, and the next launch on the workspace
// may have another grid size. A block waits for the flip of the top bit it saw before its
// own arrival. The last block to arrive leaves after one atomic: the generation word this
// replaced cost it two more dependent round trips to L2 (reset the counter, bump the
// generation). It avoids cooperative_groups, whose header costs a second of NVRTC time per
// compile. Only ever call it from a cooperative launch: without co-residency it spins forever.
#pragma once

#include "common/block_barrier.cuh"

namespace mlajit_kernel {

__device__ __forceinline__ unsigned load_acquire_gpu(const unsigned* address) {
  unsigned value;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(value) : "l"(address) : "memory");
  return value;
}

// Its block barriers are block_barrier_across_roles: a warp-specialized kernel calls this from
// each role's own branch. At most one call per launch: a block could otherwise arrive at the
// next one before a slow block has seen the flip of this one.
__device__ __forceinline__ void grid_barrier(unsigned* word, unsigned num_blocks) {
  block_barrier_across_roles();
  if (threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0) {
    const bool first_block = blockIdx.x == 0 && blockIdx.y == 0 && blockIdx.z == 0;
    const unsigned arrival = first_block ? 0x80000000u - (num_blocks - 1) : 1u;
    __threadfence();  // publish this block's writes before announcing arrival
    const unsigned before = atomicAdd(word, arrival);
    while (((before ^ load_acquire_gpu(word)) & 0x80000000u) == 0) {
      __nanosleep(32);
    }
    __threadfence();
  }
  block_barrier_across_roles();
}

}  // namespace mlajit_kernel
