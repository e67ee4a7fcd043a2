#include "check/mla_check.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>

#include <fmt/format.h>

#include "check/half.h"
#include "mlajit/error.h"
#include "mlajit/device_memory.h"

namespace mlajit {
namespace {

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

// The device's bytes of 16-bit values (little-endian, as the GPU reads them).
std::vector<uint8_t> half_bytes(const std::vector<float>& values, DType dtype) {
  const std::vector<uint16_t> bits = to_half(values, dtype);
  std::vector<uint8_t> bytes(bits.size() * 2);
  std::memcpy(bytes.data(), bits.data(), bytes.size());
  return bytes;
}

// Every non-NaN code equally likely: all 16 binades, both signs and the subnormals occur, and
// the large codes dominate the output, so a slip in decoding the upper half shows in the error.
std::vector<uint8_t> random_e4m3_codes(size_t count, std::mt19937_64& rng) {
  std::uniform_int_distribution<int> pick(0, 253);  // 256 codes less 0x7F and 0xFF
  std::vector<uint8_t> codes(count);
  for (auto& code : codes) {
    const int n = pick(rng);
    code = static_cast<uint8_t>(n < 0x7F ? n : n + 1);
  }
  return codes;
}

std::vector<float> dequantize(const std::vector<uint8_t>& codes, float scale) {
  std::vector<float> values(codes.size());
  for (size_t i = 0; i < codes.size(); ++i) values[i] = e4m3_to_float(codes[i]) * scale;
  return values;
}

// Per-token scales (KvScales::kPerToken128): one per 128 ckv values of each row, log-uniform
// over a decade, so that a scale applied to the wrong block or token shows in the error.
std::vector<float> random_token_scales(size_t count, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> exponent(-2.4f, -1.4f);
  std::vector<float> scales(count);
  for (auto& scale : scales) scale = std::pow(10.0f, exponent(rng));
  return scales;
}

std::vector<float> dequantize_per_token(const std::vector<uint8_t>& codes,
                                        const std::vector<float>& scales) {
  std::vector<float> values(codes.size());
  for (size_t i = 0; i < codes.size(); ++i) {
    values[i] = e4m3_to_float(codes[i]) * scales[i / kCkvScaleBlock];
  }
  return values;
}

template <typename T>
std::vector<uint8_t> raw_bytes(const std::vector<T>& values) {
  std::vector<uint8_t> bytes(values.size() * sizeof(T));
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

// Interleaves ckv and kpe rows into one [page][token][ckv + kpe] cache, of any element size.
std::vector<uint8_t> concatenate_kv(const std::vector<uint8_t>& ckv,
                                    const std::vector<uint8_t>& kpe, size_t ckv_row_bytes,
                                    size_t kpe_row_bytes) {
  const size_t rows = ckv.size() / ckv_row_bytes;
  const size_t row_bytes = ckv_row_bytes + kpe_row_bytes;
  std::vector<uint8_t> joined(rows * row_bytes);
  for (size_t r = 0; r < rows; ++r) {
    std::copy_n(&ckv[r * ckv_row_bytes], ckv_row_bytes, &joined[r * row_bytes]);
    std::copy_n(&kpe[r * kpe_row_bytes], kpe_row_bytes, &joined[r * row_bytes + ckv_row_bytes]);
  }
  return joined;
}

// `count` distinct ids of [0, pool) in random order: a partial Fisher-Yates shuffle.
std::vector<int32_t> draw_distinct(int64_t pool, int64_t count, std::mt19937_64& rng) {
  std::vector<int32_t> ids(pool);
  std::iota(ids.begin(), ids.end(), 0);
  for (int64_t i = 0; i < count; ++i) {
    std::uniform_int_distribution<int64_t> pick(i, pool - 1);
    std::swap(ids[i], ids[pick(rng)]);
  }
  ids.resize(count);
  return ids;
}

void fill_batch(const MlaCheckCase& check, std::mt19937_64& rng, MlaReferenceProblem* host,
                int64_t* num_pages) {
  const int page_size = check.shape.page_size;
  host->qo_indptr = {0};
  host->kv_indptr = {0};
  int64_t used_pages = 0;
  for (size_t b = 0; b < check.q_lens.size(); ++b) {
    host->qo_indptr.push_back(host->qo_indptr.back() + check.q_lens[b]);
    const int pages = (check.kv_lens[b] + page_size - 1) / page_size;
    host->kv_indptr.push_back(host->kv_indptr.back() + pages);
    host->kv_len.push_back(check.kv_lens[b]);
    used_pages += pages;
  }
  if (check.pool_pages > 0) {
    *num_pages = check.pool_pages;
    for (size_t b = 0; b < check.kv_lens.size(); ++b) {
      const int64_t pages = host->kv_indptr[b + 1] - host->kv_indptr[b];
      if (pages > check.pool_pages) {
        throw Error(ErrorCode::kInvalidArgument,
                    fmt::format("{}: request {} needs {} pages but pool_pages={}", check.name, b,
                                pages, check.pool_pages));
      }
      const std::vector<int32_t> ids = draw_distinct(check.pool_pages, pages, rng);
      host->kv_indices.insert(host->kv_indices.end(), ids.begin(), ids.end());
    }
    return;
  }
  *num_pages = used_pages + check.extra_pages;
  std::vector<int32_t> pool(*num_pages);
  std::iota(pool.begin(), pool.end(), 0);
  std::shuffle(pool.begin(), pool.end(), rng);
  host->kv_indices.assign(pool.begin(), pool.begin() + used_pages);
}


// A per-token-scaled e4m3 cache (codes, their fp32 scales, 16-bit kpe rows) on the device:
// three tensors, or with concatenated_kv DeepSeek-V3.2's one buffer of 656-byte token rows
// [512 codes][4 scales][64 kpe values]. Page strides are the caller's (token stride x page).
template <typename Upload>
void set_token_scaled_kv(const MlaCheckCase& check, const std::vector<uint8_t>& codes,
                         const std::vector<uint8_t>& scales, const std::vector<uint8_t>& kpe,
                         Upload&& upload, MlaRunArgs& args) {
  const int64_t ckv_dim = check.shape.head_dim_ckv, kpe_dim = check.shape.head_dim_kpe;
  const int64_t scales_per_token = ckv_dim / kCkvScaleBlock;
  const int64_t kpe_elem = dtype_size(check.shape.dtype);
  if (!check.concatenated_kv) {
    args.ckv = upload(codes.data(), codes.size());
    args.ckv_scales = static_cast<const float*>(upload(scales.data(), scales.size()));
    args.kpe = upload(kpe.data(), kpe.size());
    args.ckv_stride_token = ckv_dim;
    args.ckv_scales_stride_token = scales_per_token;
    args.kpe_stride_token = kpe_dim;
    return;
  }
  const std::vector<uint8_t> codes_and_scales =
      concatenate_kv(codes, scales, ckv_dim, scales_per_token * 4);
  const int64_t head_bytes = ckv_dim + scales_per_token * 4;
  const std::vector<uint8_t> rows =
      concatenate_kv(codes_and_scales, kpe, head_bytes, kpe_dim * kpe_elem);
  const int64_t row_bytes = head_bytes + kpe_dim * kpe_elem;
  const auto* base = static_cast<const uint8_t*>(upload(rows.data(), rows.size()));
  args.ckv = base;
  args.ckv_scales = reinterpret_cast<const float*>(base + ckv_dim);
  args.kpe = base + head_bytes;
  args.ckv_stride_token = row_bytes;
  args.ckv_scales_stride_token = row_bytes / 4;
  args.kpe_stride_token = row_bytes / kpe_elem;
}

}  // namespace

MlaBatch MlaDeviceProblem::batch() const {
  return MlaBatch{host.qo_indptr.data(), host.kv_indptr.data(), host.kv_len.data(),
                  static_cast<int>(host.kv_len.size()), host.kv_indices.data(), num_pages};
}

void MlaDeviceProblem::poison_outputs() const {
  const int64_t rows = args.num_tokens * check.shape.num_heads;
  if (rows == 0) return;
  device_memset(args.out, 0xFF, rows * check.shape.head_dim_ckv * 2);  // NaN in bf16 and fp16
  if (args.lse) device_memset(args.lse, 0xFF, rows * 4);
}

std::unique_ptr<MlaDeviceProblem> make_device_problem(const MlaCheckCase& check) {
  auto p = std::make_unique<MlaDeviceProblem>();
  p->check = check;
  const MlaShape& shape = check.shape;
  std::mt19937_64 rng(check.seed);
  MlaReferenceProblem& host = p->host;
  fill_batch(check, rng, &host, &p->num_pages);
  const int64_t tokens = host.qo_indptr.back();
  const int ckv_dim = shape.head_dim_ckv, kpe_dim = shape.head_dim_kpe;
  const int64_t kv_rows = p->num_pages * shape.page_size;
  host.num_heads = shape.num_heads;
  host.head_dim_ckv = ckv_dim;
  host.head_dim_kpe = kpe_dim;
  host.page_size = shape.page_size;
  host.causal = shape.causal;
  host.sm_scale = 1.0 / std::sqrt(192.0);
  host.q_nope = random_values(tokens * shape.num_heads * ckv_dim, shape.dtype, rng);
  host.q_pe = random_values(tokens * shape.num_heads * kpe_dim, shape.dtype, rng);
  // The KV cache: the values the reference reads, and the bytes the device reads.
  const DType kv_dtype = shape.effective_kv_dtype();
  const bool token_scales = shape.kv_scales == KvScales::kPerToken128;
  const bool e4m3 = kv_dtype == DType::kFloat8E4M3 && !token_scales;  // per-tensor scales
  std::vector<uint8_t> ckv_bytes, kpe_bytes, scale_bytes;
  if (token_scales) {  // DeepSeek-V3.2: codes with a scale per token and 128, kpe 16-bit
    p->ckv_codes = random_e4m3_codes(kv_rows * ckv_dim, rng);
    const std::vector<float> scales = random_token_scales(kv_rows * ckv_dim / kCkvScaleBlock, rng);
    host.ckv = dequantize_per_token(p->ckv_codes, scales);
    host.kpe = random_values(kv_rows * kpe_dim, shape.dtype, rng);
    ckv_bytes = p->ckv_codes;
    kpe_bytes = half_bytes(host.kpe, shape.dtype);
    scale_bytes = raw_bytes(scales);
  } else if (e4m3) {
    p->ckv_codes = random_e4m3_codes(kv_rows * ckv_dim, rng);
    p->kpe_codes = random_e4m3_codes(kv_rows * kpe_dim, rng);
    ckv_bytes = p->ckv_codes;
    kpe_bytes = p->kpe_codes;
  } else {
    host.ckv = random_values(kv_rows * ckv_dim, kv_dtype, rng);
    host.kpe = random_values(kv_rows * kpe_dim, kv_dtype, rng);
    ckv_bytes = half_bytes(host.ckv, kv_dtype);
    kpe_bytes = half_bytes(host.kpe, kv_dtype);
  }

  // Every buffer holds at least 16 bytes, so that an empty tensor still has a valid pointer.
  auto allocate = [&](size_t bytes) {
    p->buffers.emplace_back(check.device(), std::max<size_t>(bytes, 16));
    return p->buffers.back().data();
  };
  auto upload = [&](const void* data, size_t bytes) {
    void* device = allocate(bytes);
    copy_to_device(device, data, bytes);
    return device;
  };
  MlaRunArgs& args = p->args;
  const auto q_nope = to_half(host.q_nope, shape.dtype);
  const auto q_pe = to_half(host.q_pe, shape.dtype);
  args.q_nope = upload(q_nope.data(), q_nope.size() * 2);
  args.q_nope_stride_head = ckv_dim;
  args.q_nope_stride_token = int64_t{ckv_dim} * shape.num_heads;
  args.q_pe = upload(q_pe.data(), q_pe.size() * 2);
  args.q_pe_stride_head = kpe_dim;
  args.q_pe_stride_token = int64_t{kpe_dim} * shape.num_heads;
  const size_t kv_elem_bytes = dtype_size(kv_dtype);
  if (token_scales) {
    set_token_scaled_kv(check, ckv_bytes, scale_bytes, kpe_bytes, upload, args);
  } else if (check.concatenated_kv) {
    const auto joined =
        concatenate_kv(ckv_bytes, kpe_bytes, ckv_dim * kv_elem_bytes, kpe_dim * kv_elem_bytes);
    args.ckv = upload(joined.data(), joined.size());
    args.kpe = static_cast<const uint8_t*>(args.ckv) + ckv_dim * kv_elem_bytes;
    args.ckv_stride_token = args.kpe_stride_token = ckv_dim + kpe_dim;
  } else {
    args.ckv = upload(ckv_bytes.data(), ckv_bytes.size());
    args.kpe = upload(kpe_bytes.data(), kpe_bytes.size());
    args.ckv_stride_token = ckv_dim;
    args.kpe_stride_token = kpe_dim;
  }
  args.ckv_stride_page = args.ckv_stride_token * shape.page_size;
  args.kpe_stride_page = args.kpe_stride_token * shape.page_size;
  args.ckv_scales_stride_page = args.ckv_scales_stride_token * shape.page_size;
  args.kv_indices = static_cast<const int32_t*>(
      upload(host.kv_indices.data(), host.kv_indices.size() * 4));
  const size_t rows = tokens * shape.num_heads;
  args.out = allocate(rows * ckv_dim * 2);
  args.out_stride_head = ckv_dim;
  args.out_stride_token = int64_t{ckv_dim} * shape.num_heads;
  float* lse = static_cast<float*>(allocate(rows * 4));
  args.lse = check.with_lse ? lse : nullptr;
  args.num_tokens = tokens;
  args.sm_scale = static_cast<float>(host.sm_scale);
  if (e4m3) {
    if (check.kv_scales_on_device) {
      p->kv_scale_ckv_device = static_cast<float*>(allocate(sizeof(float)));
      p->kv_scale_kpe_device = static_cast<float*>(allocate(sizeof(float)));
      args.kv_scale_ckv_device = p->kv_scale_ckv_device;
      args.kv_scale_kpe_device = p->kv_scale_kpe_device;
    }
    p->set_kv_scales(check.kv_scale_ckv, check.kv_scale_kpe);
  }
  p->poison_outputs();
  return p;
}

void MlaDeviceProblem::set_kv_scales(float ckv, float kpe) {
  if (check.shape.effective_kv_dtype() != DType::kFloat8E4M3 ||
      check.shape.kv_scales != KvScales::kPerTensor) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: set_kv_scales needs an e4m3 KV cache with per-tensor scales, the "
                            "case's is {} with {} scales",
                            check.name, dtype_name(check.shape.effective_kv_dtype()),
                            kv_scales_name(check.shape.kv_scales)));
  }
  check.kv_scale_ckv = ckv;
  check.kv_scale_kpe = kpe;
  host.ckv = dequantize(ckv_codes, ckv);
  host.kpe = dequantize(kpe_codes, kpe);
  if (check.kv_scales_on_device) {
    copy_to_device(kv_scale_ckv_device, &ckv, sizeof ckv);
    copy_to_device(kv_scale_kpe_device, &kpe, sizeof kpe);
  } else {
    args.kv_scale_ckv = ckv;
    args.kv_scale_kpe = kpe;
  }
}

