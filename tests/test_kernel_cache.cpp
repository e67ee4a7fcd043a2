// The public KernelCache (mlajit/kernel_cache.h): one set of cache directories opened on its
// own, as the CLI's precompile --out, list and prune use it.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include "jit/disk_cache.h"
#include "mlajit/error.h"
#include "mlajit/kernel_cache.h"
#include "mlajit/runtime.h"
#include "env_guard.h"
#include "temp_dir.h"

using mlajit::CacheSettings;
using mlajit::KernelCache;
using mlajit::KernelSpec;
using mlajit::test::EnvGuard;
using mlajit::test::TempDir;

namespace {

// Entries for `count` distinct specs, written through the cache itself (the real file format),
// no NVRTC needed; returns their spec texts.
std::set<std::string> fill(const std::string& dir, int count) {
  mlajit::jit::CacheOptions options;
  options.user_dir = dir;
  mlajit::jit::DiskCache cache(options);
  std::set<std::string> texts;
  for (int i = 0; i < count; ++i) {
    KernelSpec spec;
    spec.arch = i % 2 ? "sm_80" : "sm_90";
    spec.q_dtype = spec.kv_dtype = spec.o_dtype = 
        i / 2 % 2 ? mlajit::DType::kFloat16 : mlajit::DType::kBFloat16;
    spec.head_dim_ckv = i / 4 ? 256 : 512;
    spec.head_dim_kpe = i / 4 ? 32 : 64;
    const auto key = mlajit::jit::CacheKey::from_text("spec=" + spec.text() + "\nabi=test\n");
    cache.get_or_build(key, [&] {
      return mlajit::jit::CacheEntry{key.text, std::vector<uint8_t>(100 + i, 7), "test entry"};
    });
    texts.insert(spec.text());
  }
  return texts;
}

std::set<std::string> spec_texts(const std::vector<mlajit::CacheEntryInfo>& entries) {
  std::set<std::string> texts;
  for (const auto& entry : entries) texts.insert(entry.spec_text);
  return texts;
}

}  // namespace

TEST_CASE("a KernelCache lists its layers' entries by spec text, shipped layers first") {
  TempDir shipped, user;
  const auto shipped_specs = fill(shipped.path(), 2);
  const auto user_specs = fill(user.path(), 5);
  CacheSettings settings;
  settings.read_only_dirs = {shipped.path()};
  settings.user_dir = user.path();
  const KernelCache cache(settings);
  CHECK(cache.settings().read_only_dirs == settings.read_only_dirs);
  CHECK(cache.settings().user_dir == user.path());
  CHECK(cache.user_dir_writable());
  const auto entries = cache.list();
  REQUIRE(entries.size() == 7);
  CHECK(entries[0].layer == "shipped");
  CHECK(entries[0].dir == shipped.path());
  CHECK(entries.back().layer == "user");
  std::set<std::string> user_listed;
  for (const auto& entry : entries) {
    INFO(entry.path);
    CHECK(entry.verifies);
    CHECK(entry.problem.empty());
    CHECK(entry.bytes > 100);
    CHECK(entry.last_use_unix > 0);
    CHECK(entry.path.rfind(entry.dir + "/", 0) == 0);
    if (entry.layer == "user") user_listed.insert(entry.spec_text);
  }
  CHECK(user_listed == user_specs);
}

TEST_CASE("KernelCache::prune empties the user layer and never touches a shipped one") {
  TempDir shipped, user;
  fill(shipped.path(), 2);
  const auto user_specs = fill(user.path(), 3);
  CacheSettings settings;
  settings.read_only_dirs = {shipped.path()};
  settings.user_dir = user.path();
  KernelCache cache(settings);
  const auto removed = cache.prune(0);
  CHECK(spec_texts(removed) == user_specs);
  for (const auto& entry : removed) CHECK(entry.layer == "user");
  const auto left = cache.list();
  REQUIRE(left.size() == 2);
  CHECK(left[0].layer == "shipped");
  // An age limit alone (no size limit) keeps entries used just now.
  fill(user.path(), 1);
  CHECK(cache.prune(UINT64_MAX, std::chrono::hours(1)).empty());
  CHECK(cache.list().size() == 3);
}

TEST_CASE("KernelCache::precompile builds into its own directory, and finds the entry there") {
  if (!mlajit::compiler_info().available) {
    WARN("NVRTC is not available, skipping: " << mlajit::compiler_info().unavailable_reason);
    return;
  }
  TempDir dir;
  CacheSettings settings;
  settings.user_dir = dir.path();
  KernelSpec spin;  // the benchmark's spin kernel: the smallest program there is
  spin.family = "spin";
  spin.arch = "sm_80";
  const uint64_t builds_before = mlajit::cache_stats().builds;
  mlajit::PrecompileResult first;
  {
    KernelCache cache(settings);
    first = cache.precompile(spin);
    CHECK_FALSE(first.from_cache);
    CHECK(first.bytes > 0);
    CHECK(first.compile_seconds > 0);
    CHECK(first.key.size() == 32);
    const auto entries = cache.list();
    REQUIRE(entries.size() == 1);
    CHECK(entries[0].spec_text == spin.text());
    CHECK(entries[0].path.find(first.key) != std::string::npos);
  }
  // A new KernelCache (a new process's view) finds it on disk.
  KernelCache again(settings);
  const mlajit::PrecompileResult second = again.precompile(spin);
  CHECK(second.from_cache);
  CHECK(second.key == first.key);
  CHECK(second.bytes == first.bytes);
  // The process-wide cache (BatchMlaAttention's) did not build anything for it.
  CHECK(mlajit::cache_stats().builds == builds_before);
}

TEST_CASE("CacheSettings::from_environment reads the cache variables when asked") {
  EnvGuard env({"MLAJIT_CACHE_PATH", "MLAJIT_CACHE_DIR", "MLAJIT_CACHE_MAX_BYTES", "MLAJIT_NO_JIT"});
  ::setenv("MLAJIT_CACHE_DIR", "/explicit", 1);
  ::setenv("MLAJIT_CACHE_PATH", "/a::/b:", 1);
  ::setenv("MLAJIT_CACHE_MAX_BYTES", "10M", 1);
  ::setenv("MLAJIT_NO_JIT", "1", 1);
  const CacheSettings settings = CacheSettings::from_environment();
  CHECK(settings.user_dir == "/explicit");
  CHECK(settings.read_only_dirs == std::vector<std::string>{"/a", "/b"});
  CHECK(settings.max_bytes == 10ull << 20);
  CHECK(settings.no_jit);
  CHECK(settings.lock_wait_ms == CacheSettings{}.lock_wait_ms);
  ::setenv("MLAJIT_CACHE_MAX_BYTES", "lots", 1);
  try {
    CacheSettings::from_environment();
    FAIL("a bad MLAJIT_CACHE_MAX_BYTES was accepted");
  } catch (const mlajit::Error& error) {
    CHECK(error.code() == mlajit::ErrorCode::kInvalidArgument);
    CHECK_THAT(error.what(), Catch::Contains("MLAJIT_CACHE_MAX_BYTES"));
  }
}
