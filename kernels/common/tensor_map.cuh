// A CUtensorMap as a kernel parameter sees it: 128 opaque bytes, 64-byte aligned. Compiled by
// the host C++ compiler too (parameter structs that hold one), so it uses only fixed-width
// integer types; src/driver/tensor_map.h checks that CUtensorMap has this size and alignment.
#pragma once

namespace mlajit_kernel {

struct alignas(64) TensorMapBytes {
  uint64_t opaque[16];
};

}  // namespace mlajit_kernel
