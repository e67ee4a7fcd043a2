#pragma once
// The checks of merge_states' arguments: everything is refused before the driver is touched,
// so they run (and are tested) on a machine without a GPU.
#include "mlajit/merge_states.h"

namespace mlajit {

// The most rows one launch covers: a 32-bit grid of blocks of 4 warps, one row each.
constexpr int64_t kMaxMergeRows = int64_t{4} * 0x7fffffff;

// Throws Error(kInvalidArgument) naming the field, its value and what is expected;
// Error(kUnsupported) for dtype e4m3.
void validate_merge_states_args(const MergeStatesArgs& args);

}  // namespace mlajit
