// DiskCache: the lookup order (memory -> shipped layers -> user layer -> build), in-process
// single flight, the cross-process key lock, and degradation to memory-only. The file format
// lives in cache_entry_format.cpp, the file operations in cache_file_io.cpp, the lock in
// cache_file_lock.cpp, the directory layout in cache_layout.cpp, the environment in
// cache_options.cpp.
#include "jit/disk_cache.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <future>
#include <mutex>
#include <optional>
#include <unordered_map>

#include <unistd.h>

#include <fmt/format.h>

#include "common/logging.h"
#include "jit/cache_entry_format.h"
#include "jit/cache_file_io.h"
#include "jit/cache_file_lock.h"
#include "jit/cache_layout.h"
#include "mlajit/error.h"

namespace mlajit::jit {
namespace {

void validate_key(const CacheKey& key) {
  const bool hex_ok = key.hex.size() == 32 &&
                      std::all_of(key.hex.begin(), key.hex.end(), [](char c) {
                        return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
                      });
  // The hex names a file: a hand-made key must not point anywhere else, nor disagree with
  // its text (the reader checks the text, so a mismatch would be rebuilt forever).
  if (!hex_ok || CacheKey::from_text(key.text).hex != key.hex) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("cache key hex \"{}\" is not the XXH3-128 of its text; build keys "
                            "with CacheKey::from_text",
                            key.hex));
  }
}

CacheListing listing_for(const EntryFile& f, const std::string& layer, const std::string& dir) {
  CacheListing l;
  l.layer = layer;
  l.dir = dir;
  l.path = f.path;
  l.bytes = f.bytes;
  l.last_use_unix = f.mtime_ns / 1000000000;
  std::vector<uint8_t> bytes;
  std::string problem;
  if (read_file_bounded(f.path, kMaxEntryFileBytes, &bytes, &problem) != ReadStatus::kOk) {
    l.problem = problem.empty() ? "file vanished" : problem;
    return l;
  }
  auto entry = decode_cache_entry(bytes, "", &problem);
  if (!entry) {
    l.problem = problem;
    return l;
  }
  l.key_text = entry->key_text;
  l.metadata = entry->metadata;
  if (CacheKey::from_text(entry->key_text).hex != f.hex) {
    l.problem = "the file name is not the hash of the key text inside (entry stored under the "
                "wrong name)";
    return l;
  }
  l.verifies = true;
  return l;
}

// A writer killed between mkstemp and rename leaves its temp file behind. One untouched for an
// hour is not a write in progress (a write takes milliseconds), so it can go.
void remove_abandoned_temp_files(const std::string& dir) {
  const int64_t hour_ago_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                                  std::chrono::system_clock::now().time_since_epoch() -
                                  std::chrono::hours(1))
                                  .count();
  for (const auto& f : scan_temp_files(dir)) {
    if (f.mtime_ns < hour_ago_ns) ::unlink(f.path.c_str());
  }
}

// Entries last used before this (ns since the epoch) are old enough to prune; INT64_MIN when
// no age applies or the age reaches back before the epoch. Computed in seconds: an age of a
// few hundred years would overflow a nanosecond duration.
int64_t age_cutoff_ns(std::optional<std::chrono::seconds> older_than) {
  if (!older_than) return INT64_MIN;
  if (older_than->count() < 0) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("prune: older_than is {} s; expected an age of 0 s or more",
                            older_than->count()));
  }
  const int64_t now_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count();
  constexpr int64_t kNsPerSecond = 1000000000;
  if (older_than->count() >= now_ns / kNsPerSecond) return INT64_MIN;
  return now_ns - older_than->count() * kNsPerSecond;
}

// What a single-flight leader hands its waiters: the entry, or the code and message of the
// error its build raised.
struct BuildOutcome {
  std::optional<CacheEntry> entry;
  ErrorCode error_code;
  std::string error_message;
};

}  // namespace

struct DiskCache::Impl {
  CacheOptions options;
  bool user_writable = false;
  std::shared_ptr<spdlog::logger> log = logger("mlajit.cache");

  mutable std::mutex mutex;  // guards memory, in_flight, stats
  std::unordered_map<std::string, CacheEntry> memory;  // by hex
  std::unordered_map<std::string, std::shared_future<BuildOutcome>> in_flight;
  CacheStats stats;
  std::atomic<bool> write_warned{false};

