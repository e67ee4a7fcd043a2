// A context-independent kernel image (cuLibraryLoadData) and its per-device functions.
#include <cstring>

#include <fmt/format.h>

#include "driver/cuda_driver.h"
#include "driver/driver_api.h"
#include "mlajit/error.h"

namespace mlajit::driver {
namespace {

bool is_binary_image(const std::vector<uint8_t>& image) {
  static const uint8_t kElfMagic[4] = {0x7f, 'E', 'L', 'F'};
  static const uint8_t kFatbinMagic[4] = {0x50, 0xed, 0x55, 0xba};  // 0xBA55ED50, little endian
  return image.size() >= 4 && (std::memcmp(image.data(), kElfMagic, 4) == 0 ||
                               std::memcmp(image.data(), kFatbinMagic, 4) == 0);
}

std::string device_label(int ordinal) {
  const DeviceInfo& info = detail::cached_device_info(ordinal);
  return fmt::format("device {} ({}, {})", ordinal, info.name, info.arch());
}

// A wrong-arch cubin loads with CUDA_SUCCESS; the mismatch only shows up when a kernel is
// fetched, so that is where we explain it.
[[noreturn]] void throw_no_binary(CUresult result, const std::string& name, int ordinal,
                                  const char* call) {
  std::string arch = detail::cached_device_info(ordinal).arch();
  throw Error(ErrorCode::kUnsupported,
              fmt::format("the kernel image holds no code that runs on {}: {} for '{}' returned "
                          "{}; compile the kernel for {} (a cubin runs only on the arch it was "
                          "built for) or load PTX",
                          device_label(ordinal), call, name, detail::describe(result), arch));
}

CUkernel get_kernel(CUlibrary library, const std::string& name, int ordinal) {
  CUkernel kernel = nullptr;
  CUresult result = detail::api().cuLibraryGetKernel(&kernel, library, name.c_str());
  if (result == CUDA_ERROR_NO_BINARY_FOR_GPU) throw_no_binary(result, name, ordinal, "cuLibraryGetKernel");
  if (result == CUDA_ERROR_NOT_FOUND) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("the kernel image has no kernel named '{}' ({}): pass the lowered "
                            "(mangled) name recorded when the image was compiled",
                            name, detail::describe(result)));
  }
  check(result, "cuLibraryGetKernel");
  return kernel;
}

CUfunction get_function(CUkernel kernel, const std::string& name, int ordinal) {
  // cuKernelGetFunction answers for the current context: make the device's one current.
  detail::ScopedContext scope(detail::primary_context(ordinal));
  CUfunction function = nullptr;
  CUresult result = detail::api().cuKernelGetFunction(&function, kernel);
  if (result == CUDA_ERROR_NO_BINARY_FOR_GPU) throw_no_binary(result, name, ordinal, "cuKernelGetFunction");
  check(result, "cuKernelGetFunction");
  return function;
}

void check_smem_request(const std::string& name, int ordinal, int dynamic_smem_bytes) {
  int limit = detail::cached_device_info(ordinal).smem_per_block_optin;
  if (dynamic_smem_bytes >= 0 && dynamic_smem_bytes <= limit) return;
  throw Error(ErrorCode::kInvalidArgument,
              fmt::format("kernel '{}' asks for {} bytes of dynamic shared memory; {} allows "
                          "0..{} bytes per block",
                          name, dynamic_smem_bytes, device_label(ordinal), limit));
}

}  // namespace

Library::Library(const std::vector<uint8_t>& image) {
  if (image.empty()) {
    throw Error(ErrorCode::kInvalidArgument, "cannot load an empty kernel image (0 bytes)");
  }
  const detail::Api& cu = detail::api();
  // PTX is text and must end in a NUL; cubins and fatbins are binary and go as they are.
  std::vector<uint8_t> terminated;
  const void* code = image.data();
  if (!is_binary_image(image) && image.back() != 0) {
    terminated.assign(image.begin(), image.end());
    terminated.push_back(0);
    code = terminated.data();
  }
  CUresult result = cu.cuLibraryLoadData(&library_, code, nullptr, nullptr, 0, nullptr, nullptr, 0);
  if (result != CUDA_SUCCESS) {
    throw Error(ErrorCode::kCudaError,
                fmt::format("cuLibraryLoadData of a {}-byte kernel image failed: {}",
                            image.size(), detail::describe(result)));
  }
}

Library::~Library() {
  if (!library_) return;
  const detail::Api* cu = detail::api_if_loaded();
  if (cu) warn_in_destructor(cu->cuLibraryUnload(library_), "cuLibraryUnload");
}

Function Library::function(const std::string& lowered_name, int ordinal, int dynamic_smem_bytes) {
  check_smem_request(lowered_name, ordinal, dynamic_smem_bytes);
  std::lock_guard<std::mutex> lock(mutex_);
  auto key = std::make_pair(lowered_name, ordinal);
  auto found = functions_.find(key);
  if (found == functions_.end()) {
    CUfunction function = get_function(get_kernel(library_, lowered_name, ordinal),
                                       lowered_name, ordinal);
    found = functions_.emplace(key, CachedFunction{function, 0}).first;
  }
  CachedFunction& cached = found->second;
  // The attribute belongs to the CUfunction that every copy shares: only ever raise it, so a
  // Function handed out earlier with a larger request stays valid.
  if (dynamic_smem_bytes > cached.dynamic_smem_attribute) {
    check(detail::api().cuFuncSetAttribute(
              cached.function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, dynamic_smem_bytes),
          "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)");
    cached.dynamic_smem_attribute = dynamic_smem_bytes;
  }
  return Function(cached.function, ordinal, dynamic_smem_bytes);
}

}  // namespace mlajit::driver
