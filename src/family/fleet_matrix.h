#pragma once
// The default precompile matrix: which kernel specs `mlajit precompile` builds so that a
// shipped cache (MLAJIT_CACHE_PATH) serves every GPU of the fleet without compiling. It is the
// union of every kernel family's rows (KernelFamily::fleet_shapes) on every profiled arch the
// family serves; each spec is the one the family chooses for that arch's device profile, as
// BatchMlaAttention does at run time from the real device, so the cached keys match.
#include <optional>
#include <string>
#include <vector>

#include "family/kernel_family.h"
#include "mlajit/kernel_spec.h"

namespace mlajit::family {

// Shared-memory limits that replace every profile's numbers (e.g. a MIG slice or a part
// with a smaller carve-out than its arch's profile).
struct SmemOverride {
  int smem_per_sm = 0;
  int smem_per_block_optin = 0;
};

struct FleetMatrixOptions {
  std::string kernel = "auto";     // "auto": every family's rows; a family name: its rows only
  std::vector<std::string> archs;  // empty: every profiled arch (device_profiles())
  // Filters on the families' rows; an empty filter keeps every row.
  std::vector<DType> dtypes;     // of q and output
  std::vector<DType> kv_dtypes;  // of the KV cache
  std::vector<HeadDims> head_dims;
  std::optional<SmemOverride> smem;
  // Also every other tile config that fits, not only the selected one: the debug switch
  // MlaOptions::force_tier can then be served from the cache as well.
  bool all_tiers = false;
};

// Parses "512/64"; throws Error(kInvalidArgument) for a malformed pair or one no family
// computes, listing the pairs they do.
HeadDims parse_head_dims(const std::string& text);

// arch x family x row, one spec each (more with all_tiers); no duplicates. A family skips the
// archs it cannot serve, except when it is asked for by name: then a row it cannot build on an
// asked arch is Error(kUnsupported) saying why. Throws Error(kInvalidArgument) for an unknown
// arch or family name, and when no spec is left (Error(kUnsupported) with the reasons when
// rows were skipped for the archs' limits).
// With "auto" and no row filter, the matrix also holds the utility program merge_states
// (jit::kMergeStatesProgram) for every plain sm_ arch asked.
std::vector<KernelSpec> fleet_matrix(const FleetMatrixOptions& options);

}  // namespace mlajit::family
