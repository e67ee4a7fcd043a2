// time_launches of the public API: CUDA events between launches queued behind the utility
// program "spin" (kernels/utility/spin.cuh), which holds the GPU while the host queues them.
#include "mlajit/timing.h"

#include <fmt/format.h>

#include "driver/cuda_driver.h"
#include "jit/kernel_registry.h"
#include "mlajit/error.h"

namespace mlajit {
namespace {

// Long enough for the host to queue every timed launch (a launch costs a few µs of host
// time; 50 µs each leaves room for a slow or loaded host), short enough not to matter.
double hold_milliseconds(int iterations) { return 5.0 + iterations * 0.05; }

void check_counts(const LaunchTimingOptions& options) {
  if (options.iterations < 1 || options.warmup < 0) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("time_launches: iterations={} and warmup={}: iterations must be >= 1 "
                            "and warmup >= 0",
                            options.iterations, options.warmup));
  }
}

std::shared_ptr<const jit::LoadedKernel> spin_kernel(int device) {
  KernelSpec spec;
  spec.family = "spin";
  spec.arch = driver::device_info(device).arch();
  return jit::KernelRegistry::instance().load(spec, device);
}

void launch_spin(const jit::LoadedKernel& spin, CUstream stream, double milliseconds) {
  struct {
    unsigned long long nanoseconds;
  } params{static_cast<unsigned long long>(milliseconds * 1e6)};
  void* args[] = {&params};
  driver::LaunchConfig config;
  config.block_x = static_cast<unsigned>(spin.metadata.geometry.threads_per_block);
  config.stream = stream;
  spin.function.launch(config, args);
}

}  // namespace

std::vector<double> time_launches(const std::function<void(void* stream, int index)>& launch,
                                  const LaunchTimingOptions& options) {
  check_counts(options);
  driver::set_current_device(options.device);  // throws kNoDriver / kNoDevice
  const auto spin = spin_kernel(options.device);
  driver::Stream stream;
  for (int i = 0; i < options.warmup; ++i) launch(stream.get(), i);
  std::vector<driver::Event> events(options.iterations + 1);
  launch_spin(*spin, stream.get(), hold_milliseconds(options.iterations));
  events[0].record(stream.get());
  for (int i = 0; i < options.iterations; ++i) {
    launch(stream.get(), options.warmup + i);
    events[i + 1].record(stream.get());
  }
  driver::stream_synchronize(stream.get());
  std::vector<double> microseconds;
  for (int i = 0; i < options.iterations; ++i) {
    microseconds.push_back(events[i + 1].elapsed_ms_since(events[i]) * 1e3);
  }
  return microseconds;
}

}  // namespace mlajit
