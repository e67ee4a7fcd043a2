// Device profiles and the MLA kernel's shared-memory tiers. The byte count is derived from
// the kernel's shared storage layout (the reference's SharedStorageQKVO), never hard-coded:
// other head dims or dtypes change it.
#include "jit/tile_config.h"

#include <algorithm>
#include <cstdint>
#include <string>

#include <fmt/format.h>

#include "mlajit/error.h"

namespace mlajit::jit {

namespace {

constexpr int kKiB = 1024;
// Per-SM shared memory and the per-block opt-in maximum: CUDA C++ Programming Guide,
// "Technical Specifications per Compute Capability" (max shared memory per SM / per block).
// sm_count is one typical part's count, used only for planning defaults without a GPU.
constexpr const char* kGuide = "CUDA C++ Programming Guide, technical specifications table";

}  // namespace

const std::vector<DeviceProfile>& device_profiles() {
  static const std::vector<DeviceProfile> profiles = {
      {"sm_80", 164 * kKiB, 163 * kKiB, 108, "A100", kGuide},
      {"sm_86", 100 * kKiB, 99 * kKiB, 82, "RTX 3090 (A10: 72 SMs)", kGuide},
      {"sm_87", 164 * kKiB, 163 * kKiB, 16, "Jetson AGX Orin", kGuide},
      {"sm_89", 100 * kKiB, 99 * kKiB, 142, "L40S", kGuide},
      // 228 KiB = 233,472 B per SM measured on the H200 (see notes/cuda-facts.md).
      {"sm_90", 228 * kKiB, 227 * kKiB, 132, "H100 / H200 SXM", kGuide},
      {"sm_100", 228 * kKiB, 227 * kKiB, 148, "B200", kGuide},
      {"sm_103", 228 * kKiB, 227 * kKiB, 148, "B300 (SM count approximate)", kGuide},
      {"sm_110", 228 * kKiB, 227 * kKiB, 20, "Jetson Thor", kGuide},
      {"sm_120", 100 * kKiB, 99 * kKiB, 170, "RTX 5090", kGuide},
      {"sm_121", 100 * kKiB, 99 * kKiB, 48, "DGX Spark (GB10)", kGuide},
  };
  return profiles;
}

namespace {

// "sm_90a" / "compute_90" / "sm_100f" / "90" -> "sm_90" / ... ; "" when not an arch.
std::string base_arch(const std::string& arch) {
  std::string digits = arch;
  if (digits.rfind("sm_", 0) == 0) digits = digits.substr(3);
  else if (digits.rfind("compute_", 0) == 0) digits = digits.substr(8);
  if (!digits.empty() && (digits.back() == 'a' || digits.back() == 'f')) digits.pop_back();
  if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos) return "";
  return "sm_" + digits;
}

std::string known_archs() {
  std::vector<std::string> names;
  for (const auto& profile : device_profiles()) names.push_back(profile.arch);
  return fmt::format("{}", fmt::join(names, ", "));
}

int64_t align16(int64_t bytes) { return (bytes + 15) / 16 * 16; }

// What the kernel's static_asserts accept (and a little room beyond the three tiers for
// experiments): checked here so that a spec text from anywhere fails with the field named,
// not with an NVRTC static_assert or an overflowing shared-memory formula.
void check_tile(const TileConfig& tile) {
  if (tile.num_stages < 1 || tile.num_stages > 4) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("tile config stages={}: expected 1 to 4 KV pipeline stages",
                            tile.num_stages));
  }
  const int block = tile.qk_shard ? 32 : 16;
  if (tile.kv_tile < block || tile.kv_tile > 128 || tile.kv_tile % block != 0) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("tile config kv_tile={} (qk_shard={}): expected a multiple of {} "
                            "from {} to 128 tokens",
                            tile.kv_tile, tile.qk_shard ? 1 : 0, block, block));
  }
  if (tile.q_tile != 64) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("tile config q_tile={}: the kernel's query tile is 64 rows (16 per "
                            "warp of a 4-warp group)",
                            tile.q_tile));
  }
}

}  // namespace

