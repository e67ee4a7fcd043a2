// The driver additions a Hopper kernel needs, on a GPU of compute capability 9.0 or newer:
// a TMA box load through a tensor map from encode_tensor_map, cluster launches, programmatic
// dependent launch, and cooperative launches through the attribute path. The probe kernels
// (kernels/utility/tma_probe.cuh, kernels/utility/launch_probe.cuh) are compiled here with NVRTC; each check
// has a control run that must come out differently, so a launch attribute that is dropped on
// the way to the driver fails a test instead of passing unnoticed.
#include <cstdint>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gpu_test_support.h"
#include "driver/tensor_map.h"
#include "jit/nvrtc_compiler.h"
#include "kernels/utility/launch_probe.cuh"
#include "kernels/utility/tma_probe.cuh"
#include "mlajit/error.h"
#include "tests/probe_programs.h"

namespace mlajit {
namespace {

using mlajit_kernel::ClusterProbeRecord;
using mlajit_kernel::PdlProbeParams;

// Empty when device 0 can run the probes; otherwise why not.
std::string sm90_skip_reason() {
  std::string skip = testing::gpu_skip_reason();
  if (!skip.empty()) return skip;
  const driver::DeviceInfo info = driver::device_info(0);
  if (info.cc_major < 9) {
    return "device 0 is " + info.arch() + "; clusters, TMA and PDL need sm_90 or newer";
  }
  auto& nvrtc = jit::NvrtcCompiler::instance();
  if (!nvrtc.available()) return "NVRTC is not available: " + nvrtc.unavailable_reason();
  return "";
}

#define MLAJIT_REQUIRE_SM90()                                        \
  do {                                                               \
    const std::string mlajit_skip = sm90_skip_reason();              \
    if (!mlajit_skip.empty()) {                                      \
      WARN("GPU test skipped: " << mlajit_skip);                     \
      return;                                                        \
    }                                                                \
    driver::set_current_device(0);                                   \
  } while (0)

// An `a` target is the spec's choice, not the device's (it reports plain 9.0): the probes
// name sm_90a on 9.0, as a Hopper family will, and the plain arch elsewhere.
std::string probe_arch() {
  const driver::DeviceInfo info = driver::device_info(0);
  return info.cc_major == 9 && info.cc_minor == 0 ? "sm_90a" : info.arch();
}

struct ProbeKernel {
  std::unique_ptr<driver::Library> library;
  driver::Function function;
};

ProbeKernel load_probe(const jit::CompileRequest& request) {
  const jit::CompileResult compiled = jit::NvrtcCompiler::instance().compile(request);
  ProbeKernel probe;
  probe.library = std::make_unique<driver::Library>(compiled.image);
  probe.function = probe.library->function(compiled.lowered_name, 0, 0);
  return probe;
}

template <typename T>
std::vector<T> download(const driver::DeviceBuffer& buffer, size_t count) {
  std::vector<T> host(count);
  driver::memcpy_dtoh(host.data(), buffer.ptr(), count * sizeof(T));
  return host;
}

// ---- TMA ------------------------------------------------------------------------------------

// A random bf16 bit pattern that is finite and not zero (exponent 1..254), so neither the zero
// fill nor the 0xFFFF poison (a NaN) can be mistaken for it.
uint16_t random_bf16(std::mt19937& rng) {
  const uint32_t bits = rng();
  const uint32_t exponent = 1 + bits % 254;
  return static_cast<uint16_t>((bits >> 16 & 0x8000) | exponent << 7 | (bits >> 8 & 0x7f));
}

struct TmaRun {
  size_t mismatches = 0;
  size_t checked_outside = 0;  // elements past the tensor's edges, expected zero
  std::string first_mismatch;
  uint32_t misaligned_blocks = 0;
};

// Loads a rows x cols bf16 tensor box by box through the probe and compares every element of
// the un-swizzled copy with the source (zero past the edges).
TmaRun run_tma_probe(const ProbeKernel& probe, CUtensorMapSwizzle swizzle, uint64_t rows,
                     uint64_t cols, uint32_t seed) {
  using mlajit_kernel::kTmaProbeBoxCols;
  using mlajit_kernel::kTmaProbeBoxRows;
  std::mt19937 rng(seed);
  std::vector<uint16_t> source(rows * cols);
  for (auto& value : source) value = random_bf16(rng);
  const unsigned grid_x = static_cast<unsigned>((cols + kTmaProbeBoxCols - 1) / kTmaProbeBoxCols);
  const unsigned grid_y = static_cast<unsigned>((rows + kTmaProbeBoxRows - 1) / kTmaProbeBoxRows);
  const uint64_t out_cols = uint64_t{grid_x} * kTmaProbeBoxCols;
  const uint64_t out_rows = uint64_t{grid_y} * kTmaProbeBoxRows;

  driver::DeviceBuffer tensor(source.size() * 2), out(out_rows * out_cols * 2), misaligned(4);
  driver::memcpy_htod(tensor.ptr(), source.data(), tensor.size());
  driver::memset_d8(out.ptr(), 0xFF, out.size());  // poison: a NaN the source never holds
  driver::memset_d8(misaligned.ptr(), 0, misaligned.size());

  driver::TiledTensorMap layout;
  layout.dtype = CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  layout.global_address = tensor.ptr();
  layout.global_dims = {cols, rows};
  layout.global_strides = {cols * 2};
  layout.box_dims = {kTmaProbeBoxCols, kTmaProbeBoxRows};
  layout.swizzle = swizzle;
  CUtensorMap map = driver::encode_tensor_map(layout);
  CUdeviceptr out_ptr = out.ptr(), misaligned_ptr = misaligned.ptr();
  void* args[] = {&map, &out_ptr, &misaligned_ptr};
  driver::LaunchConfig config;
  config.grid_x = grid_x;
  config.grid_y = grid_y;
  config.block_x = mlajit_kernel::kTmaProbeThreads;
  probe.function.launch(config, args);
  driver::context_synchronize();

  TmaRun run;
  run.misaligned_blocks = download<uint32_t>(misaligned, 1)[0];
  const std::vector<uint16_t> copy = download<uint16_t>(out, out_rows * out_cols);
  for (uint64_t r = 0; r < out_rows; ++r) {
    for (uint64_t c = 0; c < out_cols; ++c) {
      const bool inside = r < rows && c < cols;
      const uint16_t expected = inside ? source[r * cols + c] : 0;
      run.checked_outside += inside ? 0 : 1;
      const uint16_t got = copy[r * out_cols + c];
      if (got == expected) continue;
      if (run.mismatches++ == 0) {
        char text[160];
        std::snprintf(text, sizeof(text), "(%llu, %llu): got 0x%04x, expected 0x%04x",
                      static_cast<unsigned long long>(r), static_cast<unsigned long long>(c),
                      got, expected);
        run.first_mismatch = text;
      }
    }
  }
  return run;
}

}  // namespace

TEST_CASE("a TMA load with the 128B swizzle reads every element of the box, zeros past the edges",
          "[gpu][sm90]") {
  MLAJIT_REQUIRE_SM90();
  const ProbeKernel probe = load_probe(testing::tma_probe_request(probe_arch()));
  const uint32_t seed = 20261201;
  std::printf("TMA probe (%s), seed %u\n", probe_arch().c_str(), seed);
  // 100 x 200 is a multiple of neither box side: the last boxes hang over both edges.
  const TmaRun run = run_tma_probe(probe, CU_TENSOR_MAP_SWIZZLE_128B, 100, 200, seed);
  INFO("first mismatch " << run.first_mismatch);
  CHECK(run.misaligned_blocks == 0);
  CHECK(run.checked_outside == 128 * 256 - 100 * 200);
  CHECK(run.mismatches == 0);

  // Control: without the swizzle the probe's un-swizzling scrambles rows 1..7 of every 8.
  const TmaRun control = run_tma_probe(probe, CU_TENSOR_MAP_SWIZZLE_NONE, 100, 200, seed);
  std::printf("TMA probe control without swizzle: %zu mismatches (expected many)\n",
              control.mismatches);
  CHECK(control.mismatches > 0);
}

namespace {

// ---- clusters -------------------------------------------------------------------------------

std::vector<ClusterProbeRecord> run_cluster_probe(const ProbeKernel& probe,
                                                  const driver::LaunchConfig& config) {
  const size_t blocks = config.grid_x;
  driver::DeviceBuffer records(blocks * sizeof(ClusterProbeRecord));
  driver::memset_d8(records.ptr(), 0xFF, records.size());
  driver::context_synchronize();  // the poison is in place whatever stream the launch uses
  CUdeviceptr records_ptr = records.ptr();
  void* args[] = {&records_ptr};
  probe.function.launch(config, args);
  driver::context_synchronize();
  return download<ClusterProbeRecord>(records, blocks);
}

// How many blocks' records disagree with clusters of `cluster` consecutive blocks.
size_t wrong_cluster_records(const std::vector<ClusterProbeRecord>& records, uint32_t cluster) {
  size_t wrong = 0;
  for (uint32_t b = 0; b < records.size(); ++b) {
    const ClusterProbeRecord& r = records[b];
    const uint32_t rank = b % cluster;
    const uint32_t peer = b - rank + (rank + 1) % cluster;
    const bool right = r.block == b && r.cta_rank == rank && r.cluster_id == b / cluster &&
                       r.cluster_blocks == cluster && r.peer_block == peer;
    if (!right && wrong++ == 0) {
      std::printf("block %u: block %u rank %u cluster %u of %u blocks, peer %u (expected rank %u "
                  "cluster %u of %u, peer %u)\n",
                  b, r.block, r.cta_rank, r.cluster_id, r.cluster_blocks, r.peer_block, rank,
                  b / cluster, cluster, peer);
    }
  }
  return wrong;
}

driver::LaunchConfig cluster_config(unsigned grid, unsigned cluster) {
  driver::LaunchConfig config;
  config.grid_x = grid;
  config.block_x = 64;
  config.cluster_x = cluster;
  return config;
}

}  // namespace

TEST_CASE("a cluster launch reports %cluster_ctarank and %clusterid and shares shared memory",
          "[gpu][sm90]") {
  MLAJIT_REQUIRE_SM90();
  const ProbeKernel probe = load_probe(testing::cluster_probe_request(probe_arch()));

  const driver::LaunchConfig pairs = cluster_config(8, 2);
  std::printf("clusters of 2: at most %d active\n", probe.function.max_active_clusters(pairs));
  CHECK(wrong_cluster_records(run_cluster_probe(probe, pairs), 2) == 0);

  // Control: the same grid without the attribute runs as clusters of one, which the check
  // for pairs refuses on every block.
  const std::vector<ClusterProbeRecord> singles = run_cluster_probe(probe, cluster_config(8, 1));
  CHECK(wrong_cluster_records(singles, 1) == 0);
  CHECK(wrong_cluster_records(singles, 2) == 8);

  // 16 is above the portable 8: the launch opts the function in.
  const driver::LaunchConfig sixteens = cluster_config(32, 16);
  const int active16 = probe.function.max_active_clusters(sixteens);
  std::printf("clusters of 16: at most %d active\n", active16);
  CHECK(active16 > 0);
  CHECK(wrong_cluster_records(run_cluster_probe(probe, sixteens), 16) == 0);
}

TEST_CASE("a grid that is not a multiple of the cluster is refused before launch", "[gpu][sm90]") {
  MLAJIT_REQUIRE_SM90();
  const ProbeKernel probe = load_probe(testing::cluster_probe_request(probe_arch()));
  try {
    run_cluster_probe(probe, cluster_config(7, 2));
    FAIL("a grid of 7 blocks was launched in clusters of 2");
  } catch (const Error& e) {
    std::printf("grid 7 in clusters of 2 refused: %s\n", e.what());
    CHECK(e.code() == ErrorCode::kInvalidArgument);
    CHECK(std::string(e.what()).find("grid_x = 7 is not a multiple of cluster_x = 2") !=
          std::string::npos);
  }
}

namespace {

// ---- programmatic dependent launch ----------------------------------------------------------

struct PdlRun {
  uint32_t overlapped = 0;  // the secondary saw the primary unfinished
  size_t wrong = 0;         // results that are not 2 (3i + 1)
};

PdlRun run_pdl_pair(const ProbeKernel& probe, int32_t secondary_role, bool pdl) {
  constexpr uint32_t kN = 1u << 16;
  constexpr unsigned kBlocks = 8, kThreads = 256;
  driver::DeviceBuffer data(kN * 4), result(kN * 4), done(4), overlapped(4);
  driver::memset_d8(data.ptr(), 0xFF, data.size());
  driver::memset_d8(result.ptr(), 0xFF, result.size());
  driver::memset_d8(done.ptr(), 0, done.size());
  driver::memset_d8(overlapped.ptr(), 7, overlapped.size());  // neither answer
  driver::context_synchronize();  // the memsets ran on the legacy stream; the pair does not

  PdlProbeParams params{};
  params.data = static_cast<uint32_t*>(data.data());
  params.result = static_cast<uint32_t*>(result.data());
  params.primary_done = static_cast<uint32_t*>(done.data());
  params.overlapped = static_cast<uint32_t*>(overlapped.data());
  params.spin_ns = 2'000'000;  // 2 ms: far longer than a launch
  params.n = kN;
  params.primary_blocks = kBlocks;
  driver::Stream stream;
  driver::LaunchConfig config;
  config.grid_x = kBlocks;
  config.block_x = kThreads;
  config.stream = stream.get();

  PdlProbeParams primary = params;
  primary.role = mlajit_kernel::kPdlPrimary;
  void* primary_args[] = {&primary};
  probe.function.launch(config, primary_args);
  PdlProbeParams secondary = params;
  secondary.role = secondary_role;
  void* secondary_args[] = {&secondary};
  config.programmatic_stream_serialization = pdl;
  probe.function.launch(config, secondary_args);
  driver::stream_synchronize(stream.get());

  PdlRun run;
  run.overlapped = download<uint32_t>(overlapped, 1)[0];
  const std::vector<uint32_t> out = download<uint32_t>(result, kN);
  for (uint32_t i = 0; i < kN; ++i) run.wrong += out[i] == 2 * (3 * i + 1) ? 0 : 1;
  return run;
}

}  // namespace

TEST_CASE("a programmatic dependent launch overlaps its primary and griddepcontrol.wait orders it",
          "[gpu][sm90]") {
  MLAJIT_REQUIRE_SM90();
  const ProbeKernel probe = load_probe(testing::pdl_probe_request(probe_arch()));

  const PdlRun pdl = run_pdl_pair(probe, mlajit_kernel::kPdlSecondary, true);
  std::printf("PDL: overlapped %u, wrong %zu\n", pdl.overlapped, pdl.wrong);
  CHECK(pdl.wrong == 0);
  // The primary spins 2 ms after allowing dependents: a secondary that only starts after it
  // means the attribute did not reach the driver.
  CHECK(pdl.overlapped == 1);

  // Control: without the attribute stream order holds the secondary back.
  const PdlRun ordered = run_pdl_pair(probe, mlajit_kernel::kPdlSecondary, false);
  std::printf("plain: overlapped %u, wrong %zu\n", ordered.overlapped, ordered.wrong);
  CHECK(ordered.overlapped == 0);
  CHECK(ordered.wrong == 0);

  // Control: with the attribute but without griddepcontrol.wait the secondary reads data the
  // primary has not written yet, so the check of the first run can fail.
  const PdlRun unordered = run_pdl_pair(probe, mlajit_kernel::kPdlSecondaryWithoutWait, true);
  std::printf("PDL without wait: overlapped %u, wrong %zu\n", unordered.overlapped,
              unordered.wrong);
  CHECK(unordered.overlapped == 1);
  CHECK(unordered.wrong > 0);
}

// ---- cooperative launches through the attribute path -----------------------------------------

TEST_CASE("cooperative launches, clustered or not, run at capacity and are refused above it",
          "[gpu][sm90]") {
  MLAJIT_REQUIRE_SM90();
  const ProbeKernel probe = load_probe(testing::cluster_probe_request(probe_arch()));
  const driver::DeviceInfo info = driver::device_info(0);

  driver::LaunchConfig config = cluster_config(1, 1);
  config.cooperative = true;
  const int per_sm = probe.function.max_active_blocks_per_sm(static_cast<int>(config.block_x), 0);
  const unsigned capacity = static_cast<unsigned>(per_sm * info.sm_count);
  std::printf("cooperative capacity: %d blocks/SM x %d SMs = %u\n", per_sm, info.sm_count,
              capacity);
  config.grid_x = capacity;
  CHECK(wrong_cluster_records(run_cluster_probe(probe, config), 1) == 0);
  config.grid_x = capacity + 1;
  try {
    run_cluster_probe(probe, config);
    FAIL("a cooperative grid one block above capacity was launched");
  } catch (const Error& e) {
    std::printf("grid %u refused: %s\n", capacity + 1, e.what());
    const std::string message = e.what();
    CHECK(e.code() == ErrorCode::kUnsupported);
    CHECK(message.find("cannot be co-resident") != std::string::npos);
    CHECK(message.find(std::to_string(capacity + 1) + " blocks") != std::string::npos);
    CHECK(message.find("MAX_DYNAMIC_SHARED_SIZE_BYTES") != std::string::npos);
  }

  // Clustered: the bound is whole clusters that fit, not blocks per SM.
  config = cluster_config(2, 2);
  config.cooperative = true;
  const unsigned cluster_capacity =
      static_cast<unsigned>(probe.function.max_active_clusters(config)) * 2;
  std::printf("cooperative capacity in clusters of 2: %u blocks\n", cluster_capacity);
  REQUIRE(cluster_capacity > 0);
  config.grid_x = cluster_capacity;
  CHECK(wrong_cluster_records(run_cluster_probe(probe, config), 2) == 0);
  config.grid_x = cluster_capacity + 2;
  try {
    run_cluster_probe(probe, config);
    FAIL("a cooperative grid one cluster above capacity was launched");
  } catch (const Error& e) {
    std::printf("grid %u in clusters of 2 refused: %s\n", cluster_capacity + 2, e.what());
    CHECK(e.code() == ErrorCode::kUnsupported);
    CHECK(std::string(e.what()).find("cluster(s) of 2 blocks") != std::string::npos);
  }
}

}  // namespace mlajit
