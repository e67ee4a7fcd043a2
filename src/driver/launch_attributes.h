#pragma once
// Internal to src/driver/: a LaunchConfig turned into the CUlaunchConfig that cuLaunchKernelEx
// and cuOccupancyMaxActiveClusters take, and the checks that need no driver. Kept apart from
// Function so that the mapping (which attribute for which field) is tested on a machine
// without a GPU: a dropped attribute would otherwise launch without error and only misbehave
// (a grid barrier without co-residency traps; a cluster kernel without clusters reads the
// wrong CTA's shared memory).
#include <cuda.h>

#include <string>

#include "driver/cuda_driver.h"

namespace mlajit::driver::detail {

// The portable cluster size limit: larger clusters need the function attribute
// CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED (16 on sm_90).
constexpr unsigned long long kPortableClusterBlocks = 8;

// The driver's view of one launch. `config.attrs` points into `attributes`, so the object is
// neither copied nor moved once filled.
struct DriverLaunch {
  CUlaunchConfig config = {};
  CUlaunchAttribute attributes[3] = {};
  DriverLaunch() = default;
  DriverLaunch(const DriverLaunch&) = delete;
  DriverLaunch& operator=(const DriverLaunch&) = delete;
};

// Which attributes to put in a DriverLaunch. Occupancy queries take the cluster attribute
// only: cooperative and PDL say nothing about how many clusters fit.
enum class AttributeSet { kAll, kClusterOnly };

// Fills `out` from `config`: grid, block, shared memory, stream, and one attribute per
// feature the config asks for (cooperative; cluster dims when not 1x1x1; programmatic stream
// serialization).
void fill_driver_launch(const LaunchConfig& config, DriverLaunch& out,
                        AttributeSet which = AttributeSet::kAll);

unsigned long long grid_blocks(const LaunchConfig& config);
unsigned long long block_threads(const LaunchConfig& config);
unsigned long long cluster_blocks(const LaunchConfig& config);
bool is_clustered(const LaunchConfig& config);  // cluster dims other than 1x1x1

// "grid 8x1x1 = 8 blocks of 128 threads with 0 B dynamic shared memory", plus the cluster
// dims when clustered: for error messages.
std::string describe_grid(const LaunchConfig& config);

// "cuLaunchKernelEx", or with the attributes in parentheses: "cuLaunchKernelEx (cooperative,
// cluster 2x1x1, programmatic stream serialization)". Names the call in CUDA error messages.
std::string launch_call_name(const LaunchConfig& config);

// Throws Error(kInvalidArgument) for an empty grid or block, more dynamic shared memory than
// the function was prepared for, a zero cluster dimension, or a grid dimension that is not a
// multiple of the cluster's (the driver refuses that too, but a CUresult cannot say which
// dimension or by how much). Needs no driver.
void check_launch_shape(const LaunchConfig& config, int prepared_smem);

}  // namespace mlajit::driver::detail
