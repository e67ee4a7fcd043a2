#include "mlajit/error.h"

namespace mlajit {

const char* error_code_name(ErrorCode code) noexcept {
  switch (code) {
    case ErrorCode::kInvalidArgument: return "invalid argument";
    case ErrorCode::kUnsupported: return "unsupported";
    case ErrorCode::kNoDriver: return "no CUDA driver";
    case ErrorCode::kNoDevice: return "no CUDA device";
    case ErrorCode::kCudaError: return "CUDA error";
    case ErrorCode::kNoCompiler: return "no NVRTC compiler";
    case ErrorCode::kCompileError: return "compile error";
    case ErrorCode::kCacheMiss: return "cache miss with JIT disabled";
    case ErrorCode::kIoError: return "I/O error";
    case ErrorCode::kInternal: return "internal error";
  }
  return "unknown error";
}

Error::Error(ErrorCode code, const std::string& message)
    : std::runtime_error(message), code_(code) {}

}  // namespace mlajit
