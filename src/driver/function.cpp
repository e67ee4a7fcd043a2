// Function attributes, occupancy and launches through cuLaunchKernelEx: plain, cooperative,
// clustered, with programmatic stream serialization, or any combination.
#include <algorithm>

#include <fmt/format.h>

#include "driver/cuda_driver.h"
#include "driver/driver_api.h"
#include "driver/launch_attributes.h"
#include "mlajit/error.h"

namespace mlajit::driver {
namespace {

using detail::block_threads;
using detail::cluster_blocks;
using detail::describe_grid;
using detail::grid_blocks;

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

// Clusters need sm_90; older devices would answer the launch with a bare CUDA error.
void require_cluster_support(int ordinal, const LaunchConfig& c) {
  const DeviceInfo& info = detail::cached_device_info(ordinal);
  if (info.cc_major >= 9) return;
  throw Error(ErrorCode::kUnsupported,
              fmt::format("launch with clusters of {}x{}x{} on device {} ({}, {}): thread block "
                          "clusters need compute capability 9.0 or newer; launch without "
                          "cluster dims (1x1x1)",
                          c.cluster_x, c.cluster_y, c.cluster_z, info.ordinal, info.name,
                          info.arch()));
}

// Above the portable size the driver refuses a cluster unless the function opts in. The
// attribute is per function and only widens what it accepts, so setting it again is harmless.
void allow_cluster_size(CUfunction function, const LaunchConfig& c) {
  if (cluster_blocks(c) <= detail::kPortableClusterBlocks) return;
  check(detail::api().cuFuncSetAttribute(function,
                                         CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1),
        "cuFuncSetAttribute(NON_PORTABLE_CLUSTER_SIZE_ALLOWED)");
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

int Function::max_active_clusters(const LaunchConfig& config) const {
  require_function(function_, "max_active_clusters");
  // The answer does not depend on the grid: ask with a grid of one cluster, so that any grid
  // the caller passed (or none yet) is accepted. (A zero cluster dim keeps a grid of 1, so
  // the check below names the cluster, not an empty grid.)
  LaunchConfig one_cluster = config;
  one_cluster.grid_x = std::max(config.cluster_x, 1u);
  one_cluster.grid_y = std::max(config.cluster_y, 1u);
  one_cluster.grid_z = std::max(config.cluster_z, 1u);
  detail::check_launch_shape(one_cluster, dynamic_smem_bytes_);
  require_cluster_support(ordinal_, config);
  allow_cluster_size(function_, config);
  detail::DriverLaunch query;
  detail::fill_driver_launch(one_cluster, query, detail::AttributeSet::kClusterOnly);
  // The query needs a cluster size, and fill_driver_launch leaves 1x1x1 out: state it.
  if (query.config.numAttrs == 0) {
    query.attributes[0].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    query.attributes[0].value.clusterDim.x = 1;
    query.attributes[0].value.clusterDim.y = 1;
    query.attributes[0].value.clusterDim.z = 1;
    query.config.attrs = query.attributes;
    query.config.numAttrs = 1;
  }
  int clusters = 0;
  check(detail::api().cuOccupancyMaxActiveClusters(&clusters, function_, &query.config),
        fmt::format("cuOccupancyMaxActiveClusters (cluster {}x{}x{}, block {} threads, {} B "
                    "dynamic shared memory)",
                    config.cluster_x, config.cluster_y, config.cluster_z, block_threads(config),
                    config.dynamic_smem_bytes)
            .c_str());
  return clusters;
}

int Function::num_registers() const {
  return function_attribute(function_, CU_FUNC_ATTRIBUTE_NUM_REGS, "NUM_REGS");
}

int Function::local_bytes() const {
  return function_attribute(function_, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, "LOCAL_SIZE_BYTES");
}

namespace {

// How many blocks of a cooperative launch can be co-resident, and the numbers behind it, for
// both the pre-check and 720. Clusters must each fit inside one GPC, so for a clustered launch
// blocks/SM x SMs overstates it and the cluster occupancy is the bound.
struct CoResidency {
  unsigned long long capacity = 0;
  std::string detail;
};

CoResidency co_residency(const Function& f, const LaunchConfig& c) {
  const DeviceInfo& info = detail::cached_device_info(f.device());
  int attribute = function_attribute(f.handle(), CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                     "MAX_DYNAMIC_SHARED_SIZE_BYTES");
  std::string resources = fmt::format(
      "the function allows {} B dynamic shared memory (MAX_DYNAMIC_SHARED_SIZE_BYTES) and uses "
      "{} registers/thread",
      attribute, f.num_registers());
  CoResidency result;
  if (detail::is_clustered(c)) {
    int clusters = f.max_active_clusters(c);
    result.capacity = static_cast<unsigned long long>(clusters) * cluster_blocks(c);
    result.detail = fmt::format("occupancy {} cluster(s) of {} blocks = {} co-resident blocks; {}",
                                clusters, cluster_blocks(c), result.capacity, resources);
    return result;
  }
  int per_sm = f.max_active_blocks_per_sm(static_cast<int>(block_threads(c)),
                                          static_cast<int>(c.dynamic_smem_bytes));
  result.capacity = static_cast<unsigned long long>(per_sm) * info.sm_count;
  result.detail = fmt::format("occupancy {} block(s)/SM x {} SMs = {} co-resident blocks; {}",
                              per_sm, info.sm_count, result.capacity, resources);
  return result;
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
  CoResidency fit = co_residency(f, c);
  if (grid_blocks(c) <= fit.capacity) return;
  throw Error(ErrorCode::kUnsupported,
              fmt::format("cooperative launch of {} cannot be co-resident on device {} ({}): {}; "
                          "use a grid of at most {} blocks or the non-cooperative path",
                          describe_grid(c), info.ordinal, info.name, fit.detail, fit.capacity));
}

[[noreturn]] void throw_cooperative_too_large(const Function& f, const LaunchConfig& c,
                                              CUresult result) {
  const DeviceInfo& info = detail::cached_device_info(f.device());
  throw Error(ErrorCode::kUnsupported,
              fmt::format("cooperative launch of {} on device {} was refused with {}: either the "
                          "grid is larger than the blocks that can be co-resident (fewer SMs may "
                          "be available under MPS or a partitioned GPU), or the dynamic shared "
                          "memory exceeds the function's attribute; {}",
                          describe_grid(c), info.ordinal, detail::describe(result),
                          co_residency(f, c).detail));
}

// CUDA_ERROR_INVALID_CLUSTER_SIZE names neither cause; the occupancy query tells them apart
// (0 clusters: one cluster's blocks do not fit in a GPC with these resources).
[[noreturn]] void throw_cluster_refused(const Function& f, const LaunchConfig& c,
                                        CUresult result) {
  const DeviceInfo& info = detail::cached_device_info(f.device());
  std::string occupancy;
  try {
    occupancy = fmt::format("cuOccupancyMaxActiveClusters answers {} for this cluster",
                            f.max_active_clusters(c));
  } catch (const Error& e) {
    occupancy = fmt::format("the cluster occupancy query failed too ({})", e.what());
  }
  throw Error(ErrorCode::kUnsupported,
              fmt::format("launch of {} on device {} ({}) was refused with {}: either the "
                          "cluster has more blocks than the device allows (8 is portable; sm_90 "
                          "allows up to 16, which this layer opts into above 8), or one "
                          "cluster's blocks do not fit in one GPC with this block size and "
                          "shared memory; {}",
                          describe_grid(c), info.ordinal, info.name, detail::describe(result),
                          occupancy));
}

}  // namespace

void Function::launch(const LaunchConfig& config, void** args) const {
  require_function(function_, "launch");
  detail::check_launch_shape(config, dynamic_smem_bytes_);
  if (detail::is_clustered(config)) {
    require_cluster_support(ordinal_, config);
    allow_cluster_size(function_, config);
  }
  if (config.cooperative) check_co_resident(*this, config);

  detail::DriverLaunch launch;
  detail::fill_driver_launch(config, launch);
  CUresult result = detail::api().cuLaunchKernelEx(&launch.config, function_, args, nullptr);
  if (result == CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE) {
    throw_cooperative_too_large(*this, config, result);
  }
  if (result == CUDA_ERROR_INVALID_CLUSTER_SIZE) throw_cluster_refused(*this, config, result);
  check(result, detail::launch_call_name(config).c_str());
}

}  // namespace mlajit::driver
