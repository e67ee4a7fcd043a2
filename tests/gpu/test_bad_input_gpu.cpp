// The bad inputs that only a GPU can reach: they need a constructed BatchMlaAttention.
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "check/mla_check.h"
#include "gpu_test_support.h"

namespace mlajit {
namespace {

void require_error(const std::function<void()>& call, ErrorCode code, const std::string& names) {
  try {
    call();
    FAIL("no error; expected one naming " << names);
  } catch (const Error& e) {
    std::printf("  refused (%s): %s\n", error_code_name(e.code()), e.what());
    CHECK(e.code() == code);
    CHECK(std::string(e.what()).find(names) != std::string::npos);
  }
}

MlaShape small_shape() {
  MlaShape shape;
  shape.num_heads = 16;
  shape.page_size = 16;
  return shape;
}

}  // namespace

TEST_CASE("run() before plan() is refused", "[gpu]") {
  MLAJIT_REQUIRE_GPU();
  BatchMlaAttention attention(small_shape());
  auto problem = make_device_problem(make_random_case("unplanned", small_shape(), 2, 1, 1, 50, 5));
  require_error([&] { attention.run(problem->args, nullptr); }, ErrorCode::kInvalidArgument,
                "before plan()");
}

TEST_CASE("a device ordinal out of range is refused", "[gpu]") {
  MLAJIT_REQUIRE_GPU();
  MlaOptions options;
  options.device = driver::device_count();
  require_error([&] { BatchMlaAttention attention(small_shape(), options); },
                ErrorCode::kNoDevice, "device=");
}

TEST_CASE("a negative batch size and a token count that disagrees with the plan are refused",
          "[gpu]") {
  MLAJIT_REQUIRE_GPU();
  BatchMlaAttention attention(small_shape());
  auto problem = make_device_problem(make_random_case("tokens", small_shape(), 2, 1, 1, 50, 6));
  MlaBatch batch = problem->batch();
  batch.batch_size = -1;
  require_error([&] { attention.plan(batch, nullptr); }, ErrorCode::kInvalidArgument,
                "batch_size");
  attention.plan(problem->batch(), nullptr);
  MlaRunArgs args = problem->args;
  args.num_tokens += 1;
  require_error([&] { attention.run(args, nullptr); }, ErrorCode::kInvalidArgument, "num_tokens");
}

TEST_CASE("after a failed plan() run() refuses instead of running the previous plan", "[gpu]") {
  MLAJIT_REQUIRE_GPU();
  BatchMlaAttention attention(small_shape());
  auto problem = make_device_problem(make_random_case("replan", small_shape(), 2, 1, 1, 50, 8));
  attention.plan(problem->batch(), nullptr);
  MlaBatch bad = problem->batch();
  bad.batch_size = -1;
  require_error([&] { attention.plan(bad, nullptr); }, ErrorCode::kInvalidArgument, "batch_size");
  require_error([&] { attention.run(problem->args, nullptr); }, ErrorCode::kInvalidArgument,
                "before plan()");
}

TEST_CASE("with the workspace reserved and the grid pinned, a plan needing more is refused",
          "[gpu]") {
  MLAJIT_REQUIRE_GPU();
  MlaShape shape;  // 128 heads, page 64
  MlaOptions options;
  options.cluster_size = 2;
  options.workspace_bytes = 1 << 20;  // about 1024 partial rows
  BatchMlaAttention attention(shape, options);
  // Host arrays only: plan() reads nothing on the device without validate_kv_indices.
  const auto batch_of = [](int requests, int kv_len, std::vector<int32_t>* arrays) {
    arrays[0] = {0};
    arrays[1] = {0};
    arrays[2].clear();
    for (int b = 0; b < requests; ++b) {
      arrays[0].push_back(arrays[0].back() + 1);
      arrays[1].push_back(arrays[1].back() + (kv_len + 63) / 64);
      arrays[2].push_back(kv_len);
    }
    MlaBatch batch;
    batch.qo_indptr = arrays[0].data();
    batch.kv_indptr = arrays[1].data();
    batch.kv_len = arrays[2].data();
    batch.batch_size = requests;
    return batch;
  };
  std::vector<int32_t> small[3], large[3];
  attention.plan(batch_of(1, 64, small), nullptr);  // one unsplit tile: no partial rows
  // 16 x 4096 tokens split into ~4 chunks per 128-row tile: ~8k partial rows.
  require_error([&] { attention.plan(batch_of(16, 4096, large), nullptr); },
                ErrorCode::kInvalidArgument, "workspace_bytes");
  attention.plan(batch_of(1, 64, small), nullptr);  // the object is still usable

  // What plan_info() says to reserve for the large batch does hold it.
  MlaOptions growing = options;
  growing.workspace_bytes = 0;
  BatchMlaAttention probe(shape, growing);
  probe.plan(batch_of(16, 4096, large), nullptr);
  const uint64_t needed = probe.plan_info().workspace_bytes_needed;
  CHECK(needed > options.workspace_bytes);
  CHECK(probe.plan_info().workspace_bytes >= needed);  // grown with headroom
  options.workspace_bytes = needed;
  BatchMlaAttention reserved(shape, options);
  reserved.plan(batch_of(16, 4096, large), nullptr);
  CHECK(reserved.plan_info().workspace_bytes <= needed);
}

TEST_CASE("a page id out of range is caught in validation mode", "[gpu]") {
  MLAJIT_REQUIRE_GPU();
  MlaOptions options;
  options.validate_kv_indices = true;
  BatchMlaAttention attention(small_shape(), options);
  auto problem = make_device_problem(make_random_case("pages", small_shape(), 2, 1, 20, 50, 7));
  problem->host.kv_indices[1] = static_cast<int32_t>(problem->num_pages);
  require_error([&] { attention.plan(problem->batch(), nullptr); }, ErrorCode::kInvalidArgument,
                "kv_indices[1]");
}

TEST_CASE("a stream of another device is refused", "[gpu]") {
  MLAJIT_REQUIRE_GPU();
  if (driver::device_count() < 2) {
    WARN("skipped: a stream of another context needs a second GPU here");
    return;
  }
  MlaOptions options;
  options.device = 0;
  BatchMlaAttention attention(small_shape(), options);
  auto problem = make_device_problem(make_random_case("stream", small_shape(), 2, 1, 1, 50, 8));
  driver::set_current_device(1);
  driver::Stream foreign;
  require_error([&] { attention.plan(problem->batch(), foreign.get()); },
                ErrorCode::kInvalidArgument, "stream=");
  driver::set_current_device(0);
  attention.plan(problem->batch(), nullptr);
  require_error([&] { attention.run(problem->args, foreign.get()); }, ErrorCode::kInvalidArgument,
                "stream=");
}

}  // namespace mlajit
