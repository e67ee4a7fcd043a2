#pragma once
// Programs that are not MLA kernel families: the JIT demo (kernels/utility/grid_barrier_demo.cuh),
// the benchmark's GPU-holding spin kernel, the merge of partial attention states
// (kernels/merge/merge_states.cuh) and the driver layer's probes. They are compiled and cached like a family's
// kernel, through a spec whose family field names them, but are never listed or selected:
// they ignore every spec field but the arch.
#include <string>
#include <vector>

#include "jit/kernel_program.h"

namespace mlajit::jit {

// The spec family of merge_states' program: loaded by merge_states() and precompiled in the
// default fleet matrix.
inline constexpr const char* kMergeStatesProgram = "merge_states";

// nullptr when `name` is no utility program.
const KernelProgram* utility_program(const std::string& name) noexcept;
std::vector<std::string> utility_program_names();

}  // namespace mlajit::jit
