// KernelCache of the public API: a kernel registry of its own over the asked layers, so that
// compiling into a directory to ship, listing and pruning never touch the process-wide cache.
#include "mlajit/kernel_cache.h"

#include <sstream>

#include "api/precompile_result.h"
#include "jit/kernel_registry.h"

namespace mlajit {
namespace {

jit::CacheOptions internal_options(const CacheSettings& settings) {
  jit::CacheOptions options;
  options.read_only_dirs = settings.read_only_dirs;
  options.user_dir = settings.user_dir;
  options.max_bytes = settings.max_bytes;
  options.no_jit = settings.no_jit;
  options.lock_wait = std::chrono::milliseconds(settings.lock_wait_ms);
  return options;
}

CacheSettings public_settings(const jit::CacheOptions& options) {
  CacheSettings settings;
  settings.read_only_dirs = options.read_only_dirs;
  settings.user_dir = options.user_dir;
  settings.max_bytes = options.max_bytes;
  settings.no_jit = options.no_jit;
  settings.lock_wait_ms = options.lock_wait.count();
  return settings;
}

// The "spec=" line of an entry's key text (KernelRegistry::key_for writes it first).
std::string spec_of_key_text(const std::string& key_text) {
  std::istringstream lines(key_text);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("spec=", 0) == 0) return line.substr(5);
  }
  return "";
}

CacheEntryInfo entry_info(const jit::CacheListing& listing) {
  CacheEntryInfo info;
  info.spec_text = spec_of_key_text(listing.key_text);
  info.layer = listing.layer;
  info.dir = listing.dir;
  info.path = listing.path;
  info.bytes = listing.bytes;
  info.last_use_unix = listing.last_use_unix;
  info.verifies = listing.verifies;
  info.problem = listing.problem;
  return info;
}

std::vector<CacheEntryInfo> entry_infos(const std::vector<jit::CacheListing>& listings) {
  std::vector<CacheEntryInfo> infos;
  for (const auto& listing : listings) infos.push_back(entry_info(listing));
  return infos;
}

}  // namespace

CacheSettings CacheSettings::from_environment() {
  return public_settings(jit::CacheOptions::from_environment());
}

struct KernelCache::Impl {
  explicit Impl(const CacheSettings& asked)
      : registry(internal_options(asked)), settings(public_settings(registry.cache().options())) {}
  jit::KernelRegistry registry;
  CacheSettings settings;  // as the cache took them
};

KernelCache::KernelCache(const CacheSettings& settings)
    : impl_(std::make_unique<Impl>(settings)) {}
KernelCache::~KernelCache() = default;
KernelCache::KernelCache(KernelCache&&) noexcept = default;
KernelCache& KernelCache::operator=(KernelCache&&) noexcept = default;

const CacheSettings& KernelCache::settings() const { return impl_->settings; }

bool KernelCache::user_dir_writable() const {
  return impl_->registry.cache().user_dir_writable();
}

std::vector<CacheEntryInfo> KernelCache::list() const {
  return entry_infos(impl_->registry.cache().list());
}

std::vector<CacheEntryInfo> KernelCache::prune(uint64_t max_bytes,
                                               std::optional<std::chrono::seconds> older_than) {
  return entry_infos(impl_->registry.cache().prune(max_bytes, older_than));
}

PrecompileResult KernelCache::precompile(const KernelSpec& spec) {
  return precompile_result(impl_->registry.compile(spec));
}

}  // namespace mlajit
