// Busy-waits for a number of nanoseconds of GPU time. The benchmark launches it first so that
// every timed launch is queued while the GPU is still busy: host launch cost stays out of the
// times. %globaltimer is used instead of clock64() so no clock rate has to be known.
#pragma once

namespace mlajit_kernel {

struct SpinParams {
  unsigned long long nanoseconds;
};

__device__ __forceinline__ unsigned long long global_timer_ns() {
  unsigned long long now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  return now;
}

template <int UNUSED>
__global__ void spin_kernel(const __grid_constant__ SpinParams params) {
  const unsigned long long start = global_timer_ns();
  while (global_timer_ns() - start < params.nanoseconds) {
  }
}

}  // namespace mlajit_kernel
