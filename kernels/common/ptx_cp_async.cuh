// Asynchronous 16-byte global -> shared copies (sm_80+) and their group bookkeeping.
#pragma once

namespace mlajit_kernel {

// The shared-window address of a generic pointer into shared memory.
__device__ __forceinline__ uint32_t smem_address(const void* pointer) {
  uint32_t address;
  asm("{ .reg .u64 a; cvta.to.shared.u64 a, %1; cvt.u32.u64 %0, a; }"
      : "=r"(address)
      : "l"(pointer));
  return address;
}

// Copies 16 bytes, or writes 16 zero bytes when !valid (src-size 0 reads nothing), so rows
// past the end of the data hold zeros, never stale values that could turn 0 * x into NaN.
__device__ __forceinline__ void cp_async_16(uint32_t smem_dst, const void* global_src, bool valid) {
  const uint32_t src_bytes = valid ? 16u : 0u;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(smem_dst), "l"(global_src),
               "r"(src_bytes)
               : "memory");
}

// The same with an L2 cache policy (createpolicy), e.g. evict-first for data read once.
__device__ __forceinline__ void cp_async_16(uint32_t smem_dst, const void* global_src, bool valid,
                                            uint64_t policy) {
  const uint32_t src_bytes = valid ? 16u : 0u;
  asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2, %3;" ::"r"(smem_dst),
               "l"(global_src), "r"(src_bytes), "l"(policy)
               : "memory");
}

__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;" ::: "memory");
}

// Waits until at most `kPending` committed groups of this thread are still in flight.
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(kPending) : "memory");
}

}  // namespace mlajit_kernel
