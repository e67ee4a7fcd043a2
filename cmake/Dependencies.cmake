# All third-party code comes from Debian packages and is used header-only, so that
# libmlajit.so and the CLI need nothing beyond libc/libstdc++/libm/libgcc at load time.
find_package(Threads REQUIRED)

# mlajit_find_header(VAR header "what provides it" [find_path options]): find_path, and when the
# header is missing an error that says what provides it and how to install it (find_path's
# REQUIRED names only the header; pip install . users never ran the install script).
function(mlajit_find_header var header provider)
  find_path(${var} ${header} ${ARGN})
  if(NOT ${var})
    message(FATAL_ERROR "${header} was not found: mlajit needs ${provider}. "
      "scripts/install-deps.sh installs every build dependency (Debian packages; root or sudo). "
      "Elsewhere, add the folder that holds ${header} to CMAKE_PREFIX_PATH or CMAKE_INCLUDE_PATH.")
  endif()
endfunction()

mlajit_find_header(MLAJIT_FMT_INCLUDE fmt/format.h "the fmt headers (Debian: libfmt-dev)")
mlajit_find_header(MLAJIT_SPDLOG_INCLUDE spdlog/spdlog.h "the spdlog headers (Debian: libspdlog-dev)")
mlajit_find_header(MLAJIT_XXHASH_INCLUDE xxhash.h "the xxHash header (Debian: libxxhash-dev)")

add_library(mlajit_deps INTERFACE)
target_include_directories(mlajit_deps SYSTEM INTERFACE
  ${MLAJIT_FMT_INCLUDE} ${MLAJIT_SPDLOG_INCLUDE} ${MLAJIT_XXHASH_INCLUDE})
target_compile_definitions(mlajit_deps INTERFACE
  FMT_HEADER_ONLY SPDLOG_HEADER_ONLY SPDLOG_FMT_EXTERNAL XXH_INLINE_ALL)

# fmt alone: all that the CLI and the check library (tools/) use besides the public API.
add_library(mlajit_fmt INTERFACE)
target_include_directories(mlajit_fmt SYSTEM INTERFACE ${MLAJIT_FMT_INCLUDE})
target_compile_definitions(mlajit_fmt INTERFACE FMT_HEADER_ONLY)
