// Where a cold NVRTC compile of an MLA spec spends its time, in process CPU time (the
// 2-core machine is shared: CPU time is what the load does not stretch).
//   compile_probe [--spec TEXT]... [--fleet] [--kernel NAME] [--repeat N] [--opt OPTION]...
//                 [--stages] [--dump DIR]
// Without --spec, the default fleet matrix (--kernel filters it by family). Each row: the
// spec, then the min over --repeat fresh NVRTC programs of
//   full   : nvrtcCompileProgram for the spec's arch (cubin), as the library compiles it
// and with --stages also
//   front  : --fdevice-syntax-only (parse and instantiate, no code)
//   ptx    : the same program for compute_XX (front end + NVVM, PTX out, no ptxas)
//   ptxas  : /usr/local/cuda/bin/ptxas on that PTX for the spec's arch (a child process)
// --opt appends an NVRTC option to every compile (after the library's own). --dump writes
// each spec's program (main.cu, its headers, options, name expression) and its cubin/PTX to
// DIR/<n>/ so that other tools can take them apart.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "jit/codegen.h"
#include "jit/nvrtc_compiler.h"
#include "mlajit/error.h"
#include "mlajit/fleet.h"

using namespace mlajit;
using namespace mlajit::jit;
namespace fs = std::filesystem;

namespace {

struct Options {
  std::vector<std::string> specs;
  std::string kernel = "auto";
  int repeat = 3;
  std::vector<std::string> extra;
  bool stages = false;
  std::string dump;
  std::string ptxas = "/usr/local/cuda/bin/ptxas";
};

[[noreturn]] void usage() {
  std::fprintf(stderr,
               "usage: compile_probe [--spec TEXT]... [--kernel NAME] [--repeat N] "
               "[--opt OPTION]... [--stages] [--dump DIR]\n");
  std::exit(2);
}

Options parse_options(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage();
      return argv[++i];
    };
    if (arg == "--spec") options.specs.push_back(value());
    else if (arg == "--kernel") options.kernel = value();
    else if (arg == "--repeat") options.repeat = std::max(1, std::atoi(value().c_str()));
    else if (arg == "--opt") options.extra.push_back(value());
    else if (arg == "--stages") options.stages = true;
    else if (arg == "--dump") options.dump = value();
    else if (arg == "--ptxas") options.ptxas = value();
    else usage();
  }
  return options;
}

double cpu_seconds(int who) {
  rusage usage{};
  getrusage(who, &usage);
  return usage.ru_utime.tv_sec + usage.ru_stime.tv_sec +
         (usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) * 1e-6;
}

struct Timing {
  double cpu = 0, wall = 0;
};

// Min CPU over `repeat` compiles (and the wall time of that run).
Timing time_compile(const CompileRequest& request, int repeat, CompileResult* last) {
  Timing best{std::numeric_limits<double>::max(), 0};
  for (int i = 0; i < repeat; ++i) {
    const double before = cpu_seconds(RUSAGE_SELF);
    const auto start = std::chrono::steady_clock::now();
    CompileResult result = NvrtcCompiler::instance().compile(request);
    const double wall =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double cpu = cpu_seconds(RUSAGE_SELF) - before;
    if (cpu < best.cpu) best = {cpu, wall};
    if (last != nullptr) *last = std::move(result);
  }
  return best;
}

void write_file(const fs::path& path, const void* data, size_t size) {
  fs::create_directories(path.parent_path());
  std::ofstream file(path, std::ios::binary);
  file.write(static_cast<const char*>(data), static_cast<std::streamsize>(size));
}

