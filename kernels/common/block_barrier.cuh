// A barrier over the whole CTA that warp-specialized kernels may reach from each role's own
// branch. __syncthreads is the aligned bar.sync, which PTX defines only when every thread
// executes the same instruction (compute-sanitizer's synccheck reports "divergent thread(s)"
// otherwise); barrier.sync is its unaligned form, here barrier 0 over every thread. (racecheck
// does not order shared-memory accesses across a barrier the warps reach at different
// instructions: data handed between roles goes through an mbarrier instead.)
#pragma once

namespace mlajit_kernel {

__device__ __forceinline__ void block_barrier_across_roles() {
  asm volatile("barrier.sync 0;" ::: "memory");
}

}  // namespace mlajit_kernel
