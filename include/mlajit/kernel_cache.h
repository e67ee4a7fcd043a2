#pragma once
// KernelCache: one set of kernel cache directories, opened on its own, to fill, inspect and
// prune them (a cache to ship, a build step, an admin tool). The process-wide cache that
// BatchMlaAttention and precompile() (runtime.h) use is configured by the environment once;
// a KernelCache does not change it, and may look at other directories.
// Layers: read-only shipped directories, searched first, then one writable user directory.
// Entries are checksummed files named by their cache key; see docs/API.md.
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "mlajit/export.h"
#include "mlajit/kernel_spec.h"
#include "mlajit/runtime.h"

namespace mlajit {

struct CacheSettings {
  std::vector<std::string> read_only_dirs;  // shipped layers, searched first, in order
  std::string user_dir;                     // the writable layer; "" = memory only
  uint64_t max_bytes = 0;                   // budget of the user layer (LRU); 0 = unlimited
  bool no_jit = false;                      // a miss in every layer is an error, not a compile
  int64_t lock_wait_ms = 120000;            // bound on waiting for another process's build

  // What the environment says, read now: MLAJIT_CACHE_PATH, MLAJIT_CACHE_DIR (else
  // $XDG_CACHE_HOME/mlajit, else ~/.cache/mlajit), MLAJIT_CACHE_MAX_BYTES, MLAJIT_NO_JIT.
  // Throws Error(kInvalidArgument) naming a variable with a bad value.
  MLAJIT_API static CacheSettings from_environment();
};

// One entry file of a layer.
struct CacheEntryInfo {
  std::string spec_text;     // KernelSpec::text() of the kernel; "" when the header is unreadable
  std::string layer;         // "shipped" or "user"
  std::string dir;           // the layer's directory
  std::string path;          // the file
  uint64_t bytes = 0;        // file size
  int64_t last_use_unix = 0; // last use (file time), seconds since the epoch
  bool verifies = false;     // header, checksum and file name check out
  std::string problem;       // why not, when it does not verify
};

class MLAJIT_API KernelCache {
 public:
  // Creates a user directory that does not exist; one that cannot be written degrades to
  // memory with a warning (user_dir_writable() says so).
  explicit KernelCache(const CacheSettings& settings);
  ~KernelCache();
  KernelCache(KernelCache&&) noexcept;
  KernelCache& operator=(KernelCache&&) noexcept;

  const CacheSettings& settings() const;
  bool user_dir_writable() const;

  // Every entry of every layer, shipped layers first.
  std::vector<CacheEntryInfo> list() const;

  // Removes least-recently-used entries of the user layer until it holds at most `max_bytes`
  // (0 empties it), and every entry last used longer ago than `older_than`. Shipped layers are
  // never touched. Returns what was removed.
  std::vector<CacheEntryInfo> prune(uint64_t max_bytes,
                                    std::optional<std::chrono::seconds> older_than = std::nullopt);

  // As precompile() of runtime.h, into these layers: an entry found in any layer is not
  // rebuilt (from_cache), a build goes to the user layer. Needs NVRTC for a build, no GPU.
  // Safe to call from several threads at once.
  PrecompileResult precompile(const KernelSpec& spec);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mlajit
