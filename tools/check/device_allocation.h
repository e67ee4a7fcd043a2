#pragma once
// Device memory owned by a C++ object: device_alloc / device_free of the public API
// (mlajit/device_memory.h) with RAII, for the checks and the benchmark.
#include <cstddef>
#include <utility>

#include "mlajit/device_memory.h"

namespace mlajit {

class DeviceAllocation {
 public:
  DeviceAllocation() = default;
  DeviceAllocation(int device, size_t bytes) : ptr_(device_alloc(device, bytes)), bytes_(bytes) {}
  ~DeviceAllocation() { release(); }
  DeviceAllocation(DeviceAllocation&& other) noexcept
      : ptr_(std::exchange(other.ptr_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}
  DeviceAllocation& operator=(DeviceAllocation&& other) noexcept {
    if (this != &other) {
      release();
      ptr_ = std::exchange(other.ptr_, nullptr);
      bytes_ = std::exchange(other.bytes_, 0);
    }
    return *this;
  }
  DeviceAllocation(const DeviceAllocation&) = delete;
  DeviceAllocation& operator=(const DeviceAllocation&) = delete;

  void* data() const { return ptr_; }
  size_t size() const { return bytes_; }

 private:
  // A destructor must not throw: a free that fails (the driver torn down at exit) is dropped.
  void release() noexcept {
    try {
      device_free(ptr_);
    } catch (...) {
    }
    ptr_ = nullptr;
  }

  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace mlajit
