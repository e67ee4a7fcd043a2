#pragma once
// The default precompile matrix: which kernel specs `mlajit precompile` builds so that a
// shipped cache (MLAJIT_CACHE_PATH) serves every GPU of the fleet without compiling.
// Tile configs come from the device profile of each arch (tile_config.h), the same choice
// BatchMlaAttention makes at run time from the real device, so the cached keys match.
#include <optional>
#include <string>
#include <vector>

#include "mlajit/kernel_spec.h"

namespace mlajit::jit {

struct HeadDims {
  int ckv = 512;
  int kpe = 64;
  bool operator==(const HeadDims& other) const { return ckv == other.ckv && kpe == other.kpe; }
};

// Shared-memory limits that replace every profile's numbers (e.g. a MIG slice or a part
// with a smaller carve-out than its arch's profile).
struct SmemOverride {
  int smem_per_sm = 0;
  int smem_per_block_optin = 0;
};

struct FleetMatrixOptions {
  std::vector<std::string> archs;  // empty: every profiled arch (device_profiles())
  std::vector<DType> dtypes{DType::kBFloat16, DType::kFloat16};
  std::vector<HeadDims> head_dims{{512, 64}, {256, 32}};
  std::vector<bool> causal{false, true};
  std::optional<SmemOverride> smem;
  // Also every tier that fits the limits, not only the selected one: the debug switch
  // MlaOptions::force_tier can then be served from the cache as well.
  bool all_tiers = false;
  std::string family = "mla_fa2";
};

// The head-dim pairs the MLA kernel implements: 512/64 (DeepSeek, Kimi) and 256/32 (MiniCPM3).
const std::vector<HeadDims>& supported_head_dims();

// Parses "512/64"; throws Error(kInvalidArgument) for a malformed or unsupported pair.
HeadDims parse_head_dims(const std::string& text);
std::string head_dims_text(const HeadDims& dims);

// arch x dtype x head dims x causal (in that nesting order), one spec each, plus the extra
// tiers with all_tiers; no duplicates. Throws Error(kInvalidArgument) for an unknown arch or
// an empty axis, Error(kUnsupported) when no tile config fits the limits.
std::vector<KernelSpec> fleet_matrix(const FleetMatrixOptions& options);

}  // namespace mlajit::jit
