#pragma once
// KernelSpec -> NVRTC program: a generated prelude (fixed-width types, the program's launch
// constants and macros) followed by #include of the entry file of the spec's family (or
// utility program). NVRTC gets, and the key hashes, only that file and what it includes.
// Kernel sources come from the embedded copy, or from $MLAJIT_KERNEL_DIR when set (kernel
// development without rebuilding).
#include <map>
#include <string>
#include <vector>

#include "jit/kernel_program.h"
#include "jit/nvrtc_compiler.h"
#include "mlajit/kernel_spec.h"

namespace mlajit::jit {

struct GeneratedProgram {
  CompileRequest request;   // source + headers + name expression + arch; seed left 0
  std::string source_hash;  // XXH3-128 hex of the prelude and every header, in name order
  LaunchGeometry geometry;  // how the kernel launches
};

// Throws Error(kUnsupported) for a family, head-dim pair or dtype the kernels do not implement,
// Error(kInvalidArgument) for a DType field outside the enum or a tile the kernel cannot take,
// Error(kIoError) when the program includes a kernel file that is not among the sources.
GeneratedProgram generate_program(const KernelSpec& spec);

// The same, from the given kernel files (name -> contents) instead of kernel_sources().
GeneratedProgram generate_program(const KernelSpec& spec,
                                  const std::map<std::string, std::string>& kernel_files);

// `entry` and every kernel file it includes ("name" directives, transitively), by name.
// Throws Error(kIoError) naming the includer when one is not among `kernel_files`.
std::vector<std::string> included_kernel_files(
    const std::string& entry, const std::map<std::string, std::string>& kernel_files);

// The kernel files programs are built from, by path below kernels/ ("common/ptx_mma.cuh"):
// every *.cuh under $MLAJIT_KERNEL_DIR when it is set (logged as a warning: the cache keys
// then follow the files on disk), else the embedded copy. Throws Error(kIoError) when the
// directory or a file cannot be read, or a *.cuh in it is not a regular file.
std::map<std::string, std::string> kernel_sources();

}  // namespace mlajit::jit
