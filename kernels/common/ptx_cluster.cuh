// Thread-block clusters (sm_90): a CTA's rank in its cluster, the cluster-wide barrier, an
// arrival on another CTA's mbarrier, and a TMA box copied once into every CTA of a mask
// (multicast), completing each destination's mbarrier at the same shared-memory offset.
#pragma once
#include "common/tensor_map.cuh"

namespace mlajit_kernel {

__device__ __forceinline__ uint32_t cluster_ctarank() {
  uint32_t rank;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
  return rank;
}

__device__ __forceinline__ uint32_t cluster_nctarank() {
  uint32_t count;
  asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(count));
  return count;
}

// Every thread of every CTA of the cluster; orders the shared-memory writes (barrier inits
// included, after fence_barrier_init) before it for all of them.
__device__ __forceinline__ void cluster_sync_all() {
  asm volatile(
      "barrier.cluster.arrive.release.aligned;\n"
      "barrier.cluster.wait.acquire.aligned;" ::
          : "memory");
}

// One arrival on the mbarrier at `barrier` (this CTA's shared address) of CTA `rank` of the
// cluster, releasing this thread's prior reads and writes at cluster scope.
__device__ __forceinline__ void mbarrier_arrive_cluster(uint32_t barrier, uint32_t rank) {
  asm volatile(
      "{\n .reg .b32 remote;\n"
      " mapa.shared::cluster.u32 remote, %0, %1;\n"
      " mbarrier.arrive.release.cluster.shared::cluster.b64 _, [remote];\n}" ::"r"(barrier),
      "r"(rank)
      : "memory");
}

// One box of a 3-D tensor map at (x, y, z) into shared memory at `dst` of every CTA in
// `cta_mask`, completing the mbarrier at `barrier` in each of them with the box's bytes.
__device__ __forceinline__ void tma_load_3d_multicast(uint32_t dst, const void* tensor_map,
                                                      int32_t x, int32_t y, int32_t z,
                                                      uint32_t barrier, uint16_t cta_mask,
                                                      uint64_t policy) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes"
      ".multicast::cluster.L2::cache_hint [%0], [%1, {%2, %3, %4}], [%5], %6, %7;" ::"r"(dst),
      "l"(tensor_map), "r"(x), "r"(y), "r"(z), "r"(barrier), "h"(cta_mask), "l"(policy)
      : "memory");
}

}  // namespace mlajit_kernel
