// Development probe (nvcc -gencode arch=compute_90a,code=sm_90a -I kernels): does a CTA
// barrier reached from the four warpgroups' own branches (after setmaxnreg, as the hopper
// kernel's roles) hold every warpgroup until the last arrives? Warpgroup 1 spins 20,000 cycles
// before each barrier and then writes the round's number to shared memory; every other
// warpgroup reads it after the barrier. A form holds if every read saw the number.
//   A: barrier.sync 0 (no thread count) in each branch   (block_barrier_across_roles)
//   B: barrier.sync 0, 512 in each branch
//   C: bar.sync 4, 512 in each branch
//   D: barrier.sync 0 (no count) after the branches rejoin (the grid barrier's and the merge's)
// Why data and not clock stamps: the barrier compiles to BAR.SYNC.DEFER_BLOCKING, and a
// %clock64 read right after it issued before the barrier had released the warp (stamps of
// every form, D included, showed warpgroups "leaving" 20,000 cycles before the last arrived).
#include <cstdint>
#include <cstdio>
#include "common/block_barrier.cuh"
#include "common/ptx_tma.cuh"
using namespace mlajit_kernel;

constexpr int kRounds = 4;
__device__ int g_seen[kRounds][4];  // [round][warpgroup]: the number read after the barrier

__device__ __forceinline__ long long now() {
  long long t;
  asm volatile("mov.u64 %0, %%clock64;" : "=l"(t));
  return t;
}
__device__ __forceinline__ void spin(long long cycles) {
  const long long start = now();
  while (now() - start < cycles) {
  }
}
template <int FORM>
__device__ __forceinline__ void cta_barrier() {
  if (FORM == 0) block_barrier_across_roles();
  if (FORM == 1) asm volatile("barrier.sync 0, 512;" ::: "memory");
  if (FORM == 2) named_barrier_sync(4, 512);
}
__device__ __forceinline__ void before(volatile int* flag, int group, int round) {
  if (group == 1) {
    spin(20000);
    if (threadIdx.x == 128) *flag = round + 1;
  }
}
__device__ __forceinline__ void after(volatile int* flag, int group, int round) {
  if ((threadIdx.x & 127) == 0) g_seen[round][group] = *flag;
}
// One copy per warpgroup (GROUP), as the kernel's roles: each branch has its own barrier.
template <int FORM, int GROUP>
__device__ __forceinline__ void role(volatile int* flag) {
  for (int r = 0; r < kRounds; ++r) {
    before(flag, GROUP, r);
    cta_barrier<FORM>();
    after(flag, GROUP, r);
    cta_barrier<FORM>();  // everyone has read before the next round's write
  }
}
template <int FORM>
__global__ void __launch_bounds__(512, 1) probe() {
  __shared__ int flag;
  if (threadIdx.x == 0) flag = 0;
  __syncthreads();
  const int g = threadIdx.x >> 7;
  if constexpr (FORM < 3) {
    if (g == 0) {
      asm volatile("setmaxnreg.dec.sync.aligned.u32 120;");
      role<FORM, 0>(&flag);
    } else if (g == 1) {
      asm volatile("setmaxnreg.inc.sync.aligned.u32 160;");
      role<FORM, 1>(&flag);
    } else if (g == 2) {
      asm volatile("setmaxnreg.inc.sync.aligned.u32 160;");
      role<FORM, 2>(&flag);
    } else {
      asm volatile("setmaxnreg.dec.sync.aligned.u32 56;");
      role<FORM, 3>(&flag);
    }
  } else {
    for (int r = 0; r < kRounds; ++r) {
      before(&flag, g, r);
      block_barrier_across_roles();
      after(&flag, g, r);
      block_barrier_across_roles();
    }
  }
}
template <int FORM>
void run(const char* name) {
  static int zero[kRounds][4] = {};
  cudaMemcpyToSymbol(g_seen, zero, sizeof(zero));
  probe<FORM><<<1, 512>>>();
  const cudaError_t e = cudaDeviceSynchronize();
  if (e != cudaSuccess) {
    std::printf("%s: %s\n", name, cudaGetErrorString(e));
    return;
  }
  static int seen[kRounds][4];
  cudaMemcpyFromSymbol(seen, g_seen, sizeof(seen));
  int missed = 0;
  for (int r = 0; r < kRounds; ++r)
    for (int g = 0; g < 4; ++g) missed += seen[r][g] != r + 1;
  std::printf("%-60s %s (%d of %d reads missed the late warpgroup's write)\n", name,
              missed == 0 ? "HOLDS" : "DOES NOT HOLD", missed, 4 * kRounds);
}
int main() {
  run<0>("A: barrier.sync 0, no count, in each branch");
  run<1>("B: barrier.sync 0, 512, in each branch");
  run<2>("C: bar.sync 4, 512, in each branch");
  run<3>("D: barrier.sync 0, no count, after the branches rejoin");
  return 0;
}
