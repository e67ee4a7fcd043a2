#include "attention/kernel_choice.h"

#include "family/family_registry.h"

namespace mlajit {

family::DeviceTarget device_target(const driver::DeviceInfo& device) {
  return {device.arch(),       device.cc_major,           device.cc_minor,
          device.smem_per_sm, device.smem_per_block_optin, device.sm_count};
}

MlaKernelChoice choose_kernel(const MlaShape& shape, const family::DeviceTarget& target,
                              const MlaOptions& options) {
  MlaKernelChoice choice;
  choice.family = &family::select_family(shape, target, options.kernel, options.force_tier);
  choice.spec = choice.family->spec_for(shape, target, options);
  return choice;
}

}  // namespace mlajit
