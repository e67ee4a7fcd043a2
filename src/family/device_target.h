#pragma once
// DeviceTarget: what a kernel family needs to know about the GPU it serves, from the real
// device (attention/kernel_choice.h: the family layer knows nothing of the driver) or, for
// precompiling without it, from the device profile of an arch.
#include <string>

namespace mlajit::family {

struct DeviceTarget {
  // The NVRTC target asked for: the plain arch of a device ("sm_90"), or a profile's arch as
  // given ("sm_90a", "compute_90"). A family may map it to its own target (sm_90 -> sm_90a).
  std::string arch;
  int cc_major = 0, cc_minor = 0;
  int smem_per_sm = 0;           // bytes of shared memory per multiprocessor
  int smem_per_block_optin = 0;  // bytes one block may opt into
  int sm_count = 0;
};

// From the built-in profile of `arch` ("sm_90", "sm_90a", "90"); throws Error(kInvalidArgument)
// listing the profiled archs.
DeviceTarget profile_target(const std::string& arch);

// Whether a CTA with `bytes` of dynamic shared memory fits: within the per-block opt-in limit,
// and within the SM's shared memory less the 1 KiB the driver reserves per resident block.
bool smem_fits(int bytes, const DeviceTarget& target);
// "232448 B per block (opt-in) and 233472 B per SM (232448 B usable)", for messages.
std::string smem_limits_text(const DeviceTarget& target);

}  // namespace mlajit::family
