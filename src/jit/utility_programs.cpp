#include "jit/utility_programs.h"

#include <map>

#include <fmt/format.h>

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

// The driver layer's sm_90 probes (tests/gpu/test_driver_launch_gpu.cpp): one kernel each.
KernelProgram probe(const char* entry_file, const char* kernel, int threads) {
  KernelProgram program;
  program.entry_file = entry_file;
  program.name_expression = kernel;
  program.geometry.threads_per_block = threads;
  return program;
}

const std::map<std::string, KernelProgram>& programs() {
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

const KernelProgram* utility_program(const std::string& name) noexcept {
  const auto it = programs().find(name);
  return it == programs().end() ? nullptr : &it->second;
}

std::vector<std::string> utility_program_names() {
  std::vector<std::string> names;
  for (const auto& [name, program] : programs()) names.push_back(name);
  return names;
}

}  // namespace mlajit::jit
