#include "attention/mla_bench.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include <fmt/format.h>

#include "common/half.h"
#include "common/logging.h"
#include "driver/cuda_driver.h"
#include "jit/kernel_registry.h"

namespace mlajit {
namespace {

// FlashInfer FA2 / FA3 / FlashMLA on the H200, from ../shared/perf/baseline.md (µs; 0 = none).
struct ReferenceRow {
  int heads, batch, kv_len, page, q_len;
  const char* variant;  // "" | "ragged" | "fp16" | "tier2" | "tier3"
  double fa2, fa3, flashmla;
};
constexpr ReferenceRow kReference[] = {
    {128, 1, 1024, 64, 1, "", 17.9, 16.0, 17.3},
    {128, 1, 4096, 64, 1, "", 28.2, 21.4, 23.2},
    {128, 1, 16384, 64, 1, "", 43.8, 33.9, 41.2},
    {128, 16, 1024, 64, 1, "", 34.2, 24.4, 26.1},
    {128, 16, 4096, 64, 1, "", 84.7, 47.8, 46.8},
    {128, 16, 16384, 64, 1, "", 284.2, 136.9, 124.3},
    {128, 64, 1024, 64, 1, "", 81.1, 43.4, 38.3},
    {128, 64, 4096, 64, 1, "", 280.6, 132.1, 117.3},
    {128, 64, 16384, 64, 1, "", 1169.2, 544.8, 453.5},
    {128, 128, 1024, 64, 1, "", 155.3, 79.6, 70.1},
    {128, 128, 4096, 64, 1, "", 554.4, 256.8, 229.6},
    {128, 128, 16384, 64, 1, "", 2154.4, 980.4, 889.3},
    {16, 16, 4096, 64, 1, "", 54.0, 33.5, 34.7},
    {16, 16, 16384, 64, 1, "", 154.1, 84.7, 84.7},
    {16, 64, 4096, 64, 1, "", 149.7, 84.4, 85.4},
    {16, 64, 16384, 64, 1, "", 554.1, 291.0, 293.3},
    {16, 128, 4096, 64, 1, "", 283.6, 151.4, 150.4},
    {16, 128, 16384, 64, 1, "", 1152.8, 590.8, 570.5},
    {128, 64, 4096, 1, 1, "", 305.3, 139.7, 0},
    {128, 64, 4096, 64, 2, "causal", 551.8, 241.4, 209.8},
    {128, 64, 4096, 64, 4, "causal", 1094.1, 470.1, 407.5},
    {16, 128, 4096, 64, 2, "causal", 281.2, 150.0, 147.2},
    {16, 128, 4096, 64, 4, "causal", 282.8, 153.4, 149.3},
    {128, 16, 16384, 64, 2, "causal", 552.2, 242.4, 214.2},
    {128, 16, 16384, 64, 4, "causal", 1162.1, 508.0, 397.3},
    {16, 128, 4096, 1, 1, "", 296.1, 158.7, 0},
    {16, 64, 16384, 1, 1, "", 581.1, 305.0, 0},
    {128, 64, 0, 64, 1, "ragged", 433.5, 207.3, 129.7},
    {128, 64, 4096, 64, 1, "fp16", 279.0, 0, 0},
    {16, 128, 16384, 64, 1, "fp16", 1143.1, 0, 0},
    {128, 64, 4096, 64, 1, "tier2", 346.5, 0, 0},
    {128, 64, 4096, 64, 1, "tier3", 680.9, 0, 0},
    {16, 128, 16384, 64, 1, "tier2", 1427.5, 0, 0},
    {16, 128, 16384, 64, 1, "tier3", 2823.6, 0, 0},
};

std::string variant_of(const MlaBenchShape& shape) {
  if (!shape.ragged_kv_lens.empty()) return "ragged";
  if (shape.force_tier == 2) return "tier2";
  if (shape.force_tier == 3) return "tier3";
  if (shape.dtype == DType::kFloat16) return "fp16";
  if (shape.causal) return "causal";
  return "";
}

const ReferenceRow* find_reference(const MlaBenchShape& shape) {
  const std::string variant = variant_of(shape);
  for (const auto& row : kReference) {
    const bool ragged = variant == "ragged";
    if (row.heads == shape.num_heads && row.page == shape.page_size && row.q_len == shape.q_len &&
        variant == row.variant && (ragged ? row.batch == static_cast<int>(shape.ragged_kv_lens.size())
                                          : row.batch == shape.batch && row.kv_len == shape.kv_len)) {
      return &row;
    }
  }
  return nullptr;
}

std::vector<int> kv_lens_of(const MlaBenchShape& shape) {
  if (!shape.ragged_kv_lens.empty()) return shape.ragged_kv_lens;
  return std::vector<int>(shape.batch, shape.kv_len);
}

// The KV pool: one concatenated [token][ckv + kpe] cache, filled with random values by
// uploading one random block and replicating it on the device (generating gigabytes of
// random numbers on the host would dominate the run).
struct KvPool {
  driver::DeviceBuffer buffer;
  int64_t tokens = 0;
};

KvPool make_pool(double gigabytes, int row_elems, DType dtype) {
  KvPool pool;
  const int64_t row_bytes = int64_t{row_elems} * 2;
  pool.tokens = static_cast<int64_t>(gigabytes * 1e9 / row_bytes) / 64 * 64;
  pool.buffer = driver::DeviceBuffer(pool.tokens * row_bytes);
  const size_t block_bytes = std::min<size_t>(64u << 20, pool.buffer.size());
  std::vector<uint16_t> block(block_bytes / 2);
  std::mt19937 rng(20261129);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  for (auto& v : block) v = float_to_half(dtype, uniform(rng));
  driver::memcpy_htod(pool.buffer.ptr(), block.data(), block_bytes);
  for (size_t offset = block_bytes; offset < pool.buffer.size(); offset += block_bytes) {
    driver::memcpy_dtod(pool.buffer.ptr() + offset, pool.buffer.ptr(),
                        std::min(block_bytes, pool.buffer.size() - offset));
  }
  return pool;
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

std::shared_ptr<const jit::LoadedKernel> spin_kernel(int device) {
  KernelSpec spec;
  spec.family = "spin";
  spec.arch = driver::device_info(device).arch();
  return jit::KernelRegistry::instance().load(spec, device);
}

void launch_spin(const jit::LoadedKernel& spin, CUstream stream, double milliseconds) {
  struct {
    unsigned long long nanoseconds;
  } params{static_cast<unsigned long long>(milliseconds * 1e6)};
  void* args[] = {&params};
  driver::LaunchConfig config;
  config.block_x = static_cast<unsigned>(spin.metadata.geometry.threads_per_block);
  config.stream = stream;
  spin.function.launch(config, args);
}

MlaBenchResult bench_one(const MlaBenchShape& shape, const MlaBenchOptions& options,
                         const KvPool& pool, const jit::LoadedKernel& spin) {
  const int ckv = 512, kpe = 64;
  const std::vector<int> kv_lens = kv_lens_of(shape);
  const int batch = static_cast<int>(kv_lens.size());
  std::vector<int32_t> qo_indptr{0}, kv_indptr{0};
  for (int len : kv_lens) {
    qo_indptr.push_back(qo_indptr.back() + shape.q_len);
    kv_indptr.push_back(kv_indptr.back() + (len + shape.page_size - 1) / shape.page_size);
  }
  const int64_t pages_per_launch = kv_indptr.back();
  const int64_t pool_pages = pool.tokens / shape.page_size;
  if (pages_per_launch > pool_pages) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("bench shape needs {} pages but the pool holds {}", pages_per_launch,
                            pool_pages));
  }
  // One random permutation of the pool; launch i reads the slice starting at i * pages, so
  // consecutive launches read disjoint pages whenever two launches fit in the pool.
  std::vector<int32_t> permutation(pool_pages);
  std::iota(permutation.begin(), permutation.end(), 0);
  std::shuffle(permutation.begin(), permutation.end(), std::mt19937(7));
  const int sets = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(8, pool_pages / std::max<int64_t>(1, pages_per_launch))));
  std::vector<driver::DeviceBuffer> index_sets;
  for (int s = 0; s < sets; ++s) {
    std::vector<int32_t> indices(std::max<int64_t>(1, pages_per_launch));
    for (int64_t i = 0; i < pages_per_launch; ++i) {
      indices[i] = permutation[(s * pages_per_launch + i) % pool_pages];
    }
    index_sets.emplace_back(indices.size() * 4);
    driver::memcpy_htod(index_sets.back().ptr(), indices.data(), indices.size() * 4);
  }

  MlaShape mla;
  mla.num_heads = shape.num_heads;
  mla.page_size = shape.page_size;
  mla.dtype = shape.dtype;
  mla.causal = shape.causal;
  MlaOptions mla_options;
  mla_options.device = options.device;
  mla_options.kernel = options.kernel;
  mla_options.force_tier = shape.force_tier;
  BatchMlaAttention attention(mla, mla_options);
  driver::Stream stream;
  attention.plan(MlaBatch{qo_indptr.data(), kv_indptr.data(), kv_lens.data(), batch}, stream.get());

  const int64_t tokens = qo_indptr.back();
  driver::DeviceBuffer q(tokens * shape.num_heads * (ckv + kpe) * 2);
  driver::DeviceBuffer out(tokens * shape.num_heads * ckv * 2);
  driver::memcpy_dtod(q.ptr(), pool.buffer.ptr(), q.size());
  MlaRunArgs args;
  args.q_nope = q.data();
  args.q_nope_stride_head = ckv + kpe;
  args.q_nope_stride_token = int64_t{ckv + kpe} * shape.num_heads;
  args.q_pe = static_cast<const uint16_t*>(q.data()) + ckv;
  args.q_pe_stride_head = args.q_nope_stride_head;
  args.q_pe_stride_token = args.q_nope_stride_token;
  args.ckv = pool.buffer.data();
  args.kpe = static_cast<const uint16_t*>(pool.buffer.data()) + ckv;
  args.ckv_stride_token = args.kpe_stride_token = ckv + kpe;
  args.ckv_stride_page = args.kpe_stride_page = int64_t{ckv + kpe} * shape.page_size;
  args.out = out.data();
  args.out_stride_head = ckv;
  args.out_stride_token = int64_t{ckv} * shape.num_heads;
  args.num_tokens = tokens;
  args.sm_scale = static_cast<float>(1.0 / std::sqrt(192.0));

  auto run_with_set = [&](int i) {
    args.kv_indices = static_cast<const int32_t*>(index_sets[i % sets].data());
    attention.run(args, stream.get());
  };
  for (int i = 0; i < options.warmup; ++i) run_with_set(i);
  std::vector<driver::Event> events(options.iterations + 1);
  launch_spin(spin, stream.get(), 5.0 + options.iterations * 0.05);
  events[0].record(stream.get());
  for (int i = 0; i < options.iterations; ++i) {
    run_with_set(options.warmup + i);
    events[i + 1].record(stream.get());
  }
  driver::stream_synchronize(stream.get());
  std::vector<double> times_us;
  for (int i = 0; i < options.iterations; ++i) {
    times_us.push_back(events[i + 1].elapsed_ms_since(events[i]) * 1e3);
  }

  MlaBenchResult result;
  result.shape = shape;
  result.median_us = median(times_us);
  result.min_us = *std::min_element(times_us.begin(), times_us.end());
  result.max_us = *std::max_element(times_us.begin(), times_us.end());
  double kv_tokens = 0, flops = 0;
  for (int len : kv_lens) {
    kv_tokens += len;
    // Causal: query j of q_len sees len - (q_len - 1 - j) tokens; the mean is len - (q_len-1)/2.
    const double effective = shape.causal ? len - (shape.q_len - 1) / 2.0 : len;
    flops += 2.0 * shape.q_len * shape.num_heads * effective * (ckv + kpe + ckv);
  }
  const double bytes = kv_tokens * (ckv + kpe) * 2 + tokens * shape.num_heads * (ckv + kpe) * 2 +
                       tokens * shape.num_heads * ckv * 2;
  result.gbps = bytes / (result.median_us * 1e-6) / 1e9;
  result.tflops = flops / (result.median_us * 1e-6) / 1e12;
  if (const ReferenceRow* row = find_reference(shape)) {
    if (row->fa2 > 0) result.reference_fa2_us = row->fa2;
    if (row->fa3 > 0) result.reference_fa3_us = row->fa3;
    if (row->flashmla > 0) result.reference_flashmla_us = row->flashmla;
  }
  result.spec = attention.spec_text();
  result.plan = attention.plan_info();
  return result;
}

}  // namespace

