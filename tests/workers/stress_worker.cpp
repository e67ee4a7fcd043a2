// One process of the cache stress test (tests/test_concurrency_stress.cpp).
//   stress_worker <user_dir> <aux_dir> <keys of thread 0> <keys of thread 1> ...
// Each "keys" argument is a comma-separated list of key numbers; thread t asks one DiskCache
// (shared by the threads) for "stress key <n>" for each n in its list, in order. The build
// function sleeps 20 ms (to widen the race windows) and appends "<n> <pid>" to
// <aux_dir>/builds.log with O_APPEND, so lines from racing processes never interleave.
// With MLAJIT_STRESS_COMPILE=1 the build function also compiles a small kernel (-DKEY=<n>) in
// a compiler helper process (CompileMode::kProcess), so the races run with helpers started,
// reused and reaped by many threads of many processes at once.
// Exit status: 0 every caller got the right entry, 2 usage, 3 a wrong entry, 5 an exception.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <unistd.h>

#include "../test_payloads.h"
#include "jit/disk_cache.h"
#include "jit/isolated_compile.h"

using namespace mlajit::jit;

using mlajit::test::append_line;
using mlajit::test::stress_payload;

namespace {

// A real compile in a helper process; throws when it fails.
void compile_in_helper(int n) {
  CompileRequest request;
  request.program_name = "stress.cu";
  request.source = "__global__ void stress(int* out) { out[threadIdx.x] = KEY; }\n";
  request.arch = "sm_80";
  request.extra_options = {"-DKEY=" + std::to_string(n)};
  IsolationOptions options;
  options.mode = mlajit::CompileMode::kProcess;
  if (compile_isolated(request, options.mode, options, "stress key " + std::to_string(n)).image.empty()) {
    throw std::runtime_error("empty cubin for stress key " + std::to_string(n));
  }
}

std::vector<int> parse_keys(const std::string& list) {
  std::vector<int> keys;
  size_t start = 0;
  while (start < list.size()) {
    const size_t comma = list.find(',', start);
    keys.push_back(std::stoi(list.substr(start, comma - start)));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return keys;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: stress_worker USER_DIR AUX_DIR KEYS...\n");
    return 2;
  }
  const std::string user_dir = argv[1], log_path = std::string(argv[2]) + "/builds.log";
  CacheOptions options;
  options.user_dir = user_dir;
  options.lock_wait = std::chrono::seconds(60);  // longer than the test's deadline: no give-ups
  DiskCache cache(options);
  const char* compile = std::getenv("MLAJIT_STRESS_COMPILE");
  const bool compile_builds = compile != nullptr && std::string(compile) == "1";
  std::atomic<int> wrong{0}, failed{0};
  std::vector<std::thread> threads;
  for (int t = 3; t < argc; ++t) {
    threads.emplace_back([&, list = std::string(argv[t])] {
      try {
        for (int n : parse_keys(list)) {
          const CacheKey key = CacheKey::from_text("stress key " + std::to_string(n));
          const CacheEntry entry = cache.get_or_build(key, [&] {
            if (compile_builds) compile_in_helper(n);
            else std::this_thread::sleep_for(std::chrono::milliseconds(20));
            append_line(log_path, std::to_string(n) + " " + std::to_string(::getpid()));
            return CacheEntry{key.text, stress_payload(key.text), "stress"};
          });
          if (entry.key_text != key.text || entry.payload != stress_payload(key.text) ||
              entry.metadata != "stress") {
            ++wrong;
          }
        }
      } catch (const std::exception& e) {
        std::fprintf(stderr, "stress_worker %d: %s\n", static_cast<int>(::getpid()), e.what());
        ++failed;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  if (failed) return 5;
  return wrong ? 3 : 0;
}
