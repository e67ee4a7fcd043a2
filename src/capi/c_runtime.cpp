// Version, devices, kernel families, tile configs, cache and precompile through the C ABI.
#include <cstddef>
#include <vector>

#include <fmt/format.h>

#include "capi/c_conversions.h"
#include "capi/c_status.h"
#include "capi/c_structs.h"
#include "mlajit/mlajit.h"
#include "mlajit/runtime.h"

namespace {

using mlajit::capi::fail;
using mlajit::capi::guarded;

// The 0.1 layout, without the family appended in 0.2.0.
constexpr size_t kTileInfoFirstLayout = offsetof(mlajit_tile_info, family);

// Parsed once: "0.1.0" -> numbers, so they cannot disagree with the string.
void parse_version(int* major, int* minor, int* patch) {
  int numbers[3] = {0, 0, 0};
  const char* text = mlajit::version();
  for (int index = 0; index < 3 && *text != '\0'; ++index) {
    while (*text >= '0' && *text <= '9') numbers[index] = numbers[index] * 10 + (*text++ - '0');
    if (*text == '.') ++text;
  }
  if (major) *major = numbers[0];
  if (minor) *minor = numbers[1];
  if (patch) *patch = numbers[2];
}

}  // namespace

extern "C" {

const char* mlajit_version(void) {
  mlajit::capi::clear_last_error();
  return mlajit::version();
}

void mlajit_version_numbers(int* major, int* minor, int* patch) {
  mlajit::capi::clear_last_error();
  parse_version(major, minor, patch);
}

int mlajit_driver_available(void) {
  if (mlajit::driver_available()) {
    mlajit::capi::clear_last_error();
    return 1;
  }
  try {
    mlajit::capi::set_last_error(mlajit::driver_unavailable_reason().c_str());
  } catch (...) {  // no memory to build the reason: a fixed text, never an exception across the ABI
    mlajit::capi::set_last_error("the CUDA driver is not available");
  }
  return 0;
}

mlajit_status mlajit_device_count(int* count) {
  if (count == nullptr) return fail(MLAJIT_ERROR_INVALID_ARGUMENT, "mlajit_device_count: count is NULL");
  return guarded([&] { *count = mlajit::device_count(); });
}

mlajit_status mlajit_device_info_get(int ordinal, mlajit_device_info* info) {
  return guarded([&] {
    mlajit::capi::check_struct_size(info, "info");
    const mlajit::DeviceSummary summary = mlajit::device_summary(ordinal);
    mlajit_device_info c{};
    c.ordinal = summary.ordinal;
    mlajit::capi::copy_text(c.name, summary.name);
    mlajit::capi::copy_text(c.arch, summary.arch);
    c.cc_major = summary.cc_major;
    c.cc_minor = summary.cc_minor;
    c.sm_count = summary.sm_count;
    c.smem_per_sm = summary.smem_per_sm;
    c.smem_per_block_optin = summary.smem_per_block_optin;
    c.cooperative_launch = summary.cooperative_launch ? 1 : 0;
    mlajit::capi::write_struct(info, c, "info");
  });
}

mlajit_status mlajit_kernel_family_count(int* count) {
  if (count == nullptr) {
    return fail(MLAJIT_ERROR_INVALID_ARGUMENT, "mlajit_kernel_family_count: count is NULL");
  }
  return guarded([&] { *count = static_cast<int>(mlajit::kernel_families().size()); });
}

mlajit_status mlajit_kernel_family_get(int index, mlajit_kernel_family_info* info) {
  return guarded([&] {
    mlajit::capi::check_struct_size(info, "info");
    const std::vector<mlajit::KernelFamilyInfo> families = mlajit::kernel_families();
    if (index < 0 || static_cast<size_t>(index) >= families.size()) {
      throw mlajit::Error(mlajit::ErrorCode::kInvalidArgument,
                          fmt::format("mlajit_kernel_family_get: index={} is out of range: "
                                      "expected 0..{}",
                                      index, static_cast<int>(families.size()) - 1));
    }
    mlajit::capi::write_struct(info, mlajit::capi::to_kernel_family_info(families[index]), "info");
  });
}

mlajit_status mlajit_tile_for_device(int ordinal, const mlajit_shape* shape,
                                     mlajit_tile_info* info) {
  return guarded([&] {
    mlajit::capi::check_struct_size(info, "info", kTileInfoFirstLayout);
    const mlajit::TileChoice choice = mlajit::tile_for(ordinal, mlajit::capi::to_shape(shape));
    mlajit::capi::write_struct(info, mlajit::capi::to_tile_info(choice), "info",
                               kTileInfoFirstLayout);
  });
}

mlajit_status mlajit_tile_for_arch(const char* arch, const mlajit_shape* shape,
                                   mlajit_tile_info* info) {
  if (arch == nullptr) return fail(MLAJIT_ERROR_INVALID_ARGUMENT, "mlajit_tile_for_arch: arch is NULL");
  return guarded([&] {
    mlajit::capi::check_struct_size(info, "info", kTileInfoFirstLayout);
    const mlajit::TileChoice choice = mlajit::tile_for_arch(arch, mlajit::capi::to_shape(shape));
    mlajit::capi::write_struct(info, mlajit::capi::to_tile_info(choice), "info",
                               kTileInfoFirstLayout);
  });
}

mlajit_status mlajit_cache_stats_get(mlajit_cache_stats* stats) {
  return guarded([&] {
    constexpr size_t first_layout = offsetof(mlajit_cache_stats, read_only_dirs);
    mlajit::capi::check_struct_size(stats, "stats", first_layout);
    const mlajit::CacheSummary summary = mlajit::cache_stats();
    mlajit_cache_stats c{};
    c.memory_hits = summary.memory_hits;
    c.disk_hits = summary.disk_hits;
    c.misses = summary.misses;
    c.builds = summary.builds;
    c.bad_entries = summary.bad_entries;
    c.build_seconds = summary.build_seconds;
    c.user_dir_writable = summary.user_dir_writable ? 1 : 0;
    c.no_jit = summary.no_jit ? 1 : 0;
    mlajit::capi::copy_text(c.user_dir, summary.user_dir);
    mlajit::capi::copy_text(c.read_only_dirs,
                            fmt::format("{}", fmt::join(summary.read_only_dirs, ":")));
    mlajit::capi::write_struct(stats, c, "stats", first_layout);
  });
}

mlajit_status mlajit_precompile(const char* spec_text, mlajit_precompile_result* result) {
  if (spec_text == nullptr) return fail(MLAJIT_ERROR_INVALID_ARGUMENT, "mlajit_precompile: spec_text is NULL");
  return guarded([&] {
    if (result != nullptr) mlajit::capi::check_struct_size(result, "result");
    const mlajit::PrecompileResult cpp = mlajit::precompile(std::string(spec_text));
    if (result == nullptr) return;
    mlajit_precompile_result c{};
    c.from_cache = cpp.from_cache ? 1 : 0;
    c.bytes = cpp.bytes;
    c.compile_seconds = cpp.compile_seconds;
    mlajit::capi::copy_text(c.key, cpp.key);
    mlajit::capi::write_struct(result, c, "result");
  });
}

}  // extern "C"
