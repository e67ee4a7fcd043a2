#pragma once
// What codegen needs from a kernel family (or a utility program) to build one NVRTC program
// for a spec: the entry file, the kernel instance, extra prelude macros and how it launches.
#include <string>
#include <utility>
#include <vector>

namespace mlajit::jit {

struct ClusterDims {
  int x = 1, y = 1, z = 1;
  bool operator==(const ClusterDims& o) const { return x == o.x && y == o.y && z == o.z; }
  bool operator!=(const ClusterDims& o) const { return !(*this == o); }
};

// How the kernel is launched: fixed by the program, never read from a cache file.
struct LaunchGeometry {
  int threads_per_block = 0;
  ClusterDims cluster;          // thread-block cluster; 1x1x1 = no cluster
  int dynamic_smem_bytes = 0;
  bool cooperative = false;     // has a grid barrier: its merging launch must be cooperative

  bool operator==(const LaunchGeometry& o) const {
    return threads_per_block == o.threads_per_block && cluster == o.cluster &&
           dynamic_smem_bytes == o.dynamic_smem_bytes && cooperative == o.cooperative;
  }
  bool operator!=(const LaunchGeometry& o) const { return !(*this == o); }
};

struct KernelProgram {
  // The kernel file the program includes, by its name below kernels/ ("portable/mla_fa2.cuh").
  // The headers NVRTC gets, and the key hashes, are this file and what it includes, no more.
  std::string entry_file;
  std::string name_expression;  // the kernel instance, e.g. "mlajit_kernel::spin_kernel<0>"
  std::vector<std::pair<std::string, std::string>> defines;  // extra prelude macros
  LaunchGeometry geometry;
};

}  // namespace mlajit::jit
