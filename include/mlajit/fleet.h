#pragma once
// The fleet matrix: the kernel specs to precompile so that a shipped cache
// (MLAJIT_CACHE_PATH) serves every GPU of a fleet without compiling. It is every kernel
// family's rows (dtype x head dims; the causal mask is a run-time value, so one spec serves
// both) on every asked arch the family serves; each spec
// is the one the family chooses from that arch's built-in device profile, the same choice
// BatchMlaAttention makes at run time from the real device, so the cached keys match. With
// kernel "auto" and no row filter it also holds merge_states' program (merge_states.h) for
// every plain sm_ arch asked (FleetSpec tier 0), so merging partial states needs no NVRTC
// either. Compile the specs with precompile() (runtime.h) or KernelCache::precompile (kernel_cache.h).
// No GPU and no NVRTC needed.
#include <string>
#include <vector>

#include "mlajit/export.h"
#include "mlajit/kernel_spec.h"

namespace mlajit {

struct FleetOptions {
  std::string kernel = "auto";     // "auto": every family's rows; a family name: its rows only
  std::vector<std::string> archs;  // "sm_90", "90", "sm_90a", "compute_90"; empty: every
                                   // profiled arch
  // Filters on the families' rows; an empty filter keeps every row.
  std::vector<DType> dtypes;           // of q and output
  std::vector<DType> kv_dtypes;        // of the KV cache (e4m3 rows: FP8 KV)
  std::vector<std::string> head_dims;  // CKV/KPE pairs, "512/64"
  // Shared-memory limits in bytes that replace every arch profile's (a MIG slice, a part with
  // a smaller carve-out); 0: the profile's. Set both or neither.
  int smem_per_sm = 0;
  int smem_per_block_optin = 0;
  // Also every other tile config that fits, not only the selected one, so that the debug
  // option MlaOptions::force_tier is served from the cache too.
  bool all_tiers = false;
};

struct FleetSpec {
  KernelSpec spec;
  int tier = 0;  // its family's tile tier (1 = largest); 0 when the family has no tiers
};

// arch x family x row, one spec each (two where the portable tile has a layout for few-row
// tiles: with it, and rows=wide for head counts that are multiples of 32; more with
// all_tiers), without duplicates, in that order.
// With "auto" a family skips the archs it cannot serve; a family asked for by name that cannot
// build an asked row on an asked arch is Error(kUnsupported) saying why. Throws
// Error(kInvalidArgument) for an unknown arch or family name (listing the known ones), head
// dims that are malformed or that no family computes, limits set one without the other, and an
// empty matrix (Error(kUnsupported) with the reasons when rows were skipped for the limits).
MLAJIT_API std::vector<FleetSpec> fleet_matrix(const FleetOptions& options = {});

}  // namespace mlajit
