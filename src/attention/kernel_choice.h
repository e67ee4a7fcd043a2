#pragma once
// The kernel BatchMlaAttention runs for a shape on a device: one place, shared by the
// attention object and the tile queries of the public runtime API, so both always agree.
#include "driver/cuda_driver.h"
#include "family/device_target.h"
#include "family/kernel_family.h"
#include "mlajit/attention.h"
#include "mlajit/kernel_spec.h"

namespace mlajit {

struct MlaKernelChoice {
  const family::KernelFamily* family = nullptr;
  KernelSpec spec;
};

// What a family knows of a real device.
family::DeviceTarget device_target(const driver::DeviceInfo& device);

// The family (options.kernel, or the registry's choice for "auto") and its spec for `shape`
// on `target` (options.force_tier applies). Throws as family::select_family, and
// Error(kUnsupported) when no configuration of the family fits the target.
MlaKernelChoice choose_kernel(const MlaShape& shape, const family::DeviceTarget& target,
                              const MlaOptions& options);

}  // namespace mlajit
