#pragma once
// Content-addressed, checksummed cubin store on disk, in layers:
//   read-only shipped caches ($MLAJIT_CACHE_PATH, ':'-separated)
//   -> the user cache ($MLAJIT_CACHE_DIR, else $XDG_CACHE_HOME/mlajit, else ~/.cache/mlajit)
//   -> build (the caller's compile function).
// One file per entry: a header (magic, format version, key text, payload size, XXH3-64
// payload checksum, metadata) then the payload. Entries are verified before use; a bad one is
// logged, moved to <dir>/quarantine/ and rebuilt. Writes go to a unique temp file, are
// fsync'd and renamed into place. One thread per key builds inside a process; a per-key lock
// file (flock) keeps processes from building the same key twice, with a bounded wait.
// The directory layout (<dir>/<hex[0:2]>/<hex>.cubin, locks/, quarantine/) is in cache_layout.h.
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace mlajit::jit {

// The hashed identity of an entry. `text` is the full human-readable key material (spec text,
// source hash, options, NVRTC version, ABI version); `hex` is its XXH3-128, used as file name.
struct CacheKey {
  std::string text;
  std::string hex;
  static CacheKey from_text(const std::string& text);
  uint64_t seed() const;  // low 64 bits of the hash: the -frandom-seed value
};

struct CacheEntry {
  std::string key_text;
  std::vector<uint8_t> payload;  // the cubin (or PTX)
  std::string metadata;          // opaque to the cache (launch metadata, serialized by caller)
};

struct CacheOptions {
  std::vector<std::string> read_only_dirs;  // shipped layers, searched first, in order
  std::string user_dir;                     // writable layer; "" = memory only
  uint64_t max_bytes = 0;                   // user-layer budget, 0 = unlimited
  bool no_jit = false;                      // a miss in every layer is an error
  std::chrono::milliseconds lock_wait{120000};  // bound on waiting for another process
  // Reads MLAJIT_CACHE_PATH, MLAJIT_CACHE_DIR, XDG_CACHE_HOME, HOME, MLAJIT_CACHE_MAX_BYTES,
  // MLAJIT_NO_JIT.
  static CacheOptions from_environment();
};

struct CacheStats {
  uint64_t memory_hits = 0;
  uint64_t disk_hits = 0;
  uint64_t misses = 0;
  uint64_t builds = 0;
  double build_seconds = 0;
  uint64_t bad_entries = 0;  // quarantined
};

struct CacheListing {
  std::string layer;       // "shipped" or "user"
  std::string dir;
  std::string path;
  std::string key_text;    // "" when the header could not be read
  std::string metadata;
  uint64_t bytes = 0;      // file size
  int64_t last_use_unix = 0;
  bool verifies = false;
  std::string problem;     // why it does not verify
};

class DiskCache {
 public:
  explicit DiskCache(CacheOptions options);
  ~DiskCache();

  // Memory, then each disk layer, then `build` (called at most once per key per process
  // at a time, and at most once across processes sharing the user dir, unless the lock
  // wait times out). Throws Error(kCacheMiss) on a miss when no_jit is set. The thread that
  // ran `build` rethrows what it threw; threads that waited on it get an Error of the same
  // code and message (kInternal for a non-Error exception). A user dir that cannot be
  // written degrades to memory with a warning.
  CacheEntry get_or_build(const CacheKey& key, const std::function<CacheEntry()>& build);

  // Disk/memory lookup only, no build.
  std::optional<CacheEntry> lookup(const CacheKey& key);

  std::vector<CacheListing> list() const;
  // Evicts least-recently-used user-layer entries until the layer holds <= max_bytes (and
  // entries last used before `older_than`, when given). Returns what was removed.
  // max_bytes = 0 empties the layer; pass UINT64_MAX to prune by age only. Also removes temp
  // files abandoned (untouched for an hour) by writers that died before their rename.
  std::vector<CacheListing> prune(uint64_t max_bytes,
                                  std::optional<std::chrono::seconds> older_than = std::nullopt);

  CacheStats stats() const;
  const CacheOptions& options() const;
  bool user_dir_writable() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The entry file format, exposed for tests and fuzzing: serialize, and parse+verify.
std::vector<uint8_t> encode_cache_entry(const CacheEntry& entry);
// Returns nullopt and fills `problem` when the bytes are not a valid entry for `expected_key`
// (pass "" to accept any key).
std::optional<CacheEntry> decode_cache_entry(const std::vector<uint8_t>& bytes,
                                             const std::string& expected_key_text,
                                             std::string* problem);

}  // namespace mlajit::jit
