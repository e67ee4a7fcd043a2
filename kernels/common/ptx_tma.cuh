// Transaction barriers (mbarrier) and bulk tensor copies (TMA, cp.async.bulk.tensor) for
// sm_90. A copy names a tensor map (encoded on the host with cuTensorMapEncodeTiled,
// src/driver/tensor_map.h, and passed as a __grid_constant__ TensorMapBytes kernel parameter,
// so its address is a parameter-space address the copy engine can read) and completes on an
// mbarrier by transaction bytes.
#pragma once
#include "common/tensor_map.cuh"

namespace mlajit_kernel {

__device__ __forceinline__ void mbarrier_init(uint32_t barrier, uint32_t arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(barrier), "r"(arrivals) : "memory");
}

// Makes initialised barriers visible to the async proxy (the copy engine) and other threads.
__device__ __forceinline__ void fence_barrier_init() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

// Arrives once and announces `bytes` more transaction bytes for the current phase.
__device__ __forceinline__ void mbarrier_arrive_expect_tx(uint32_t barrier, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(barrier), "r"(bytes)
               : "memory");
}

__device__ __forceinline__ void mbarrier_arrive(uint32_t barrier) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(barrier) : "memory");
}

// Arrives on the barrier once all cp.async copies this thread issued so far have landed.
__device__ __forceinline__ void cp_async_mbarrier_arrive(uint32_t barrier) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" ::"r"(barrier) : "memory");
}

// Blocks until the phase with parity `parity` has completed. The retry loop lives inside one
// asm statement: a loop the compiler can see is a divergent path, and ptxas serializes every
// wgmma in flight across one (warning C7520).
__device__ __forceinline__ void mbarrier_wait(uint32_t barrier, uint32_t parity) {
  asm volatile(
      "{\n"
      ".reg .pred done;\n"
      "mbarrier_wait_retry:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra mbarrier_wait_retry;\n"
      "}\n" ::"r"(barrier),
      "r"(parity)
      : "memory");
}

// Fetches a tensor map (a __grid_constant__ kernel parameter) into the copy engine's
// descriptor cache ahead of its first use.
__device__ __forceinline__ void prefetch_tensor_map(const void* tensor_map) {
  asm volatile("prefetch.tensormap [%0];" ::"l"(tensor_map) : "memory");
}

// An L2 policy for data read once (the KV cache): evicted first, so it does not push out the
// query tiles and partial rows that are read again.
__device__ __forceinline__ uint64_t l2_evict_first_policy() {
  uint64_t policy;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
  return policy;
}

// One box of a 2-D tensor map at element coordinates (x inner, y outer) into shared memory at
// `dst`, completing `barrier` with the box's bytes. Out-of-range elements arrive as zeros.
__device__ __forceinline__ void tma_load_2d(uint32_t dst, const void* tensor_map, int32_t x,
                                            int32_t y, uint32_t barrier, uint64_t policy) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint"
      " [%0], [%1, {%2, %3}], [%4], %5;" ::"r"(dst),
      "l"(tensor_map), "r"(x), "r"(y), "r"(barrier), "l"(policy)
      : "memory");
}

// The same without a cache hint.
__device__ __forceinline__ void tma_load_2d(uint32_t dst, const void* tensor_map, int32_t x,
                                            int32_t y, uint32_t barrier) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3}], [%4];" ::"r"(dst),
      "l"(tensor_map), "r"(x), "r"(y), "r"(barrier)
      : "memory");
}

// The same for a 3-D tensor map at (x, y, z): a paged cache as [page][token][column].
__device__ __forceinline__ void tma_load_3d(uint32_t dst, const void* tensor_map, int32_t x,
                                            int32_t y, int32_t z, uint32_t barrier,
                                            uint64_t policy) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint"
      " [%0], [%1, {%2, %3, %4}], [%5], %6;" ::"r"(dst),
      "l"(tensor_map), "r"(x), "r"(y), "r"(z), "r"(barrier), "l"(policy)
      : "memory");
}

// Named barrier over `threads` threads (a multiple of 32), id 1..15 (0 is __syncthreads).
__device__ __forceinline__ void named_barrier_sync(uint32_t id, uint32_t threads) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void named_barrier_arrive(uint32_t id, uint32_t threads) {
  asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

}  // namespace mlajit_kernel
