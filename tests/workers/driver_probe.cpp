// Prints what the CUDA driver layer sees: driver version, device count and each device's
// attributes, or why there is no driver. Always exits 0 in this mode: it is a probe.
//
//   driver_probe                     the report
//   driver_probe --lazy-check        whether anything loaded libcuda before the first call
//   driver_probe --print-kernels     the CUDA source of the selftest kernels, for nvcc:
//       driver_probe --print-kernels > k.cu && nvcc -cubin -arch=sm_90 -o k90.cubin k.cu
//   driver_probe --selftest CUBIN [WRONG_ARCH_CUBIN]
//                                    exercises load/launch/copies/graphs on device 0 with that
//                                    cubin; exits 1 when a check fails.
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "driver/cuda_driver.h"
#include "driver/driver_api.h"
#include "mlajit/error.h"

namespace drv = mlajit::driver;

namespace {

const char* kSelftestKernels = R"(extern "C" __global__ void fill(unsigned* out, unsigned value, unsigned n) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = value;
}

extern "C" __global__ void smem_fill(unsigned* out, unsigned value, unsigned n) {
  extern __shared__ unsigned staging[];
  staging[threadIdx.x] = value;
  __syncthreads();
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = staging[threadIdx.x];
}
)";

bool libcuda_mapped() {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    if (line.find("libcuda.so") != std::string::npos) return true;
  }
  return false;
}

int lazy_check() {
  // Static initialisers have run by now; main has not called the driver layer yet.
  std::printf("load_attempted_at_start=%d\n", drv::detail::load_attempted() ? 1 : 0);
  std::printf("libcuda_mapped_at_start=%d\n", libcuda_mapped() ? 1 : 0);
  bool available = drv::driver_available();
  std::printf("load_attempted_after_call=%d\n", drv::detail::load_attempted() ? 1 : 0);
  std::printf("driver_available=%d\n", available ? 1 : 0);
  return 0;
}

int report() {
  if (!drv::driver_available()) {
    std::printf("driver: unavailable: %s\n", drv::driver_unavailable_reason().c_str());
  }
  try {
    std::printf("driver version: %d\n", drv::driver_version());
    int count = drv::device_count();
    std::printf("devices: %d\n", count);
    for (int i = 0; i < count; ++i) {
      drv::DeviceInfo d = drv::device_info(i);
      std::printf(
          "device %d: %s arch=%s cc=%d.%d sms=%d smem_per_sm=%d smem_per_block_optin=%d "
          "l2=%d cooperative=%d\n",
          d.ordinal, d.name.c_str(), d.arch().c_str(), d.cc_major, d.cc_minor, d.sm_count,
          d.smem_per_sm, d.smem_per_block_optin, d.l2_bytes, d.cooperative_launch ? 1 : 0);
    }
  } catch (const mlajit::Error& e) {
    std::printf("error (%s): %s\n", mlajit::error_code_name(e.code()), e.what());
  }
  return 0;
}

