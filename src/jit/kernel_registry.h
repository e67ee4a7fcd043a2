#pragma once
// KernelRegistry: KernelSpec -> loaded kernel, once per process per device. Follows the one
// path of the design: spec -> source (codegen) -> cubin (NVRTC) -> cache (disk) -> module
// (driver) -> function. Compiling needs no GPU; loading needs the driver.
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "driver/cuda_driver.h"
#include "jit/disk_cache.h"
#include "jit/isolation_options.h"
#include "jit/kernel_program.h"
#include "mlajit/kernel_spec.h"

namespace mlajit::jit {

// What a launch needs besides the cubin; stored with it in the cache entry.
struct KernelMetadata {
  std::string spec_text;
  std::string lowered_name;
  LaunchGeometry geometry;  // recorded as built; loads take codegen's, which must agree
  double compile_seconds = 0;

  std::string serialize() const;
  // Throws Error(kInternal) naming the field when the text is not a valid record.
  static KernelMetadata parse(const std::string& text);
};

struct CompiledKernel {
  CacheKey key;
  KernelMetadata metadata;
  std::vector<uint8_t> image;
  bool from_cache = false;  // false when this call compiled it
};

struct LoadedKernel {
  KernelMetadata metadata;
  std::shared_ptr<driver::Library> library;
  driver::Function function;
};

class KernelRegistry {
 public:
  // The process-wide registry with CacheOptions::from_environment() and
  // IsolationOptions::from_environment().
  static KernelRegistry& instance();
  explicit KernelRegistry(CacheOptions options,
                          IsolationOptions isolation = IsolationOptions::from_environment());

  // The cache key of a spec: hash of (spec text, source hash, NVRTC options, NVRTC version,
  // library ABI version). Needs no GPU and no NVRTC.
  CacheKey key_for(const KernelSpec& spec) const;

  // Cache lookup, else compile and store. No GPU needed. A spec this registry has compiled
  // before is served from memory without codegen, so edits under MLAJIT_KERNEL_DIR take effect
  // in the next process. A build runs where `mode` says (kDefault: this registry's
  // IsolationOptions::mode): the mode is per request, and concurrent requests for one key share
  // the build of the first, whatever mode the others asked for (the cubin is the same).
  CompiledKernel compile(const KernelSpec& spec, CompileMode mode = CompileMode::kDefault);

  // The kernel loaded on `device` (an ordinal), from memory after the first call.
  std::shared_ptr<const LoadedKernel> load(const KernelSpec& spec, int device,
                                           CompileMode mode = CompileMode::kDefault);

  DiskCache& cache() { return *cache_; }
  const IsolationOptions& isolation() const { return isolation_; }
  // Calls of compile() and load() served by this registry's own memory, before the cache is
  // asked (its memory_hits count only what reaches it).
  uint64_t memory_hits() const { return memory_hits_.load(std::memory_order_relaxed); }

 private:
  std::unique_ptr<DiskCache> cache_;
  IsolationOptions isolation_;
  std::mutex mutex_;
  std::map<std::pair<std::string, int>, std::shared_ptr<const LoadedKernel>> loaded_;
  std::map<std::string, CompiledKernel> compiled_;  // by spec text
  std::atomic<uint64_t> memory_hits_{0};
};

// Bumped whenever the cache entry's meaning changes without the kernel source changing.
// 2: the metadata records the whole launch geometry (cluster dims, cooperative).
constexpr int kLibraryAbiVersion = 2;

}  // namespace mlajit::jit
