// The JIT path end to end on a GPU: a spec compiled (or found in the cache), loaded through
// the driver, launched cooperatively with a grid of occupancy x SMs, and checked; a grid one
// block larger must be refused before launch.
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "gpu_test_support.h"
#include "jit/kernel_registry.h"
#include "kernels/utility/grid_barrier_demo.cuh"
#include "mlajit/error.h"

namespace mlajit {
namespace {

struct DemoRun {
  std::vector<uint64_t> totals;
  uint64_t expected = 0;
};

// `barrier`: the barrier's word, zeroed once by the caller and kept across runs, as a
// workspace keeps it across launches of other grid sizes.
DemoRun run_demo(const jit::LoadedKernel& kernel, unsigned grid, const std::vector<uint32_t>& input,
                 driver::DeviceBuffer& barrier) {
  driver::DeviceBuffer in(input.size() * 4), partials(grid * 8), totals(grid * 8);
  driver::memcpy_htod(in.ptr(), input.data(), input.size() * 4);
  driver::memset_d8(partials.ptr(), 0xAB, partials.size());  // poison
  driver::memset_d8(totals.ptr(), 0xAB, totals.size());
  mlajit_kernel::DemoParams params{};
  params.input = static_cast<const uint32_t*>(in.data());
  params.partials = static_cast<uint64_t*>(partials.data());
  params.totals = static_cast<uint64_t*>(totals.data());
  params.barrier = static_cast<uint32_t*>(barrier.data());
  params.n = static_cast<int64_t>(input.size());
  void* args[] = {&params};
  driver::LaunchConfig config;
  config.grid_x = grid;
  config.block_x = static_cast<unsigned>(kernel.metadata.geometry.threads_per_block);
  config.cooperative = true;
  kernel.function.launch(config, args);
  driver::context_synchronize();
  DemoRun run;
  run.totals.resize(grid);
  driver::memcpy_dtoh(run.totals.data(), totals.ptr(), grid * 8);
  run.expected = std::accumulate(input.begin(), input.end(), uint64_t{0});
  return run;
}

}  // namespace

TEST_CASE("the demo kernel runs cooperatively on a full grid and a larger grid is refused",
          "[gpu]") {
  MLAJIT_REQUIRE_GPU();
  driver::set_current_device(0);
  KernelSpec spec;
  spec.family = "grid_barrier_demo";
  spec.arch = driver::device_info(0).arch();
  auto kernel = jit::KernelRegistry::instance().load(spec, 0);
  const int per_sm = kernel->function.max_active_blocks_per_sm(kernel->metadata.geometry.threads_per_block, 0);
  const unsigned grid = static_cast<unsigned>(per_sm * driver::device_info(0).sm_count);
  std::printf("demo kernel: %d blocks/SM, grid %u, %d registers\n", per_sm, grid,
              kernel->function.num_registers());
  REQUIRE(grid > 0);
  std::mt19937 rng(20261129);
  std::vector<uint32_t> input(3u << 20);
  for (auto& v : input) v = rng();
  driver::DeviceBuffer barrier(256);
  driver::memset_d8(barrier.ptr(), 0, barrier.size());
  // One barrier word for every run, never reset, with grids of other sizes in between.
  const unsigned grids[] = {grid, grid / 2, grid - 1, 1, grid};
  for (int repeat = 0; repeat < 20; ++repeat) {
    const unsigned g = grids[repeat % 5];
    const DemoRun run = run_demo(*kernel, g, input, barrier);
    for (unsigned b = 0; b < g; ++b) REQUIRE(run.totals[b] == run.expected);
  }
  try {
    run_demo(*kernel, grid + 1, input, barrier);
    FAIL("a cooperative grid one block larger than co-resident capacity was launched");
  } catch (const Error& e) {
    std::printf("grid %u refused: %s\n", grid + 1, e.what());
    CHECK(std::string(e.what()).find(std::to_string(grid + 1)) != std::string::npos);
  }
}

}  // namespace mlajit