  void open_user_dir();
  std::optional<CacheEntry> memory_lookup(const CacheKey& key);
  std::optional<CacheEntry> disk_lookup(const CacheKey& key);
  std::optional<CacheEntry> read_layer(const std::string& dir, const CacheKey& key,
                                       bool quarantine_bad);
  CacheEntry load_or_build(const CacheKey& key, const std::function<CacheEntry()>& build);
  CacheEntry build_and_store(const CacheKey& key, const std::function<CacheEntry()>& build);
  void store(const CacheEntry& entry, const CacheKey& key);
  std::optional<CacheFileLock> lock_key(const CacheKey& key);
  Error miss_error(const CacheKey& key) const;
  std::vector<CacheListing> prune(uint64_t max_bytes, std::optional<std::chrono::seconds> older_than);
  void count(uint64_t CacheStats::*counter) {
    std::lock_guard<std::mutex> lock(mutex);
    ++(stats.*counter);
  }
  void log_stats();
};

void DiskCache::Impl::open_user_dir() {
  if (options.user_dir.empty()) {
    log->info("no user cache dir configured: compiled kernels are kept in memory only");
    return;
  }
  std::string problem;
  user_writable = make_directories(options.user_dir, &problem) &&
                  probe_writable(options.user_dir, &problem);
  if (!user_writable) {
    log->warn("cache dir {} is not usable ({}); compiled kernels are kept in memory only and "
              "rebuilt in every process. Set MLAJIT_CACHE_DIR to a writable directory.",
              options.user_dir, problem);
  }
}

std::optional<CacheEntry> DiskCache::Impl::memory_lookup(const CacheKey& key) {
  std::lock_guard<std::mutex> lock(mutex);
  auto it = memory.find(key.hex);
  if (it == memory.end() || it->second.key_text != key.text) return std::nullopt;
  ++stats.memory_hits;
  return it->second;
}

// Reads and verifies one layer's entry. A bad entry in a layer we own is quarantined (so it is
// not re-read forever and can be inspected); in a read-only layer it is only skipped.
std::optional<CacheEntry> DiskCache::Impl::read_layer(const std::string& dir, const CacheKey& key,
                                                      bool quarantine_bad) {
  const std::string path = entry_path(dir, key.hex);
  std::vector<uint8_t> bytes;
  std::string problem;
  const ReadStatus status = read_file_bounded(path, kMaxEntryFileBytes, &bytes, &problem);
  if (status == ReadStatus::kMissing) return std::nullopt;
  if (status == ReadStatus::kUnreadable) {
    log->warn("skipping cache entry {} this process may not read ({}): another account's entry, "
              "or permissions set by hand; it is left in place",
              path, problem);
    return std::nullopt;
  }
  std::optional<CacheEntry> entry;
  if (status == ReadStatus::kOk) entry = decode_cache_entry(bytes, key.text, &problem);
  if (entry) return entry;
  if (!quarantine_bad) {
    log->warn("skipping bad cache entry {} in read-only layer {}: {}", path, dir, problem);
    return std::nullopt;
  }
  std::string move_problem;
  const std::string moved = quarantine_file(path, quarantine_dir(dir), key.hex, &move_problem);
  log->warn("bad cache entry {}: {}; {}; rebuilding", path, problem,
            !moved.empty()          ? "moved to " + moved
            : move_problem.empty() ? std::string("deleted it")
                                   : move_problem);
  count(&CacheStats::bad_entries);
  return std::nullopt;
}

std::optional<CacheEntry> DiskCache::Impl::disk_lookup(const CacheKey& key) {
  for (const auto& dir : options.read_only_dirs) {
    if (auto entry = read_layer(dir, key, /*quarantine_bad=*/false)) {
      count(&CacheStats::disk_hits);
      return entry;
    }
  }
  if (options.user_dir.empty()) return std::nullopt;
  // A user dir we cannot write is still worth reading, as one more read-only layer.
  auto entry = read_layer(options.user_dir, key, /*quarantine_bad=*/user_writable);
  if (!entry) return std::nullopt;
  // The mtime is the last-use time for LRU: a stamp, not a rewrite.
  if (user_writable) touch_last_use(entry_path(options.user_dir, key.hex));
  count(&CacheStats::disk_hits);
  return entry;
}

Error DiskCache::Impl::miss_error(const CacheKey& key) const {
  std::string layers;
  for (const auto& dir : options.read_only_dirs) layers += "shipped " + dir + ", ";
  layers += options.user_dir.empty() ? "no user dir" : "user " + options.user_dir;
  return Error(ErrorCode::kCacheMiss,
               fmt::format("no cache layer holds kernel {} (key: {}); searched memory, {}. "
                           "JIT compiling is off (MLAJIT_NO_JIT / CacheOptions::no_jit): "
                           "precompile it with `mlajit precompile` into one of these "
                           "directories, or unset MLAJIT_NO_JIT",
                           key.hex, key.text, layers));
}

