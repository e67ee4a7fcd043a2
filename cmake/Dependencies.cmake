# All third-party code comes from Debian packages and is used header-only, so that
# libmlajit.so and the CLI need nothing beyond libc/libstdc++/libm/libgcc at load time.
find_package(Threads REQUIRED)

find_path(MLAJIT_FMT_INCLUDE fmt/format.h REQUIRED)
find_path(MLAJIT_SPDLOG_INCLUDE spdlog/spdlog.h REQUIRED)
find_path(MLAJIT_XXHASH_INCLUDE xxhash.h REQUIRED)

add_library(mlajit_deps INTERFACE)
target_include_directories(mlajit_deps SYSTEM INTERFACE
  ${MLAJIT_FMT_INCLUDE} ${MLAJIT_SPDLOG_INCLUDE} ${MLAJIT_XXHASH_INCLUDE})
target_compile_definitions(mlajit_deps INTERFACE
  FMT_HEADER_ONLY SPDLOG_HEADER_ONLY SPDLOG_FMT_EXTERNAL XXH_INLINE_ALL)

# fmt alone: all that the CLI and the check library (tools/) use besides the public API.
add_library(mlajit_fmt INTERFACE)
target_include_directories(mlajit_fmt SYSTEM INTERFACE ${MLAJIT_FMT_INCLUDE})
target_compile_definitions(mlajit_fmt INTERFACE FMT_HEADER_ONLY)
