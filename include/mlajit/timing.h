#pragma once
// GPU time of queued launches, measured the way kernel benchmarks are (FlashInfer's and
// FlashMLA's reference numbers in docs/PERF.md were timed so): a CUDA event recorded after each
// launch, and a spin kernel queued first that holds the GPU until every timed launch is queued,
// so that the host's launch cost (several µs a call) never shows in a kernel of 20 µs.
// For programs without a CUDA library of their own (`mlajit bench` is one); a program that
// has the CUDA runtime can do the same with cudaEvent* and its own busy kernel.
#include <functional>
#include <vector>

#include "mlajit/export.h"

namespace mlajit {

struct LaunchTimingOptions {
  int device = 0;       // CUDA device ordinal
  int warmup = 5;       // untimed launches first (compiles, first-touch, clocks up)
  int iterations = 30;  // timed launches, >= 1
};

// Calls `launch(stream, index)` warmup + iterations times, index 0, 1, ...; each call queues
// one launch (e.g. BatchMlaAttention::run) on `stream`, a non-blocking stream on the device
// that this function creates (work queued on other streams before is not waited for: finish
// it first, e.g. with device_synchronize). Returns the GPU time of each timed launch in µs,
// in order. The spin kernel is compiled like any kernel (cached; NVRTC on a miss). Throws
// Error(kNoDriver / kNoDevice / kCudaError), Error(kInvalidArgument) for counts out of range,
// and whatever `launch` throws (the stream is destroyed after its work completes).
MLAJIT_API std::vector<double> time_launches(
    const std::function<void(void* stream, int index)>& launch,
    const LaunchTimingOptions& options = {});

}  // namespace mlajit
