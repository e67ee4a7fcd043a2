#pragma once
// NVRTC, loaded with dlopen: libnvrtc.so.13 from the loader path, then
// $CUDA_HOME/lib64, $CUDA_PATH/lib64, /usr/local/cuda/lib64. Knows nothing of launching.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace mlajit::jit {

struct CompileRequest {
  std::string program_name = "mlajit.cu";
  std::string source;                          // the main translation unit
  std::map<std::string, std::string> headers;  // name -> contents, for #include "name"
  std::string name_expression;                 // e.g. "mlajit_kernel::mla_fa2_kernel"
  std::string arch = "sm_90";                  // "sm_XX[a|f]" -> cubin, "compute_XX" -> PTX
  std::vector<std::string> extra_options;      // appended after the canonical options
  uint64_t random_seed = 0;                    // -> -frandom-seed=<hex>, from the cache key
};

struct CompileResult {
  std::vector<uint8_t> image;        // cubin, or PTX text (null-terminated) for compute_XX
  bool is_ptx = false;
  std::string lowered_name;          // nvrtcGetLoweredName of the name expression
  std::string log;                   // the NVRTC log (warnings), may be empty
  std::vector<std::string> options;  // the exact option list passed to NVRTC
  double seconds = 0;                // wall time of nvrtcCompileProgram
};

class NvrtcCompiler {
 public:
  // The process-wide instance; loading is attempted once, on first call.
  static NvrtcCompiler& instance();

  bool available() const noexcept;
  std::string unavailable_reason() const;  // what was tried and why it failed
  std::string library_path() const;        // the file that was loaded
  int version() const;                     // major * 1000 + minor * 10 (13000 for 13.0)
  std::vector<int> supported_archs() const;  // nvrtcGetSupportedArchs, e.g. {75, 80, ..., 121}

  // The canonical option list for a request (without the name expression); part of the
  // cache key, so it must depend on nothing but the request.
  std::vector<std::string> options_for(const CompileRequest& request) const;

  // Throws Error(kNoCompiler) when NVRTC is missing, Error(kUnsupported) for an arch NVRTC
  // does not support (listing the supported ones), Error(kCompileError) with the log.
  CompileResult compile(const CompileRequest& request) const;

 private:
  NvrtcCompiler();
  struct Impl;
  Impl* impl_;
};

}  // namespace mlajit::jit
