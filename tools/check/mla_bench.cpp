#include "check/mla_bench.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>

#include <fmt/format.h>

#include "check/half.h"
#include "mlajit/device_memory.h"
#include "mlajit/error.h"
#include "mlajit/timing.h"

namespace mlajit {
namespace {

constexpr int kCkv = 512, kKpe = 64;  // the baseline shapes' head dims (DeepSeek)
constexpr int kRowElems = kCkv + kKpe;
constexpr size_t kBlockBytes = 64u << 20;  // random values made on the host, then replicated
// e4m3 pool codes encode uniform values in [-448, 448]: dequantized they are the 16-bit pool's
// [-1, 1].
constexpr float kE4m3PoolScale = 1.0f / 448.0f;

DType kv_dtype_of(const MlaBenchShape& shape) { return shape.kv_dtype.value_or(shape.dtype); }
bool token_scaled(const MlaBenchShape& shape) { return shape.kv_scales == KvScales::kPerToken128; }

// DeepSeek-V3.2's token row: 512 codes, their 4 fp32 scales, 64 bf16 kpe values.
constexpr int kTokenScaledRowBytes = kCkv + kCkv / kCkvScaleBlock * 4 + kKpe * 2;

// Bytes of one token's KV row in the pool.
int row_bytes_of(const MlaBenchShape& shape) {
  return token_scaled(shape) ? kTokenScaledRowBytes : kRowElems * dtype_size(kv_dtype_of(shape));
}

std::vector<int> kv_lens_of(const MlaBenchShape& shape) {
  if (!shape.ragged_kv_lens.empty()) return shape.ragged_kv_lens;
  return std::vector<int>(shape.batch, shape.kv_len);
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

// DeepSeek-V3.2 rows of random codes (dequantized uniform in [-1, 1] by their scales) and
// bf16 kpe values, whole rows only.
void fill_token_scaled_rows(std::vector<uint8_t>& block, std::mt19937& rng) {
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  block.resize(block.size() / kTokenScaledRowBytes * kTokenScaledRowBytes);
  for (size_t row = 0; row < block.size(); row += kTokenScaledRowBytes) {
    uint8_t* codes = &block[row];
    for (int c = 0; c < kCkv; ++c) codes[c] = float_to_e4m3(uniform(rng) / kE4m3PoolScale);
    const float scales[kCkv / kCkvScaleBlock] = {kE4m3PoolScale, kE4m3PoolScale, kE4m3PoolScale,
                                                 kE4m3PoolScale};
    std::memcpy(codes + kCkv, scales, sizeof scales);
    for (int k = 0; k < kKpe; ++k) {
      const uint16_t value = float_to_half(DType::kBFloat16, uniform(rng));
      std::memcpy(codes + kCkv + sizeof scales + 2 * k, &value, 2);
    }
  }
}

// One block of random values (bf16, e4m3, or with per-token scales DeepSeek-V3.2's rows) of
// at most kBlockBytes, on the device.
DeviceAllocation random_block(int device, size_t bytes, DType dtype,
                              KvScales scales = KvScales::kPerTensor) {
  std::mt19937 rng(20261129);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<uint8_t> block(std::min(kBlockBytes, bytes));
  if (scales == KvScales::kPerToken128) {
    fill_token_scaled_rows(block, rng);
  } else if (dtype == DType::kFloat8E4M3) {
    for (auto& code : block) code = float_to_e4m3(uniform(rng) / kE4m3PoolScale);
  } else {
    std::vector<uint16_t> values(block.size() / 2);
    for (auto& v : values) v = float_to_half(DType::kBFloat16, uniform(rng));
    std::memcpy(block.data(), values.data(), values.size() * 2);
  }
  DeviceAllocation allocation(device, block.size());
  copy_to_device(allocation.data(), block.data(), block.size());
  return allocation;
}

// Copies `source` over `buffer` as often as it fits: gigabytes of random numbers made on the
// host would dominate the run.
void replicate(void* buffer, size_t bytes, const DeviceAllocation& source) {
  auto* out = static_cast<char*>(buffer);
  for (size_t offset = 0; offset < bytes; offset += source.size()) {
    copy_device_to_device(out + offset, source.data(), std::min(source.size(), bytes - offset));
  }
}

// Up to 8 disjoint page sets of one random permutation of the pool (or of the pool in order);
// launch i reads set i % sets, so consecutive launches read disjoint pages whenever two launches
// fit in the pool.
std::vector<DeviceAllocation> page_sets(int device, int64_t pages_per_launch, int64_t pool_pages,
                                        bool contiguous) {
  std::vector<int32_t> permutation(pool_pages);
  std::iota(permutation.begin(), permutation.end(), 0);
  if (!contiguous) std::shuffle(permutation.begin(), permutation.end(), std::mt19937(7));
  const int64_t fit = pool_pages / std::max<int64_t>(1, pages_per_launch);
  const int sets = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(8, fit)));
  std::vector<DeviceAllocation> index_sets;
  for (int s = 0; s < sets; ++s) {
    std::vector<int32_t> indices(std::max<int64_t>(1, pages_per_launch));
    for (int64_t i = 0; i < pages_per_launch; ++i) {
      indices[i] = permutation[(s * pages_per_launch + i) % pool_pages];
    }
    index_sets.emplace_back(device, indices.size() * sizeof(int32_t));
    copy_to_device(index_sets.back().data(), indices.data(), indices.size() * sizeof(int32_t));
  }
  return index_sets;
}

// Up to 8 selections for a top-k shape: request b selects kv_len distinct tokens of its cache,
// the window [b x cache, (b + 1) x cache) of the pool (wrapping around it), in random order.
std::vector<DeviceAllocation> top_k_sets(int device, const MlaBenchShape& shape,
                                         const std::vector<int>& kv_lens, int64_t pool_tokens) {
  const int64_t cache = shape.topk_cache_tokens;
  const int64_t windows = pool_tokens / cache;
  std::mt19937 rng(11);
  std::vector<int32_t> offsets(cache);
  std::vector<DeviceAllocation> index_sets;
  for (int s = 0; s < 8; ++s) {
    std::vector<int32_t> indices;
    for (size_t b = 0; b < kv_lens.size(); ++b) {
      const int64_t start = static_cast<int64_t>(b % windows) * cache;
      std::iota(offsets.begin(), offsets.end(), 0);
      for (int i = 0; i < kv_lens[b]; ++i) {  // partial Fisher-Yates: distinct, unsorted
        std::uniform_int_distribution<int64_t> pick(i, cache - 1);
        std::swap(offsets[i], offsets[pick(rng)]);
        indices.push_back(static_cast<int32_t>(start + offsets[i]));
      }
    }
    if (indices.empty()) indices.push_back(0);
    index_sets.emplace_back(device, indices.size() * sizeof(int32_t));
    copy_to_device(index_sets.back().data(), indices.data(), indices.size() * sizeof(int32_t));
  }
  return index_sets;
}

// q_nope and q_pe as views of one [token][head][ckv + kpe] buffer, the KV cache as views of
// the pool, the output dense.
MlaRunArgs run_args(const MlaBenchShape& shape, int64_t tokens, const void* q, const void* pool,
                    void* out) {
  const int q_bytes = dtype_size(shape.dtype);
  const int kv_bytes = dtype_size(kv_dtype_of(shape));
  const int row_bytes = row_bytes_of(shape);
  MlaRunArgs args;
  args.q_nope = q;
  args.q_nope_stride_head = kRowElems;
  args.q_nope_stride_token = int64_t{kRowElems} * shape.num_heads;
  args.q_pe = static_cast<const char*>(q) + kCkv * q_bytes;
  args.q_pe_stride_head = args.q_nope_stride_head;
  args.q_pe_stride_token = args.q_nope_stride_token;
  args.ckv = pool;
  if (token_scaled(shape)) {  // rows of codes, scales and kpe in Q's 16-bit type
    args.ckv_scales = reinterpret_cast<const float*>(static_cast<const char*>(pool) + kCkv);
    args.kpe = static_cast<const char*>(pool) + kCkv + kCkv / kCkvScaleBlock * 4;
    args.ckv_stride_token = row_bytes;
    args.ckv_scales_stride_token = row_bytes / 4;
    args.kpe_stride_token = row_bytes / q_bytes;
    args.ckv_scales_stride_page = args.ckv_scales_stride_token * shape.page_size;
  } else {
    args.kpe = static_cast<const char*>(pool) + kCkv * kv_bytes;
    args.ckv_stride_token = args.kpe_stride_token = kRowElems;
    if (kv_dtype_of(shape) == DType::kFloat8E4M3) {
      args.kv_scale_ckv = args.kv_scale_kpe = kE4m3PoolScale;
    }
  }
  args.ckv_stride_page = args.ckv_stride_token * shape.page_size;
  args.kpe_stride_page = args.kpe_stride_token * shape.page_size;
  args.out = out;
  args.out_stride_head = kCkv;
  args.out_stride_token = int64_t{kCkv} * shape.num_heads;
  args.num_tokens = tokens;
  args.sm_scale = static_cast<float>(1.0 / std::sqrt(192.0));
  return args;
}

// GB/s and TFLOP/s as baseline.md counts them: the bytes are the KV rows read (in the KV
// dtype: half of them with e4m3; 656 a token in DeepSeek-V3.2's rows) plus q read and out
// written (in the query dtype).
void add_rates(const std::vector<int>& kv_lens, int64_t tokens, MlaBenchResult* result) {
  const MlaBenchShape& shape = result->shape;
  double kv_tokens = 0, flops = 0;
  for (int len : kv_lens) {
    kv_tokens += len;
    // Causal: query j of q_len sees len - (q_len - 1 - j) tokens; the mean is len - (q_len-1)/2.
    const double effective = shape.causal ? len - (shape.q_len - 1) / 2.0 : len;
    flops += 2.0 * shape.q_len * shape.num_heads * effective * (kCkv + kKpe + kCkv);
  }
  const double q_bytes = dtype_size(shape.dtype);
  const double bytes = kv_tokens * row_bytes_of(shape) +
                       tokens * shape.num_heads * kRowElems * q_bytes +
                       tokens * shape.num_heads * kCkv * q_bytes;
  result->gbps = bytes / (result->median_us * 1e-6) / 1e9;
  result->tflops = flops / (result->median_us * 1e-6) / 1e12;
}

}  // namespace

