#include "capi/c_status.h"

#include <new>

#include "mlajit/error.h"

namespace mlajit::capi {
namespace {

// One message per thread: a binding may call from many threads, each reads its own error.
thread_local std::string last_error;

}  // namespace

void set_last_error(const char* message) noexcept {
  try {
    last_error = message;
  } catch (...) {
    last_error.clear();
  }
}

void clear_last_error() noexcept { last_error.clear(); }

const char* last_error_text() noexcept { return last_error.c_str(); }

mlajit_status status_of_current_exception() noexcept {
  try {
    throw;
  } catch (const Error& error) {
    set_last_error(error.what());
    return static_cast<mlajit_status>(static_cast<int>(error.code()));
  } catch (const std::bad_alloc&) {
    set_last_error("out of host memory");
    return MLAJIT_ERROR_OUT_OF_MEMORY;
  } catch (const std::exception& error) {
    try {  // the concatenation may itself run out of memory: never throw from here
      set_last_error(
          (std::string("unexpected exception inside mlajit (please report): ") + error.what())
              .c_str());
    } catch (...) {
      set_last_error("unexpected exception inside mlajit (please report)");
    }
    return MLAJIT_ERROR_INTERNAL;
  } catch (...) {
    set_last_error("unexpected non-standard exception inside mlajit (please report)");
    return MLAJIT_ERROR_INTERNAL;
  }
}

mlajit_status fail(mlajit_status status, const char* message) noexcept {
  set_last_error(message);
  return status;
}

}  // namespace mlajit::capi

extern "C" {

const char* mlajit_last_error(void) { return mlajit::capi::last_error_text(); }

const char* mlajit_status_name(mlajit_status status) {
  if (status == MLAJIT_OK) return "ok";
  if (status == MLAJIT_ERROR_OUT_OF_MEMORY) return "out of memory";
  if (status >= MLAJIT_ERROR_INVALID_ARGUMENT && status <= MLAJIT_ERROR_INTERNAL) {
    return mlajit::error_code_name(static_cast<mlajit::ErrorCode>(static_cast<int>(status)));
  }
  return "unknown status";
}

}  // extern "C"