std::vector<MlaBenchShape> baseline_bench_shapes() {
  std::vector<MlaBenchShape> shapes;
  for (const auto& row : kReference) {
    MlaBenchShape shape;
    shape.num_heads = row.heads;
    shape.batch = row.batch;
    shape.kv_len = row.kv_len;
    shape.page_size = row.page;
    shape.q_len = row.q_len;
    const std::string variant = row.variant;
    if (variant == "ragged") {
      shapes.push_back(ragged_bench_shape());
      continue;
    }
    shape.causal = variant == "causal";
    shape.dtype = variant == "fp16" ? DType::kFloat16 : DType::kBFloat16;
    shape.force_tier = variant == "tier2" ? 2 : variant == "tier3" ? 3 : 0;
    shapes.push_back(shape);
  }
  return shapes;
}

MlaBenchShape ragged_bench_shape() {
  MlaBenchShape shape;
  shape.num_heads = 128;
  shape.batch = 64;
  shape.label = "ragged U[1,8192]";
  std::mt19937 rng(20260601);
  std::uniform_int_distribution<int> length(1, 8192);
  for (int b = 0; b < 64; ++b) shape.ragged_kv_lens.push_back(length(rng));
  return shape;
}

std::vector<MlaBenchResult> run_mla_bench(const std::vector<MlaBenchShape>& shapes,
                                          const MlaBenchOptions& options) {
  driver::set_current_device(options.device);
  auto spin = spin_kernel(options.device);
  KvPool pool = make_pool(options.pool_gb, 576, DType::kBFloat16);
  std::vector<MlaBenchResult> results;
  for (const auto& shape : shapes) {
    results.push_back(bench_one(shape, options, pool, *spin));
    logger("mlajit.bench")->info("{}: {:.1f} us", results.back().spec, results.back().median_us);
  }
  return results;
}

}  // namespace mlajit
