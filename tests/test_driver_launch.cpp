// Launch attributes without a GPU: which attribute each LaunchConfig field becomes, the
// checks made before the driver is asked, that the loader resolves the new entry points where
// a driver works, and that the probe kernels the GPU tests run compile for sm_90a.
#include <string>

#include <catch2/catch.hpp>

#include "driver/cuda_driver.h"
#include "driver/driver_api.h"
#include "driver/launch_attributes.h"
#include "jit/nvrtc_compiler.h"
#include "mlajit/error.h"
#include "tests/probe_programs.h"

namespace drv = mlajit::driver;
using mlajit::Error;
using mlajit::ErrorCode;

namespace {

drv::LaunchConfig grid_of(unsigned x, unsigned y = 1, unsigned z = 1) {
  drv::LaunchConfig config;
  config.grid_x = x;
  config.grid_y = y;
  config.grid_z = z;
  config.block_x = 128;
  return config;
}

// The attribute with `id` in a filled launch, or nullptr.
const CUlaunchAttribute* find_attribute(const drv::detail::DriverLaunch& launch,
                                        CUlaunchAttributeID id) {
  for (unsigned i = 0; i < launch.config.numAttrs; ++i) {
    if (launch.config.attrs[i].id == id) return &launch.config.attrs[i];
  }
  return nullptr;
}

std::string shape_refusal(const drv::LaunchConfig& config) {
  try {
    drv::detail::check_launch_shape(config, 0);
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::kInvalidArgument);
    return e.what();
  }
  FAIL("check_launch_shape accepted the launch");
  return "";
}

}  // namespace

TEST_CASE("a plain launch carries no attribute and a cooperative one only COOPERATIVE") {
  drv::LaunchConfig config = grid_of(3, 2, 1);
  config.block_y = 2;
  config.dynamic_smem_bytes = 4096;
  config.stream = reinterpret_cast<CUstream>(0x1234);
  drv::detail::DriverLaunch plain;
  drv::detail::fill_driver_launch(config, plain);
  CHECK(plain.config.numAttrs == 0);
  CHECK(plain.config.attrs == nullptr);
  CHECK(plain.config.gridDimX == 3);
  CHECK(plain.config.gridDimY == 2);
  CHECK(plain.config.blockDimX == 128);
  CHECK(plain.config.blockDimY == 2);
  CHECK(plain.config.sharedMemBytes == 4096);
  CHECK(plain.config.hStream == config.stream);
  CHECK(drv::detail::launch_call_name(config) == "cuLaunchKernelEx");

  config.cooperative = true;
  drv::detail::DriverLaunch cooperative;
  drv::detail::fill_driver_launch(config, cooperative);
  REQUIRE(cooperative.config.numAttrs == 1);
  CHECK(cooperative.config.attrs[0].id == CU_LAUNCH_ATTRIBUTE_COOPERATIVE);
  CHECK(cooperative.config.attrs[0].value.cooperative == 1);
  CHECK(drv::detail::launch_call_name(config) == "cuLaunchKernelEx (cooperative)");
}

TEST_CASE("cluster dims and programmatic stream serialization become their launch attributes") {
  drv::LaunchConfig config = grid_of(8, 4, 2);
  config.cluster_x = 2;
  config.cluster_y = 4;
  config.cluster_z = 1;
  config.programmatic_stream_serialization = true;
  config.cooperative = true;
  drv::detail::DriverLaunch launch;
  drv::detail::fill_driver_launch(config, launch);
  CHECK(launch.config.numAttrs == 3);
  const CUlaunchAttribute* cluster = find_attribute(launch, CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION);
  REQUIRE(cluster != nullptr);
  CHECK(cluster->value.clusterDim.x == 2);
  CHECK(cluster->value.clusterDim.y == 4);
  CHECK(cluster->value.clusterDim.z == 1);
  const CUlaunchAttribute* pdl =
      find_attribute(launch, CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION);
  REQUIRE(pdl != nullptr);
  CHECK(pdl->value.programmaticStreamSerializationAllowed == 1);
  REQUIRE(find_attribute(launch, CU_LAUNCH_ATTRIBUTE_COOPERATIVE) != nullptr);
  CHECK(drv::detail::launch_call_name(config) ==
        "cuLaunchKernelEx (cooperative, cluster 2x4x1, programmatic stream serialization)");
  CHECK(drv::detail::describe_grid(config).find("in clusters of 2x4x1 = 8 blocks") !=
        std::string::npos);

  // The occupancy query gets the cluster alone.
  drv::detail::DriverLaunch query;
  drv::detail::fill_driver_launch(config, query, drv::detail::AttributeSet::kClusterOnly);
  REQUIRE(query.config.numAttrs == 1);
  CHECK(query.config.attrs[0].id == CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION);

  // 1x1x1 is no cluster: no attribute, and the message does not mention one.
  drv::LaunchConfig single = grid_of(8);
  single.programmatic_stream_serialization = true;
  drv::detail::DriverLaunch unclustered;
  drv::detail::fill_driver_launch(single, unclustered);
  REQUIRE(unclustered.config.numAttrs == 1);
  CHECK(unclustered.config.attrs[0].id == CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION);
  CHECK(drv::detail::describe_grid(single).find("cluster") == std::string::npos);
}

