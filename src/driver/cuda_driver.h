#pragma once
// The CUDA Driver API, loaded with dlopen("libcuda.so.1") on first use and resolved through
// cuGetProcAddress at the CUDA 13 ABI (PFN_*_v13000 typedefs). Nothing here runs at library
// load time: without a driver or a GPU the first call throws Error(kNoDriver / kNoDevice).
#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace mlajit::driver {

struct DeviceInfo {
  int ordinal = 0;
  std::string name;
  int cc_major = 0, cc_minor = 0;
  int sm_count = 0;
  int smem_per_sm = 0;             // CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR
  int smem_per_block_optin = 0;    // CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN
  int l2_bytes = 0;
  bool cooperative_launch = false;
  std::string arch() const;        // "sm_90" (no "a" suffix)
};

// Throws Error(kCudaError) naming the call and the CUDA error name/string when result != 0.
void check(CUresult result, const char* call);
// For frees and unloads in destructors, which must not throw: logs a failure at warn level,
// except CUDA_ERROR_DEINITIALIZED (the driver is shutting down with the process and has
// released everything already), at debug level.
void warn_in_destructor(CUresult result, const char* call) noexcept;

int driver_version();            // cuDriverGetVersion; throws kNoDriver without a driver
int device_count();              // 0 is possible; throws kNoDriver without a driver
bool driver_available() noexcept;   // true when libcuda loaded and cuInit succeeded
std::string driver_unavailable_reason();  // why not, "" when available
DeviceInfo device_info(int ordinal);      // throws kNoDevice for a bad ordinal

// Makes the device's primary context current on the calling thread (retained once per
// process per device and never released).
void set_current_device(int ordinal);
int current_device();  // ordinal of the current context's device; throws if none

// A loaded cubin/PTX image, context-independent (cuLibraryLoadData). Functions are resolved
// per device. Loading checks the image's arch against the device (a wrong-arch cubin loads
// with CUDA_SUCCESS and only fails at cuLibraryGetKernel; we report that as the load error).
class Function;
class Library {
 public:
  explicit Library(const std::vector<uint8_t>& image);
  ~Library();
  Library(const Library&) = delete;
  Library& operator=(const Library&) = delete;
  // The kernel `lowered_name` as a function on device `ordinal`, with its dynamic shared
  // memory limit raised to `dynamic_smem_bytes`. Cached per device.
  Function function(const std::string& lowered_name, int ordinal, int dynamic_smem_bytes);

 private:
  CUlibrary library_ = nullptr;
  // Per (lowered name, device ordinal): the function and the dynamic-smem attribute set on it.
  struct CachedFunction {
    CUfunction function = nullptr;
    int dynamic_smem_attribute = 0;
  };
  std::mutex mutex_;
  std::map<std::pair<std::string, int>, CachedFunction> functions_;
};

// One launch through cuLaunchKernelEx. Each feature below becomes a launch attribute only
// when asked for, so a plain launch stays the call it always was.
struct LaunchConfig {
  unsigned grid_x = 1, grid_y = 1, grid_z = 1;
  unsigned block_x = 1, block_y = 1, block_z = 1;
  unsigned dynamic_smem_bytes = 0;
  CUstream stream = nullptr;
  // Every block co-resident (CU_LAUNCH_ATTRIBUTE_COOPERATIVE): what a grid barrier needs.
  bool cooperative = false;
  // Thread block clusters (sm_90+, CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION): the blocks of a
  // cluster run at once on one GPC and can read each other's shared memory (DSMEM) and share
  // TMA multicasts. 1x1x1 is no cluster. Each grid dimension must be a multiple of its cluster
  // dimension; above 8 blocks the launch sets CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED
  // on the function (sm_90 allows 16).
  unsigned cluster_x = 1, cluster_y = 1, cluster_z = 1;
  // Programmatic dependent launch (sm_90+, CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION):
  // this kernel may start while the previous kernel in the stream is still running, once
  // that one has executed griddepcontrol.launch_dependents in every block; it must execute
  // griddepcontrol.wait before it reads what the previous kernel writes. Hides the launch
  // latency and prologue of back-to-back kernels.
  bool programmatic_stream_serialization = false;
};

