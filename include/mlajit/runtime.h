#pragma once
// Process-wide queries and actions beside BatchMlaAttention: the library version, the CUDA
// devices, the kernel families, the kernel (family, tile config, spec) a shape gets, the
// kernel cache, and compiling ahead of time.
// Every function is safe to call from any thread. Failures throw mlajit::Error; without a
// CUDA driver the device functions throw Error(kNoDriver) with the reason in the message,
// while version(), compiler_info(), kernel_families(), tile_for_arch(), cache_stats() and
// precompile() need no GPU at all.
#include <cstdint>
#include <string>
#include <vector>

#include "mlajit/attention.h"
#include "mlajit/export.h"
#include "mlajit/kernel_spec.h"
#include "mlajit/version.h"

namespace mlajit {

// The version of the loaded library, e.g. "0.2.0" (compare MLAJIT_VERSION_STRING, the
// version of the headers the caller was compiled with).
MLAJIT_API const char* version() noexcept;

// One CUDA device as the library sees it.
struct DeviceSummary {
  int ordinal = 0;
  std::string name;                 // e.g. "NVIDIA H200"
  std::string arch;                 // NVRTC target of its kernels, e.g. "sm_90"
  int cc_major = 0, cc_minor = 0;   // compute capability
  int sm_count = 0;
  int smem_per_sm = 0;              // bytes of shared memory per multiprocessor
  int smem_per_block_optin = 0;     // bytes one block may opt into
  bool cooperative_launch = false;  // false: BatchMlaAttention uses the two-launch path
  int l2_bytes = 0;                 // L2 cache size (appended in 0.2.0)
};

// True when libcuda.so.1 loads and cuInit succeeds; never throws.
MLAJIT_API bool driver_available() noexcept;
// Why the driver is unusable ("" when it is usable); never throws.
MLAJIT_API std::string driver_unavailable_reason() noexcept;
// The CUDA version the driver supports, major * 1000 + minor * 10 (13000 for 13.0).
// Throws Error(kNoDriver) without a driver.
MLAJIT_API int driver_version();

// NVRTC, the run-time compiler (libnvrtc, loaded on first use): whether this host can compile
// kernels, or only run them from a cache.
struct CompilerInfo {
  bool available = false;
  std::string unavailable_reason;   // what was tried and why it failed; "" when available
  std::string library_path;         // the file that was loaded
  int version = 0;                  // major * 1000 + minor * 10 (13000 for 13.0)
  std::vector<int> supported_archs; // compute capabilities it targets, e.g. {75, 80, ..., 121}
};
// Loads NVRTC on the first call; a missing NVRTC is `available = false`, not an error.
MLAJIT_API CompilerInfo compiler_info();
// Visible devices (0 is possible). Throws Error(kNoDriver) without a driver.
MLAJIT_API int device_count();
MLAJIT_API std::vector<DeviceSummary> devices();
// Throws Error(kNoDevice) for an ordinal outside [0, device_count()).
MLAJIT_API DeviceSummary device_summary(int ordinal);

// A kernel family: one way of computing MLA on a class of GPUs (MlaOptions::kernel).
struct KernelFamilyInfo {
  std::string name;                    // e.g. "portable"; also the spec text's first field
  std::string summary;                 // one line
  std::vector<std::string> head_dims;  // the CKV/KPE pairs it computes, e.g. "512/64"
  std::vector<std::string> archs;      // the profiled archs it serves, e.g. "sm_80"
};
// Every family, in the order `auto` prefers them.
MLAJIT_API std::vector<KernelFamilyInfo> kernel_families();
// Throws Error(kInvalidArgument) listing the known names.
MLAJIT_API KernelFamilyInfo kernel_family(const std::string& name);

// The kernel a BatchMlaAttention(shape, options) gets: its family, tile config (shared-memory
// tier) and spec. Of the options, `kernel` and `force_tier` count; `device` does not.
struct TileChoice {
  std::string family;         // e.g. "portable"
  TileConfig tile;
  int tier = 0;               // 1 (largest) .. 3; 0 when not one of the family's tiers
  int shared_bytes = 0;       // dynamic shared memory of one CTA
  std::string spec_text;      // KernelSpec::text() of the kernel
};
// On device `ordinal` (from its compute capability and shared-memory limits). Throws as
// device_summary(), Error(kInvalidArgument) for an unknown family name, and
// Error(kUnsupported) saying why for a shape no (or the asked) family serves there.
MLAJIT_API TileChoice tile_for(int ordinal, const MlaShape& shape, const MlaOptions& options = {});
// For an arch from the built-in device profiles ("sm_80", "sm_90a", "90", ...), no GPU needed.
// Throws as tile_for, and Error(kInvalidArgument) listing the known archs.
MLAJIT_API TileChoice tile_for_arch(const std::string& arch, const MlaShape& shape,
                                    const MlaOptions& options = {});

// The process-wide kernel cache: where it lives and what it has done so far.
struct CacheSummary {
  uint64_t memory_hits = 0;    // kernels served from this process's memory
  uint64_t disk_hits = 0;      // kernels read from a cache directory
  uint64_t misses = 0;         // kernels that were in no layer
  uint64_t builds = 0;         // NVRTC compiles done by this process
  double build_seconds = 0;    // their total wall time
  uint64_t bad_entries = 0;    // damaged entries quarantined and rebuilt
  std::string user_dir;        // writable layer ($MLAJIT_CACHE_DIR ...); "" = memory only
  bool user_dir_writable = false;
  std::vector<std::string> read_only_dirs;  // shipped layers ($MLAJIT_CACHE_PATH)
  bool no_jit = false;         // $MLAJIT_NO_JIT: a miss is an error
};
// The cache reads its environment once, on the first call that needs it (this one, a
// precompile() or the first BatchMlaAttention).
MLAJIT_API CacheSummary cache_stats();

struct PrecompileResult {
  std::string key;            // cache key (hex), the entry's file name
  bool from_cache = false;    // true: it was cached already, nothing was compiled
  uint64_t bytes = 0;         // size of the cubin (or PTX)
  double compile_seconds = 0; // of the compile that built it (maybe in another process)
};
// Compiles `spec` into the kernel cache unless it is there already. Needs NVRTC, no GPU.
// Throws Error(kNoCompiler), Error(kCompileError) with the NVRTC log, Error(kCacheMiss)
// under MLAJIT_NO_JIT, Error(kIoError) for an unusable cache directory.
MLAJIT_API PrecompileResult precompile(const KernelSpec& spec);
// The same from KernelSpec::text(); throws Error(kInvalidArgument) naming a bad field.
MLAJIT_API PrecompileResult precompile(const std::string& spec_text);

}  // namespace mlajit
