#pragma once
// The checks every device-tensor argument of the API gets (run(), merge_states()): pointers the
// kernels can load 16-byte vectors from, row strides that keep every row start aligned.
#include <cstdint>

#include "mlajit/kernel_spec.h"

namespace mlajit {

// No device holds 2^40 elements, and the bound keeps every extent computed from a stride
// (at most (page_size - 1) x stride + row, page_size <= 2^20) inside int64.
constexpr int64_t kMaxStride = int64_t{1} << 40;

// Throws Error(kInvalidArgument) when `pointer` is null or not 16-byte aligned.
void require_aligned(const char* name, const void* pointer);

// Throws Error(kInvalidArgument) unless minimum <= stride <= kMaxStride and the stride is a
// whole number of 16-byte units of `dtype`.
void require_stride(const char* name, int64_t stride, int64_t minimum, DType dtype);

}  // namespace mlajit
