// Loads libcuda.so.1 with dlopen on first use and resolves the entry points through
// cuGetProcAddress. Nothing here runs at static initialisation: a process that never touches
// the GPU never loads the driver, and a machine without one fails only when asked.
#include <dlfcn.h>

#include <atomic>
#include <mutex>
#include <string>

#include <fmt/format.h>

#include "common/logging.h"
#include "driver/driver_api.h"
#include "mlajit/error.h"

namespace mlajit::driver::detail {
namespace {

// The ABI every entry point is requested at; the PFN_* types in Api match it.
constexpr int kAbiVersion = 13000;
constexpr const char* kLibraryName = "libcuda.so.1";
constexpr const char* kDriverRemedy =
    "install the NVIDIA driver (580 or newer for CUDA 13), or run on a machine with a CUDA "
    "GPU (in a container, start it with the NVIDIA container runtime, e.g. --gpus all)";

constexpr const char* kStubAnswer = "stub library";

enum class Status { kReady, kNoLibrary, kTooOld, kInitFailed, kNoDevices };

struct LoadState {
  Api api;
  Status status = Status::kNoLibrary;
  std::string reason;  // empty when kReady
  void* handle = nullptr;
};

std::atomic<bool> g_load_attempted{false};
// Set once cuGetErrorName/String resolved, even if cuInit then failed: for describe().
std::atomic<const Api*> g_error_names{nullptr};
// Set once every entry point resolved and cuInit succeeded.
std::atomic<const Api*> g_ready{nullptr};

// Either cuGetProcAddress_v2 (CUDA 12+) or the CUDA 11.3 one without the status argument.
struct ProcResolver {
  PFN_cuGetProcAddress_v12000 v2 = nullptr;
  PFN_cuGetProcAddress_v11030 v1 = nullptr;

