#pragma once
// Internal to src/driver/: the table of Driver API entry points, resolved once through
// cuGetProcAddress at the CUDA 13 ABI. Every pointer has the type of the newest typedef in
// cudaTypedefs.h, because cuGetProcAddress(…, 13000, …) hands back the newest ABI of each
// symbol (cuCtxSynchronize comes back as cuCtxSynchronize_v2, which takes a CUcontext).
#include <cuda.h>
#include <cudaTypedefs.h>

#include <string>

#include "driver/cuda_driver.h"

namespace mlajit::driver::detail {

struct Api {
  PFN_cuGetErrorName_v6000 cuGetErrorName = nullptr;
  PFN_cuGetErrorString_v6000 cuGetErrorString = nullptr;
  PFN_cuInit_v2000 cuInit = nullptr;
  PFN_cuDriverGetVersion_v2020 cuDriverGetVersion = nullptr;
  PFN_cuDeviceGetCount_v2000 cuDeviceGetCount = nullptr;
  PFN_cuDeviceGet_v2000 cuDeviceGet = nullptr;
  PFN_cuDeviceGetName_v2000 cuDeviceGetName = nullptr;
  PFN_cuDeviceGetAttribute_v2000 cuDeviceGetAttribute = nullptr;
  PFN_cuDevicePrimaryCtxRetain_v7000 cuDevicePrimaryCtxRetain = nullptr;
  PFN_cuCtxSetCurrent_v4000 cuCtxSetCurrent = nullptr;
  PFN_cuCtxGetCurrent_v4000 cuCtxGetCurrent = nullptr;
  PFN_cuCtxGetDevice_v13000 cuCtxGetDevice = nullptr;
  PFN_cuCtxSynchronize_v13000 cuCtxSynchronize = nullptr;
  PFN_cuLibraryLoadData_v12000 cuLibraryLoadData = nullptr;
  PFN_cuLibraryUnload_v12000 cuLibraryUnload = nullptr;
  PFN_cuLibraryGetKernel_v12000 cuLibraryGetKernel = nullptr;
  PFN_cuKernelGetFunction_v12000 cuKernelGetFunction = nullptr;
  PFN_cuFuncSetAttribute_v9000 cuFuncSetAttribute = nullptr;
  PFN_cuFuncGetAttribute_v2020 cuFuncGetAttribute = nullptr;
  PFN_cuOccupancyMaxActiveBlocksPerMultiprocessor_v6050
      cuOccupancyMaxActiveBlocksPerMultiprocessor = nullptr;
  PFN_cuLaunchKernelEx_v11060 cuLaunchKernelEx = nullptr;
  PFN_cuOccupancyMaxActiveClusters_v11070 cuOccupancyMaxActiveClusters = nullptr;
  // TMA descriptors; v12000 is the only ABI cudaTypedefs.h has for it (CUDA 13.0).
  PFN_cuTensorMapEncodeTiled_v12000 cuTensorMapEncodeTiled = nullptr;
  PFN_cuMemAlloc_v3020 cuMemAlloc = nullptr;
  PFN_cuMemFree_v3020 cuMemFree = nullptr;
  PFN_cuMemHostAlloc_v2020 cuMemHostAlloc = nullptr;
  PFN_cuMemFreeHost_v2000 cuMemFreeHost = nullptr;
  PFN_cuMemcpyHtoD_v3020 cuMemcpyHtoD = nullptr;
  PFN_cuMemcpyDtoH_v3020 cuMemcpyDtoH = nullptr;
  PFN_cuMemcpyDtoD_v3020 cuMemcpyDtoD = nullptr;
  PFN_cuMemcpyHtoDAsync_v3020 cuMemcpyHtoDAsync = nullptr;
  PFN_cuMemsetD8_v3020 cuMemsetD8 = nullptr;
  PFN_cuMemsetD32Async_v3020 cuMemsetD32Async = nullptr;
  PFN_cuStreamCreate_v2000 cuStreamCreate = nullptr;
  PFN_cuStreamDestroy_v4000 cuStreamDestroy = nullptr;
  PFN_cuStreamSynchronize_v2000 cuStreamSynchronize = nullptr;
  // cuStreamGetCtx at 12050+ is cuStreamGetCtx_v2 (adds a CUgreenCtx out-parameter).
  PFN_cuStreamGetCtx_v12050 cuStreamGetCtx = nullptr;
  PFN_cuEventCreate_v2000 cuEventCreate = nullptr;
  PFN_cuEventDestroy_v4000 cuEventDestroy = nullptr;
  PFN_cuEventRecord_v2000 cuEventRecord = nullptr;
  PFN_cuEventSynchronize_v2000 cuEventSynchronize = nullptr;
  PFN_cuEventElapsedTime_v12080 cuEventElapsedTime = nullptr;
  PFN_cuStreamBeginCapture_v10010 cuStreamBeginCapture = nullptr;
  PFN_cuStreamEndCapture_v10000 cuStreamEndCapture = nullptr;
  // Resolved by its own name: "cuGraphInstantiate" changed ABI in CUDA 12 and
  // cudaTypedefs.h has no typedef for the new one under that name.
  PFN_cuGraphInstantiateWithFlags_v11040 cuGraphInstantiateWithFlags = nullptr;
  PFN_cuGraphLaunch_v10000 cuGraphLaunch = nullptr;
  PFN_cuGraphDestroy_v10000 cuGraphDestroy = nullptr;
  PFN_cuGraphExecDestroy_v10000 cuGraphExecDestroy = nullptr;
};

// The entry points, loading libcuda and running cuInit on the first call (thread-safe, once).
// Throws Error(kNoDriver) when libcuda is missing, too old or cuInit failed, and
// Error(kNoDevice) when the driver works but sees no device.
const Api& api();

// The entry points when libcuda loaded, even if cuInit found no device; throws
// Error(kNoDriver) otherwise. Without a device only the bootstrap entries are set
// (cuDriverGetVersion, cuGetErrorName, cuGetErrorString, cuInit): every other one is null, so
// callers use it for those four and reach the rest through api().
const Api& loaded_api();

// The table if a previous call already loaded it, else nullptr. Never loads anything: for
// error formatting and destructors, which must not start the driver.
const Api* api_if_loaded() noexcept;

// The table with at least cuGetErrorName/cuGetErrorString if libcuda was loaded by a
// previous call (even when cuInit failed), else nullptr. Never loads anything.
const Api* error_api_if_loaded() noexcept;

// Why the driver is unusable ("" when it is ready). Loads the driver if needed.
std::string driver_unavailable_reason_text();

// True once anything asked for the driver (for the test that nothing loads at static init).
bool load_attempted() noexcept;

// True when libcuda loaded but cuInit answered CUDA_ERROR_NO_DEVICE.
bool driver_without_devices();

// "CUDA_ERROR_X (text)" from the driver when loaded, else "CUDA error <n>".
std::string describe(CUresult result);

// Throws Error(kNoDevice) unless `ordinal` names a device of this machine.
void check_ordinal(int ordinal);

// The device's attributes, queried once per process.
const DeviceInfo& cached_device_info(int ordinal);

// The device's primary context, retained once per process (never released: the driver tears
// it down at exit, and releasing it from a static destructor would pull the context from
// under buffers other static objects still free later).
CUcontext primary_context(int ordinal);

// Makes the primary context of device 0 current when the thread has no context, the way the
// CUDA runtime does, so buffers and streams work before set_current_device is called.
void ensure_current_context();

// Makes `context` current for its lifetime and restores the previous one after.
class ScopedContext {
 public:
  explicit ScopedContext(CUcontext context);
  ~ScopedContext();
  ScopedContext(const ScopedContext&) = delete;
  ScopedContext& operator=(const ScopedContext&) = delete;

 private:
  CUcontext previous_ = nullptr;
  bool switched_ = false;
};

}  // namespace mlajit::driver::detail
