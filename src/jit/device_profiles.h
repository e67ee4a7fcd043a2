#pragma once
// Device profiles: per arch, the shared-memory limits of a typical part, so that kernels can be
// chosen and precompiled for a GPU that is not in this machine.
#include <string>
#include <vector>

namespace mlajit::jit {

struct DeviceProfile {
  std::string arch;             // "sm_90"
  int smem_per_sm = 0;          // bytes of shared memory per multiprocessor
  int smem_per_block_optin = 0; // bytes one block may opt into
  int sm_count = 0;             // a typical part's SM count (used only for planning defaults)
  std::string example;          // e.g. "H100/H200"
  std::string source;           // where the numbers come from
};

const std::vector<DeviceProfile>& device_profiles();  // sm_80, 86, 87, 89, 90, 100, 103, 110, 120, 121
// Throws Error(kInvalidArgument) listing the known archs. Accepts "sm_90", "sm_90a", "90".
const DeviceProfile& device_profile(const std::string& arch);
// The NVRTC target a requested arch names: a bare number ("90") is its profile's arch
// ("sm_90"); "sm_90a", or "compute_90" for PTX, stays as asked.
std::string target_arch(const std::string& requested, const DeviceProfile& profile);

struct ComputeCapability {
  int major = 0, minor = 0;
};
// "sm_90" / "sm_90a" / "compute_100f" / "90" -> 9.0 / 9.0 / 10.0 / 9.0: the last digit is the
// minor version. Throws Error(kInvalidArgument) for text that names no arch.
ComputeCapability compute_capability(const std::string& arch);

}  // namespace mlajit::jit