TEST_CASE("a grid that is not a multiple of its cluster dims is refused naming the dimension") {
  drv::LaunchConfig config = grid_of(7);
  config.cluster_x = 2;
  std::string message = shape_refusal(config);
  INFO(message);
  CHECK(message.find("grid 7x1x1 is not divisible by cluster 2x1x1") != std::string::npos);
  CHECK(message.find("grid_x = 7 is not a multiple of cluster_x = 2") != std::string::npos);

  config = grid_of(8, 3);
  config.cluster_y = 2;
  message = shape_refusal(config);
  CHECK(message.find("grid_y = 3 is not a multiple of cluster_y = 2") != std::string::npos);

  config = grid_of(8);
  config.cluster_z = 0;
  CHECK(shape_refusal(config).find("zero cluster dimension") != std::string::npos);

  config = grid_of(8, 4, 2);
  config.cluster_x = 4;
  config.cluster_y = 2;
  config.cluster_z = 2;
  CHECK_NOTHROW(drv::detail::check_launch_shape(config, 0));
}

TEST_CASE("the checks that predate clusters keep their messages") {
  drv::LaunchConfig config = grid_of(0);
  CHECK(shape_refusal(config).find("empty grid or block") != std::string::npos);
  config = grid_of(4);
  config.dynamic_smem_bytes = 1024;
  CHECK(shape_refusal(config).find("prepared for 0 B") != std::string::npos);
}

TEST_CASE("an empty Function refuses a cluster occupancy query without touching the driver") {
  drv::Function function;
  drv::LaunchConfig config = grid_of(2);
  config.cluster_x = 2;
  try {
    function.max_active_clusters(config);
    FAIL("an empty Function answered max_active_clusters");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::kInvalidArgument);
    CHECK(std::string(e.what()).find("max_active_clusters") != std::string::npos);
  }
}

TEST_CASE("the loader resolves the cluster, launch and tensor-map entry points") {
  if (!drv::driver_available()) {
    // Entry points beyond cuInit are resolved only once cuInit found a device.
    WARN("skipped: no usable CUDA driver here (" << drv::driver_unavailable_reason() << ")");
    return;
  }
  const drv::detail::Api& api = drv::detail::api();
  CHECK(api.cuLaunchKernelEx != nullptr);
  CHECK(api.cuOccupancyMaxActiveClusters != nullptr);
  CHECK(api.cuTensorMapEncodeTiled != nullptr);
}

TEST_CASE("the TMA, cluster and PDL probe kernels compile for sm_90a and sm_90") {
  auto& nvrtc = mlajit::jit::NvrtcCompiler::instance();
  if (!nvrtc.available()) {
    WARN("skipped: NVRTC is not available: " << nvrtc.unavailable_reason());
    return;
  }
  for (const char* arch : {"sm_90a", "sm_90"}) {
    for (const auto& request : {mlajit::testing::tma_probe_request(arch),
                                mlajit::testing::cluster_probe_request(arch),
                                mlajit::testing::pdl_probe_request(arch)}) {
      INFO(request.name_expression << " for " << arch);
      const mlajit::jit::CompileResult result = nvrtc.compile(request);
      CHECK(!result.image.empty());
      CHECK(!result.lowered_name.empty());
    }
  }
}
