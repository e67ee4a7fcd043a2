// fleet_matrix of the public API, on the family layer's matrix (family/fleet_matrix.h).
#include "mlajit/fleet.h"

#include <fmt/format.h>

#include "family/family_registry.h"
#include "family/fleet_matrix.h"
#include "mlajit/error.h"

namespace mlajit {
namespace {

family::FleetMatrixOptions internal_options(const FleetOptions& options) {
  family::FleetMatrixOptions internal;
  internal.kernel = options.kernel;
  internal.archs = options.archs;
  internal.dtypes = options.dtypes;
  internal.kv_dtypes = options.kv_dtypes;
  for (const auto& dims : options.head_dims) {
    internal.head_dims.push_back(family::parse_head_dims(dims));
  }
  const bool per_sm = options.smem_per_sm != 0, per_block = options.smem_per_block_optin != 0;
  if (per_sm != per_block || options.smem_per_sm < 0 || options.smem_per_block_optin < 0) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("FleetOptions: smem_per_sm={} and smem_per_block_optin={} must both "
                            "be positive (a replacement profile) or both 0 (each arch's own)",
                            options.smem_per_sm, options.smem_per_block_optin));
  }
  if (per_sm) internal.smem = family::SmemOverride{options.smem_per_sm, options.smem_per_block_optin};
  internal.all_tiers = options.all_tiers;
  return internal;
}

}  // namespace

std::vector<FleetSpec> fleet_matrix(const FleetOptions& options) {
  std::vector<FleetSpec> matrix;
  for (KernelSpec& spec : family::fleet_matrix(internal_options(options))) {
    const family::KernelFamily* family = family::family_named(spec.family);
    const int tier = family != nullptr ? family->tier_of(spec) : 0;  // 0: a utility program
    matrix.push_back({std::move(spec), tier});
  }
  return matrix;
}

}  // namespace mlajit
