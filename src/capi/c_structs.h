#pragma once
// Versioned structs of the C ABI: every struct starts with struct_size. Reading copies the
// caller's first struct_size bytes over a defaulted struct (fields a caller's older header
// lacks keep their defaults); writing copies at most struct_size bytes back.
#include <cstddef>
#include <cstring>
#include <string>

#include <fmt/format.h>

#include "mlajit/error.h"

namespace mlajit::capi {

// `first_layout_size`: sizeof the struct in the first header version that had it, so that
// programs built against that header keep working. Structs still at their first layout pass
// sizeof(T); one with appended fields passes the offset of the first of them.
template <typename T>
void check_struct_size(const T* value, const char* name, size_t first_layout_size = sizeof(T)) {
  if (value == nullptr) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("{} is NULL", name));
  }
  const size_t size = value->struct_size;
  if (size < first_layout_size) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}->struct_size={} is too small: expected {}{} (set it to sizeof "
                            "the struct, or fill the struct with its mlajit_*_init() function)",
                            name, size, sizeof(T),
                            first_layout_size < sizeof(T)
                                ? fmt::format(", or {} from an older mlajit.h", first_layout_size)
                                : std::string()));
  }
  if (size > sizeof(T)) {
    throw Error(ErrorCode::kUnsupported,
                fmt::format("{}->struct_size={} is larger than this library's {} bytes: the "
                            "program was built against a newer mlajit.h than the library "
                            "(version {}) it runs with",
                            name, size, sizeof(T), MLAJIT_VERSION_STRING));
  }
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