MlaCheckResult MlaDeviceProblem::compare_with_reference() const {
  const MlaReferenceResult ref = mla_reference(host);
  const DType dtype = check.shape.dtype;
  const size_t rows = args.num_tokens * check.shape.num_heads;
  std::vector<uint16_t> out_bits(rows * check.shape.head_dim_ckv);
  std::vector<float> lse(rows);
  copy_to_host(out_bits.data(), args.out, out_bits.size() * 2);
  if (args.lse) copy_to_host(lse.data(), args.lse, rows * 4);

  MlaCheckResult result;
  std::vector<double> out(out_bits.size());
  for (size_t i = 0; i < out.size(); ++i) {
    out[i] = half_to_float(dtype, out_bits[i]);
    if (std::isnan(out[i])) result.all_written = false;
  }
  result.out_error = result.all_written ? relative_l2_error(out, ref.out) : INFINITY;
  if (!args.lse) return result;
  std::vector<double> got, expected;
  const double scale = check.options.lse_base == LseBase::kNatural ? std::log(2.0) : 1.0;
  for (size_t i = 0; i < rows; ++i) {
    const bool ref_inf = std::isinf(ref.lse[i]);
    if (ref_inf != std::isinf(lse[i]) || std::isnan(lse[i])) result.lse_infinities_match = false;
    if (!ref_inf && std::isfinite(lse[i])) {
      got.push_back(lse[i]);
      expected.push_back(ref.lse[i] * scale);
    }
  }
  result.lse_error = relative_l2_error(got, expected);
  return result;
}

MlaCheckResult run_mla_check(const MlaCheckCase& check) {
  const auto start = std::chrono::steady_clock::now();
  BatchMlaAttention attention(check.shape, check.options);
  auto problem = make_device_problem(check);
  attention.plan(problem->batch(), nullptr);
  attention.run(problem->args, nullptr);
  device_synchronize(check.device());
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  MlaCheckResult result = problem->compare_with_reference();
  result.seconds = seconds;
  result.plan = attention.plan_info();
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
