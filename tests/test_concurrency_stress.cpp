// Races on the kernel cache, beyond tests/test_disk_cache.cpp's one-key races:
//  - 16 processes (tests/workers/stress_worker) x 8 threads, each thread asking for a random
//    6 of 24 cold keys, 20 rounds with fresh directories: every key is built exactly once,
//    every caller gets the right entry, nothing is torn or left behind, and no round deadlocks
//    (a round past its deadline is killed and fails the test);
//  - the same shape inside one process, two DiskCache instances on one directory, with
//    lookups, listings and prunes running alongside (for ThreadSanitizer);
//  - the 16 x 8 race again with builds that compile in helper processes (3 rounds);
//  - 16 threads compiling real specs through one KernelRegistry, in helper processes (NVRTC;
//    for ThreadSanitizer).
// Tagged [concurrency] so scripts/ci-sanitizers.sh can run them under TSan.
// MLAJIT_STRESS_SEED and MLAJIT_STRESS_ROUNDS override the seed and the round count.
#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kernel_dir_copy.h"
#include "temp_dir.h"
#include "test_payloads.h"
#include "jit/cache_layout.h"
#include "jit/disk_cache.h"
#include "jit/kernel_registry.h"
#include "jit/nvrtc_compiler.h"
#include "mlajit/error.h"

extern char** environ;

using mlajit::test::stress_payload;
using mlajit::test::TempDir;