// ptxas on a PTX file, min CPU of `repeat` runs of the child.
Timing time_ptxas(const Options& options, const std::string& arch, const fs::path& ptx,
                  const fs::path& cubin) {
  Timing best{std::numeric_limits<double>::max(), 0};
  for (int i = 0; i < options.repeat; ++i) {
    const double before = cpu_seconds(RUSAGE_CHILDREN);
    const auto start = std::chrono::steady_clock::now();
    const pid_t pid = fork();
    if (pid == 0) {
      execl(options.ptxas.c_str(), "ptxas", ("-arch=" + arch).c_str(), ptx.c_str(), "-o",
            cubin.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    const double wall =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double cpu = cpu_seconds(RUSAGE_CHILDREN) - before;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      std::fprintf(stderr, "ptxas failed on %s\n", ptx.c_str());
      return {0, 0};
    }
    if (cpu < best.cpu) best = {cpu, wall};
  }
  return best;
}

std::string compute_arch(const std::string& arch) {
  std::string number = arch.substr(3);  // sm_90a -> 90a
  return "compute_" + number;
}

void probe(const KernelSpec& spec, const Options& options, int index) {
  GeneratedProgram program = generate_program(spec);
  CompileRequest request = program.request;
  request.random_seed = 0x1234567890abcdefull;
  request.extra_options = options.extra;
  CompileResult cubin;
  const Timing full = time_compile(request, options.repeat, &cubin);
  std::printf("%-70s full %7.0f ms cpu (%6.0f wall) %8zu B", spec.text().c_str(),
              full.cpu * 1000, full.wall * 1000, cubin.image.size());
  const fs::path dir = options.dump.empty() ? fs::path() : fs::path(options.dump) / std::to_string(index);
  if (!options.dump.empty()) {
    write_file(dir / "main.cu", request.source.data(), request.source.size());
    for (const auto& [name, contents] : request.headers) {
      write_file(dir / "headers" / name, contents.data(), contents.size());
    }
    std::string text = spec.text() + "\n" + request.name_expression + "\n" + cubin.lowered_name + "\n";
    for (const std::string& option : cubin.options) text += option + "\n";
    write_file(dir / "program.txt", text.data(), text.size());
    write_file(dir / "kernel.cubin", cubin.image.data(), cubin.image.size());
  }
  if (options.stages) {
    CompileRequest front = request;
    front.extra_options.push_back("--fdevice-syntax-only");
    Timing front_time{0, 0};
    try {
      front_time = time_compile(front, options.repeat, nullptr);
    } catch (const Error& error) {
      // NVRTC may return no image for a syntax-only compile; time it all the same.
    }
    CompileRequest ptx_request = request;
    ptx_request.arch = compute_arch(spec.arch);
    CompileResult ptx;
    const Timing ptx_time = time_compile(ptx_request, options.repeat, &ptx);
    const fs::path scratch = dir.empty() ? fs::temp_directory_path() / ("compile_probe." + std::to_string(getpid())) : dir;
    fs::create_directories(scratch);
    const size_t ptx_size = ptx.image.empty() ? 0 : ptx.image.size() - 1;
    write_file(scratch / "kernel.ptx", ptx.image.data(), ptx_size);
    const Timing ptxas = time_ptxas(options, spec.arch, scratch / "kernel.ptx", scratch / "ptxas.cubin");
    std::printf(" | front %6.0f  ptx %6.0f  ptxas %6.0f ms cpu", front_time.cpu * 1000,
                ptx_time.cpu * 1000, ptxas.cpu * 1000);
    if (dir.empty()) fs::remove_all(scratch);
  }
  std::printf("\n");
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  const Options options = parse_options(argc, argv);
  if (!NvrtcCompiler::instance().available()) {
    std::fprintf(stderr, "NVRTC unavailable: %s\n",
                 NvrtcCompiler::instance().unavailable_reason().c_str());
    return 1;
  }
  try {
    std::vector<KernelSpec> specs;
    for (const std::string& text : options.specs) specs.push_back(KernelSpec::parse(text));
    if (specs.empty()) {
      FleetOptions fleet;
      fleet.kernel = options.kernel;
      for (const FleetSpec& row : fleet_matrix(fleet)) specs.push_back(row.spec);
    }
    // NVRTC's first compile in a process pays its own set-up: pay it before timing.
    KernelSpec warm;
    warm.family = "grid_barrier_demo";
    warm.arch = "sm_80";
    NvrtcCompiler::instance().compile(generate_program(warm).request);
    int index = 0;
    for (const KernelSpec& spec : specs) probe(spec, options, index++);
  } catch (const Error& error) {
    std::fprintf(stderr, "error: %s\n", error.what());
    return 1;
  }
  return 0;
}
