#pragma once
// What precompile() reports of a compiled kernel: one conversion for the process-wide cache
// (cache.cpp) and for a KernelCache of its own (kernel_cache.cpp).
#include "jit/kernel_registry.h"
#include "mlajit/runtime.h"

namespace mlajit {

inline PrecompileResult precompile_result(const jit::CompiledKernel& kernel) {
  PrecompileResult result;
  result.key = kernel.key.hex;
  result.from_cache = kernel.from_cache;
  result.bytes = kernel.image.size();
  result.compile_seconds = kernel.metadata.compile_seconds;
  return result;
}

}  // namespace mlajit