class Function {
 public:
  Function() = default;
  Function(CUfunction function, int ordinal, int dynamic_smem_bytes)
      : function_(function), ordinal_(ordinal), dynamic_smem_bytes_(dynamic_smem_bytes) {}
  CUfunction handle() const { return function_; }
  int device() const { return ordinal_; }
  // Blocks of `block_threads` threads that fit on one SM with `dynamic_smem_bytes`.
  int max_active_blocks_per_sm(int block_threads, int dynamic_smem_bytes) const;
  // Clusters of `config`'s cluster dims (block size, shared memory) that fit on the whole
  // device at once (cuOccupancyMaxActiveClusters): the co-residency bound of a cooperative
  // cluster launch, since clusters must fit inside one GPC and blocks-per-SM times SMs
  // overstates it. Grid dims and the other attributes are ignored.
  int max_active_clusters(const LaunchConfig& config) const;
  int num_registers() const;
  int local_bytes() const;  // spills + stack per thread
  // Launches with kernel params `args` (array of pointers to each argument). A cooperative
  // launch whose grid cannot be co-resident is refused with an error naming both causes
  // (grid too large / smem above the attribute); for a clustered one the bound is
  // max_active_clusters x blocks per cluster. A grid that is not a multiple of the cluster
  // dims, or clusters on a device before sm_90, are refused before anything is queued.
  void launch(const LaunchConfig& config, void** args) const;

 private:
  CUfunction function_ = nullptr;
  int ordinal_ = -1;
  int dynamic_smem_bytes_ = 0;
};

// RAII device memory / pinned host memory / stream / event, for the library, tests and bench.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes);  // on the current device
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  CUdeviceptr ptr() const { return ptr_; }
  void* data() const { return reinterpret_cast<void*>(ptr_); }
  size_t size() const { return bytes_; }

 private:
  CUdeviceptr ptr_ = 0;
  size_t bytes_ = 0;
};

class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  explicit PinnedBuffer(size_t bytes);
  ~PinnedBuffer();
  PinnedBuffer(PinnedBuffer&& other) noexcept;
  PinnedBuffer& operator=(PinnedBuffer&& other) noexcept;
  void* data() const { return ptr_; }
  size_t size() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

void memcpy_htod(CUdeviceptr dst, const void* src, size_t bytes);
void memcpy_dtoh(void* dst, CUdeviceptr src, size_t bytes);
void memcpy_dtod(CUdeviceptr dst, CUdeviceptr src, size_t bytes);
void memcpy_htod_async(CUdeviceptr dst, const void* src, size_t bytes, CUstream stream);
void memset_d8(CUdeviceptr dst, uint8_t value, size_t bytes);
void memset_d32_async(CUdeviceptr dst, uint32_t value, size_t count, CUstream stream);
void stream_synchronize(CUstream stream);
void context_synchronize();
CUcontext stream_context(CUstream stream);  // the context a stream belongs to
// True when `stream` may carry work for device `ordinal`: the legacy/per-thread default
// streams (nullptr, 1, 2) always may, another stream only if it was made in the device's
// primary context.
bool stream_on_device(CUstream stream, int ordinal);

class Stream {
 public:
  Stream();  // non-blocking stream on the current context
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  CUstream get() const { return stream_; }

 private:
  CUstream stream_ = nullptr;
};

class Event {
 public:
  Event();
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  void record(CUstream stream);
  float elapsed_ms_since(const Event& start) const;  // synchronizes on this event
  void synchronize() const;  // waits until the recorded work has finished
  CUevent get() const { return event_; }

 private:
  CUevent event_ = nullptr;
};

// CUDA graph capture helpers for tests: begin/end capture on a stream, instantiate, launch.
class Graph {
 public:
  static void begin_capture(CUstream stream);
  static Graph end_capture(CUstream stream);
  Graph() = default;
  ~Graph();
  Graph(Graph&& other) noexcept;
  Graph& operator=(Graph&& other) noexcept;
  void launch(CUstream stream) const;

 private:
  CUgraph graph_ = nullptr;
  CUgraphExec exec_ = nullptr;
};

}  // namespace mlajit::driver
