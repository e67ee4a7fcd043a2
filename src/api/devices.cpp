// Device queries of the public runtime API, on top of the driver layer.
#include "driver/cuda_driver.h"
#include "mlajit/runtime.h"

namespace mlajit {

bool driver_available() noexcept { return driver::driver_available(); }

std::string driver_unavailable_reason() noexcept {
  try {
    return driver::driver_unavailable_reason();
  } catch (...) {  // std::bad_alloc building the text: the caller asked not to be thrown at
    return "the CUDA driver is unavailable";
  }
}

int driver_version() { return driver::driver_version(); }

int device_count() { return driver::device_count(); }

DeviceSummary device_summary(int ordinal) {
  const driver::DeviceInfo info = driver::device_info(ordinal);
  DeviceSummary summary;
  summary.ordinal = info.ordinal;
  summary.name = info.name;
  summary.arch = info.arch();
  summary.cc_major = info.cc_major;
  summary.cc_minor = info.cc_minor;
  summary.sm_count = info.sm_count;
  summary.smem_per_sm = info.smem_per_sm;
  summary.smem_per_block_optin = info.smem_per_block_optin;
  summary.cooperative_launch = info.cooperative_launch;
  summary.l2_bytes = info.l2_bytes;
  return summary;
}

std::vector<DeviceSummary> devices() {
  std::vector<DeviceSummary> all;
  const int count = driver::device_count();
  for (int ordinal = 0; ordinal < count; ++ordinal) all.push_back(device_summary(ordinal));
  return all;
}

}  // namespace mlajit
