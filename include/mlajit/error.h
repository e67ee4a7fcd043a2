#pragma once
// The one exception type of the C++ API. Every failure the library can meet (bad input,
// missing driver or compiler, a compile error, an unusable cache) surfaces as mlajit::Error
// with a code a program can branch on and a message a person can act on.
#include <stdexcept>
#include <string>

#include "mlajit/export.h"

namespace mlajit {

enum class ErrorCode : int {
  kInvalidArgument = 1,  // a caller passed a value outside what is documented
  kUnsupported = 2,      // a valid request this build or device cannot serve
  kNoDriver = 3,         // libcuda.so.1 could not be loaded, or cuInit failed
  kNoDevice = 4,         // no CUDA device, or the ordinal is out of range
  kCudaError = 5,        // a CUDA driver call failed
  kNoCompiler = 6,       // libnvrtc could not be loaded
  kCompileError = 7,     // NVRTC rejected the generated program (the log is in the message)
  kCacheMiss = 8,        // MLAJIT_NO_JIT is set and no cache layer holds the kernel
  kIoError = 9,          // a file operation failed
  kInternal = 10,        // a broken invariant inside the library: please report it
};

MLAJIT_API const char* error_code_name(ErrorCode code) noexcept;

class MLAJIT_API Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& message);
  ErrorCode code() const noexcept { return code_; }

 private:
  ErrorCode code_;
};

}  // namespace mlajit