MlaBenchShape top_k_bench_shape(int num_heads, int batch, int top_k, int cache_tokens) {
  MlaBenchShape shape;
  shape.num_heads = num_heads;
  shape.batch = batch;
  shape.kv_len = top_k;
  shape.page_size = 1;
  shape.topk_cache_tokens = cache_tokens;
  shape.label = fmt::format("top-k {} of {}", top_k, cache_tokens);
  return shape;
}

MlaBenchShape ragged_bench_shape(int num_heads, int batch, int min_kv, int max_kv, uint32_t seed) {
  MlaBenchShape shape;
  shape.num_heads = num_heads;
  shape.batch = batch;
  shape.label = fmt::format("ragged U[{},{}] seed {}", min_kv, max_kv, seed);
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> length(min_kv, max_kv);
  for (int b = 0; b < batch; ++b) shape.ragged_kv_lens.push_back(length(rng));
  return shape;
}

MlaBench::MlaBench(const MlaBenchOptions& options) : options_(options) {
  // Sized in 16-bit rows, a multiple of 64 tokens of either KV dtype.
  const int64_t row_bytes = int64_t{kRowElems} * 2;
  const int64_t tokens = static_cast<int64_t>(options.pool_gb * 1e9 / row_bytes) / 64 * 64;
  pool_ = DeviceAllocation(options.device, tokens * row_bytes);
  block16_ = random_block(options.device, pool_.size(), DType::kBFloat16);
  replicate(pool_.data(), pool_.size(), block16_);
  pool_row_bytes_ = static_cast<int>(row_bytes);
}

