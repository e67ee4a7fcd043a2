// What compiling in a helper process costs (docs/PERF.md, JIT section), on this machine:
//   start-up     posix_spawn + exec + libnvrtc load + HELO, then retire (median of --repeat)
//   compile      one program compiled: in this process (NVRTC already loaded and warm), in a
//                freshly started helper (a process's first compile), in a reused helper
//   cache hit    KernelRegistry memory and disk hits in process mode, and that neither starts
//                a helper
// Each compile row also gives CPU time (this process, plus the reaped helper for a fresh one):
// on a machine shared with other builds wall times stretch with the load, CPU times do not,
// and on an idle machine the two agree (the parent waits while the helper runs).
//   helper_bench [--repeat N]   (default 15)
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "jit/codegen.h"
#include "jit/compiler_helper.h"
#include "jit/helper_locator.h"
#include "jit/kernel_registry.h"
#include "family/device_target.h"
#include "family/portable/portable_tiles.h"

using namespace mlajit;
using namespace mlajit::jit;
using Clock = std::chrono::steady_clock;

namespace {

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

struct Stats {
  double median, low, high;
};

Stats stats(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return {values[values.size() / 2], values.front(), values.back()};
}

void row(const char* what, const Stats& s, const char* unit = "ms") {
  std::printf("  %-44s median %8.2f %s   (min %.2f, max %.2f)\n", what, s.median, unit, s.low, s.high);
}

// User + system CPU seconds of `who` (RUSAGE_SELF, or RUSAGE_CHILDREN: the reaped ones), in ms.
double cpu_ms(int who) {
  rusage usage{};
  ::getrusage(who, &usage);
  return (usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) * 1e3 +
         (usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e3;
}
double all_cpu_ms() { return cpu_ms(RUSAGE_SELF) + cpu_ms(RUSAGE_CHILDREN); }

Deadline in_a_minute() { return Clock::now() + std::chrono::minutes(1); }

// "VmRSS 61 MiB (RssAnon 9 MiB, RssFile 52 MiB)" from /proc/<pid>/status.
std::string memory_of(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string text;
  for (std::string line; std::getline(status, line);) {
    for (const char* field : {"VmRSS:", "RssAnon:", "RssFile:"}) {
      if (line.rfind(field, 0) == 0) text += line.substr(0, line.find(':')) + " " +
                                            std::to_string(std::atol(line.c_str() + std::strlen(field)) / 1024) + " MiB  ";
    }
  }
  return text;
}

void time_program(const char* name, CompileRequest request, const std::string& helper, int repeat) {
  request.random_seed = 42;
  const int version = NvrtcCompiler::instance().version();
  NvrtcCompiler::instance().compile(request);  // warm: NVRTC's builtins loaded in this process
  std::vector<double> inline_ms, fresh_ms, reused_ms, inline_cpu, fresh_cpu;
  auto reused = CompilerHelper::start(helper, version, in_a_minute());
  reused->compile(request, in_a_minute(), name, "1 min");  // warm, as the in-process one
  for (int i = 0; i < repeat; ++i) {
    auto start = Clock::now();
    double cpu = all_cpu_ms();
    NvrtcCompiler::instance().compile(request);
    inline_ms.push_back(ms_since(start));
    inline_cpu.push_back(all_cpu_ms() - cpu);
    start = Clock::now();
    cpu = all_cpu_ms();
    {
      auto fresh = CompilerHelper::start(helper, version, in_a_minute());
      fresh->compile(request, in_a_minute(), name, "1 min");
    }  // retired and reaped here, so its CPU time is in RUSAGE_CHILDREN
    fresh_ms.push_back(ms_since(start));
    fresh_cpu.push_back(all_cpu_ms() - cpu);
    start = Clock::now();
    reused->compile(request, in_a_minute(), name, "1 min");
    reused_ms.push_back(ms_since(start));
  }
  std::printf("%s\n", name);
  row("in this process (NVRTC loaded, warm)", stats(inline_ms));
  row("fresh helper: start + compile + retire", stats(fresh_ms));
  row("reused helper", stats(reused_ms));
  std::printf("  added by a fresh helper: %.1f ms; by a reused one: %.1f ms (medians)\n",
              stats(fresh_ms).median - stats(inline_ms).median,
              stats(reused_ms).median - stats(inline_ms).median);
  row("CPU: in this process", stats(inline_cpu));
  row("CPU: fresh helper (it and this process)", stats(fresh_cpu));
  std::printf("  CPU added by a fresh helper: %.1f ms (medians)\n",
              stats(fresh_cpu).median - stats(inline_cpu).median);
  std::printf("  the reused helper, idle after %d compiles: %s\n", repeat + 1,
              memory_of(reused->pid()).c_str());
}

}  // namespace

int main(int argc, char** argv) {
  int repeat = 15;
  if (argc == 3 && std::string(argv[1]) == "--repeat") repeat = std::max(1, std::atoi(argv[2]));
  const HelperLocation location = locate_compiler_helper("");
  if (location.path.empty() || !NvrtcCompiler::instance().available()) {
    std::fprintf(stderr, "helper_bench: %s %s\n", location.problem().c_str(),
                 NvrtcCompiler::instance().unavailable_reason().c_str());
    return 1;
  }
  const int version = NvrtcCompiler::instance().version();
  std::printf("helper %s, NVRTC %d\n", location.path.c_str(), version);
  std::vector<double> start_ms, start_cpu;
  for (int i = 0; i < repeat; ++i) {
    const double cpu = all_cpu_ms();
    const auto start = Clock::now();
    auto helper = CompilerHelper::start(location.path, version, in_a_minute());
    start_ms.push_back(ms_since(start));
    helper->retire();
    start_cpu.push_back(all_cpu_ms() - cpu);
  }
  row("helper start-up (spawn to HELO)", stats(start_ms));
  row("CPU: helper start-up and retirement", stats(start_cpu));

  CompileRequest tiny;
  tiny.program_name = "tiny.cu";
  tiny.source = "template <int N> __global__ void fill(int* out) { out[threadIdx.x] = N; }\n";
  tiny.name_expression = "fill<7>";
  tiny.arch = "sm_90";
  time_program("tiny kernel, sm_90", tiny, location.path, repeat);
  KernelSpec mla;
  mla.arch = "sm_90";
  mla.tile = family::portable::select_tile_config(mla, family::profile_target("sm_90"));
  time_program("portable mla_fa2 bf16 512/64, sm_90", generate_program(mla).request, location.path,
               std::max(3, repeat / 3));

  char pattern[] = "/tmp/mlajit-helper-bench-XXXXXX";
  CacheOptions cache;
  cache.user_dir = mkdtemp(pattern);
  IsolationOptions process;
  process.mode = CompileMode::kProcess;
  KernelRegistry registry(cache, process);
  KernelSpec spin;
  spin.family = "spin";
  spin.arch = "sm_90";
  registry.compile(spin);
  const uint64_t started = CompilerHelper::started_count();
  std::vector<double> memory_us, disk_ms;
  for (int i = 0; i < 2000; ++i) {
    const auto start = Clock::now();
    registry.compile(spin);
    memory_us.push_back(ms_since(start) * 1e3);
  }
  for (int i = 0; i < 20; ++i) {
    KernelRegistry fresh(cache, process);
    const auto start = Clock::now();
    fresh.compile(spin);
    disk_ms.push_back(ms_since(start));
  }
  std::printf("cache hits in process mode\n");
  row("in-memory (registry)", stats(memory_us), "us");
  row("disk (a fresh registry)", stats(disk_ms));
  std::printf("  helpers started by 2,020 hits: %llu\n",
              static_cast<unsigned long long>(CompilerHelper::started_count() - started));
  return CompilerHelper::started_count() == started ? 0 : 1;
}
