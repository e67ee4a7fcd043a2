#pragma once
// NVRTC programs for the driver-layer probe kernels (kernels/utility/tma_probe.cuh,
// kernels/utility/launch_probe.cuh): utility programs of codegen, compiled here through
// NvrtcCompiler rather than through the cache. Shared by the CPU test that they compile and
// the GPU tests that run them.
#include <string>

#include "jit/codegen.h"
#include "jit/nvrtc_compiler.h"
#include "mlajit/kernel_spec.h"

namespace mlajit::testing {

inline jit::CompileRequest probe_request(const std::string& program, const std::string& arch) {
  KernelSpec spec;
  spec.family = program;
  spec.arch = arch;
  return jit::generate_program(spec).request;
}

inline jit::CompileRequest tma_probe_request(const std::string& arch) {
  return probe_request("tma_probe", arch);
}

inline jit::CompileRequest cluster_probe_request(const std::string& arch) {
  return probe_request("cluster_probe", arch);
}

inline jit::CompileRequest pdl_probe_request(const std::string& arch) {
  return probe_request("pdl_probe", arch);
}

}  // namespace mlajit::testing