std::vector<uint8_t> read_file(const char* path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

int g_failures = 0;

void expect(bool ok, const std::string& what) {
  std::printf("%s: %s\n", ok ? "PASS" : "FAIL", what.c_str());
  if (!ok) ++g_failures;
}

// Runs `body`, expecting an mlajit::Error with `code` whose message contains `needle`.
template <typename Body>
void expect_error(const std::string& what, mlajit::ErrorCode code, const char* needle, Body body) {
  try {
    body();
    expect(false, what + " (no error thrown)");
  } catch (const mlajit::Error& e) {
    bool ok = e.code() == code && std::strstr(e.what(), needle) != nullptr;
    expect(ok, what + " -> [" + mlajit::error_code_name(e.code()) + "] " + e.what());
  }
}

std::vector<uint32_t> run_fill(const drv::Function& f, drv::LaunchConfig config, uint32_t n,
                               uint32_t value) {
  drv::DeviceBuffer out(n * sizeof(uint32_t));
  drv::memset_d8(out.ptr(), 0, out.size());
  CUdeviceptr ptr = out.ptr();
  void* args[] = {&ptr, &value, &n};
  f.launch(config, args);
  drv::stream_synchronize(config.stream);
  std::vector<uint32_t> host(n);
  drv::memcpy_dtoh(host.data(), out.ptr(), out.size());
  return host;
}

bool all_equal(const std::vector<uint32_t>& v, uint32_t value) {
  for (uint32_t x : v) {
    if (x != value) return false;
  }
  return true;
}

void selftest_launches(drv::Library& library, const drv::DeviceInfo& info) {
  drv::Function fill = library.function("fill", 0, 0);
  std::printf("fill: %d registers, %d local bytes\n", fill.num_registers(), fill.local_bytes());
  drv::Stream stream;
  expect(drv::stream_context(stream.get()) != nullptr, "stream_context of a new stream");
  drv::LaunchConfig config;
  config.grid_x = 64;
  config.block_x = 128;
  config.stream = stream.get();
  expect(all_equal(run_fill(fill, config, 64 * 128, 7), 7), "plain launch fills the buffer");
  config.cooperative = true;
  expect(all_equal(run_fill(fill, config, 64 * 128, 9), 9), "cooperative launch fills the buffer");
  int per_sm = fill.max_active_blocks_per_sm(128, 0);
  config.grid_x = static_cast<unsigned>(per_sm * info.sm_count + 1);
  expect_error("cooperative grid one block too large is refused", mlajit::ErrorCode::kUnsupported,
               "co-resident", [&] { run_fill(fill, config, config.grid_x * 128, 1); });

  int big = 200 * 1024;
  drv::Function smem = library.function("smem_fill", 0, big);
  expect(smem.max_active_blocks_per_sm(256, big) >= 1, "occupancy at 200 KB after the attribute");
  drv::LaunchConfig sconfig;
  sconfig.grid_x = static_cast<unsigned>(info.sm_count);
  sconfig.block_x = 256;
  sconfig.dynamic_smem_bytes = static_cast<unsigned>(big);
  sconfig.cooperative = true;
  sconfig.stream = stream.get();
  expect(all_equal(run_fill(smem, sconfig, info.sm_count * 256, 5), 5),
         "cooperative 200 KB dynamic smem launch");
  sconfig.dynamic_smem_bytes = static_cast<unsigned>(big + 1024);
  expect_error("smem above the prepared attribute is refused", mlajit::ErrorCode::kInvalidArgument,
               "prepared for", [&] { run_fill(smem, sconfig, 256, 1); });
}

void selftest_graph_and_events(drv::Library& library) {
  drv::Function fill = library.function("fill", 0, 0);
  drv::Stream stream;
  uint32_t n = 4096, value = 11;
  drv::DeviceBuffer out(n * sizeof(uint32_t));
  drv::memset_d32_async(out.ptr(), 0, n, stream.get());
  drv::stream_synchronize(stream.get());
  CUdeviceptr ptr = out.ptr();
  void* args[] = {&ptr, &value, &n};
  drv::LaunchConfig config;
  config.grid_x = n / 256;
  config.block_x = 256;
  config.stream = stream.get();
  drv::Graph::begin_capture(stream.get());
  fill.launch(config, args);
  drv::Graph graph = drv::Graph::end_capture(stream.get());
  drv::Event start, stop;
  start.record(stream.get());
  graph.launch(stream.get());
  stop.record(stream.get());
  float ms = stop.elapsed_ms_since(start);
  std::vector<uint32_t> host(n);
  drv::memcpy_dtoh(host.data(), out.ptr(), out.size());
  expect(all_equal(host, value), "graph launch fills the buffer (" + std::to_string(ms) + " ms)");
  drv::PinnedBuffer pinned(n * sizeof(uint32_t));
  std::memset(pinned.data(), 0x22, pinned.size());
  drv::memcpy_htod_async(out.ptr(), pinned.data(), pinned.size(), stream.get());
  drv::stream_synchronize(stream.get());
  drv::context_synchronize();
  drv::memcpy_dtoh(host.data(), out.ptr(), out.size());
  expect(all_equal(host, 0x22222222u), "pinned async copy round-trips");
}

int selftest(const char* cubin_path, const char* wrong_arch_path) {
  try {
    drv::set_current_device(0);
    expect(drv::current_device() == 0, "current_device after set_current_device(0)");
    drv::DeviceInfo info = drv::device_info(0);
    expect_error("device ordinal out of range", mlajit::ErrorCode::kNoDevice, "out of range",
                 [&] { drv::device_info(drv::device_count()); });
    drv::Library library(read_file(cubin_path));
    expect_error("unknown kernel name", mlajit::ErrorCode::kInvalidArgument, "no_such_kernel",
                 [&] { library.function("no_such_kernel", 0, 0); });
    selftest_launches(library, info);
    selftest_graph_and_events(library);
    if (wrong_arch_path) {
      drv::Library wrong(read_file(wrong_arch_path));
      expect_error("wrong-arch cubin names the device arch", mlajit::ErrorCode::kUnsupported,
                   info.arch().c_str(), [&] { wrong.function("fill", 0, 0); });
    }
  } catch (const mlajit::Error& e) {
    expect(false, std::string("unexpected error: ") + e.what());
  }
  std::printf("selftest: %d failure(s)\n", g_failures);
  return g_failures == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && std::strcmp(argv[1], "--lazy-check") == 0) return lazy_check();
  if (argc >= 2 && std::strcmp(argv[1], "--print-kernels") == 0) {
    std::fputs(kSelftestKernels, stdout);
    return 0;
  }
  if (argc >= 3 && std::strcmp(argv[1], "--selftest") == 0) {
    report();
    return selftest(argv[2], argc >= 4 ? argv[3] : nullptr);
  }
  return report();
}
