#include "attention/mla_check.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>
#include <random>

#include "attention/mla_reference.h"
#include "common/half.h"
#include "driver/cuda_driver.h"

namespace mlajit {
namespace {

struct HostBatch {
  std::vector<int32_t> qo_indptr{0}, kv_indptr{0}, kv_len, kv_indices;
  int64_t num_pages = 0;
};

HostBatch make_batch(const MlaCheckCase& check, std::mt19937_64& rng) {
  HostBatch batch;
  const int page_size = check.shape.page_size;
  int64_t used_pages = 0;
  for (size_t b = 0; b < check.q_lens.size(); ++b) {
    batch.qo_indptr.push_back(batch.qo_indptr.back() + check.q_lens[b]);
    const int pages = (check.kv_lens[b] + page_size - 1) / page_size;
    batch.kv_indptr.push_back(batch.kv_indptr.back() + pages);
    batch.kv_len.push_back(check.kv_lens[b]);
    used_pages += pages;
  }
  batch.num_pages = used_pages + check.extra_pages;
  std::vector<int32_t> pool(batch.num_pages);
  std::iota(pool.begin(), pool.end(), 0);
  std::shuffle(pool.begin(), pool.end(), rng);
  batch.kv_indices.assign(pool.begin(), pool.begin() + used_pages);
  return batch;
}

// Random values rounded to the dtype, so host reference and GPU see identical inputs.
std::vector<float> random_values(size_t count, DType dtype, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> values(count);
  for (auto& v : values) v = half_to_float(dtype, float_to_half(dtype, uniform(rng)));
  return values;
}

std::vector<uint16_t> to_half(const std::vector<float>& values, DType dtype) {
  std::vector<uint16_t> bits(values.size());
  for (size_t i = 0; i < values.size(); ++i) bits[i] = float_to_half(dtype, values[i]);
  return bits;
}

driver::DeviceBuffer upload(const void* data, size_t bytes) {
  driver::DeviceBuffer buffer(std::max<size_t>(bytes, 16));
  if (bytes > 0) driver::memcpy_htod(buffer.ptr(), data, bytes);
  return buffer;
}

template <typename T>
driver::DeviceBuffer upload(const std::vector<T>& values) {
  return upload(values.data(), values.size() * sizeof(T));
}

// Interleaves ckv and kpe rows into one [page][token][ckv + kpe] cache.
std::vector<uint16_t> concatenate_kv(const std::vector<uint16_t>& ckv,
                                     const std::vector<uint16_t>& kpe, int ckv_dim, int kpe_dim) {
  const size_t rows = ckv.size() / ckv_dim;
  std::vector<uint16_t> joined(rows * (ckv_dim + kpe_dim));
  for (size_t r = 0; r < rows; ++r) {
    std::copy_n(&ckv[r * ckv_dim], ckv_dim, &joined[r * (ckv_dim + kpe_dim)]);
    std::copy_n(&kpe[r * kpe_dim], kpe_dim, &joined[r * (ckv_dim + kpe_dim) + ckv_dim]);
  }
  return joined;
}

void compare(const MlaReferenceResult& ref, const std::vector<uint16_t>& out_bits,
             const std::vector<float>& lse, DType dtype, bool natural_lse, bool with_lse,
             MlaCheckResult* result) {
  std::vector<double> out(out_bits.size());
  for (size_t i = 0; i < out.size(); ++i) {
    out[i] = half_to_float(dtype, out_bits[i]);
    if (std::isnan(out[i])) result->all_written = false;
  }
  result->out_error = result->all_written ? relative_l2_error(out, ref.out) : INFINITY;
  if (!with_lse) return;
  std::vector<double> got, expected;
  const double scale = natural_lse ? std::log(2.0) : 1.0;
  for (size_t i = 0; i < ref.lse.size(); ++i) {
    const bool ref_inf = std::isinf(ref.lse[i]);
    if (ref_inf != std::isinf(lse[i]) || std::isnan(lse[i])) result->lse_infinities_match = false;
    if (!ref_inf && std::isfinite(lse[i])) {
      got.push_back(lse[i]);
      expected.push_back(ref.lse[i] * scale);
    }
  }
  result->lse_error = relative_l2_error(got, expected);
}

}  // namespace

MlaCheckResult run_mla_check(const MlaCheckCase& check) {
  const MlaShape& shape = check.shape;
  std::mt19937_64 rng(check.seed);
  HostBatch batch = make_batch(check, rng);
  const int64_t tokens = batch.qo_indptr.back();
  const int ckv_dim = shape.head_dim_ckv, kpe_dim = shape.head_dim_kpe;
  const int64_t kv_rows = batch.num_pages * shape.page_size;

  MlaReferenceProblem problem;
  problem.num_heads = shape.num_heads;
  problem.head_dim_ckv = ckv_dim;
  problem.head_dim_kpe = kpe_dim;
  problem.page_size = shape.page_size;
  problem.causal = shape.causal;
  problem.sm_scale = 1.0 / std::sqrt(192.0);
  problem.qo_indptr = batch.qo_indptr;
  problem.kv_indptr = batch.kv_indptr;
  problem.kv_indices = batch.kv_indices;
  problem.kv_len = batch.kv_len;
  problem.q_nope = random_values(tokens * shape.num_heads * ckv_dim, shape.dtype, rng);
  problem.q_pe = random_values(tokens * shape.num_heads * kpe_dim, shape.dtype, rng);
  problem.ckv = random_values(kv_rows * ckv_dim, shape.dtype, rng);
  problem.kpe = random_values(kv_rows * kpe_dim, shape.dtype, rng);
  const MlaReferenceResult ref = mla_reference(problem);

  MlaCheckResult result;
  const auto start = std::chrono::steady_clock::now();
  BatchMlaAttention attention(shape, check.options);
  driver::DeviceBuffer q_nope = upload(to_half(problem.q_nope, shape.dtype));
  driver::DeviceBuffer q_pe = upload(to_half(problem.q_pe, shape.dtype));
  driver::DeviceBuffer indices = upload(batch.kv_indices);
  const auto ckv_bits = to_half(problem.ckv, shape.dtype);
  const auto kpe_bits = to_half(problem.kpe, shape.dtype);
  driver::DeviceBuffer ckv, kpe;
  MlaRunArgs args;
  if (check.concatenated_kv) {
    ckv = upload(concatenate_kv(ckv_bits, kpe_bits, ckv_dim, kpe_dim));
    args.ckv = ckv.data();
    args.kpe = static_cast<const uint16_t*>(ckv.data()) + ckv_dim;
    args.ckv_stride_token = args.kpe_stride_token = ckv_dim + kpe_dim;
  } else {
    ckv = upload(ckv_bits);
    kpe = upload(kpe_bits);
    args.ckv = ckv.data();
    args.kpe = kpe.data();
    args.ckv_stride_token = ckv_dim;
    args.kpe_stride_token = kpe_dim;
  }
  args.ckv_stride_page = args.ckv_stride_token * shape.page_size;
  args.kpe_stride_page = args.kpe_stride_token * shape.page_size;
  const size_t out_count = tokens * shape.num_heads * ckv_dim;
  driver::DeviceBuffer out(std::max<size_t>(out_count * 2, 16));
  driver::DeviceBuffer lse(std::max<size_t>(tokens * shape.num_heads * 4, 16));
  driver::memset_d8(out.ptr(), 0xFF, out.size());  // NaN in bf16 and fp16
  driver::memset_d8(lse.ptr(), 0xFF, lse.size());  // NaN in fp32
  args.q_nope = q_nope.data();
  args.q_nope_stride_head = ckv_dim;
  args.q_nope_stride_token = int64_t{ckv_dim} * shape.num_heads;
  args.q_pe = q_pe.data();
  args.q_pe_stride_head = kpe_dim;
  args.q_pe_stride_token = int64_t{kpe_dim} * shape.num_heads;
  args.kv_indices = static_cast<const int32_t*>(indices.data());
  args.out = out.data();
  args.out_stride_head = ckv_dim;
  args.out_stride_token = int64_t{ckv_dim} * shape.num_heads;
  args.lse = check.with_lse ? static_cast<float*>(lse.data()) : nullptr;
  args.num_tokens = tokens;
  args.sm_scale = static_cast<float>(problem.sm_scale);

  MlaBatch host_batch{batch.qo_indptr.data(), batch.kv_indptr.data(), batch.kv_len.data(),
                      static_cast<int>(check.q_lens.size()), batch.kv_indices.data(),
                      batch.num_pages};
  attention.plan(host_batch, nullptr);
  attention.run(args, nullptr);
  driver::context_synchronize();
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  result.plan = attention.plan_info();

  std::vector<uint16_t> out_bits(out_count);
  std::vector<float> lse_values(tokens * shape.num_heads);
  if (out_count > 0) driver::memcpy_dtoh(out_bits.data(), out.ptr(), out_count * 2);
  if (!lse_values.empty()) {
    driver::memcpy_dtoh(lse_values.data(), lse.ptr(), lse_values.size() * 4);
  }
  compare(ref, out_bits, lse_values, shape.dtype,
          check.options.lse_base == LseBase::kNatural, check.with_lse, &result);
  return result;
}

MlaCheckCase make_random_case(std::string name, MlaShape shape, int batch, int q_len, int min_kv,
                              int max_kv, uint64_t seed) {
  MlaCheckCase check;
  check.name = std::move(name);
  check.shape = shape;
  check.seed = seed;
  std::mt19937_64 rng(seed ^ 0x9e3779b97f4a7c15ull);
  std::uniform_int_distribution<int> kv(min_kv, max_kv);
  for (int b = 0; b < batch; ++b) {
    check.q_lens.push_back(q_len);
    check.kv_lens.push_back(kv(rng));
  }
  return check;
}

}  // namespace mlajit
