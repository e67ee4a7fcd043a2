// Turning a CUresult into an Error whose message names the call, the CUDA error name and its
// text. Works without a driver too (then it can only give the number).
#include <fmt/format.h>

#include "common/logging.h"
#include "driver/cuda_driver.h"
#include "driver/driver_api.h"
#include "mlajit/error.h"

namespace mlajit::driver {
namespace detail {

std::string describe(CUresult result) {
  const Api* table = error_api_if_loaded();
  const char* name = nullptr;
  const char* text = nullptr;
  if (table) {
    if (table->cuGetErrorName(result, &name) != CUDA_SUCCESS) name = nullptr;
    if (table->cuGetErrorString(result, &text) != CUDA_SUCCESS) text = nullptr;
  }
  int code = static_cast<int>(result);
  if (name && text) return fmt::format("{} ({}, code {})", name, text, code);
  if (name) return fmt::format("{} (code {})", name, code);
  return fmt::format("CUDA error code {}", code);
}

}  // namespace detail

void check(CUresult result, const char* call) {
  if (result == CUDA_SUCCESS) return;
  throw Error(ErrorCode::kCudaError,
              fmt::format("{} failed: {}", call ? call : "a CUDA driver call",
                          detail::describe(result)));
}

void warn_in_destructor(CUresult result, const char* call) noexcept {
  if (result == CUDA_SUCCESS) return;
  try {
    const auto level =
        result == CUDA_ERROR_DEINITIALIZED ? spdlog::level::debug : spdlog::level::warn;
    logger("mlajit.driver")->log(level, "{} failed in a destructor: {}", call, detail::describe(result));
  } catch (...) {  // logging itself failed (out of memory): nothing more to do in a destructor
  }
}

}  // namespace mlajit::driver
