// Precompiles one spec text through the C ABI, in its own process so that the kernel cache
// reads the MLAJIT_CACHE_DIR the test gives it (the cache reads its environment once).
//   capi_precompile SPEC_TEXT   prints "status=<n> from_cache=<0|1> bytes=<n> key=<hex>",
//                               precompiles it once more when that worked (a memory hit),
//                               prints every mlajit_cache_stats field as name=value, then
//                               "message=<mlajit_last_error()>"; exits 0 on MLAJIT_OK.
#include <cstdio>
#include <string>

#include "mlajit/mlajit.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: capi_precompile SPEC_TEXT\n");
    return 2;
  }
  mlajit_precompile_result result;
  result.struct_size = sizeof(result);
  const mlajit_status status = mlajit_precompile(argv[1], &result);
  const bool ok = status == MLAJIT_OK;
  const std::string message = ok ? "" : mlajit_last_error();  // the next call clears it
  std::printf("status=%d from_cache=%d bytes=%llu key=%s\n", static_cast<int>(status),
              ok ? result.from_cache : -1, ok ? static_cast<unsigned long long>(result.bytes) : 0ull,
              ok ? result.key : "");
  if (ok) {
    mlajit_precompile_result again;
    again.struct_size = sizeof(again);
    mlajit_precompile(argv[1], &again);
  }
  mlajit_cache_stats stats;
  stats.struct_size = sizeof(stats);
  if (mlajit_cache_stats_get(&stats) == MLAJIT_OK) {
    std::printf("memory_hits=%llu disk_hits=%llu misses=%llu builds=%llu bad_entries=%llu "
                "build_seconds_positive=%d user_dir_writable=%d no_jit=%d read_only_dirs=%s "
                "user_dir=%s\n",
                static_cast<unsigned long long>(stats.memory_hits),
                static_cast<unsigned long long>(stats.disk_hits),
                static_cast<unsigned long long>(stats.misses),
                static_cast<unsigned long long>(stats.builds),
                static_cast<unsigned long long>(stats.bad_entries),
                stats.build_seconds > 0 ? 1 : 0, stats.user_dir_writable, stats.no_jit,
                stats.read_only_dirs, stats.user_dir);
  }
  std::printf("message=%s\n", message.c_str());
  return ok ? 0 : 1;
}
