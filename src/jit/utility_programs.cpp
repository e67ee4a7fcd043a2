#include "jit/utility_programs.h"

#include <cstdint>
#include <map>

#include <fmt/format.h>

#include "family/kernel_family.h"
#include "kernels/common/mla_params.cuh"

namespace mlajit::jit {
namespace {

KernelProgram grid_barrier_demo() {
  constexpr int kThreads = 256;  // the kernel's BLOCK template argument
  KernelProgram program;
  program.entry_file = "utility/grid_barrier_demo.cuh";
  program.name_expression = fmt::format("mlajit_kernel::grid_barrier_demo<{}>", kThreads);
  program.geometry.threads_per_block = kThreads;
  program.geometry.cooperative = true;
  return program;
}

KernelProgram spin() {
  KernelProgram program;
  program.entry_file = "utility/spin.cuh";
  program.name_expression = "mlajit_kernel::spin_kernel<0>";
  program.geometry.threads_per_block = 32;  // one warp holds the GPU
  return program;
}

// Combines partial attention states (merge_states.h); one warp per row, so the block size
// only sets rows per block: 4 keeps a small merge (one token of 16 heads) on 4 SMs.
KernelProgram merge_states() {
  constexpr int kThreads = 128;
  KernelProgram program;
  program.entry_file = "merge/merge_states.cuh";
  program.name_expression = fmt::format("mlajit_kernel::merge_states<{}>", kThreads);
  program.geometry.threads_per_block = kThreads;
  return program;
}

// The merge of split tiles in a launch of its own (kernels/merge/mla_merge_launch.cuh), for the
// spec's output dtype and ckv head dim. 512 threads with 8 chunks' loads in flight a thread: the
// block size and batch of the hopper kernel's former in-launch merge, so its bits stay those.
KernelProgram mla_merge(const KernelSpec& spec) {
  constexpr int kThreads = 512;
  constexpr int kBatch = 8;
  KernelProgram program;
  program.entry_file = "merge/mla_merge_launch.cuh";
  program.name_expression =
      fmt::format("mlajit_kernel::mla_merge_kernel<{}, {}, {}, {}>",
                  family::kernel_type_name(spec.o_dtype), spec.head_dim_ckv, kThreads, kBatch);
  program.geometry.threads_per_block = kThreads;
  program.geometry.dynamic_smem_bytes = mlajit_kernel::kMergeScratchBytes<kThreads>;
  return program;
}

// The driver layer's sm_90 probes (tests/gpu/test_driver_launch_gpu.cpp): one kernel each.
KernelProgram probe(const char* entry_file, const char* kernel, int threads) {
  KernelProgram program;
  program.entry_file = entry_file;
  program.name_expression = kernel;
  program.geometry.threads_per_block = threads;
  return program;
}

const std::map<std::string, KernelProgram>& fixed_programs() {
  static const std::map<std::string, KernelProgram> table{
      {"grid_barrier_demo", grid_barrier_demo()},
      {"spin", spin()},
      {kMergeStatesProgram, merge_states()},
      {"tma_probe", probe("utility/tma_probe.cuh", "mlajit_kernel::tma_probe", 128)},
      {"cluster_probe", probe("utility/launch_probe.cuh", "mlajit_kernel::cluster_probe", 32)},
      {"pdl_probe", probe("utility/launch_probe.cuh", "mlajit_kernel::pdl_probe", 32)},
  };
  return table;
}

}  // namespace

std::optional<KernelProgram> utility_program(const KernelSpec& spec) {
  if (spec.family == kMlaMergeProgram) return mla_merge(spec);
  const auto it = fixed_programs().find(spec.family);
  if (it == fixed_programs().end()) return std::nullopt;
  return it->second;
}

std::vector<std::string> utility_program_names() {
  std::vector<std::string> names;
  for (const auto& [name, program] : fixed_programs()) names.push_back(name);
  names.push_back(kMlaMergeProgram);
  return names;
}

}  // namespace mlajit::jit
