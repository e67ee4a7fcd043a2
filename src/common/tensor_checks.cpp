#include "common/tensor_checks.h"

#include <cstdint>

#include <fmt/format.h>

#include "mlajit/error.h"

namespace mlajit {
namespace {

[[noreturn]] void invalid(const std::string& message) {
  throw Error(ErrorCode::kInvalidArgument, message);
}

}  // namespace

// cp.async and the merge move 16 bytes at a time, so every row start must be 16-byte aligned.
void require_aligned(const char* name, const void* pointer) {
  if (pointer == nullptr) invalid(fmt::format("{} is null: a device pointer is required", name));
  const auto address = reinterpret_cast<std::uintptr_t>(pointer);
  if (address % 16 != 0) {
    invalid(fmt::format("{}={} is not 16-byte aligned (kernels load 16-byte vectors)", name,
                        pointer));
  }
}

void require_stride(const char* name, int64_t stride, int64_t minimum, DType dtype) {
  if (stride > kMaxStride) {
    invalid(fmt::format("{}={} is too large: expected <= 2^40 elements (no device holds a "
                        "tensor that wide)",
                        name, stride));
  }
  if (stride < minimum) {
    invalid(fmt::format("{}={} is too small: rows would overlap (expected >= {})", name, stride,
                        minimum));
  }
  const int per_16_bytes = 16 / dtype_size(dtype);
  if (stride % per_16_bytes != 0) {
    invalid(fmt::format("{}={} is not a multiple of {} elements (16 bytes of {})", name, stride,
                        per_16_bytes, dtype_name(dtype)));
  }
}

}  // namespace mlajit
