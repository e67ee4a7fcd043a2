#pragma once
// The C ABI's error boundary: every exported function runs its body through guarded(), which
// turns any exception into a status and keeps the message for mlajit_last_error().
#include <string>
#include <utility>

#include "mlajit/mlajit.h"

namespace mlajit::capi {

// Records the message of this thread's last call ("" = success).
// Takes a C string: a std::string argument could throw bad_alloc at the call site, outside
// any guard. Out of memory for the copy, the message is left empty.
void set_last_error(const char* message) noexcept;
void clear_last_error() noexcept;
const char* last_error_text() noexcept;  // never null

// Runs `body` (returning void); maps mlajit::Error to its code, std::bad_alloc to
// MLAJIT_ERROR_OUT_OF_MEMORY and anything else to MLAJIT_ERROR_INTERNAL.
mlajit_status status_of_current_exception() noexcept;

template <typename Body>
mlajit_status guarded(Body&& body) noexcept {
  try {
    std::forward<Body>(body)();
    clear_last_error();
    return MLAJIT_OK;
  } catch (...) {
    return status_of_current_exception();
  }
}

// A failure found by the C layer itself (null pointer, bad struct_size). Takes the text as a
// C string: building a std::string at the call site could throw bad_alloc outside guarded().
mlajit_status fail(mlajit_status status, const char* message) noexcept;

}  // namespace mlajit::capi
