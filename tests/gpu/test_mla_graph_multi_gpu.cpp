// run() inside a captured CUDA graph, replayed after a re-plan; and two devices used at once
// from one process, each with its own loaded function and workspace.
#include <cstdio>
#include <string>
#include <thread>

#include "check/mla_check.h"
#include "gpu_test_support.h"

namespace mlajit {
namespace {

void report(const char* name, const MlaCheckResult& result) {
  std::printf("%-58s out %.2e lse %.2e\n", name, result.out_error, result.lse_error);
  CHECK(result.all_written);
  CHECK(result.lse_infinities_match);
  CHECK(result.out_error < 1e-2);
  CHECK(result.lse_error < 1e-2);
}

}  // namespace

// Both launch paths: one cooperative launch, and two launches whose merge (from sm_90) is a
// programmatic dependent, captured as a programmatic edge of the graph. (The hopper family
// always merges in a second launch, of its merge program.)
TEST_CASE("a CUDA graph captured around run() stays valid across a re-plan", "[gpu]") {
  MLAJIT_REQUIRE_GPU();
  for (bool force_two_launch : {false, true}) {
    MlaShape shape;
    shape.num_heads = 128;
    shape.page_size = 16;
    auto check = make_random_case("graph", shape, 12, 1, 200, 3000, 901);
    MlaOptions options;
    options.cluster_size = 2;            // pins the grid
    options.workspace_bytes = 64 << 20;  // no growth on re-plan
    options.force_two_launch = force_two_launch;
    check.options = options;
    BatchMlaAttention attention(shape, options);
    if (force_two_launch) REQUIRE(attention.plan_info().two_launch);
    const std::string path = attention.plan_info().two_launch ? "two-launch" : "cooperative";
    auto problem = make_device_problem(check);
    driver::Stream stream;
    attention.plan(problem->batch(), stream.get());
    driver::Graph::begin_capture(stream.get());
    attention.run(problem->args, stream.get());
    driver::Graph graph = driver::Graph::end_capture(stream.get());

    graph.launch(stream.get());
    driver::stream_synchronize(stream.get());
    report(("graph replay, first plan, " + path).c_str(), problem->compare_with_reference());

    // New lengths (shorter, so the pages already there suffice), a new plan, the same graph.
    for (size_t b = 0; b < problem->host.kv_len.size(); ++b) {
      problem->host.kv_len[b] = problem->host.kv_len[b] / 3 + static_cast<int>(b);
    }
    problem->poison_outputs();
    attention.plan(problem->batch(), stream.get());
    graph.launch(stream.get());
    driver::stream_synchronize(stream.get());
    report(("graph replay after re-plan, " + path).c_str(), problem->compare_with_reference());
  }
}

TEST_CASE("two GPUs run at once from one process", "[gpu]") {
  MLAJIT_REQUIRE_GPU();
  const int devices = driver::device_count();
  if (devices < 2) {
    WARN("two-GPU test skipped: this machine has " << devices << " GPU(s)");
    return;
  }
  MlaCheckResult results[2];
  std::string errors[2];
  auto work = [&](int device) {
    try {
      driver::set_current_device(device);
      MlaShape shape;
      shape.num_heads = 16;
      shape.page_size = 64;
      auto check = make_random_case("device " + std::to_string(device), shape, 32, 1, 1, 4000,
                                    950 + device);
      check.options.device = device;
      results[device] = run_mla_check(check);
    } catch (const std::exception& e) {
      errors[device] = e.what();
    }
  };
  std::thread first(work, 0), second(work, 1);
  first.join();
  second.join();
  for (int device = 0; device < 2; ++device) {
    INFO("device " << device << ": " << errors[device]);
    REQUIRE(errors[device].empty());
    report(device == 0 ? "two GPUs: device 0" : "two GPUs: device 1", results[device]);
  }
}

}  // namespace mlajit
