// Device memory helpers through the C ABI (see mlajit/device_memory.h).
#include "capi/c_status.h"
#include "mlajit/device_memory.h"
#include "mlajit/mlajit.h"

using mlajit::capi::fail;
using mlajit::capi::guarded;

extern "C" {

mlajit_status mlajit_device_alloc(int ordinal, size_t bytes, void** ptr) {
  if (ptr == nullptr) return fail(MLAJIT_ERROR_INVALID_ARGUMENT, "mlajit_device_alloc: ptr is NULL");
  *ptr = nullptr;
  return guarded([&] { *ptr = mlajit::device_alloc(ordinal, bytes); });
}

mlajit_status mlajit_device_free(void* ptr) {
  return guarded([&] { mlajit::device_free(ptr); });
}

mlajit_status mlajit_memcpy_to_device(void* device_dst, const void* host_src, size_t bytes) {
  return guarded([&] { mlajit::copy_to_device(device_dst, host_src, bytes); });
}

mlajit_status mlajit_memcpy_to_host(void* host_dst, const void* device_src, size_t bytes) {
  return guarded([&] { mlajit::copy_to_host(host_dst, device_src, bytes); });
}

mlajit_status mlajit_device_synchronize(int ordinal) {
  return guarded([&] { mlajit::device_synchronize(ordinal); });
}

}  // extern "C"
