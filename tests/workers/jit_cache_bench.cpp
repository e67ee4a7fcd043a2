// Times the JIT path on this machine (no GPU needed): a cold NVRTC compile of the MLA kernel
// and of the demo, a warm load from the disk cache by a fresh registry (what a new process
// pays), and the in-memory lookup of a spec already compiled. Used for docs/PERF.md.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "jit/kernel_registry.h"
#include "mlajit/runtime.h"

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

void time_spec(const mlajit::KernelSpec& spec, const std::string& dir) {
  mlajit::jit::CacheOptions options;
  options.user_dir = dir;
  auto start = Clock::now();
  mlajit::jit::KernelRegistry cold(options);
  const auto compiled = cold.compile(spec);
  const double cold_s = seconds_since(start);

  std::vector<double> disk;
  for (int i = 0; i < 20; ++i) {
    mlajit::jit::KernelRegistry fresh(options);  // a new process's view: memory empty
    start = Clock::now();
    const auto loaded = fresh.compile(spec);
    disk.push_back(seconds_since(start));
    if (!loaded.from_cache) std::printf("  (unexpected compile on a warm cache)\n");
  }
  std::vector<double> memory;
  for (int i = 0; i < 2000; ++i) {
    start = Clock::now();
    const auto again = cold.compile(spec);
    memory.push_back(seconds_since(start));
  }
  std::printf("%-12s %-6s cold compile %8.1f ms   disk-cache load %6.3f ms   in-memory %6.3f us   cubin %7zu B\n",
              spec.family.c_str(), spec.arch.c_str(), cold_s * 1e3, median(disk) * 1e3,
              median(memory) * 1e6, compiled.image.size());
}

}  // namespace

int main() {
  char pattern[] = "/tmp/mlajit-jit-bench-XXXXXX";
  const std::string dir = mkdtemp(pattern);
  for (const std::string arch : {"sm_80", "sm_86", "sm_89", "sm_90", "sm_100", "sm_120"}) {
    // The default shape's kernel on the arch's profile: what precompile builds for it.
    time_spec(mlajit::KernelSpec::parse(mlajit::tile_for_arch(arch, mlajit::MlaShape{}).spec_text),
              dir);
    mlajit::KernelSpec demo;
    demo.family = "grid_barrier_demo";
    demo.arch = arch;
    time_spec(demo, dir);
  }
  std::string command = "rm -rf " + dir;
  return std::system(command.c_str()) == 0 ? 0 : 1;
}
