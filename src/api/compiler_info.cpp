// compiler_info of the public runtime API: NVRTC as the jit layer loaded it.
#include "jit/nvrtc_compiler.h"
#include "mlajit/runtime.h"

namespace mlajit {

CompilerInfo compiler_info() {
  const jit::NvrtcCompiler& compiler = jit::NvrtcCompiler::instance();
  CompilerInfo info;
  info.available = compiler.available();
  if (!info.available) {
    info.unavailable_reason = compiler.unavailable_reason();
    return info;
  }
  info.library_path = compiler.library_path();
  info.version = compiler.version();
  info.supported_archs = compiler.supported_archs();
  return info;
}

}  // namespace mlajit
