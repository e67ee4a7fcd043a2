// cache_stats / precompile of the public runtime API, on the process-wide kernel registry.
#include "api/precompile_result.h"
#include "jit/kernel_registry.h"
#include "mlajit/runtime.h"

namespace mlajit {

CacheSummary cache_stats() {
  jit::KernelRegistry& registry = jit::KernelRegistry::instance();
  jit::DiskCache& cache = registry.cache();
  const jit::CacheStats stats = cache.stats();
  CacheSummary summary;
  summary.memory_hits = stats.memory_hits + registry.memory_hits();
  summary.disk_hits = stats.disk_hits;
  summary.misses = stats.misses;
  summary.builds = stats.builds;
  summary.build_seconds = stats.build_seconds;
  summary.bad_entries = stats.bad_entries;
  summary.user_dir = cache.options().user_dir;
  summary.user_dir_writable = cache.user_dir_writable();
  summary.read_only_dirs = cache.options().read_only_dirs;
  summary.no_jit = cache.options().no_jit;
  return summary;
}

PrecompileResult precompile(const KernelSpec& spec) {
  return precompile_result(jit::KernelRegistry::instance().compile(spec));
}

PrecompileResult precompile(const std::string& spec_text) {
  return precompile(KernelSpec::parse(spec_text));
}

}  // namespace mlajit
