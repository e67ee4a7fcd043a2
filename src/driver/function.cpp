// Function attributes, occupancy and launches (plain and cooperative) via cuLaunchKernelEx.
#include <fmt/format.h>

#include "driver/cuda_driver.h"
#include "driver/driver_api.h"
#include "mlajit/error.h"

namespace mlajit::driver {
namespace {

void require_function(CUfunction function, const char* what) {
  if (function) return;
  throw Error(ErrorCode::kInvalidArgument,
              fmt::format("{} on an empty Function: get one from Library::function first", what));
}

int function_attribute(CUfunction function, CUfunction_attribute which, const char* what) {
  require_function(function, what);
  int value = 0;
  check(detail::api().cuFuncGetAttribute(&value, which, function),
        fmt::format("cuFuncGetAttribute({})", what).c_str());
  return value;
}

unsigned long long grid_blocks(const LaunchConfig& c) {
  return static_cast<unsigned long long>(c.grid_x) * c.grid_y * c.grid_z;
}

unsigned long long block_threads(const LaunchConfig& c) {
  return static_cast<unsigned long long>(c.block_x) * c.block_y * c.block_z;
}

std::string describe_grid(const LaunchConfig& c) {
  return fmt::format("grid {}x{}x{} = {} blocks of {} threads with {} B dynamic shared memory",
                     c.grid_x, c.grid_y, c.grid_z, grid_blocks(c), block_threads(c),
                     c.dynamic_smem_bytes);
}

void check_shape(const LaunchConfig& c, int prepared_smem) {
  if (grid_blocks(c) == 0 || block_threads(c) == 0) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("launch with an empty grid or block: grid {}x{}x{}, block {}x{}x{}; "
                            "every dimension must be at least 1",
                            c.grid_x, c.grid_y, c.grid_z, c.block_x, c.block_y, c.block_z));
  }
  if (static_cast<long long>(c.dynamic_smem_bytes) > prepared_smem) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("launch asks for {} B of dynamic shared memory but the function was "
                            "prepared for {} B: request it from Library::function with at "
                            "least {} B",
                            c.dynamic_smem_bytes, prepared_smem, c.dynamic_smem_bytes));
  }
}

}  // namespace

int Function::max_active_blocks_per_sm(int block_threads, int dynamic_smem_bytes) const {
  require_function(function_, "max_active_blocks_per_sm");
  int blocks = 0;
  check(detail::api().cuOccupancyMaxActiveBlocksPerMultiprocessor(
            &blocks, function_, block_threads, static_cast<size_t>(dynamic_smem_bytes)),
        "cuOccupancyMaxActiveBlocksPerMultiprocessor");
  return blocks;
}

int Function::num_registers() const {
  return function_attribute(function_, CU_FUNC_ATTRIBUTE_NUM_REGS, "NUM_REGS");
}

int Function::local_bytes() const {
  return function_attribute(function_, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, "LOCAL_SIZE_BYTES");
}

namespace {

// Why a cooperative grid might not fit, with the numbers, for both the pre-check and 720.
std::string co_residency_detail(const Function& f, int per_sm, int sms) {
  int attribute = function_attribute(f.handle(), CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                     "MAX_DYNAMIC_SHARED_SIZE_BYTES");
  return fmt::format(
      "occupancy {} block(s)/SM x {} SMs = {} co-resident blocks; the function allows {} B "
      "dynamic shared memory (MAX_DYNAMIC_SHARED_SIZE_BYTES) and uses {} registers/thread",
      per_sm, sms, static_cast<long long>(per_sm) * sms, attribute, f.num_registers());
}

// A cooperative grid must be co-resident; the driver would refuse it with 720 anyway, but
// this names the numbers before anything is queued.
void check_co_resident(const Function& f, const LaunchConfig& c) {
  const DeviceInfo& info = detail::cached_device_info(f.device());
  if (!info.cooperative_launch) {
    throw Error(ErrorCode::kUnsupported,
                fmt::format("device {} ({}) does not support cooperative launches: use the "
                            "non-cooperative path",
                            info.ordinal, info.name));
  }
  int per_sm = f.max_active_blocks_per_sm(static_cast<int>(block_threads(c)),
                                          static_cast<int>(c.dynamic_smem_bytes));
  unsigned long long capacity = static_cast<unsigned long long>(per_sm) * info.sm_count;
  if (grid_blocks(c) <= capacity) return;
  throw Error(ErrorCode::kUnsupported,
              fmt::format("cooperative launch of {} cannot be co-resident on device {} ({}): {}; "
                          "use a grid of at most {} blocks or the non-cooperative path",
                          describe_grid(c), info.ordinal, info.name,
                          co_residency_detail(f, per_sm, info.sm_count), capacity));
}

[[noreturn]] void throw_cooperative_too_large(const Function& f, const LaunchConfig& c,
                                              CUresult result) {
  const DeviceInfo& info = detail::cached_device_info(f.device());
  int per_sm = f.max_active_blocks_per_sm(static_cast<int>(block_threads(c)),
                                          static_cast<int>(c.dynamic_smem_bytes));
  throw Error(ErrorCode::kUnsupported,
              fmt::format("cooperative launch of {} on device {} was refused with {}: either the "
                          "grid is larger than the blocks that can be co-resident (fewer SMs may "
                          "be available under MPS or a partitioned GPU), or the dynamic shared "
                          "memory exceeds the function's attribute; {}",
                          describe_grid(c), info.ordinal, detail::describe(result),
                          co_residency_detail(f, per_sm, info.sm_count)));
}

}  // namespace

void Function::launch(const LaunchConfig& config, void** args) const {
  require_function(function_, "launch");
  check_shape(config, dynamic_smem_bytes_);
  if (config.cooperative) check_co_resident(*this, config);

  CUlaunchAttribute attributes[1] = {};
  attributes[0].id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
  attributes[0].value.cooperative = 1;
  CUlaunchConfig launch = {};
  launch.gridDimX = config.grid_x;
  launch.gridDimY = config.grid_y;
  launch.gridDimZ = config.grid_z;
  launch.blockDimX = config.block_x;
  launch.blockDimY = config.block_y;
  launch.blockDimZ = config.block_z;
  launch.sharedMemBytes = config.dynamic_smem_bytes;
  launch.hStream = config.stream;
  launch.attrs = config.cooperative ? attributes : nullptr;
  launch.numAttrs = config.cooperative ? 1 : 0;

  CUresult result = detail::api().cuLaunchKernelEx(&launch, function_, args, nullptr);
  if (result == CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE) {
    throw_cooperative_too_large(*this, config, result);
  }
  check(result, config.cooperative ? "cuLaunchKernelEx (cooperative)" : "cuLaunchKernelEx");
}

}  // namespace mlajit::driver
