#pragma once
// Checks MlaShape and MlaRunArgs at the API boundary, before anything reaches the GPU.
#include "mlajit/attention.h"

namespace mlajit {

// Throws Error(kInvalidArgument) / Error(kUnsupported) naming the field, value and expectation.
void validate_shape(const MlaShape& shape);
void validate_options(const MlaOptions& options);
// Both, and that the asked family (or with "auto" some family) computes the shape: everything
// the constructor and the tile queries can refuse before a device is touched.
void validate_shape_and_options(const MlaShape& shape, const MlaOptions& options);
void validate_run_args(const MlaShape& shape, const MlaRunArgs& args, int64_t planned_tokens);
// With host kv_indices: every page id of every request lies in [0, num_pages).
void validate_kv_indices(const MlaBatch& batch);

}  // namespace mlajit
