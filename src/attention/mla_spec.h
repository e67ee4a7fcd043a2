#pragma once
// The kernel spec BatchMlaAttention runs for a shape on a device: one place, shared by the
// attention object and the tile queries of the public runtime API, so both always agree.
#include <string>

#include "mlajit/attention.h"
#include "mlajit/kernel_spec.h"

namespace mlajit {

// `force_tier` 0 picks the largest tier that fits the shared-memory limits; 1..3 forces one.
KernelSpec mla_spec_for(const MlaShape& shape, const std::string& arch, int smem_per_sm,
                        int smem_per_block_optin, int force_tier = 0);

}  // namespace mlajit
