// Driver presence, device enumeration and attributes, primary contexts.
#include <map>
#include <mutex>

#include <fmt/format.h>

#include "common/logging.h"
#include "driver/cuda_driver.h"
#include "driver/driver_api.h"
#include "mlajit/error.h"

namespace mlajit::driver {
namespace detail {
namespace {

int attribute(const Api& cu, CUdevice device, CUdevice_attribute which, const char* what) {
  int value = 0;
  check(cu.cuDeviceGetAttribute(&value, which, device),
        fmt::format("cuDeviceGetAttribute({})", what).c_str());
  return value;
}

CUdevice device_handle(const Api& cu, int ordinal) {
  CUdevice device = 0;
  check(cu.cuDeviceGet(&device, ordinal), "cuDeviceGet");
  return device;
}

DeviceInfo query_device_info(int ordinal) {
  const Api& cu = api();
  CUdevice device = device_handle(cu, ordinal);
  DeviceInfo info;
  info.ordinal = ordinal;
  char name[256] = {};
  check(cu.cuDeviceGetName(name, sizeof(name) - 1, device), "cuDeviceGetName");
  info.name = name;
  info.cc_major = attribute(cu, device, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, "cc major");
  info.cc_minor = attribute(cu, device, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, "cc minor");
  info.sm_count = attribute(cu, device, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, "SM count");
  info.smem_per_sm = attribute(cu, device, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR,
                               "shared memory per SM");
  info.smem_per_block_optin = attribute(
      cu, device, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, "opt-in smem per block");
  info.l2_bytes = attribute(cu, device, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, "L2 size");
  info.cooperative_launch =
      attribute(cu, device, CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH, "cooperative launch") != 0;
  return info;
}

}  // namespace

void check_ordinal(int ordinal) {
  api();  // kNoDriver / kNoDevice with the reason when the driver is unusable
  int count = device_count();
  if (ordinal >= 0 && ordinal < count) return;
  throw Error(ErrorCode::kNoDevice,
              fmt::format("CUDA device ordinal {} is out of range: this process sees {} device(s), "
                          "valid ordinals are 0..{} (check CUDA_VISIBLE_DEVICES)",
                          ordinal, count, count - 1));
}

const DeviceInfo& cached_device_info(int ordinal) {
  static std::mutex mutex;
  static std::map<int, DeviceInfo> infos;
  check_ordinal(ordinal);
  std::lock_guard<std::mutex> lock(mutex);
  auto found = infos.find(ordinal);
  if (found == infos.end()) found = infos.emplace(ordinal, query_device_info(ordinal)).first;
  return found->second;
}

CUcontext primary_context(int ordinal) {
  static std::mutex mutex;
  static std::map<int, CUcontext> contexts;
  check_ordinal(ordinal);
  std::lock_guard<std::mutex> lock(mutex);
  auto found = contexts.find(ordinal);
  if (found != contexts.end()) return found->second;
  const Api& cu = api();
  CUcontext context = nullptr;
  check(cu.cuDevicePrimaryCtxRetain(&context, device_handle(cu, ordinal)),
        "cuDevicePrimaryCtxRetain");
  contexts.emplace(ordinal, context);
  return context;
}

void ensure_current_context() {
  const Api& cu = api();
  CUcontext current = nullptr;
  check(cu.cuCtxGetCurrent(&current), "cuCtxGetCurrent");
  if (current) return;
  logger("mlajit.driver")->debug("no current CUDA context on this thread: using device 0");
  set_current_device(0);
}

ScopedContext::ScopedContext(CUcontext context) {
  const Api& cu = api();
  check(cu.cuCtxGetCurrent(&previous_), "cuCtxGetCurrent");
  if (previous_ == context) return;
  check(cu.cuCtxSetCurrent(context), "cuCtxSetCurrent");
  switched_ = true;
}

ScopedContext::~ScopedContext() {
  if (!switched_) return;
  CUresult result = api_if_loaded()->cuCtxSetCurrent(previous_);
  if (result != CUDA_SUCCESS) {
    logger("mlajit.driver")->warn("restoring the previous CUDA context failed: {}",
                                  describe(result));
  }
}

}  // namespace detail

std::string DeviceInfo::arch() const { return fmt::format("sm_{}{}", cc_major, cc_minor); }

int driver_version() {
  int version = 0;
  check(detail::loaded_api().cuDriverGetVersion(&version), "cuDriverGetVersion");
  return version;
}

int device_count() {
  const detail::Api& cu = detail::loaded_api();
  if (detail::driver_without_devices()) return 0;
  int count = 0;
  check(cu.cuDeviceGetCount(&count), "cuDeviceGetCount");
  return count;
}

bool driver_available() noexcept {
  try {
    detail::api();
    return true;
  } catch (...) {
    return false;
  }
}

std::string driver_unavailable_reason() { return detail::driver_unavailable_reason_text(); }

DeviceInfo device_info(int ordinal) { return detail::cached_device_info(ordinal); }

void set_current_device(int ordinal) {
  CUcontext context = detail::primary_context(ordinal);
  check(detail::api().cuCtxSetCurrent(context), "cuCtxSetCurrent");
}

int current_device() {
  const detail::Api& cu = detail::api();
  CUcontext context = nullptr;
  check(cu.cuCtxGetCurrent(&context), "cuCtxGetCurrent");
  if (!context) {
    throw Error(ErrorCode::kNoDevice,
                "no CUDA context is current on this thread: call set_current_device(ordinal) "
                "first");
  }
  CUdevice device = 0;
  check(cu.cuCtxGetDevice(&device, nullptr), "cuCtxGetDevice");
  int count = device_count();
  for (int ordinal = 0; ordinal < count; ++ordinal) {
    if (detail::device_handle(cu, ordinal) == device) return ordinal;
  }
  throw Error(ErrorCode::kInternal,
              fmt::format("the current context's device (handle {}) matches none of the {} "
                          "devices cuDeviceGet enumerates",
                          static_cast<int>(device), count));
}

}  // namespace mlajit::driver
