// Busy-waits for a number of GPU clock cycles. The benchmark launches it first so that every
// timed launch is queued while the GPU is still busy: host launch cost stays out of the times.
#pragma once

namespace mlajit_kernel {

struct SpinParams {
  unsigned long long cycles;
};

template <int UNUSED>
__global__ void spin_kernel(const __grid_constant__ SpinParams params) {
  const long long start = clock64();
  while (clock64() - start < static_cast<long long>(params.cycles)) {
  }
}

}  // namespace mlajit_kernel
