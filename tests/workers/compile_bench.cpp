// Times NVRTC compiles of the JIT demo kernel (and of the MLA kernel, when it is built in)
// for every profiled arch and prints a table for docs/PERF.md.
//   compile_bench [--repeat N] [--out DIR]
// Each compile is a fresh NVRTC program (nothing is reused between compiles but the loaded
// library); the first row of the process also pays NVRTC's own start-up, shown separately.
// With --out, each cubin is written to DIR/<family>.<arch>.cubin (for loading on a GPU).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "jit/codegen.h"
#include "jit/embedded_kernels.h"
#include "jit/device_profiles.h"
#include "jit/nvrtc_compiler.h"
#include "mlajit/error.h"
#include "mlajit/runtime.h"

using namespace mlajit;
using namespace mlajit::jit;

namespace {

struct Options {
  int repeat = 3;
  std::string out_dir;
};

Options parse_options(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--repeat" && i + 1 < argc) options.repeat = std::max(1, std::atoi(argv[++i]));
    else if (arg == "--out" && i + 1 < argc) options.out_dir = argv[++i];
    else {
      std::fprintf(stderr, "usage: compile_bench [--repeat N] [--out DIR]\n");
      std::exit(2);
    }
  }
  return options;
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

void write_file(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream file(path, std::ios::binary);
  file.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!file) std::fprintf(stderr, "warning: could not write %s\n", path.c_str());
}

// Compiles `spec` `repeat` times; prints one row: arch, first ms, median ms, cubin bytes.
void bench(const KernelSpec& spec, const Options& options) {
  const GeneratedProgram program = generate_program(spec);
  std::vector<double> ms;
  CompileResult result;
  for (int i = 0; i < options.repeat; ++i) {
    result = NvrtcCompiler::instance().compile(program.request);
    ms.push_back(result.seconds * 1000);
  }
  std::printf("| %-18s | %-7s | %8.1f | %9.1f | %9zu |\n", spec.family.c_str(), spec.arch.c_str(),
              ms.front(), median(ms), result.image.size());
  if (!options.out_dir.empty()) {
    write_file(options.out_dir + "/" + spec.family + "." + spec.arch + ".cubin", result.image);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const Options options = parse_options(argc, argv);
  const auto load_start = std::chrono::steady_clock::now();
  NvrtcCompiler& nvrtc = NvrtcCompiler::instance();
  const double load_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - load_start)
          .count();
  if (!nvrtc.available()) {
    std::fprintf(stderr, "NVRTC unavailable: %s\n", nvrtc.unavailable_reason().c_str());
    return 1;
  }
  std::printf("NVRTC %d.%d from %s, loaded in %.1f ms; %d compiles per row\n\n",
              nvrtc.version() / 1000, nvrtc.version() % 1000 / 10, nvrtc.library_path().c_str(),
              load_ms, options.repeat);
  std::printf("| %-18s | %-7s | %8s | %9s | %9s |\n", "kernel", "arch", "first ms", "median ms",
              "cubin B");
  std::printf("|%s|%s|%s|%s|%s|\n", std::string(20, '-').c_str(), std::string(9, '-').c_str(),
              std::string(10, '-').c_str(), std::string(11, '-').c_str(),
              std::string(11, '-').c_str());
  const bool have_mla = embedded_kernel_files().count("portable/mla_fa2.cuh") > 0;
  try {
    for (const DeviceProfile& profile : device_profiles()) {
      KernelSpec spec;
      spec.arch = profile.arch;
      spec.family = "grid_barrier_demo";
      bench(spec, options);
    }
    for (const DeviceProfile& profile : device_profiles()) {
      if (!have_mla) break;
      // The default shape (bf16, 512/64, not causal: DeepSeek decode) on the arch's profile.
      bench(KernelSpec::parse(tile_for_arch(profile.arch, MlaShape{}).spec_text), options);
    }
  } catch (const Error& error) {
    std::fprintf(stderr, "error: %s\n", error.what());
    return 1;
  }
  if (!have_mla) std::printf("\n(portable/mla_fa2.cuh is not built in: MLA rows skipped)\n");
  return 0;
}
