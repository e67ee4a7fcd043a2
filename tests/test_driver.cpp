// The CUDA driver layer on a machine that may have no driver or GPU: every call that needs
// the GPU must fail with a typed error that says why, and nothing may load at static init.
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>
#include <spdlog/sinks/ringbuffer_sink.h>

#include "common/logging.h"
#include "driver/cuda_driver.h"
#include "mlajit/error.h"

namespace drv = mlajit::driver;
using mlajit::Error;
using mlajit::ErrorCode;

namespace {

bool gpu_present() { return drv::driver_available() && drv::device_count() > 0; }

std::string lower(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

// Runs `call`, which must throw Error(kNoDriver or kNoDevice) whose message says so.
void require_unavailable_error(const std::string& what, const std::function<void()>& call) {
  INFO(what);
  try {
    call();
    FAIL(what << " did not throw without a usable GPU");
  } catch (const Error& e) {
    INFO("message: " << e.what());
    CHECK((e.code() == ErrorCode::kNoDriver || e.code() == ErrorCode::kNoDevice));
    std::string message = lower(e.what());
    CHECK(!message.empty());
    CHECK((message.find("driver") != std::string::npos ||
           message.find("device") != std::string::npos));
  }
}

std::string worker_path(const char* name) {
  const char* dir = std::getenv("MLAJIT_TEST_WORKER_DIR");
  return std::string(dir ? dir : MLAJIT_TEST_WORKER_DIR) + "/" + name;
}

std::string run_and_capture(const std::string& command) {
  std::string output;
  FILE* pipe = popen(command.c_str(), "r");
  REQUIRE(pipe != nullptr);
  char buffer[512];
  while (std::fgets(buffer, sizeof(buffer), pipe)) output += buffer;
  int status = pclose(pipe);
  CHECK(status == 0);
  return output;
}

}  // namespace

TEST_CASE("check() names the failed call and the CUDA error, with or without a driver") {
  try {
    drv::check(CUDA_ERROR_INVALID_VALUE, "cuFoo");
    FAIL("check did not throw on CUDA_ERROR_INVALID_VALUE");
  } catch (const Error& e) {
    std::string message = e.what();
    INFO(message);
    CHECK(e.code() == ErrorCode::kCudaError);
    CHECK(message.find("cuFoo") != std::string::npos);
    // With a driver the name is spelled out; without one the number stands in for it.
    CHECK((message.find("CUDA_ERROR_INVALID_VALUE") != std::string::npos ||
           message.find(std::to_string(static_cast<int>(CUDA_ERROR_INVALID_VALUE))) !=
               std::string::npos));
  }
}

TEST_CASE("check() lets CUDA_SUCCESS through") {
  CHECK_NOTHROW(drv::check(CUDA_SUCCESS, "cuBar"));
}

TEST_CASE("a destructor's failed free is a warning, but not once the driver is shutting down") {
  auto sink = std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(8);
  const auto log = mlajit::logger("mlajit.driver");
  const spdlog::level::level_enum old_level = log->level();
  log->sinks().push_back(sink);
  log->set_level(spdlog::level::trace);
  mlajit::driver::warn_in_destructor(CUDA_SUCCESS, "cuMemFree");
  mlajit::driver::warn_in_destructor(CUDA_ERROR_INVALID_VALUE, "cuMemFree");
  // At process exit (Python's interpreter teardown) every cached module's unload meets a
  // driver that has released everything already: nothing for the user to act on.
  mlajit::driver::warn_in_destructor(CUDA_ERROR_DEINITIALIZED, "cuLibraryUnload");
  log->sinks().pop_back();
  log->set_level(old_level);
  const std::vector<spdlog::details::log_msg_buffer> records = sink->last_raw();
  REQUIRE(records.size() == 2);
  CHECK(records[0].level == spdlog::level::warn);
  CHECK(std::string(records[0].payload.data(), records[0].payload.size())
            .find("cuMemFree failed in a destructor") != std::string::npos);
  CHECK(records[1].level == spdlog::level::debug);
  CHECK(std::string(records[1].payload.data(), records[1].payload.size())
            .find("cuLibraryUnload failed in a destructor") != std::string::npos);
}

TEST_CASE("DeviceInfo::arch spells sm_<major><minor> without a suffix") {
  drv::DeviceInfo info;
  info.cc_major = 9;
  info.cc_minor = 0;
  CHECK(info.arch() == "sm_90");
  info.cc_major = 12;
  info.cc_minor = 1;
  CHECK(info.arch() == "sm_121");
  info.cc_major = 10;
  info.cc_minor = 3;
  CHECK(info.arch() == "sm_103");
}

TEST_CASE("nothing loads the CUDA driver at static initialisation") {
  // A fresh process: in this one other tests may already have asked for the driver.
  std::string output = run_and_capture(worker_path("driver_probe") + " --lazy-check");
  INFO(output);
  CHECK(output.find("load_attempted_at_start=0") != std::string::npos);
  CHECK(output.find("libcuda_mapped_at_start=0") != std::string::npos);
  // and asking does attempt the load, so the check above can fail
  CHECK(output.find("load_attempted_after_call=1") != std::string::npos);
}

TEST_CASE("the driver probe reports a device list or why there is none, and exits 0") {
  std::string output = run_and_capture(worker_path("driver_probe"));
  INFO(output);
  bool listed = output.find("devices: ") != std::string::npos;
  bool explained = output.find("driver: unavailable: ") != std::string::npos;
  CHECK((listed || explained));
}

TEST_CASE("without a GPU every GPU call throws kNoDriver or kNoDevice with the reason") {
  if (gpu_present()) {
    WARN("skipped: this machine has a usable CUDA GPU");
    return;
  }
  if (!drv::driver_available()) {
    std::string reason = drv::driver_unavailable_reason();
    INFO(reason);
    CHECK(!reason.empty());
    CHECK(lower(reason).find("driver") != std::string::npos);
  }
  std::vector<uint8_t> image = {0x7f, 'E', 'L', 'F', 0, 0, 0, 0};
  std::vector<uint8_t> host(16);
  require_unavailable_error("device_info(0)", [] { drv::device_info(0); });
  require_unavailable_error("set_current_device(0)", [] { drv::set_current_device(0); });
  require_unavailable_error("current_device()", [] { drv::current_device(); });
  require_unavailable_error("Library(image)", [&] { drv::Library library(image); });
  require_unavailable_error("DeviceBuffer(16)", [] { drv::DeviceBuffer buffer(16); });
  require_unavailable_error("PinnedBuffer(16)", [] { drv::PinnedBuffer buffer(16); });
  require_unavailable_error("Stream()", [] { drv::Stream stream; });
  require_unavailable_error("Event()", [] { drv::Event event; });
  require_unavailable_error("memcpy_htod", [&] { drv::memcpy_htod(4096, host.data(), 16); });
  require_unavailable_error("memcpy_dtoh", [&] { drv::memcpy_dtoh(host.data(), 4096, 16); });
  require_unavailable_error("memset_d8", [] { drv::memset_d8(4096, 0, 16); });
  require_unavailable_error("context_synchronize", [] { drv::context_synchronize(); });
  require_unavailable_error("stream_synchronize", [] { drv::stream_synchronize(nullptr); });
  require_unavailable_error("stream_context", [] { drv::stream_context(nullptr); });
  require_unavailable_error("Graph::begin_capture", [] { drv::Graph::begin_capture(nullptr); });
}

TEST_CASE("without a driver library, device_count and driver_version throw kNoDriver") {
  if (drv::driver_available() || drv::driver_unavailable_reason().find("no device") !=
                                     std::string::npos) {
    WARN("skipped: libcuda is present here");
    return;
  }
  for (auto call : {+[] { drv::device_count(); }, +[] { drv::driver_version(); }}) {
    try {
      call();
      FAIL("no exception without a driver");
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::kNoDriver);
      CHECK(std::string(e.what()).find("libcuda.so.1") != std::string::npos);
    }
  }
}

