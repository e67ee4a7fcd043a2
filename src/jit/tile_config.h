#pragma once
// Device profiles (per arch, for precompiling without a GPU) and tile-config selection:
// the largest candidate whose computed shared storage fits the device.
#include <optional>
#include <string>
#include <vector>

#include "mlajit/kernel_spec.h"

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

// Candidates in order of preference (the reference's three tiers).
std::vector<TileConfig> tile_candidates();
// Bytes of dynamic shared memory the MLA kernel needs for `spec` with `tile`.
int mla_shared_storage_bytes(const KernelSpec& spec, const TileConfig& tile);
// Whether `tile` fits a device with these limits: per block (opt-in) and per SM, less the
// 1 KiB the driver keeps for each resident block.
bool tile_fits(const KernelSpec& spec, const TileConfig& tile, int smem_per_sm,
               int smem_per_block_optin);
// The first candidate that fits both limits; throws Error(kUnsupported) when none does.
TileConfig select_tile_config(const KernelSpec& spec, int smem_per_sm, int smem_per_block_optin);
// 1, 2, 3 -> the tier's config; throws Error(kInvalidArgument) otherwise.
TileConfig tile_tier(int tier);
int tier_of(const TileConfig& tile);  // 1..3, 0 when not one of the tiers

}  // namespace mlajit::jit
