// Host cost of BatchMlaAttention::run() per call, through the C++ API and through the C ABI:
// median (and p90) over 10,000 calls of a tiny decode batch (16 heads, 1 token, 100 KV tokens)
// on one stream, not synchronising per call (every 256 calls, outside the timed region, so
// the launch queue never fills). Prints microseconds. Without a GPU: says so and exits 0.
//   run_overhead [calls]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "driver/cuda_driver.h"
#include "mlajit/attention.h"
#include "mlajit/mlajit.h"

namespace drv = mlajit::driver;
using Clock = std::chrono::steady_clock;

namespace {

struct Summary {
  double median_us, p90_us;
};

template <typename Call>
Summary time_calls(int calls, CUstream stream, Call&& call) {
  std::vector<double> samples;
  samples.reserve(calls);
  for (int i = 0; i < 100; ++i) call();  // warm-up
  drv::stream_synchronize(stream);
  for (int i = 0; i < calls; ++i) {
    const auto start = Clock::now();
    call();
    samples.push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count());
    if (i % 256 == 255) drv::stream_synchronize(stream);
  }
  drv::stream_synchronize(stream);
  std::sort(samples.begin(), samples.end());
  return {samples[samples.size() / 2], samples[samples.size() * 9 / 10]};
}

}  // namespace

int main(int argc, char** argv) {
  const int calls = argc > 1 ? std::atoi(argv[1]) : 10000;
  if (!drv::driver_available() || drv::device_count() < 1) {
    std::printf("run_overhead: no GPU, nothing measured (%s)\n",
                drv::driver_available() ? "no device" : drv::driver_unavailable_reason().c_str());
    return 0;
  }
  try {
    drv::set_current_device(0);
    mlajit::MlaShape shape;
    shape.num_heads = 16;
    const int heads = shape.num_heads, ckv = shape.head_dim_ckv, kpe = shape.head_dim_kpe;
    const int page = shape.page_size;
    mlajit::BatchMlaAttention attention(shape);
    drv::Stream stream;
    const int32_t qo_indptr[] = {0, 1}, kv_indptr[] = {0, 2}, kv_len[] = {100}, pages[] = {0, 1};
    mlajit::MlaBatch batch;
    batch.qo_indptr = qo_indptr;
    batch.kv_indptr = kv_indptr;
    batch.kv_len = kv_len;
    batch.batch_size = 1;
    attention.plan(batch, stream.get());

    drv::DeviceBuffer q_nope(heads * ckv * 2), q_pe(heads * kpe * 2), out(heads * ckv * 2);
    drv::DeviceBuffer ckv_cache(2 * page * ckv * 2), kpe_cache(2 * page * kpe * 2), indices(8);
    drv::memset_d8(q_nope.ptr(), 0, q_nope.size());
    drv::memset_d8(q_pe.ptr(), 0, q_pe.size());
    drv::memset_d8(ckv_cache.ptr(), 0, ckv_cache.size());
    drv::memset_d8(kpe_cache.ptr(), 0, kpe_cache.size());
    drv::memcpy_htod(indices.ptr(), pages, sizeof(pages));
    mlajit::MlaRunArgs args;
    args.q_nope = q_nope.data(), args.q_nope_stride_token = heads * ckv, args.q_nope_stride_head = ckv;
    args.q_pe = q_pe.data(), args.q_pe_stride_token = heads * kpe, args.q_pe_stride_head = kpe;
    args.ckv = ckv_cache.data(), args.ckv_stride_page = page * ckv, args.ckv_stride_token = ckv;
    args.kpe = kpe_cache.data(), args.kpe_stride_page = page * kpe, args.kpe_stride_token = kpe;
    args.kv_indices = static_cast<const int32_t*>(indices.data());
    args.out = out.data(), args.out_stride_token = heads * ckv, args.out_stride_head = ckv;
    args.num_tokens = 1;
    args.sm_scale = 0.07f;

    const Summary cpp = time_calls(calls, stream.get(), [&] { attention.run(args, stream.get()); });
    std::printf("C++ API run(): median %.2f us, p90 %.2f us per call (%d calls)\n", cpp.median_us,
                cpp.p90_us, calls);

    mlajit_shape c_shape;
    mlajit_shape_init(&c_shape);
    c_shape.num_heads = heads;
    mlajit_attention_t* handle = nullptr;
    mlajit_batch c_batch;
    mlajit_batch_init(&c_batch);
    c_batch.qo_indptr = qo_indptr, c_batch.kv_indptr = kv_indptr, c_batch.kv_len = kv_len;
    c_batch.batch_size = 1;
    if (mlajit_attention_create(&c_shape, nullptr, &handle) != MLAJIT_OK ||
        mlajit_attention_plan(handle, &c_batch, stream.get()) != MLAJIT_OK) {
      std::fprintf(stderr, "run_overhead: C ABI setup failed: %s\n", mlajit_last_error());
      return 1;
    }
    mlajit_run_args c_args;
    mlajit_run_args_init(&c_args);
    c_args.q_nope = args.q_nope, c_args.q_nope_stride_token = args.q_nope_stride_token;
    c_args.q_nope_stride_head = args.q_nope_stride_head;
    c_args.q_pe = args.q_pe, c_args.q_pe_stride_token = args.q_pe_stride_token;
    c_args.q_pe_stride_head = args.q_pe_stride_head;
    c_args.ckv = args.ckv, c_args.ckv_stride_page = args.ckv_stride_page;
    c_args.ckv_stride_token = args.ckv_stride_token;
    c_args.kpe = args.kpe, c_args.kpe_stride_page = args.kpe_stride_page;
    c_args.kpe_stride_token = args.kpe_stride_token;
    c_args.kv_indices = args.kv_indices;
    c_args.out = args.out, c_args.out_stride_token = args.out_stride_token;
    c_args.out_stride_head = args.out_stride_head;
    c_args.num_tokens = 1;
    c_args.sm_scale = args.sm_scale;
    mlajit_status status = MLAJIT_OK;
    const Summary c = time_calls(calls, stream.get(), [&] {
      status = static_cast<mlajit_status>(status | mlajit_attention_run(handle, &c_args, stream.get()));
    });
    mlajit_attention_destroy(handle);
    if (status != MLAJIT_OK) {
      std::fprintf(stderr, "run_overhead: a C ABI run failed: %s\n", mlajit_last_error());
      return 1;
    }
    std::printf("C ABI mlajit_attention_run(): median %.2f us, p90 %.2f us per call (%d calls)\n",
                c.median_us, c.p90_us, calls);
    return 0;
  } catch (const mlajit::Error& error) {
    std::fprintf(stderr, "run_overhead: %s: %s\n", mlajit::error_code_name(error.code()), error.what());
    return 1;
  }
}
