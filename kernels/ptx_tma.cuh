// TMA loads (cp.async.bulk.tensor) into shared memory and the mbarriers they complete on
// (sm_90+). One thread arms the barrier with the bytes it expects and issues the copy; every
// thread then waits for the barrier's phase to flip. The tensor map is the host's CUtensorMap
// (src/driver/tensor_map.h), taken as a `const __grid_constant__ TmaDescriptor` kernel
// parameter: TMA reads it from the parameter space by its generic address.
#pragma once

#include "ptx_cp_async.cuh"  // smem_address

namespace mlajit_kernel {

// CUtensorMap as the kernel sees it: 128 opaque bytes, 64-byte aligned.
struct alignas(64) TmaDescriptor {
  uint64_t opaque[16];
};

__device__ __forceinline__ void mbarrier_init(uint32_t barrier, uint32_t arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(barrier), "r"(arrivals)
               : "memory");
}

// Makes initialised barriers visible to the async proxy (TMA) and to the cluster before a
// copy can signal them. Follow it with __syncthreads (or a cluster barrier) so that no thread
// waits on a barrier that is not initialised yet.
__device__ __forceinline__ void fence_barrier_init() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

// Arrives once and adds `bytes` to the transaction count the current phase waits for.
__device__ __forceinline__ void mbarrier_arrive_expect_tx(uint32_t barrier, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(barrier),
               "r"(bytes)
               : "memory");
}

// True once the phase of parity `phase` (0 for the first) has completed. A C++ loop around
// it instead of a PTX loop: PTX labels would repeat when the function is inlined twice.
__device__ __forceinline__ bool mbarrier_try_wait(uint32_t barrier, uint32_t phase) {
  uint32_t done;
  asm volatile(
      "{\n"
      "  .reg .pred complete;\n"
      "  mbarrier.try_wait.parity.shared::cta.b64 complete, [%1], %2;\n"
      "  selp.u32 %0, 1, 0, complete;\n"
      "}\n"
      : "=r"(done)
      : "r"(barrier), "r"(phase)
      : "memory");
  return done != 0;
}

__device__ __forceinline__ void mbarrier_wait(uint32_t barrier, uint32_t phase) {
  while (!mbarrier_try_wait(barrier, phase)) {
  }
}

// Copies the box whose first element is at (x, y) (x along the tensor's dims[0]) to shared
// memory at `dst`, and completes the whole box's bytes on `barrier`: elements past the
// tensor's edges arrive as the map's fill (zeros) and count too.
__device__ __forceinline__ void tma_load_2d(uint32_t dst, const TmaDescriptor* map, int32_t x,
                                            int32_t y, uint32_t barrier) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes "
      "[%0], [%1, {%2, %3}], [%4];" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(x), "r"(y), "r"(barrier)
      : "memory");
}

}  // namespace mlajit_kernel