std::optional<CacheFileLock> DiskCache::Impl::lock_key(const CacheKey& key) {
  std::string problem;
  if (!make_directories(lock_dir(options.user_dir), &problem)) {
    log->debug("not locking {}: {}", key.hex, problem);
    return std::nullopt;
  }
  auto lock = CacheFileLock::acquire(lock_path(options.user_dir, key.hex), options.lock_wait);
  if (lock.outcome() == CacheFileLock::Outcome::kTimedOut) {
    log->warn("{}; building {} without the lock (another process may build it too)",
              lock.problem(), key.hex);
  } else if (lock.outcome() == CacheFileLock::Outcome::kUnavailable) {
    log->debug("not locking {}: {}", key.hex, lock.problem());
  }
  return lock;
}

void DiskCache::Impl::store(const CacheEntry& entry, const CacheKey& key) {
  if (!user_writable) return;
  const std::string path = entry_path(options.user_dir, key.hex);
  try {
    std::string problem;
    const std::string shard = path.substr(0, path.find_last_of('/'));
    if (!make_directories(shard, &problem)) throw Error(ErrorCode::kIoError, problem);
    write_file_atomically(path, encode_cache_entry(entry));
  } catch (const std::exception& e) {
    // A failed write costs a rebuild in the next process, never this call its result.
    if (!write_warned.exchange(true)) {
      log->warn("cannot write cache entry {} ({}); keeping it in memory only (further write "
                "failures are logged at debug level)",
                path, e.what());
    } else {
      log->debug("cannot write cache entry {}: {}", path, e.what());
    }
    return;
  }
  // Oldest first, so the entry just written (the newest) is the last to go.
  if (options.max_bytes > 0) prune(options.max_bytes, std::nullopt);
}

CacheEntry DiskCache::Impl::build_and_store(const CacheKey& key,
                                            const std::function<CacheEntry()>& build) {
  const auto start = std::chrono::steady_clock::now();
  CacheEntry entry = build();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  entry.key_text = key.text;  // the cache owns the key; a builder need not fill it in
  {
    std::lock_guard<std::mutex> lock(mutex);
    ++stats.builds;
    stats.build_seconds += seconds;
  }
  log->debug("built {} in {:.3f} s ({} bytes)", key.hex, seconds, entry.payload.size());
  store(entry, key);
  return entry;
}

CacheEntry DiskCache::Impl::load_or_build(const CacheKey& key,
                                          const std::function<CacheEntry()>& build) {
  if (auto entry = disk_lookup(key)) return *entry;
  if (options.no_jit) {
    count(&CacheStats::misses);
    throw miss_error(key);
  }
  const std::optional<CacheFileLock> lock =
      user_writable ? lock_key(key) : std::optional<CacheFileLock>();
  // Another process may have built and written it while we waited.
  if (lock && lock->held()) {
    if (auto entry = read_layer(options.user_dir, key, /*quarantine_bad=*/true)) {
      count(&CacheStats::disk_hits);
      return *entry;
    }
  }
  count(&CacheStats::misses);
  return build_and_store(key, build);  // the lock, if held, is released after the write
}

void DiskCache::Impl::log_stats() {
  if (!log->should_log(spdlog::level::debug)) return;
  const CacheStats s = [&] {
    std::lock_guard<std::mutex> lock(mutex);
    return stats;
  }();
  log->debug("stats: memory_hits={} disk_hits={} misses={} builds={} build_seconds={:.3f} "
             "bad_entries={}",
             s.memory_hits, s.disk_hits, s.misses, s.builds, s.build_seconds, s.bad_entries);
}

DiskCache::DiskCache(CacheOptions options) : impl_(std::make_unique<Impl>()) {
  impl_->options = std::move(options);
  impl_->open_user_dir();
}

DiskCache::~DiskCache() {
  if (impl_) impl_->log_stats();
}

