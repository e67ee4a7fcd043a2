// The bad inputs that only a GPU can reach: they need a constructed BatchMlaAttention.
#include <cstdio>
#include <functional>
#include <string>

#include "attention/mla_check.h"
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
