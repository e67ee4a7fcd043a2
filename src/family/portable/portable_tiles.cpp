// The portable kernel's shared-memory tiers. The byte count is derived from the kernel's
// shared storage layout (the reference's SharedStorageQKVO), never hard-coded: other head dims
// or dtypes change it.
#include "family/portable/portable_tiles.h"

#include <algorithm>
#include <cstdint>
#include <string>

#include <fmt/format.h>

#include "mlajit/error.h"

namespace mlajit::family::portable {

namespace {

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
// softmax exchange rows} with the output staging tile, then (per-token scales) each stage's
// tokens' ckv scales. Every member is 16-byte aligned. The KV tiles hold Q's 16-bit type
// whatever the cache's: an e4m3 tile lands in the top half of its 16-bit tile and is expanded
// in place.
int shared_storage_bytes(const KernelSpec& spec, const TileConfig& tile) {
  check_tile(tile);
  const int64_t q = dtype_size(spec.q_dtype), kv = q;
  const int64_t o = dtype_size(spec.o_dtype);
  const int64_t ckv = spec.head_dim_ckv, kpe = spec.head_dim_kpe;
  const int64_t stages = tile.num_stages, kv_tile = tile.kv_tile, q_tile = tile.q_tile;
  const int64_t compute = align16(q_tile * ckv * q) + align16(q_tile * kpe * q) +
                          stages * align16(kv_tile * ckv * kv) +
                          stages * align16(kv_tile * std::max(kpe, q_tile) * kv) +
                          align16(2 * q_tile * 4);
  const int64_t output = align16(q_tile * ckv * o);
  // Per-token scales: a 16-byte row of each stage's tokens, past the union.
  const int64_t token_scales = spec.kv_scales == KvScales::kPerToken128 ? stages * kv_tile * 16 : 0;
  const int64_t bytes = std::max(compute, output) + token_scales;
  if (bytes > INT32_MAX) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("shared storage of {} bytes for ckv={} kpe={} does not fit an int",
                            bytes, ckv, kpe));
  }
  return static_cast<int>(bytes);
}

bool tile_fits(const KernelSpec& spec, const TileConfig& tile, const DeviceTarget& target) {
  return smem_fits(shared_storage_bytes(spec, tile), target);
}

TileConfig select_tile_config(const KernelSpec& spec, const DeviceTarget& target) {
  std::vector<std::string> tried;
  for (const TileConfig& tile : tile_candidates()) {
    if (tile_fits(spec, tile, target)) return tile;
    tried.push_back(fmt::format("tier {} (stages={} kv_tile={}) needs {} B", tier_of(tile),
                                tile.num_stages, tile.kv_tile, shared_storage_bytes(spec, tile)));
  }
  throw Error(ErrorCode::kUnsupported,
              fmt::format("no MLA tile config fits ckv={} kpe={} q={} kv={} in {}: {}",
                          spec.head_dim_ckv, spec.head_dim_kpe, dtype_name(spec.q_dtype),
                          dtype_name(spec.kv_dtype), smem_limits_text(target),
                          fmt::join(tried, "; ")));
}

}  // namespace mlajit::family::portable
