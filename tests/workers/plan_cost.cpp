// Host cost of planning a decode step: the planner alone (make_plan, no GPU needed) and, where
// a GPU is present, BatchMlaAttention::plan() (the planner plus the upload of the plan to the
// device). Batches: 16 and 128 heads x B = 1, 16, 128, 1024 requests of one query token, KV
// uniform (4096 tokens each) or ragged (U[1, 8192] from std::mt19937(20260601), page 64), on
// an H200's 132 CTAs for the planner alone. Prints the median and p90 in microseconds.
//   plan_cost [repeats]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "driver/cuda_driver.h"
#include "mlajit/attention.h"
#include "mlajit/error.h"
#include "plan/planner.h"

namespace drv = mlajit::driver;
using Clock = std::chrono::steady_clock;

namespace {

constexpr int kPageSize = 64;
constexpr int kH200Ctas = 132;

struct Batch {
  std::vector<int32_t> qo_indptr{0}, kv_indptr{0}, kv_len;
  int size() const { return static_cast<int>(kv_len.size()); }
};

Batch decode_batch(int requests, bool ragged) {
  std::mt19937 rng(20260601u);
  std::uniform_int_distribution<int32_t> length(1, 8192);
  Batch batch;
  for (int b = 0; b < requests; ++b) {
    const int32_t kv = ragged ? length(rng) : 4096;
    batch.qo_indptr.push_back(batch.qo_indptr.back() + 1);
    batch.kv_indptr.push_back(batch.kv_indptr.back() + (kv + kPageSize - 1) / kPageSize);
    batch.kv_len.push_back(kv);
  }
  return batch;
}

struct Summary {
  double median_us, p90_us;
};

template <typename Call>
Summary time_calls(int repeats, Call&& call) {
  for (int i = 0; i < 10; ++i) call();  // warm-up
  std::vector<double> samples(repeats);
  for (double& sample : samples) {
    const auto start = Clock::now();
    call();
    sample = std::chrono::duration<double, std::micro>(Clock::now() - start).count();
  }
  std::sort(samples.begin(), samples.end());
  return {samples[samples.size() / 2], samples[samples.size() * 9 / 10]};
}

Summary time_planner(const Batch& batch, int heads, int repeats) {
  mlajit::plan::PlanInput input;
  input.qo_indptr = batch.qo_indptr.data();
  input.kv_indptr = batch.kv_indptr.data();
  input.kv_len = batch.kv_len.data();
  input.batch_size = batch.size();
  input.num_heads = heads;
  input.page_size = kPageSize;
  input.num_ctas = kH200Ctas;
  size_t items = 0;
  const Summary summary = time_calls(repeats, [&] { items += mlajit::plan::make_plan(input).work_items.size(); });
  if (items == 0) std::printf("(no work items?)\n");
  return summary;
}

Summary time_plan_call(const Batch& batch, int heads, int repeats, CUstream stream) {
  mlajit::MlaShape shape;
  shape.num_heads = heads;
  shape.page_size = kPageSize;
  mlajit::BatchMlaAttention attention(shape);
  mlajit::MlaBatch mla_batch;
  mla_batch.qo_indptr = batch.qo_indptr.data();
  mla_batch.kv_indptr = batch.kv_indptr.data();
  mla_batch.kv_len = batch.kv_len.data();
  mla_batch.batch_size = batch.size();
  return time_calls(repeats, [&] { attention.plan(mla_batch, stream); });
}

}  // namespace

int main(int argc, char** argv) {
  const int repeats = argc > 1 ? std::atoi(argv[1]) : 2000;
  const bool gpu = drv::driver_available() && drv::device_count() > 0;
  if (!gpu) std::printf("plan_cost: no GPU, timing the planner alone\n");
  try {
    std::unique_ptr<drv::Stream> stream;
    if (gpu) {
      drv::set_current_device(0);
      stream = std::make_unique<drv::Stream>();
    }
    std::printf("%-6s %-6s %-8s %22s %26s\n", "heads", "batch", "kv", "make_plan us (p90)",
                gpu ? "plan() incl. upload (p90)" : "");
    for (int heads : {16, 128}) {
      for (int requests : {1, 16, 128, 1024}) {
        for (bool ragged : {false, true}) {
          const Batch batch = decode_batch(requests, ragged);
          const Summary planner = time_planner(batch, heads, repeats);
          std::string call = "";
          if (gpu) {
            const Summary plan = time_plan_call(batch, heads, repeats, stream->get());
            char text[64];
            std::snprintf(text, sizeof(text), "%8.1f (%6.1f)", plan.median_us, plan.p90_us);
            call = text;
          }
          std::printf("%-6d %-6d %-8s %12.1f (%6.1f) %26s\n", heads, requests,
                      ragged ? "ragged" : "4096", planner.median_us, planner.p90_us, call.c_str());
        }
      }
    }
    return 0;
  } catch (const mlajit::Error& error) {
    std::fprintf(stderr, "plan_cost: %s: %s\n", mlajit::error_code_name(error.code()), error.what());
    return 1;
  }
}
