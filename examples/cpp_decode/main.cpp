// One DeepSeek-style decode batch (4 requests, 1 query token each, 128 heads, bf16) through
// the C++ API; checks one (request, head) against a float reference on the host.
// Exit 0: it ran and matched, or there is no GPU (the message says so); 1: anything else.
#include <mlajit/attention.h>
#include <mlajit/device_memory.h>
#include <mlajit/runtime.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

namespace {

uint16_t to_bf16(float value) {  // truncation is fine for test data
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  return static_cast<uint16_t>(bits >> 16);
}
float from_bf16(uint16_t value) {
  const uint32_t bits = static_cast<uint32_t>(value) << 16;
  float result;
  std::memcpy(&result, &bits, 4);
  return result;
}
std::vector<uint16_t> random_bf16(size_t count, uint32_t seed) {
  std::vector<uint16_t> values(count);
  for (auto& value : values) {
    seed = seed * 1664525u + 1013904223u;
    value = to_bf16(static_cast<float>(seed >> 8) / 16777216.0f - 0.5f);
  }
  return values;
}
template <typename T>
void* upload(const std::vector<T>& host) {
  void* device = mlajit::device_alloc(0, host.size() * sizeof(T));
  mlajit::copy_to_device(device, host.data(), host.size() * sizeof(T));
  return device;
}

}  // namespace

int main() {
  std::printf("mlajit %s (headers %s)\n", mlajit::version(), MLAJIT_VERSION_STRING);
  const mlajit::MlaShape shape;  // 128 heads, ckv 512, kpe 64, page 64, bf16
  const int heads = shape.num_heads, ckv = shape.head_dim_ckv, kpe = shape.head_dim_kpe;
  const int page = shape.page_size;
  try {
    mlajit::BatchMlaAttention attention(shape);
    std::printf("kernel: %s\n", attention.spec_text().c_str());

    const std::vector<int32_t> kv_len = {100, 257, 64, 1000};
    std::vector<int32_t> qo_indptr = {0}, kv_indptr = {0}, kv_indices;
    for (int32_t len : kv_len) {
      qo_indptr.push_back(qo_indptr.back() + 1);
      for (int p = 0; p < (len + page - 1) / page; ++p) kv_indices.push_back(kv_indices.size());
      kv_indptr.push_back(static_cast<int32_t>(kv_indices.size()));
    }
    const size_t tokens = kv_len.size(), pages = kv_indices.size();
    const auto q_nope = random_bf16(tokens * heads * ckv, 1), q_pe = random_bf16(tokens * heads * kpe, 2);
    const auto ckv_cache = random_bf16(pages * page * ckv, 3), kpe_cache = random_bf16(pages * page * kpe, 4);

    mlajit::MlaBatch batch;
    batch.qo_indptr = qo_indptr.data();
    batch.kv_indptr = kv_indptr.data();
    batch.kv_len = kv_len.data();
    batch.batch_size = static_cast<int>(kv_len.size());
    attention.plan(batch, nullptr);  // nullptr: the legacy default stream

    mlajit::MlaRunArgs args;
    args.q_nope = upload(q_nope);
    args.q_nope_stride_token = heads * ckv, args.q_nope_stride_head = ckv;
    args.q_pe = upload(q_pe);
    args.q_pe_stride_token = heads * kpe, args.q_pe_stride_head = kpe;
    args.ckv = upload(ckv_cache);
    args.ckv_stride_page = page * ckv, args.ckv_stride_token = ckv;
    args.kpe = upload(kpe_cache);
    args.kpe_stride_page = page * kpe, args.kpe_stride_token = kpe;
    args.kv_indices = static_cast<const int32_t*>(upload(kv_indices));
    args.out = mlajit::device_alloc(0, tokens * heads * ckv * 2);
    args.out_stride_token = heads * ckv, args.out_stride_head = ckv;
    args.num_tokens = static_cast<int64_t>(tokens);
    args.sm_scale = 1.0f / std::sqrt(192.0f);
    attention.run(args, nullptr);

    std::vector<uint16_t> out(tokens * heads * ckv);
    mlajit::copy_to_host(out.data(), args.out, out.size() * 2);

    // Reference for request 1 (257 tokens: a partial last page), head 5.
    const int r = 1, h = 5;
    std::vector<double> s(kv_len[r]), o(ckv, 0.0);
    double max_s = -1e30, sum = 0;
    for (int t = 0; t < kv_len[r]; ++t) {
      const size_t row = static_cast<size_t>(kv_indices[kv_indptr[r] + t / page]) * page + t % page;
      double dot = 0;
      for (int d = 0; d < ckv; ++d) dot += from_bf16(q_nope[(r * heads + h) * ckv + d]) * from_bf16(ckv_cache[row * ckv + d]);
      for (int d = 0; d < kpe; ++d) dot += from_bf16(q_pe[(r * heads + h) * kpe + d]) * from_bf16(kpe_cache[row * kpe + d]);
      s[t] = dot * args.sm_scale;
      if (s[t] > max_s) max_s = s[t];
    }
    for (int t = 0; t < kv_len[r]; ++t) {
      const size_t row = static_cast<size_t>(kv_indices[kv_indptr[r] + t / page]) * page + t % page;
      const double p = std::exp(s[t] - max_s);
      sum += p;
      for (int d = 0; d < ckv; ++d) o[d] += p * from_bf16(ckv_cache[row * ckv + d]);
    }
    double worst = 0;
    for (int d = 0; d < ckv; ++d) {
      worst = std::fmax(worst, std::fabs(o[d] / sum - from_bf16(out[(r * heads + h) * ckv + d])));
    }
    std::printf("decode batch of %zu requests ran; max |out - reference| = %.2e\n", tokens, worst);
    for (const void* p : {args.q_nope, args.q_pe, args.ckv, args.kpe, static_cast<const void*>(args.kv_indices),
                          static_cast<const void*>(args.out)}) {
      mlajit::device_free(const_cast<void*>(p));
    }
    return worst < 2e-2 ? 0 : 1;
  } catch (const mlajit::Error& error) {
    const bool no_gpu = error.code() == mlajit::ErrorCode::kNoDriver ||
                        error.code() == mlajit::ErrorCode::kNoDevice;
    std::printf("%s: %s\n", no_gpu ? "no GPU, nothing to run" : mlajit::error_code_name(error.code()),
                error.what());
    return no_gpu ? 0 : 1;
  }
}