TEST_CASE("every thread sees the same driver state and reason") {
  bool expected = drv::driver_available();
  std::string reason = drv::driver_unavailable_reason();
  std::vector<int> answers(8, -1);
  std::vector<std::string> reasons(8);
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&, i] {
      answers[i] = drv::driver_available() ? 1 : 0;
      reasons[i] = drv::driver_unavailable_reason();
    });
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < 8; ++i) {
    CHECK(answers[i] == (expected ? 1 : 0));
    CHECK(reasons[i] == reason);
  }
}

TEST_CASE("an empty kernel image is refused as an invalid argument") {
  try {
    drv::Library library(std::vector<uint8_t>{});
    FAIL("an empty image loaded");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::kInvalidArgument);
    CHECK(std::string(e.what()).find("empty") != std::string::npos);
  }
}

TEST_CASE("an empty Function or Graph refuses to launch without touching the driver") {
  drv::Function function;
  drv::LaunchConfig config;
  try {
    function.launch(config, nullptr);
    FAIL("an empty Function launched");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::kInvalidArgument);
  }
  drv::Graph graph;
  try {
    graph.launch(nullptr);
    FAIL("an empty Graph launched");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::kInvalidArgument);
  }
}

TEST_CASE("empty buffers move and destroy without a driver") {
  drv::DeviceBuffer a;
  drv::DeviceBuffer b(std::move(a));
  CHECK(b.ptr() == 0);
  CHECK(b.size() == 0);
  drv::PinnedBuffer p;
  drv::PinnedBuffer q;
  q = std::move(p);
  CHECK(q.data() == nullptr);
  drv::Graph g;
  drv::Graph h(std::move(g));
}
