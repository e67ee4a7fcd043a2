#pragma once
// NVRTC programs for the driver-layer probe kernels (kernels/tma_probe.cuh,
// kernels/launch_probe.cuh). They are test kernels, not kernel families, so they are compiled
// here through NvrtcCompiler rather than through codegen and the cache. Shared by the CPU test
// that they compile and the GPU tests that run them.
#include <string>

#include "jit/codegen.h"
#include "jit/nvrtc_compiler.h"

namespace mlajit::testing {

// The fixed-width types codegen's prelude gives every program (kernels include no header).
constexpr const char* kProbeIntegerTypes =
    "typedef signed char int8_t;\n"
    "typedef short int16_t;\n"
    "typedef int int32_t;\n"
    "typedef long long int64_t;\n"
    "typedef unsigned char uint8_t;\n"
    "typedef unsigned short uint16_t;\n"
    "typedef unsigned int uint32_t;\n"
    "typedef unsigned long long uint64_t;\n";

inline jit::CompileRequest probe_request(const std::string& file,
                                         const std::string& name_expression,
                                         const std::string& arch) {
  jit::CompileRequest request;
  request.program_name = file + ".cu";
  request.source = std::string(kProbeIntegerTypes) + "#include \"" + file + "\"\n";
  request.headers = jit::kernel_sources();
  request.name_expression = name_expression;
  request.arch = arch;
  return request;
}

inline jit::CompileRequest tma_probe_request(const std::string& arch) {
  return probe_request("tma_probe.cuh", "mlajit_kernel::tma_probe", arch);
}

inline jit::CompileRequest cluster_probe_request(const std::string& arch) {
  return probe_request("launch_probe.cuh", "mlajit_kernel::cluster_probe", arch);
}

inline jit::CompileRequest pdl_probe_request(const std::string& arch) {
  return probe_request("launch_probe.cuh", "mlajit_kernel::pdl_probe", arch);
}

}  // namespace mlajit::testing
