// NVRTC through dlopen: the library must load on hosts without the toolkit (cache-only mode),
// so nothing links against libnvrtc. nvrtc.h is used for its types only.
#include "jit/nvrtc_compiler.h"

#include <dlfcn.h>

#include <chrono>
#include <cstdlib>
#include <memory>

#include <fmt/format.h>
#include <nvrtc.h>

#include "common/logging.h"
#include "mlajit/error.h"

namespace mlajit::jit {

namespace {

// NVRTC 13 is what the kernels are tested with; the unversioned name is a last resort for
// toolkits that ship only the development symlink.
constexpr const char* kSoname = "libnvrtc.so.13";

std::vector<std::string> library_candidates() {
  std::vector<std::string> candidates = {kSoname};
  for (const char* variable : {"CUDA_HOME", "CUDA_PATH"}) {
    const char* root = std::getenv(variable);
    if (root != nullptr && *root != '\0') {
      candidates.push_back(fmt::format("{}/lib64/{}", root, kSoname));
    }
  }
  candidates.push_back(fmt::format("/usr/local/cuda/lib64/{}", kSoname));
  candidates.push_back(fmt::format("/usr/local/cuda-13.0/lib64/{}", kSoname));
  candidates.push_back("libnvrtc.so");
  return candidates;
}

std::string hex16(uint64_t value) { return fmt::format("{:016x}", value); }

// "sm_90a" -> 90, "compute_100f" -> 100; -1 when the text is not an arch.
int arch_number(const std::string& arch) {
  std::string digits;
  if (arch.rfind("sm_", 0) == 0) digits = arch.substr(3);
  else if (arch.rfind("compute_", 0) == 0) digits = arch.substr(8);
  else return -1;
  if (!digits.empty() && (digits.back() == 'a' || digits.back() == 'f')) digits.pop_back();
  if (digits.empty() || digits.size() > 4 ||
      digits.find_first_not_of("0123456789") != std::string::npos) {
    return -1;
  }
  return std::stoi(digits);
}

}  // namespace

struct NvrtcCompiler::Impl {
  void* handle = nullptr;
  std::string path;
  std::string reason;
  int version = 0;
  std::vector<int> archs;

  decltype(&::nvrtcVersion) Version = nullptr;
  decltype(&::nvrtcGetNumSupportedArchs) GetNumSupportedArchs = nullptr;
  decltype(&::nvrtcGetSupportedArchs) GetSupportedArchs = nullptr;
  decltype(&::nvrtcCreateProgram) CreateProgram = nullptr;
  decltype(&::nvrtcAddNameExpression) AddNameExpression = nullptr;
  decltype(&::nvrtcCompileProgram) CompileProgram = nullptr;
  decltype(&::nvrtcGetProgramLogSize) GetProgramLogSize = nullptr;
  decltype(&::nvrtcGetProgramLog) GetProgramLog = nullptr;
  decltype(&::nvrtcGetCUBINSize) GetCUBINSize = nullptr;
  decltype(&::nvrtcGetCUBIN) GetCUBIN = nullptr;
  decltype(&::nvrtcGetPTXSize) GetPTXSize = nullptr;
  decltype(&::nvrtcGetPTX) GetPTX = nullptr;
  decltype(&::nvrtcGetLoweredName) GetLoweredName = nullptr;
  decltype(&::nvrtcDestroyProgram) DestroyProgram = nullptr;
  decltype(&::nvrtcGetErrorString) GetErrorString = nullptr;

  void load();
  bool open_library();
  bool resolve_symbols();
  void query_library();
  std::string error_text(nvrtcResult result) const {
    return fmt::format("{} ({})", GetErrorString(result), static_cast<int>(result));
  }
};

void NvrtcCompiler::Impl::load() {
  if (!open_library() || !resolve_symbols()) return;
  query_library();
  logger("mlajit.jit")->debug("loaded NVRTC {}.{} from {}", version / 1000, version % 1000 / 10,
                              path);
}

bool NvrtcCompiler::Impl::open_library() {
  std::vector<std::string> failures;
  for (const std::string& candidate : library_candidates()) {
    handle = dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle != nullptr) {
      path = candidate;
      return true;
    }
    const char* why = dlerror();
    failures.push_back(fmt::format("{}: {}", candidate, why ? why : "not found"));
  }
  reason = fmt::format("libnvrtc could not be loaded; tried {}. Install the CUDA 13 toolkit's "
                       "NVRTC or set CUDA_HOME to the toolkit root",
                       fmt::join(failures, "; "));
  return false;
}

