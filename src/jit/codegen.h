#pragma once
// KernelSpec -> NVRTC program: a generated prelude (fixed-width types, the spec's constants)
// followed by #include of the family's kernel source. Kernel sources come from the embedded
// copy, or from $MLAJIT_KERNEL_DIR when set (kernel development without rebuilding).
#include <map>
#include <string>

#include "jit/nvrtc_compiler.h"
#include "mlajit/kernel_spec.h"

namespace mlajit::jit {

struct GeneratedProgram {
  CompileRequest request;   // source + headers + name expression + arch; seed left 0
  std::string source_hash;  // XXH3-128 hex of the prelude and every header, in name order
  int threads_per_block = 0;     // the kernel's block size
  int dynamic_smem_bytes = 0;    // shared storage the kernel needs for this spec
};

// Throws Error(kUnsupported) for a family or head-dim pair the kernels do not implement,
// Error(kInvalidArgument) for a DType field outside the enum or a tile the kernel cannot take.
GeneratedProgram generate_program(const KernelSpec& spec);

// The same, from the given kernel files (name -> contents) instead of kernel_sources().
GeneratedProgram generate_program(const KernelSpec& spec,
                                  const std::map<std::string, std::string>& kernel_files);

// The kernel files programs are built from: every *.cuh in $MLAJIT_KERNEL_DIR when it is set
// (logged as a warning: the cache keys then follow the files on disk), else the embedded copy.
// Throws Error(kIoError) when the directory or a file cannot be read, or a *.cuh in it is not
// a regular file.
std::map<std::string, std::string> kernel_sources();

}  // namespace mlajit::jit