const DeviceProfile& device_profile(const std::string& arch) {
  const std::string base = base_arch(arch);
  for (const auto& profile : device_profiles()) {
    if (profile.arch == base) return profile;
  }
  throw Error(ErrorCode::kInvalidArgument,
              fmt::format("no device profile for arch '{}'; known archs: {}", arch, known_archs()));
}

std::string target_arch(const std::string& requested, const DeviceProfile& profile) {
  const bool bare_number = !requested.empty() &&
                           requested.find_first_not_of("0123456789") == std::string::npos;
  return bare_number ? profile.arch : requested;
}

std::vector<TileConfig> tile_candidates() { return {tile_tier(1), tile_tier(2), tile_tier(3)}; }

TileConfig tile_tier(int tier) {
  switch (tier) {
    case 1: return TileConfig{2, 64, true, 64};
    case 2: return TileConfig{2, 32, true, 64};
    case 3: return TileConfig{1, 16, false, 64};
  }
  throw Error(ErrorCode::kInvalidArgument,
              fmt::format("tile tier {} does not exist: expected 1, 2 or 3", tier));
}

int tier_of(const TileConfig& tile) {
  for (int tier = 1; tier <= 3; ++tier) {
    if (tile == tile_tier(tier)) return tier;
  }
  return 0;
}

// Mirrors the kernel's shared storage: a union of {Q nope + Q pe, `stages` CKV tiles,
// `stages` KPE tiles (reused for P, hence max(kpe, q_tile) columns), the two warpgroups'
// softmax exchange rows} with the output staging tile. Every member is 16-byte aligned.
int mla_shared_storage_bytes(const KernelSpec& spec, const TileConfig& tile) {
  check_tile(tile);
  const int64_t q = dtype_size(spec.q_dtype), kv = dtype_size(spec.kv_dtype);
  const int64_t o = dtype_size(spec.o_dtype);
  const int64_t ckv = spec.head_dim_ckv, kpe = spec.head_dim_kpe;
  const int64_t stages = tile.num_stages, kv_tile = tile.kv_tile, q_tile = tile.q_tile;
  const int64_t compute = align16(q_tile * ckv * q) + align16(q_tile * kpe * q) +
                          stages * align16(kv_tile * ckv * kv) +
                          stages * align16(kv_tile * std::max(kpe, q_tile) * kv) +
                          align16(2 * q_tile * 4);
  const int64_t output = align16(q_tile * ckv * o);
  const int64_t bytes = std::max(compute, output);
  if (bytes > INT32_MAX) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("shared storage of {} bytes for ckv={} kpe={} does not fit an int",
                            bytes, ckv, kpe));
  }
  return static_cast<int>(bytes);
}

// The driver reserves 1 KiB of each SM's shared memory per resident block.
constexpr int kDriverReservedPerBlock = 1024;

bool tile_fits(const KernelSpec& spec, const TileConfig& tile, int smem_per_sm,
               int smem_per_block_optin) {
  const int bytes = mla_shared_storage_bytes(spec, tile);
  return bytes <= smem_per_block_optin && bytes <= smem_per_sm - kDriverReservedPerBlock;
}

TileConfig select_tile_config(const KernelSpec& spec, int smem_per_sm, int smem_per_block_optin) {
  const int per_sm_usable = smem_per_sm - kDriverReservedPerBlock;
  std::vector<std::string> tried;
  for (const TileConfig& tile : tile_candidates()) {
    if (tile_fits(spec, tile, smem_per_sm, smem_per_block_optin)) return tile;
    const int bytes = mla_shared_storage_bytes(spec, tile);
    tried.push_back(fmt::format("tier {} (stages={} kv_tile={}) needs {} B", tier_of(tile),
                                tile.num_stages, tile.kv_tile, bytes));
  }
  throw Error(ErrorCode::kUnsupported,
              fmt::format("no MLA tile config fits ckv={} kpe={} q={} kv={} in {} B per block "
                          "(opt-in) and {} B per SM ({} B usable): {}",
                          spec.head_dim_ckv, spec.head_dim_kpe, dtype_name(spec.q_dtype),
                          dtype_name(spec.kv_dtype), smem_per_block_optin, smem_per_sm,
                          per_sm_usable, fmt::join(tried, "; ")));
}

}  // namespace mlajit::jit