bool NvrtcCompiler::Impl::resolve_symbols() {
  std::vector<std::string> missing;
  auto resolve = [&](auto& function, const char* name) {
    function = reinterpret_cast<std::remove_reference_t<decltype(function)>>(dlsym(handle, name));
    if (function == nullptr) missing.push_back(name);
  };
  resolve(Version, "nvrtcVersion");
  resolve(GetNumSupportedArchs, "nvrtcGetNumSupportedArchs");
  resolve(GetSupportedArchs, "nvrtcGetSupportedArchs");
  resolve(CreateProgram, "nvrtcCreateProgram");
  resolve(AddNameExpression, "nvrtcAddNameExpression");
  resolve(CompileProgram, "nvrtcCompileProgram");
  resolve(GetProgramLogSize, "nvrtcGetProgramLogSize");
  resolve(GetProgramLog, "nvrtcGetProgramLog");
  resolve(GetCUBINSize, "nvrtcGetCUBINSize");
  resolve(GetCUBIN, "nvrtcGetCUBIN");
  resolve(GetPTXSize, "nvrtcGetPTXSize");
  resolve(GetPTX, "nvrtcGetPTX");
  resolve(GetLoweredName, "nvrtcGetLoweredName");
  resolve(DestroyProgram, "nvrtcDestroyProgram");
  resolve(GetErrorString, "nvrtcGetErrorString");
  if (missing.empty()) return true;
  reason = fmt::format("{} was loaded but lacks {} (NVRTC 11.2 or newer is needed)", path,
                       fmt::join(missing, ", "));
  return false;
}

void NvrtcCompiler::Impl::query_library() {
  // Record the file the loader really chose, not the name we asked for.
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(Version), &info) != 0 && info.dli_fname != nullptr) {
    path = info.dli_fname;
  }
  int major = 0, minor = 0;
  if (Version(&major, &minor) == NVRTC_SUCCESS) version = major * 1000 + minor * 10;
  int count = 0;
  if (GetNumSupportedArchs(&count) == NVRTC_SUCCESS && count > 0) {
    archs.resize(count);
    if (GetSupportedArchs(archs.data()) != NVRTC_SUCCESS) archs.clear();
  }
}

NvrtcCompiler& NvrtcCompiler::instance() {
  static NvrtcCompiler compiler;  // C++11 static init: loaded once, thread-safe
  return compiler;
}

NvrtcCompiler::NvrtcCompiler() : impl_(new Impl) { impl_->load(); }

bool NvrtcCompiler::available() const noexcept { return impl_->handle && impl_->reason.empty(); }
std::string NvrtcCompiler::unavailable_reason() const { return impl_->reason; }
std::string NvrtcCompiler::library_path() const { return available() ? impl_->path : ""; }
int NvrtcCompiler::version() const { return available() ? impl_->version : 0; }
std::vector<int> NvrtcCompiler::supported_archs() const {
  return available() ? impl_->archs : std::vector<int>{};
}

std::vector<std::string> NvrtcCompiler::options_for(const CompileRequest& request) const {
  // Deliberately no --use_fast_math, -ftz, -lineinfo: the kernels rely on exact IEEE
  // semantics, and line info would make the bytes depend on nothing useful.
  std::vector<std::string> options = {
      "--gpu-architecture=" + request.arch,
      "-std=c++17",
      "-DMLAJIT_NVRTC=1",
  };
  // --minimal leaves NVRTC's built-in declarations of textures, surfaces, device-side
  // runtime calls and launches out of every program: the kernels use none, and the front
  // end parses ~10 ms less per compile (NVRTC 13.0: 60 -> 46 ms of CPU for the hopper
  // program). The code is the same: every cubin of the default matrix is byte-identical
  // with and without it (docs/PERF.md, "Where a compile's time goes"). Known to NVRTC 13.
  if (version() >= 13000) options.push_back("--minimal");
  // Accepted by NVRTC 13.0 (checked): it makes names of anonymous-namespace entities, and so
  // the cubin bytes, independent of the process that compiles.
  if (request.random_seed != 0) options.push_back("-frandom-seed=" + hex16(request.random_seed));
  options.insert(options.end(), request.extra_options.begin(), request.extra_options.end());
  return options;
}

namespace {

void check_arch(const std::string& arch, const std::vector<int>& supported) {
  const int number = arch_number(arch);
  if (number < 0) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("'{}' is not a GPU arch: expected sm_XX[a|f] (cubin) or compute_XX "
                            "(PTX), e.g. sm_90a",
                            arch));
  }
  for (int value : supported) {
    if (value == number) return;
  }
  if (supported.empty()) {
    throw Error(ErrorCode::kUnsupported,
                fmt::format("NVRTC does not support arch '{}': it reported no supported archs "
                            "at all (a broken or stub libnvrtc?)",
                            arch));
  }
  throw Error(ErrorCode::kUnsupported,
              fmt::format("NVRTC does not support arch '{}'; it supports sm_{}", arch,
                          fmt::join(supported, ", sm_")));
}

