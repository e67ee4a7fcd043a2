#include "family/device_target.h"

#include <fmt/format.h>

#include "jit/device_profiles.h"

namespace mlajit::family {
namespace {

// The driver reserves 1 KiB of each SM's shared memory per resident block.
constexpr int kDriverReservedPerBlock = 1024;

}  // namespace

DeviceTarget profile_target(const std::string& arch) {
  const jit::DeviceProfile& profile = jit::device_profile(arch);
  const jit::ComputeCapability cc = jit::compute_capability(profile.arch);
  return {jit::target_arch(arch, profile), cc.major, cc.minor, profile.smem_per_sm,
          profile.smem_per_block_optin, profile.sm_count};
}

bool smem_fits(int bytes, const DeviceTarget& target) {
  return bytes <= target.smem_per_block_optin &&
         bytes <= target.smem_per_sm - kDriverReservedPerBlock;
}

std::string smem_limits_text(const DeviceTarget& target) {
  return fmt::format("{} B per block (opt-in) and {} B per SM ({} B usable)",
                     target.smem_per_block_optin, target.smem_per_sm,
                     target.smem_per_sm - kDriverReservedPerBlock);
}

}  // namespace mlajit::family
