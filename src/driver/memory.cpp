// Device and pinned host buffers, copies and fills.
#include <utility>

#include <fmt/format.h>

#include "driver/cuda_driver.h"
#include "driver/driver_api.h"
#include "mlajit/error.h"

namespace mlajit::driver {
namespace {

// Frees in destructors: log, never throw (a destructor may run during unwinding).
void free_device(CUdeviceptr ptr) {
  if (!ptr) return;
  if (const detail::Api* cu = detail::api_if_loaded()) warn_in_destructor(cu->cuMemFree(ptr), "cuMemFree");
}

void free_host(void* ptr) {
  if (!ptr) return;
  if (const detail::Api* cu = detail::api_if_loaded()) warn_in_destructor(cu->cuMemFreeHost(ptr), "cuMemFreeHost");
}

[[noreturn]] void throw_alloc_failure(CUresult result, const char* call, size_t bytes) {
  const char* hint = result == CUDA_ERROR_OUT_OF_MEMORY ? ": free memory or allocate less" : "";
  throw Error(ErrorCode::kCudaError,
              fmt::format("{} of {} bytes failed: {}{}", call, bytes, detail::describe(result), hint));
}

}  // namespace

DeviceBuffer::DeviceBuffer(size_t bytes) : bytes_(bytes) {
  detail::ensure_current_context();
  if (bytes == 0) return;  // cuMemAlloc refuses 0 bytes; an empty buffer is still useful
  CUresult result = detail::api().cuMemAlloc(&ptr_, bytes);
  if (result != CUDA_SUCCESS) throw_alloc_failure(result, "cuMemAlloc", bytes);
}

DeviceBuffer::~DeviceBuffer() { free_device(ptr_); }

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : ptr_(std::exchange(other.ptr_, 0)), bytes_(std::exchange(other.bytes_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this == &other) return *this;
  free_device(ptr_);
  ptr_ = std::exchange(other.ptr_, 0);
  bytes_ = std::exchange(other.bytes_, 0);
  return *this;
}

PinnedBuffer::PinnedBuffer(size_t bytes) : bytes_(bytes) {
  detail::ensure_current_context();
  if (bytes == 0) return;
  // Portable: the buffer is pinned for every context, not only the one current now.
  CUresult result = detail::api().cuMemHostAlloc(&ptr_, bytes, CU_MEMHOSTALLOC_PORTABLE);
  if (result != CUDA_SUCCESS) throw_alloc_failure(result, "cuMemHostAlloc", bytes);
}

PinnedBuffer::~PinnedBuffer() { free_host(ptr_); }

PinnedBuffer::PinnedBuffer(PinnedBuffer&& other) noexcept
    : ptr_(std::exchange(other.ptr_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

PinnedBuffer& PinnedBuffer::operator=(PinnedBuffer&& other) noexcept {
  if (this == &other) return *this;
  free_host(ptr_);
  ptr_ = std::exchange(other.ptr_, nullptr);
  bytes_ = std::exchange(other.bytes_, 0);
  return *this;
}

void memcpy_htod(CUdeviceptr dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  check(detail::api().cuMemcpyHtoD(dst, src, bytes), "cuMemcpyHtoD");
}

void memcpy_dtod(CUdeviceptr dst, CUdeviceptr src, size_t bytes) {
  if (bytes == 0) return;
  check(detail::api().cuMemcpyDtoD(dst, src, bytes), "cuMemcpyDtoD");
}

void memcpy_dtoh(void* dst, CUdeviceptr src, size_t bytes) {
  if (bytes == 0) return;
  check(detail::api().cuMemcpyDtoH(dst, src, bytes), "cuMemcpyDtoH");
}

void memcpy_htod_async(CUdeviceptr dst, const void* src, size_t bytes, CUstream stream) {
  if (bytes == 0) return;
  check(detail::api().cuMemcpyHtoDAsync(dst, src, bytes, stream), "cuMemcpyHtoDAsync");
}

void memset_d8(CUdeviceptr dst, uint8_t value, size_t bytes) {
  if (bytes == 0) return;
  check(detail::api().cuMemsetD8(dst, value, bytes), "cuMemsetD8");
}

void memset_d32_async(CUdeviceptr dst, uint32_t value, size_t count, CUstream stream) {
  if (count == 0) return;
  check(detail::api().cuMemsetD32Async(dst, value, count, stream), "cuMemsetD32Async");
}

}  // namespace mlajit::driver