// Destroys the program on every path out of compile().
struct ProgramGuard {
  nvrtcProgram program = nullptr;
  decltype(&::nvrtcDestroyProgram) destroy;
  ~ProgramGuard() {
    if (program != nullptr) destroy(&program);
  }
};

}  // namespace

CompileResult NvrtcCompiler::compile(const CompileRequest& request) const {
  if (!available()) throw Error(ErrorCode::kNoCompiler, impl_->reason);
  check_arch(request.arch, impl_->archs);
  const Impl& nvrtc = *impl_;
  auto log = logger("mlajit.jit");

  std::vector<const char*> header_sources, header_names;
  for (const auto& [name, contents] : request.headers) {
    header_names.push_back(name.c_str());
    header_sources.push_back(contents.c_str());
  }
  ProgramGuard guard{nullptr, nvrtc.DestroyProgram};
  nvrtcResult result = nvrtc.CreateProgram(
      &guard.program, request.source.c_str(), request.program_name.c_str(),
      static_cast<int>(header_sources.size()), header_sources.data(), header_names.data());
  if (result != NVRTC_SUCCESS) {
    throw Error(ErrorCode::kCompileError,
                fmt::format("nvrtcCreateProgram failed for {}: {}", request.program_name,
                            nvrtc.error_text(result)));
  }
  if (!request.name_expression.empty()) {
    result = nvrtc.AddNameExpression(guard.program, request.name_expression.c_str());
    if (result != NVRTC_SUCCESS) {
      throw Error(ErrorCode::kCompileError,
                  fmt::format("nvrtcAddNameExpression('{}') failed: {}", request.name_expression,
                              nvrtc.error_text(result)));
    }
  }

  CompileResult out;
  out.options = options_for(request);
  std::vector<const char*> option_pointers;
  for (const auto& option : out.options) option_pointers.push_back(option.c_str());

  log->debug("compiling {} ({}) for {}", request.program_name, request.name_expression,
             request.arch);
  const auto start = std::chrono::steady_clock::now();
  result = nvrtc.CompileProgram(guard.program, static_cast<int>(option_pointers.size()),
                                option_pointers.data());
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  size_t log_size = 0;
  if (nvrtc.GetProgramLogSize(guard.program, &log_size) == NVRTC_SUCCESS && log_size > 1) {
    out.log.resize(log_size);
    nvrtc.GetProgramLog(guard.program, out.log.data());
    out.log.resize(log_size - 1);  // drop the terminating null
  }
  if (result != NVRTC_SUCCESS) {
    throw Error(ErrorCode::kCompileError,
                fmt::format("NVRTC failed to compile {} ({}) for {}: {}\noptions: {}\nlog:\n{}",
                            request.program_name, request.name_expression, request.arch,
                            nvrtc.error_text(result), fmt::join(out.options, " "), out.log));
  }

  out.is_ptx = request.arch.rfind("compute_", 0) == 0;
  size_t image_size = 0;
  if (out.is_ptx) {
    result = nvrtc.GetPTXSize(guard.program, &image_size);
    if (result == NVRTC_SUCCESS) {
      out.image.resize(image_size);
      result = nvrtc.GetPTX(guard.program, reinterpret_cast<char*>(out.image.data()));
    }
  } else {
    result = nvrtc.GetCUBINSize(guard.program, &image_size);
    if (result == NVRTC_SUCCESS) {
      out.image.resize(image_size);
      result = nvrtc.GetCUBIN(guard.program, reinterpret_cast<char*>(out.image.data()));
    }
  }
  if (result != NVRTC_SUCCESS || out.image.empty()) {
    throw Error(ErrorCode::kCompileError,
                fmt::format("NVRTC compiled {} for {} but returned no {}: {}",
                            request.program_name, request.arch, out.is_ptx ? "PTX" : "cubin",
                            nvrtc.error_text(result)));
  }

  if (!request.name_expression.empty()) {
    const char* lowered = nullptr;
    result = nvrtc.GetLoweredName(guard.program, request.name_expression.c_str(), &lowered);
    if (result != NVRTC_SUCCESS || lowered == nullptr) {
      throw Error(ErrorCode::kCompileError,
                  fmt::format("NVRTC has no lowered name for '{}' (is it a __global__ function "
                              "template instance?): {}",
                              request.name_expression, nvrtc.error_text(result)));
    }
    out.lowered_name = lowered;  // owned by the program: copy before it is destroyed
  }
  log->info("compiled {} for {} in {:.0f} ms ({} bytes)", request.name_expression, request.arch,
            out.seconds * 1000, out.image.size());
  if (!out.log.empty()) log->debug("NVRTC log for {}:\n{}", request.name_expression, out.log);
  return out;
}

}  // namespace mlajit::jit