namespace {

using namespace mlajit::jit;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr int kKeys = 24;
constexpr int kProcesses = 16;
constexpr int kThreads = 8;
constexpr int kKeysPerThread = 6;

CacheKey stress_key(int n) { return CacheKey::from_text("stress key " + std::to_string(n)); }

uint64_t env_or(const char* name, uint64_t fallback) {
  const char* value = std::getenv(name);
  return value && *value ? std::strtoull(value, nullptr, 0) : fallback;
}

uint64_t stress_seed() {
  const uint64_t seed = env_or("MLAJIT_STRESS_SEED", std::random_device{}());
  WARN("stress seed " << seed << " (set MLAJIT_STRESS_SEED to replay)");
  return seed;
}

// A random `count` distinct keys out of kKeys, in random order.
std::vector<int> random_keys(std::mt19937_64& rng, int count) {
  std::vector<int> all(kKeys);
  for (int i = 0; i < kKeys; ++i) all[i] = i;
  std::shuffle(all.begin(), all.end(), rng);
  all.resize(count);
  return all;
}

std::string join_keys(const std::vector<int>& keys) {
  std::string text;
  for (int k : keys) text += (text.empty() ? "" : ",") + std::to_string(k);
  return text;
}

std::string worker_path() {
  const char* dir = std::getenv("MLAJIT_TEST_WORKER_DIR");
  return std::string(dir && *dir ? dir : MLAJIT_TEST_WORKER_DIR) + "/stress_worker";
}

pid_t spawn(const std::vector<std::string>& args) {
  std::vector<std::string> copy = args;
  std::vector<char*> argv;
  for (auto& a : copy) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  REQUIRE(::posix_spawn(&pid, copy[0].c_str(), nullptr, nullptr, argv.data(), environ) == 0);
  return pid;
}

// Waits for every pid until `deadline`; then SIGKILLs the rest. Returns exit codes by pid
// (128 + signal for killed ones) and whether the deadline passed.
std::map<pid_t, int> wait_all(const std::vector<pid_t>& pids, Clock::time_point deadline,
                              bool* timed_out) {
  std::map<pid_t, int> codes;
  *timed_out = false;
  while (codes.size() < pids.size()) {
    for (pid_t pid : pids) {
      if (codes.count(pid)) continue;
      int status = 0;
      const pid_t done = ::waitpid(pid, &status, WNOHANG);
      if (done == pid) codes[pid] = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    if (codes.size() == pids.size()) break;
    if (Clock::now() > deadline) {
      *timed_out = true;
      for (pid_t pid : pids) {
        if (codes.count(pid)) continue;
        ::kill(pid, SIGKILL);
        int status = 0;
        ::waitpid(pid, &status, 0);
        codes[pid] = 128 + SIGKILL;
      }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return codes;
}

std::map<int, int> builds_per_key(const std::string& log_path) {
  std::map<int, int> builds;
  std::ifstream log(log_path);
  for (std::string line; std::getline(log, line);) {
    std::istringstream fields(line);
    int key = -1;
    long pid = 0;
    REQUIRE(static_cast<bool>(fields >> key >> pid));  // a torn line would fail here
    ++builds[key];
  }
  return builds;
}

void require_entry_on_disk(const std::string& dir, int n) {
  const CacheKey key = stress_key(n);
  const std::string path = entry_path(dir, key.hex);
  std::ifstream in(path, std::ios::binary);
  const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), {});
  std::string problem;
  const auto entry = decode_cache_entry(bytes, key.text, &problem);
  INFO("key " << n << " at " << path << ": " << problem);
  REQUIRE(entry);
  REQUIRE(entry->payload == stress_payload(key.text));
}

// One round: fresh dirs, 16 workers, checks. Returns the round's wall time.
double stress_round(std::mt19937_64& rng, int round, std::chrono::seconds limit) {
  TempDir tmp("mlajit-stress");
  const std::string user = tmp.sub("cache");
  std::set<int> requested;
  std::vector<pid_t> pids;
  const auto start = Clock::now();
  for (int p = 0; p < kProcesses; ++p) {
    std::vector<std::string> args = {worker_path(), user, tmp.path()};
    for (int t = 0; t < kThreads; ++t) {
      const std::vector<int> keys = random_keys(rng, kKeysPerThread);
      requested.insert(keys.begin(), keys.end());
      args.push_back(join_keys(keys));
    }
    pids.push_back(spawn(args));
  }
  bool timed_out = false;
  // A round takes well under a second (a few with real compiles); past `limit` means a
  // deadlock (or a machine in trouble).
  const auto codes = wait_all(pids, start + limit, &timed_out);
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  INFO("round " << round);
  if (timed_out) {
    FAIL("round " << round << " did not finish in " << limit.count()
                  << " s: killed its workers (deadlock?)");
  }
  for (const auto& [pid, code] : codes) {
    INFO("worker " << pid << " exit code " << code << " (3: wrong entry, 5: exception)");
    REQUIRE(code == 0);
  }
  const std::map<int, int> builds = builds_per_key(tmp.sub("builds.log"));
  for (int n = 0; n < kKeys; ++n) {
    INFO("key " << n);
    const auto it = builds.find(n);
    REQUIRE((it == builds.end() ? 0 : it->second) == (requested.count(n) ? 1 : 0));
  }
  for (int n : requested) require_entry_on_disk(user, n);
  REQUIRE(scan_temp_files(user).empty());                // no write left half-done
  REQUIRE_FALSE(fs::exists(quarantine_dir(user)));       // nothing torn was ever seen
  return seconds;
}

}  // namespace

TEST_CASE("16 processes x 8 threads racing for overlapping cold keys build each key once",
          "[concurrency][stress]") {
  REQUIRE(::access(worker_path().c_str(), X_OK) == 0);
  std::mt19937_64 rng(stress_seed());
  const int rounds = static_cast<int>(env_or("MLAJIT_STRESS_ROUNDS", 20));
  double slowest = 0, total = 0;
  for (int round = 0; round < rounds; ++round) {
    const double seconds = stress_round(rng, round, std::chrono::seconds(30));
    slowest = std::max(slowest, seconds);
    total += seconds;
  }
  WARN(rounds << " rounds of " << kProcesses << " processes x " << kThreads << " threads in "
              << total << " s (slowest round " << slowest << " s)");
}

TEST_CASE("16 processes x 8 threads whose builds compile in helper processes build each key "
          "once",
          "[concurrency][stress][isolation]") {
  if (!NvrtcCompiler::instance().available()) {
    WARN("NVRTC is not available, skipping: " << NvrtcCompiler::instance().unavailable_reason());
    return;
  }
  REQUIRE(::access(worker_path().c_str(), X_OK) == 0);
  mlajit::test::ScopedEnv compile("MLAJIT_STRESS_COMPILE", "1");
  std::mt19937_64 rng(stress_seed());
  const int rounds = static_cast<int>(env_or("MLAJIT_STRESS_COMPILE_ROUNDS", 3));
  double slowest = 0, total = 0;
  for (int round = 0; round < rounds; ++round) {
    // Each round compiles up to 24 kernels and starts a helper or more per process: seconds
    // on 2 cores, more under the sanitizers.
    const double seconds = stress_round(rng, round, std::chrono::seconds(180));
    slowest = std::max(slowest, seconds);
    total += seconds;
  }
  WARN(rounds << " rounds of " << kProcesses << " processes x " << kThreads
              << " threads with helper compiles in " << total << " s (slowest round " << slowest
              << " s)");
}

TEST_CASE("16 threads on two caches of one directory build each key once", "[concurrency]") {
  std::mt19937_64 rng(stress_seed());
  TempDir tmp("mlajit-stress");
  CacheOptions options;
  options.user_dir = tmp.path();
  options.lock_wait = std::chrono::seconds(60);
  // Two instances in one process (say, two libraries each with a cache): their flocks are
  // separate open file descriptions, so they exclude each other like two processes.
  DiskCache first(options), second(options);
  std::array<std::atomic<int>, kKeys> builds{};
  std::atomic<int> wrong{0}, errors{0};
  std::atomic<bool> done{false};
  std::vector<std::vector<int>> plans;
  for (int t = 0; t < 16; ++t) plans.push_back(random_keys(rng, kKeysPerThread));

  std::vector<std::thread> threads;
  for (int t = 0; t < 16; ++t) {
    threads.emplace_back([&, t] {
      DiskCache& cache = t % 2 ? second : first;
      try {
        for (int n : plans[t]) {
          const CacheKey key = stress_key(n);
          const CacheEntry entry = cache.get_or_build(key, [&] {
            ++builds[n];
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
            return CacheEntry{key.text, stress_payload(key.text), "stress"};
          });
          if (entry.payload != stress_payload(key.text) || entry.key_text != key.text) ++wrong;
          if (!cache.lookup(key)) ++wrong;  // after get_or_build it is in memory
        }
      } catch (const std::exception& e) {
        WARN("thread " << t << ": " << e.what());
        ++errors;
      }
    });
  }
  // Readers of the shared state alongside: stats, listings (which read entries being
  // written) and prunes (which only clear hour-old temp files here).
  std::thread observer([&] {
    while (!done) {
      (void)first.stats();
      (void)second.list();
      (void)first.prune(UINT64_MAX);
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  });
  for (auto& thread : threads) thread.join();
  done = true;
  observer.join();

  REQUIRE(errors == 0);
  REQUIRE(wrong == 0);
  std::set<int> requested;
  for (const auto& plan : plans) requested.insert(plan.begin(), plan.end());
  for (int n = 0; n < kKeys; ++n) {
    INFO("key " << n);
    REQUIRE(builds[n] == (requested.count(n) ? 1 : 0));
  }
  REQUIRE(first.stats().builds + second.stats().builds == requested.size());
  for (int n : requested) require_entry_on_disk(tmp.path(), n);
  for (const auto& listing : first.list()) {
    INFO(listing.path << ": " << listing.problem);
    REQUIRE(listing.verifies);
  }
}

TEST_CASE("16 threads compiling through one KernelRegistry compile each spec once",
          "[concurrency][registry]") {
  if (!NvrtcCompiler::instance().available()) {
    WARN("NVRTC is not available, skipping: " << NvrtcCompiler::instance().unavailable_reason());
    return;
  }
  TempDir tmp("mlajit-stress");
  CacheOptions options;
  options.user_dir = tmp.path();
  // Every build in a helper process: the single flight and the pool under 16 threads.
  IsolationOptions isolation;
  isolation.mode = mlajit::CompileMode::kProcess;
  KernelRegistry registry(options, isolation);
  std::vector<mlajit::KernelSpec> specs;
  for (const char* family : {"grid_barrier_demo", "spin"}) {
    for (const char* arch : {"sm_80", "sm_90"}) {
      mlajit::KernelSpec spec;
      spec.family = family;
      spec.arch = arch;
      specs.push_back(spec);
    }
  }
  std::mt19937_64 rng(stress_seed());
  std::vector<std::vector<size_t>> orders(16);
  for (auto& order : orders) {
    for (size_t i = 0; i < specs.size(); ++i) order.push_back(i);
    std::shuffle(order.begin(), order.end(), rng);
  }
  // results[thread][spec]
  std::vector<std::vector<CompiledKernel>> results(16, std::vector<CompiledKernel>(specs.size()));
  std::atomic<int> errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 16; ++t) {
    threads.emplace_back([&, t] {
      try {
        for (size_t i : orders[t]) results[t][i] = registry.compile(specs[i]);
      } catch (const std::exception& e) {
        WARN("thread " << t << ": " << e.what());
        ++errors;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  REQUIRE(errors == 0);
  REQUIRE(registry.cache().stats().builds == specs.size());
  for (size_t i = 0; i < specs.size(); ++i) {
    INFO(specs[i].text());
    int compiled_here = 0;
    for (int t = 0; t < 16; ++t) {
      const CompiledKernel& r = results[t][i];
      REQUIRE_FALSE(r.image.empty());
      REQUIRE(r.image == results[0][i].image);
      REQUIRE(r.metadata.spec_text == specs[i].text());
      REQUIRE(r.metadata.lowered_name == results[0][i].metadata.lowered_name);
      compiled_here += r.from_cache ? 0 : 1;
    }
    REQUIRE(compiled_here == 1);
  }
}