// The three contents differ in their rows (16-bit values, codes, V3.2's rows), so the row
// size says which the pool holds.
void MlaBench::hold_in_pool(const MlaBenchShape& shape) {
  const int row_bytes = row_bytes_of(shape);
  if (row_bytes == pool_row_bytes_) return;
  if (row_bytes == kRowElems * 2) {
    replicate(pool_.data(), pool_.size(), block16_);
  } else {
    replicate(pool_.data(), pool_.size(),
              random_block(options_.device, pool_.size(), kv_dtype_of(shape), shape.kv_scales));
  }
  pool_row_bytes_ = row_bytes;
}

MlaBenchResult MlaBench::run(const MlaBenchShape& shape) {
  const std::vector<int> kv_lens = kv_lens_of(shape);
  const int batch = static_cast<int>(kv_lens.size());
  std::vector<int32_t> qo_indptr{0}, kv_indptr{0};
  for (int len : kv_lens) {
    qo_indptr.push_back(qo_indptr.back() + shape.q_len);
    kv_indptr.push_back(kv_indptr.back() + (len + shape.page_size - 1) / shape.page_size);
  }
  hold_in_pool(shape);
  const int64_t pool_tokens = static_cast<int64_t>(pool_.size() / row_bytes_of(shape));
  const int64_t pages_per_launch = kv_indptr.back();
  const int64_t pool_pages = pool_tokens / shape.page_size;
  if (pages_per_launch > pool_pages) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("bench shape needs {} pages but the pool holds {}", pages_per_launch,
                            pool_pages));
  }
  if (shape.topk_cache_tokens > 0 &&
      (shape.page_size != 1 || shape.topk_cache_tokens > pool_tokens ||
       *std::max_element(kv_lens.begin(), kv_lens.end()) > shape.topk_cache_tokens)) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("top-k bench shape: page size {} (expected 1), top-k up to {} of a "
                            "{}-token cache in a pool of {} tokens (expected top-k <= cache <= "
                            "pool)",
                            shape.page_size, *std::max_element(kv_lens.begin(), kv_lens.end()),
                            shape.topk_cache_tokens, pool_tokens));
  }
  const std::vector<DeviceAllocation> index_sets =
      shape.topk_cache_tokens > 0
          ? top_k_sets(options_.device, shape, kv_lens, pool_tokens)
          : page_sets(options_.device, pages_per_launch, pool_pages, shape.contiguous_pages);

  MlaShape mla;
  mla.num_heads = shape.num_heads;
  mla.page_size = shape.page_size;
  mla.dtype = shape.dtype;
  mla.kv_dtype = shape.kv_dtype;
  mla.kv_scales = shape.kv_scales;
  mla.causal = shape.causal;
  MlaOptions mla_options;
  mla_options.device = options_.device;
  mla_options.kernel = options_.kernel;
  mla_options.force_tier = shape.force_tier;
  mla_options.batch_invariant = shape.batch_invariant;
  mla_options.force_two_launch = shape.two_launch;
  BatchMlaAttention attention(mla, mla_options);
  // Planned on the legacy stream and waited for: the timed launches run on a stream of
  // time_launches' own, which does not wait for the legacy stream.
  attention.plan(MlaBatch{qo_indptr.data(), kv_indptr.data(), kv_lens.data(), batch}, nullptr);
  device_synchronize(options_.device);

  const int64_t tokens = qo_indptr.back();
  const int q_bytes = dtype_size(shape.dtype);
  DeviceAllocation q(options_.device, tokens * shape.num_heads * kRowElems * q_bytes);
  DeviceAllocation out(options_.device, tokens * shape.num_heads * kCkv * q_bytes);
  replicate(q.data(), q.size(), block16_);
  MlaRunArgs args = run_args(shape, tokens, q.data(), pool_.data(), out.data());

  LaunchTimingOptions timing;
  timing.device = options_.device;
  timing.warmup = options_.warmup;
  timing.iterations = options_.iterations;
  const std::vector<double> times_us = time_launches(
      [&](void* stream, int index) {
        args.kv_indices = static_cast<const int32_t*>(index_sets[index % index_sets.size()].data());
        attention.run(args, stream);
      },
      timing);

  MlaBenchResult result;
  result.shape = shape;
  result.median_us = median(times_us);
  result.min_us = *std::min_element(times_us.begin(), times_us.end());
  result.max_us = *std::max_element(times_us.begin(), times_us.end());
  add_rates(kv_lens, tokens, &result);
  result.spec = attention.spec_text();
  result.plan = attention.plan_info();
  return result;
}

}  // namespace mlajit
