#pragma once
// Versioned structs of the C ABI: every struct starts with struct_size. Reading copies the
// caller's first struct_size bytes over a defaulted struct (fields a caller's older header
// lacks keep their defaults); writing copies at most struct_size bytes back.
#include <cstddef>
#include <cstring>
#include <string>

#include <fmt/format.h>

#include "capi/c_status.h"
#include "mlajit/error.h"

namespace mlajit::capi {

// A struct size a caller states, `what` naming it: at least `first_layout_size` (sizeof the
// struct in the first header version that had it, so that programs built against that
// header keep working; structs still at their first layout pass sizeof, one with appended
// fields the offset of the first of them), at most this library's `library_size`.
inline void check_size(size_t size, const std::string& what, size_t library_size,
                       size_t first_layout_size) {
  if (size < first_layout_size) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}={} is too small: expected {}{} (sizeof the struct: the "
                            "mlajit_*_init() macros fill it)",
                            what, size, library_size,
                            first_layout_size < library_size
                                ? fmt::format(", or {} from an older mlajit.h", first_layout_size)
                                : std::string()));
  }
  if (size > library_size) {
    throw Error(ErrorCode::kUnsupported,
                fmt::format("{}={} is larger than this library's {} bytes: the program was "
                            "built against a newer mlajit.h than the library (version {}) it "
                            "runs with",
                            what, size, library_size, MLAJIT_VERSION_STRING));
  }
}

template <typename T>
void check_struct_size(const T* value, const char* name, size_t first_layout_size = sizeof(T)) {
  if (value == nullptr) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("{} is NULL", name));
  }
  check_size(value->struct_size, fmt::format("{}->struct_size", name), sizeof(T), first_layout_size);
}

// Fills the caller's struct, `struct_size` bytes by its own header (an older header's struct
// is smaller than this library's), with the defaults: no byte past it is written.
template <typename T>
void init_struct(T* destination, size_t struct_size, T defaults, const char* function,
                 size_t first_layout_size = sizeof(T)) {
  if (destination == nullptr) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: the struct pointer is NULL", function));
  }
  check_size(struct_size, fmt::format("{}: struct_size", function), sizeof(T), first_layout_size);
  defaults.struct_size = struct_size;
  std::memcpy(destination, &defaults, struct_size);
}

// init_struct behind the C ABI's error boundary: the body of every mlajit_*_init_sized.
template <typename T>
mlajit_status init_struct_guarded(T* destination, size_t struct_size, T (*defaults)(),
                                  const char* function, size_t first_layout_size) noexcept {
  return guarded([&] { init_struct(destination, struct_size, defaults(), function, first_layout_size); });
}

template <typename T>
T read_struct(const T* value, const T& defaults, const char* name,
              size_t first_layout_size = sizeof(T)) {
  check_struct_size(value, name, first_layout_size);
  T copy = defaults;
  std::memcpy(&copy, value, value->struct_size);
  copy.struct_size = sizeof(T);
  return copy;
}

template <typename T>
void write_struct(T* destination, T value, const char* name,
                  size_t first_layout_size = sizeof(T)) {
  check_struct_size(destination, name, first_layout_size);
  const size_t size = destination->struct_size;
  value.struct_size = size;
  std::memcpy(destination, &value, size);
}

// NUL-terminated copy, truncated to fit.
template <size_t N>
void copy_text(char (&destination)[N], const std::string& text) {
  const size_t length = text.size() < N - 1 ? text.size() : N - 1;
  std::memcpy(destination, text.data(), length);
  destination[length] = '\0';
}

}  // namespace mlajit::capi