CacheEntry DiskCache::get_or_build(const CacheKey& key, const std::function<CacheEntry()>& build) {
  validate_key(key);
  if (auto entry = impl_->memory_lookup(key)) return *entry;

  // Single flight: the first thread to miss becomes the leader; later threads wait on its
  // shared future and receive its entry or a copy of its error. The error travels as a value,
  // not as a shared exception object: an exception_ptr rethrown on several threads is freed
  // by whichever drops it last, through a refcount the sanitizers cannot see.
  std::promise<BuildOutcome> promise;
  std::shared_future<BuildOutcome> waiting;
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    auto mem = impl_->memory.find(key.hex);  // stored between our lookup and this lock?
    if (mem != impl_->memory.end() && mem->second.key_text == key.text) {
      ++impl_->stats.memory_hits;
      return mem->second;
    }
    auto it = impl_->in_flight.find(key.hex);
    if (it != impl_->in_flight.end()) {
      waiting = it->second;
    } else {
      impl_->in_flight.emplace(key.hex, promise.get_future().share());
    }
  }
  if (waiting.valid()) {
    const BuildOutcome& outcome = waiting.get();
    if (!outcome.entry) throw Error(outcome.error_code, outcome.error_message);
    impl_->count(&CacheStats::memory_hits);
    return *outcome.entry;
  }

  // Forget a failed flight so the next call retries instead of replaying the error.
  const auto fail = [&](ErrorCode code, const std::string& message) {
    {
      std::lock_guard<std::mutex> lock(impl_->mutex);
      impl_->in_flight.erase(key.hex);
    }
    promise.set_value(BuildOutcome{std::nullopt, code, message});
  };
  try {
    CacheEntry entry = impl_->load_or_build(key, build);
    {
      std::lock_guard<std::mutex> lock(impl_->mutex);
      impl_->memory[key.hex] = entry;
      impl_->in_flight.erase(key.hex);
    }
    promise.set_value(BuildOutcome{entry, ErrorCode::kInternal, {}});
    impl_->log_stats();
    return entry;
  } catch (const Error& e) {
    fail(e.code(), e.what());
    throw;
  } catch (const std::exception& e) {
    fail(ErrorCode::kInternal, fmt::format("building cache entry {} failed: {}", key.hex, e.what()));
    throw;
  } catch (...) {
    fail(ErrorCode::kInternal, fmt::format("building cache entry {} threw a non-standard exception", key.hex));
    throw;
  }
}

std::optional<CacheEntry> DiskCache::lookup(const CacheKey& key) {
  validate_key(key);
  if (auto entry = impl_->memory_lookup(key)) return entry;
  auto entry = impl_->disk_lookup(key);
  std::lock_guard<std::mutex> lock(impl_->mutex);
  if (entry) {
    impl_->memory[key.hex] = *entry;
  } else {
    ++impl_->stats.misses;
  }
  return entry;
}

std::vector<CacheListing> DiskCache::list() const {
  std::vector<CacheListing> out;
  for (const auto& dir : impl_->options.read_only_dirs) {
    for (const auto& f : scan_entry_files(dir)) out.push_back(listing_for(f, "shipped", dir));
  }
  const std::string& user = impl_->options.user_dir;
  if (!user.empty()) {
    for (const auto& f : scan_entry_files(user)) out.push_back(listing_for(f, "user", user));
  }
  return out;
}

std::vector<CacheListing> DiskCache::prune(uint64_t max_bytes,
                                           std::optional<std::chrono::seconds> older_than) {
  return impl_->prune(max_bytes, older_than);
}

std::vector<CacheListing> DiskCache::Impl::prune(uint64_t max_bytes,
                                                 std::optional<std::chrono::seconds> older_than) {
  std::vector<CacheListing> removed;
  const std::string& dir = options.user_dir;
  if (dir.empty() || !user_writable) return removed;  // shipped layers: never
  remove_abandoned_temp_files(dir);
  auto files = scan_entry_files(dir);
  std::sort(files.begin(), files.end(),
            [](const EntryFile& a, const EntryFile& b) { return a.mtime_ns < b.mtime_ns; });
  uint64_t total = 0;
  for (const auto& f : files) total += f.bytes;
  const int64_t cutoff_ns = age_cutoff_ns(older_than);
  for (const auto& f : files) {  // oldest first
    if (total <= max_bytes && f.mtime_ns >= cutoff_ns) continue;
    CacheListing l = listing_for(f, "user", dir);
    if (::unlink(f.path.c_str()) != 0) {
      // Another process pruning the same directory got there first: the bytes are gone all
      // the same, and counting them keeps this prune from evicting newer entries for nothing.
      if (errno == ENOENT) {
        total -= f.bytes;
        continue;
      }
      log->warn("prune: cannot remove {}: {}", f.path, errno_text(errno));
      continue;
    }
    total -= f.bytes;
    removed.push_back(std::move(l));
  }
  if (!removed.empty()) {
    log->debug("pruned {} entries from {}; {} bytes remain", removed.size(), dir, total);
  }
  return removed;
}

CacheStats DiskCache::stats() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return impl_->stats;
}

const CacheOptions& DiskCache::options() const { return impl_->options; }

bool DiskCache::user_dir_writable() const { return impl_->user_writable; }

}  // namespace mlajit::jit
