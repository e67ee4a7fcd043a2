#pragma once
// Programs that are not MLA kernel families: the JIT demo (kernels/utility/grid_barrier_demo.cuh),
// the benchmark's GPU-holding spin kernel, the merge of partial attention states
// (kernels/merge/merge_states.cuh) and the driver layer's probes. They are compiled and cached like a family's
// kernel, through a spec whose family field names them, but are never listed or selected:
// they ignore every spec field but the arch, except mla_merge (its output dtype and ckv dim).
#include <optional>
#include <string>
#include <vector>

#include "jit/kernel_program.h"
#include "mlajit/kernel_spec.h"

namespace mlajit::jit {

// The spec family of merge_states' program: loaded by merge_states() and precompiled in the
// default fleet matrix.
inline constexpr const char* kMergeStatesProgram = "merge_states";

// The spec family of the merge launch of a family whose kernel does not merge its split tiles
// (KernelFamily::merge_spec): o and ckv of the spec pick the instance.
inline constexpr const char* kMlaMergeProgram = "mla_merge";

// The program of the utility that spec.family names; none when it names no utility program.
std::optional<KernelProgram> utility_program(const KernelSpec& spec);
std::vector<std::string> utility_program_names();

}  // namespace mlajit::jit