  // Returns "" on success, else why the symbol is unavailable.
  std::string resolve(const char* name, void** fn) const {
    *fn = nullptr;
    CUdriverProcAddressQueryResult found = CU_GET_PROC_ADDRESS_SUCCESS;
    CUresult result = v2 ? v2(name, fn, kAbiVersion, CU_GET_PROC_ADDRESS_DEFAULT, &found)
                         : v1(name, fn, kAbiVersion, CU_GET_PROC_ADDRESS_DEFAULT);
    if (result == CUDA_SUCCESS && found == CU_GET_PROC_ADDRESS_SUCCESS && *fn) return "";
    if (found == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT) return "version not sufficient";
    if (found == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND) return "symbol not found";
    if (result == CUDA_ERROR_STUB_LIBRARY) return kStubAnswer;
    return fmt::format("cuGetProcAddress returned {}", static_cast<int>(result));
  }
};

bool find_get_proc_address(LoadState& state, ProcResolver& resolver) {
  resolver.v2 = reinterpret_cast<PFN_cuGetProcAddress_v12000>(
      dlsym(state.handle, "cuGetProcAddress_v2"));
  if (!resolver.v2) {
    resolver.v1 = reinterpret_cast<PFN_cuGetProcAddress_v11030>(
        dlsym(state.handle, "cuGetProcAddress"));
  }
  if (resolver.v2 || resolver.v1) return true;
  state.status = Status::kTooOld;
  state.reason = fmt::format("{} exports no cuGetProcAddress (driver older than CUDA 11.3): {}",
                             kLibraryName, kDriverRemedy);
  return false;
}

// Resolves one entry point; on failure records why and returns false.
template <typename Fn>
bool resolve(LoadState& state, const ProcResolver& resolver, const char* name, Fn& fn) {
  void* raw = nullptr;
  std::string why = resolver.resolve(name, &raw);
  if (why.empty()) {
    fn = reinterpret_cast<Fn>(raw);
    return true;
  }
  state.status = Status::kTooOld;
  if (why == kStubAnswer) {
    // The toolkit's lib64/stubs/libcuda.so links programs but drives nothing; it is found
    // when a stubs folder sits on LD_LIBRARY_PATH.
    state.reason = fmt::format(
        "{} is the CUDA toolkit's stub library (CUDA_ERROR_STUB_LIBRARY), not a driver: remove "
        "the toolkit's lib64/stubs folder from LD_LIBRARY_PATH, or {}",
        kLibraryName, kDriverRemedy);
    return false;
  }
  int version = 0;
  if (state.api.cuDriverGetVersion) state.api.cuDriverGetVersion(&version);
  state.reason = fmt::format(
      "{} (driver API version {}) does not provide {} at the CUDA {}.{} ABI ({}): {}",
      kLibraryName, version, name, kAbiVersion / 1000, kAbiVersion % 1000 / 10, why,
      kDriverRemedy);
  return false;
}

#define MLAJIT_RESOLVE(name) \
  if (!resolve(state, resolver, #name, state.api.name)) return false

// What cuInit and the error and version queries need.
bool resolve_bootstrap(LoadState& state, const ProcResolver& resolver) {
  MLAJIT_RESOLVE(cuDriverGetVersion);
  MLAJIT_RESOLVE(cuGetErrorName);
  MLAJIT_RESOLVE(cuGetErrorString);
  MLAJIT_RESOLVE(cuInit);
  return true;
}

bool resolve_all(LoadState& state, const ProcResolver& resolver) {
  MLAJIT_RESOLVE(cuDeviceGetCount);
  MLAJIT_RESOLVE(cuDeviceGet);
  MLAJIT_RESOLVE(cuDeviceGetName);
  MLAJIT_RESOLVE(cuDeviceGetAttribute);
  MLAJIT_RESOLVE(cuDevicePrimaryCtxRetain);
  MLAJIT_RESOLVE(cuCtxSetCurrent);
  MLAJIT_RESOLVE(cuCtxGetCurrent);
  MLAJIT_RESOLVE(cuCtxGetDevice);
  MLAJIT_RESOLVE(cuCtxSynchronize);
  MLAJIT_RESOLVE(cuLibraryLoadData);
  MLAJIT_RESOLVE(cuLibraryUnload);
  MLAJIT_RESOLVE(cuLibraryGetKernel);
  MLAJIT_RESOLVE(cuKernelGetFunction);
  MLAJIT_RESOLVE(cuFuncSetAttribute);
  MLAJIT_RESOLVE(cuFuncGetAttribute);
  MLAJIT_RESOLVE(cuOccupancyMaxActiveBlocksPerMultiprocessor);
  MLAJIT_RESOLVE(cuLaunchKernelEx);
  MLAJIT_RESOLVE(cuOccupancyMaxActiveClusters);
  MLAJIT_RESOLVE(cuTensorMapEncodeTiled);
  MLAJIT_RESOLVE(cuMemAlloc);
  MLAJIT_RESOLVE(cuMemFree);
  MLAJIT_RESOLVE(cuMemHostAlloc);
  MLAJIT_RESOLVE(cuMemFreeHost);
  MLAJIT_RESOLVE(cuMemcpyHtoD);
  MLAJIT_RESOLVE(cuMemcpyDtoH);
  MLAJIT_RESOLVE(cuMemcpyDtoD);
  MLAJIT_RESOLVE(cuMemcpyHtoDAsync);
  MLAJIT_RESOLVE(cuMemsetD8);
  MLAJIT_RESOLVE(cuMemsetD32Async);
  MLAJIT_RESOLVE(cuStreamCreate);
  MLAJIT_RESOLVE(cuStreamDestroy);
  MLAJIT_RESOLVE(cuStreamSynchronize);
  MLAJIT_RESOLVE(cuStreamGetCtx);
  MLAJIT_RESOLVE(cuEventCreate);
  MLAJIT_RESOLVE(cuEventDestroy);
  MLAJIT_RESOLVE(cuEventRecord);
  MLAJIT_RESOLVE(cuEventSynchronize);
  MLAJIT_RESOLVE(cuEventElapsedTime);
  MLAJIT_RESOLVE(cuStreamBeginCapture);
  MLAJIT_RESOLVE(cuStreamEndCapture);
  MLAJIT_RESOLVE(cuGraphInstantiateWithFlags);
  MLAJIT_RESOLVE(cuGraphLaunch);
  MLAJIT_RESOLVE(cuGraphDestroy);
  MLAJIT_RESOLVE(cuGraphExecDestroy);
  return true;
}

#undef MLAJIT_RESOLVE

void run_cu_init(LoadState& state) {
  CUresult result = state.api.cuInit(0);
  if (result == CUDA_SUCCESS) {
    state.status = Status::kReady;
    return;
  }
  if (result == CUDA_ERROR_NO_DEVICE) {
    state.status = Status::kNoDevices;
    state.reason = fmt::format(
        "the CUDA driver is installed but cuInit found no device ({}): check that a GPU is "
        "attached and visible (nvidia-smi, CUDA_VISIBLE_DEVICES)",
        describe(result));
    return;
  }
  state.status = Status::kInitFailed;
  state.reason = fmt::format("cuInit failed: {}: check the driver installation (nvidia-smi); {}",
                             describe(result), kDriverRemedy);
}

void load(LoadState& state) {
  g_load_attempted.store(true);
  dlerror();
  state.handle = dlopen(kLibraryName, RTLD_NOW | RTLD_LOCAL);
  if (!state.handle) {
    const char* why = dlerror();
    state.status = Status::kNoLibrary;
    state.reason = fmt::format("the CUDA driver library {} could not be loaded ({}): {}",
                               kLibraryName, why ? why : "unknown dlopen error", kDriverRemedy);
    return;
  }
  ProcResolver resolver;
  if (!find_get_proc_address(state, resolver) || !resolve_bootstrap(state, resolver)) return;
  // Error names are usable from here on, even if cuInit fails below.
  g_error_names.store(&state.api, std::memory_order_release);
  run_cu_init(state);
  if (state.status != Status::kReady || !resolve_all(state, resolver)) return;
  g_ready.store(&state.api, std::memory_order_release);
}

const LoadState& loaded_state() {
  static LoadState state;
  static std::once_flag once;
  std::call_once(once, [] {
    load(state);
    if (state.status == Status::kReady) {
      int version = 0;
      state.api.cuDriverGetVersion(&version);
      logger("mlajit.driver")->debug("loaded {} (driver API version {})", kLibraryName, version);
    } else {
      logger("mlajit.driver")->info("CUDA driver unavailable: {}", state.reason);
    }
  });
  return state;
}

}  // namespace

const Api& api() {
  const LoadState& state = loaded_state();
  if (state.status == Status::kReady) return state.api;
  ErrorCode code = state.status == Status::kNoDevices ? ErrorCode::kNoDevice : ErrorCode::kNoDriver;
  throw Error(code, state.reason);
}

const Api& loaded_api() {
  const LoadState& state = loaded_state();
  if (state.status == Status::kReady || state.status == Status::kNoDevices) return state.api;
  throw Error(ErrorCode::kNoDriver, state.reason);
}

const Api* api_if_loaded() noexcept { return g_ready.load(std::memory_order_acquire); }

const Api* error_api_if_loaded() noexcept {
  return g_error_names.load(std::memory_order_acquire);
}

bool load_attempted() noexcept { return g_load_attempted.load(); }

bool driver_without_devices() { return loaded_state().status == Status::kNoDevices; }

std::string driver_unavailable_reason_text() { return loaded_state().reason; }

}  // namespace mlajit::driver::detail
