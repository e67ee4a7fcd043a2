// LaunchConfig -> CUlaunchConfig with its launch attributes, and the launch checks that need
// no driver.
#include "driver/launch_attributes.h"

#include <vector>

#include <fmt/format.h>

#include "mlajit/error.h"

namespace mlajit::driver::detail {

unsigned long long grid_blocks(const LaunchConfig& c) {
  return static_cast<unsigned long long>(c.grid_x) * c.grid_y * c.grid_z;
}

unsigned long long block_threads(const LaunchConfig& c) {
  return static_cast<unsigned long long>(c.block_x) * c.block_y * c.block_z;
}

unsigned long long cluster_blocks(const LaunchConfig& c) {
  return static_cast<unsigned long long>(c.cluster_x) * c.cluster_y * c.cluster_z;
}

bool is_clustered(const LaunchConfig& c) {
  return c.cluster_x != 1 || c.cluster_y != 1 || c.cluster_z != 1;
}

std::string describe_grid(const LaunchConfig& c) {
  std::string text =
      fmt::format("grid {}x{}x{} = {} blocks of {} threads with {} B dynamic shared memory",
                  c.grid_x, c.grid_y, c.grid_z, grid_blocks(c), block_threads(c),
                  c.dynamic_smem_bytes);
  if (is_clustered(c)) {
    text += fmt::format(", in clusters of {}x{}x{} = {} blocks", c.cluster_x, c.cluster_y,
                        c.cluster_z, cluster_blocks(c));
  }
  return text;
}

std::string launch_call_name(const LaunchConfig& c) {
  std::vector<std::string> parts;
  if (c.cooperative) parts.emplace_back("cooperative");
  if (is_clustered(c)) {
    parts.push_back(fmt::format("cluster {}x{}x{}", c.cluster_x, c.cluster_y, c.cluster_z));
  }
  if (c.programmatic_stream_serialization) {
    parts.emplace_back("programmatic stream serialization");
  }
  if (parts.empty()) return "cuLaunchKernelEx";
  return fmt::format("cuLaunchKernelEx ({})", fmt::join(parts, ", "));
}

void fill_driver_launch(const LaunchConfig& c, DriverLaunch& out, AttributeSet which) {
  out.config = {};
  out.config.gridDimX = c.grid_x;
  out.config.gridDimY = c.grid_y;
  out.config.gridDimZ = c.grid_z;
  out.config.blockDimX = c.block_x;
  out.config.blockDimY = c.block_y;
  out.config.blockDimZ = c.block_z;
  out.config.sharedMemBytes = c.dynamic_smem_bytes;
  out.config.hStream = c.stream;
  unsigned count = 0;
  const bool all = which == AttributeSet::kAll;
  if (all && c.cooperative) {
    out.attributes[count] = {};
    out.attributes[count].id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
    out.attributes[count].value.cooperative = 1;
    ++count;
  }
  // 1x1x1 is left out, so that a launch without clusters makes the same call as before
  // LaunchConfig had cluster dims.
  if (is_clustered(c)) {
    out.attributes[count] = {};
    out.attributes[count].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    out.attributes[count].value.clusterDim.x = c.cluster_x;
    out.attributes[count].value.clusterDim.y = c.cluster_y;
    out.attributes[count].value.clusterDim.z = c.cluster_z;
    ++count;
  }
  if (all && c.programmatic_stream_serialization) {
    out.attributes[count] = {};
    out.attributes[count].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    out.attributes[count].value.programmaticStreamSerializationAllowed = 1;
    ++count;
  }
  out.config.attrs = count ? out.attributes : nullptr;
  out.config.numAttrs = count;
}

namespace {

void check_cluster_shape(const LaunchConfig& c) {
  if (c.cluster_x == 0 || c.cluster_y == 0 || c.cluster_z == 0) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("launch with a zero cluster dimension: cluster {}x{}x{}; every "
                            "dimension must be at least 1 (1x1x1 means no cluster)",
                            c.cluster_x, c.cluster_y, c.cluster_z));
  }
  const unsigned grid[3] = {c.grid_x, c.grid_y, c.grid_z};
  const unsigned cluster[3] = {c.cluster_x, c.cluster_y, c.cluster_z};
  const char* axis[3] = {"x", "y", "z"};
  for (int i = 0; i < 3; ++i) {
    if (grid[i] % cluster[i] == 0) continue;
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("grid {}x{}x{} is not divisible by cluster {}x{}x{}: grid_{} = {} is "
                            "not a multiple of cluster_{} = {}; every grid dimension must be a "
                            "multiple of the cluster dimension",
                            c.grid_x, c.grid_y, c.grid_z, c.cluster_x, c.cluster_y, c.cluster_z,
                            axis[i], grid[i], axis[i], cluster[i]));
  }
}

}  // namespace

void check_launch_shape(const LaunchConfig& c, int prepared_smem) {
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
  check_cluster_shape(c);
}

}  // namespace mlajit::driver::detail
