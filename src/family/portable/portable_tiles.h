#pragma once
// The portable kernel's tile configs: the reference's three shared-memory tiers, the shared
// storage a config needs (derived from the kernel's layout, never hard-coded), and the choice
// of the largest tier that fits a device.
#include <vector>

#include "family/device_target.h"
#include "mlajit/kernel_spec.h"

namespace mlajit::family::portable {

// Candidates in order of preference (the reference's three tiers).
std::vector<TileConfig> tile_candidates();
// 1, 2, 3 -> the tier's config; throws Error(kInvalidArgument) otherwise.
TileConfig tile_tier(int tier);
int tier_of(const TileConfig& tile);  // 1..3, 0 when not one of the tiers

// Bytes of dynamic shared memory the kernel needs for `spec` with `tile`. Throws
// Error(kInvalidArgument) naming the field for a tile the kernel cannot take.
int shared_storage_bytes(const KernelSpec& spec, const TileConfig& tile);
// Whether `tile` fits the target's shared memory (see smem_fits).
bool tile_fits(const KernelSpec& spec, const TileConfig& tile, const DeviceTarget& target);
// The first candidate that fits; throws Error(kUnsupported) naming what each needs when none
// does.
TileConfig select_tile_config(const KernelSpec& spec, const DeviceTarget& target);

}  // namespace mlajit::family::portable
