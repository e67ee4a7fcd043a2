#include "jit/fleet_matrix.h"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

#include "jit/tile_config.h"
#include "mlajit/error.h"

namespace mlajit::jit {
namespace {

std::string supported_list() {
  std::string list;
  for (const auto& dims : supported_head_dims()) {
    if (!list.empty()) list += ", ";
    list += head_dims_text(dims);
  }
  return list;
}

bool all_digits(const std::string& text) {
  return !text.empty() && text.size() <= 6 &&
         std::all_of(text.begin(), text.end(), [](unsigned char c) { return std::isdigit(c); });
}

std::vector<const DeviceProfile*> profiles_for(const std::vector<std::string>& archs,
                                               std::vector<std::string>* spec_archs) {
  std::vector<const DeviceProfile*> profiles;
  if (archs.empty()) {
    for (const auto& profile : device_profiles()) {
      profiles.push_back(&profile);
      spec_archs->push_back(profile.arch);
    }
    return profiles;
  }
  for (const auto& arch : archs) {
    const DeviceProfile& profile = device_profile(arch);  // throws naming the known archs
    profiles.push_back(&profile);
    spec_archs->push_back(target_arch(arch, profile));
  }
  return profiles;
}

// The selected tier, plus with `all_tiers` every other tier that fits both limits.
std::vector<TileConfig> tiles_for(const KernelSpec& spec, int smem_per_sm, int smem_per_block,
                                  bool all_tiers) {
  std::vector<TileConfig> tiles{select_tile_config(spec, smem_per_sm, smem_per_block)};
  if (!all_tiers) return tiles;
  for (const TileConfig& tile : tile_candidates()) {
    const bool fits = tile_fits(spec, tile, smem_per_sm, smem_per_block);
    if (fits && std::find(tiles.begin(), tiles.end(), tile) == tiles.end()) tiles.push_back(tile);
  }
  return tiles;
}

void require_nonempty(bool empty, const char* axis) {
  if (empty) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("the precompile matrix needs at least one {}", axis));
  }
}

}  // namespace

const std::vector<HeadDims>& supported_head_dims() {
  static const std::vector<HeadDims> dims{{512, 64}, {256, 32}};
  return dims;
}

std::string head_dims_text(const HeadDims& dims) { return fmt::format("{}/{}", dims.ckv, dims.kpe); }

HeadDims parse_head_dims(const std::string& text) {
  const auto slash = text.find('/');
  const std::string ckv = slash == std::string::npos ? "" : text.substr(0, slash);
  const std::string kpe = slash == std::string::npos ? "" : text.substr(slash + 1);
  if (!all_digits(ckv) || !all_digits(kpe)) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("head dims '{}' are not CKV/KPE (e.g. 512/64); supported: {}", text,
                            supported_list()));
  }
  const HeadDims dims{std::stoi(ckv), std::stoi(kpe)};
  const auto& supported = supported_head_dims();
  if (std::find(supported.begin(), supported.end(), dims) == supported.end()) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("head dims {} are not implemented by the MLA kernel; supported: {}",
                            text, supported_list()));
  }
  return dims;
}

std::vector<KernelSpec> fleet_matrix(const FleetMatrixOptions& options) {
  require_nonempty(options.dtypes.empty(), "dtype");
  require_nonempty(options.head_dims.empty(), "head-dim pair");
  require_nonempty(options.causal.empty(), "causal setting");
  std::vector<std::string> spec_archs;
  const auto profiles = profiles_for(options.archs, &spec_archs);
  std::vector<KernelSpec> specs;
  std::vector<std::string> seen;  // spec texts, to drop duplicates ("sm_90,90")
  for (size_t a = 0; a < profiles.size(); ++a) {
    const int smem_per_sm = options.smem ? options.smem->smem_per_sm : profiles[a]->smem_per_sm;
    const int smem_per_block =
        options.smem ? options.smem->smem_per_block_optin : profiles[a]->smem_per_block_optin;
    for (DType dtype : options.dtypes) {
      for (const HeadDims& dims : options.head_dims) {
        for (bool causal : options.causal) {
          KernelSpec spec;
          spec.family = options.family;
          spec.q_dtype = spec.kv_dtype = spec.o_dtype = dtype;
          spec.head_dim_ckv = dims.ckv;
          spec.head_dim_kpe = dims.kpe;
          spec.causal = causal;
          spec.arch = spec_archs[a];
          for (const TileConfig& tile :
               tiles_for(spec, smem_per_sm, smem_per_block, options.all_tiers)) {
            spec.tile = tile;
            std::string text = spec.text();
            if (std::find(seen.begin(), seen.end(), text) != seen.end()) continue;
            seen.push_back(std::move(text));
            specs.push_back(spec);
          }
        }
      }
    }
  }
  return specs;
}

}  // namespace mlajit::jit
