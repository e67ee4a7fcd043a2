// Device memory for programs that link no CUDA library themselves. Allocations are kept in a
// table (pointer -> buffer, device) so that free() can refuse a pointer it never handed out
// and copies know which device's context to use.
#include "mlajit/device_memory.h"

#include <map>
#include <mutex>

#include <fmt/format.h>

#include "driver/cuda_driver.h"
#include "mlajit/error.h"

namespace mlajit {
namespace {

struct Allocation {
  driver::DeviceBuffer buffer;
  int ordinal = 0;
};

struct AllocationTable {
  std::mutex mutex;
  std::map<uintptr_t, Allocation> by_address;
};

AllocationTable& table() {
  static auto* allocations = new AllocationTable;  // never destroyed: frees may come at exit
  return *allocations;
}

// The device of the allocation holding `ptr`, or -1 when it is not one of ours (a pointer
// from PyTorch or cudaMalloc: unified addressing lets any context copy it).
int owner_of(const void* ptr) {
  const auto address = reinterpret_cast<uintptr_t>(ptr);
  AllocationTable& allocations = table();
  std::lock_guard<std::mutex> lock(allocations.mutex);
  auto it = allocations.by_address.upper_bound(address);
  if (it == allocations.by_address.begin()) return -1;
  --it;
  if (address >= it->first + it->second.buffer.size()) return -1;
  return it->second.ordinal;
}

void use_context_for(const void* ptr) {
  const int ordinal = owner_of(ptr);
  driver::set_current_device(ordinal >= 0 ? ordinal : 0);
}

}  // namespace

void* device_alloc(int ordinal, size_t bytes) {
  if (ordinal < 0 || ordinal >= driver::device_count()) {
    throw Error(ErrorCode::kNoDevice,
                fmt::format("device={} does not exist: {} CUDA device(s) visible", ordinal,
                            driver::device_count()));
  }
  if (bytes == 0) return nullptr;
  driver::set_current_device(ordinal);
  Allocation allocation{driver::DeviceBuffer(bytes), ordinal};
  void* ptr = allocation.buffer.data();
  AllocationTable& allocations = table();
  std::lock_guard<std::mutex> lock(allocations.mutex);
  allocations.by_address.emplace(reinterpret_cast<uintptr_t>(ptr), std::move(allocation));
  return ptr;
}

void device_free(void* ptr) {
  if (ptr == nullptr) return;
  Allocation released;
  {
    AllocationTable& allocations = table();
    std::lock_guard<std::mutex> lock(allocations.mutex);
    auto it = allocations.by_address.find(reinterpret_cast<uintptr_t>(ptr));
    if (it == allocations.by_address.end()) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("device_free({}): not a pointer returned by device_alloc (or "
                              "freed already)", ptr));
    }
    released = std::move(it->second);
    allocations.by_address.erase(it);
  }
  driver::set_current_device(released.ordinal);  // cuMemFree runs in released's destructor
}

void copy_to_device(void* device_dst, const void* host_src, size_t bytes) {
  if (bytes == 0) return;
  if (device_dst == nullptr || host_src == nullptr) {
    throw Error(ErrorCode::kInvalidArgument, "copy_to_device: a pointer is null");
  }
  use_context_for(device_dst);
  driver::memcpy_htod(reinterpret_cast<CUdeviceptr>(device_dst), host_src, bytes);
}

void copy_to_host(void* host_dst, const void* device_src, size_t bytes) {
  if (bytes == 0) return;
  if (host_dst == nullptr || device_src == nullptr) {
    throw Error(ErrorCode::kInvalidArgument, "copy_to_host: a pointer is null");
  }
  use_context_for(device_src);
  driver::memcpy_dtoh(host_dst, reinterpret_cast<CUdeviceptr>(device_src), bytes);
}

void copy_device_to_device(void* device_dst, const void* device_src, size_t bytes) {
  if (bytes == 0) return;
  if (device_dst == nullptr || device_src == nullptr) {
    throw Error(ErrorCode::kInvalidArgument, "copy_device_to_device: a pointer is null");
  }
  use_context_for(device_dst);
  driver::memcpy_dtod(reinterpret_cast<CUdeviceptr>(device_dst),
                      reinterpret_cast<CUdeviceptr>(device_src), bytes);
  // Device-to-device copies return before they finish; blocking like the other copies.
  driver::context_synchronize();
}

void device_memset(void* device_dst, unsigned char value, size_t bytes) {
  if (bytes == 0) return;
  if (device_dst == nullptr) throw Error(ErrorCode::kInvalidArgument, "device_memset: null pointer");
  use_context_for(device_dst);
  driver::memset_d8(reinterpret_cast<CUdeviceptr>(device_dst), value, bytes);
  // cuMemsetD8 on device memory returns before it finishes: wait, so that work the caller
  // queues next on any stream sees the bytes.
  driver::context_synchronize();
}

void device_synchronize(int ordinal) {
  if (ordinal < 0 || ordinal >= driver::device_count()) {
    throw Error(ErrorCode::kNoDevice,
                fmt::format("device={} does not exist: {} CUDA device(s) visible", ordinal,
                            driver::device_count()));
  }
  driver::set_current_device(ordinal);
  driver::context_synchronize();
}

}  // namespace mlajit
