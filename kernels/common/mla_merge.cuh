// Merging the partial results of split KV chunks: out = sum_c w_c o_c / sum_c w_c with
// w_c = 2^(lse_c - max lse), lse = max + log2(sum w), all in fp32. Partial o and lse were
// written by other CTAs before the grid barrier (or by an earlier launch), so they are read
// with ld.global.cg: the L2 is the point of coherence, this SM's L1 might hold stale lines.
#pragma once
#include "common/mla_params.cuh"
#include "common/ptx_dtype.cuh"
#include "common/ptx_math.cuh"

namespace mlajit_kernel {

struct alignas(16) Chunk16 {
  uint32_t w[4];
};

__device__ __forceinline__ Chunk16 load_global_cg(const void* pointer) {
  Chunk16 v;
  asm volatile("ld.global.cg.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.w[0]), "=r"(v.w[1]), "=r"(v.w[2]), "=r"(v.w[3])
               : "l"(pointer));
  return v;
}

__device__ __forceinline__ float load_global_cg(const float* pointer) {
  float v;
  asm volatile("ld.global.cg.f32 %0, [%1];" : "=f"(v) : "l"(pointer));
  return v;
}

// Where final packed row `row` of a request starting at token `q_token_base` goes.
__device__ __forceinline__ int64_t final_row_offset(const MlaParams& params, int32_t q_token_base,
                                                    int32_t row) {
  const int32_t token = q_token_base + row / params.num_heads;
  const int32_t head = row % params.num_heads;
  return token * params.out_stride_token + head * params.out_stride_head;
}

__device__ __forceinline__ void write_final_lse(const MlaParams& params, int32_t q_token_base,
                                                int32_t row, float lse_base2) {
  if (params.lse == nullptr) return;
  const int32_t token = q_token_base + row / params.num_heads;
  const int32_t head = row % params.num_heads;
  params.lse[static_cast<int64_t>(token) * params.num_heads + head] =
      params.lse_base_e ? lse_base2 * kLn2 : lse_base2;
}

// One merged row: each of the row's HEAD_DIM / 8 threads owns 8 consecutive output elements.
// One pass over the chunks, BATCH at a time: a batch's partial LSEs and rows are all loaded
// before any is used, so a row costs ceil(chunks / BATCH) L2 round trips (the loads are
// volatile, to stay after the grid barrier, and would otherwise wait one by one), and the
// running sum is rescaled once per batch whose largest LSE is a new maximum.
template <typename DType, int HEAD_DIM, int BATCH>
__device__ __forceinline__ void merge_row(const MlaParams& params, const MlaMergeRecord& record,
                                          int32_t i, int32_t part) {
  const DType* partial_o = static_cast<const DType*>(params.partial_o);
  float lse_max = neg_inf();
  float acc[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
  float weight_sum = 0.f;
  for (int32_t c0 = 0; c0 < record.num_chunks; c0 += BATCH) {
    float lse[BATCH];
    Chunk16 v[BATCH];
#pragma unroll
    for (int b = 0; b < BATCH; ++b) {
      lse[b] = neg_inf();
      if (c0 + b < record.num_chunks) {
        const int64_t prow = record.partial_row_base +
                             static_cast<int64_t>(c0 + b) * record.partial_stride + i;
        lse[b] = load_global_cg(params.partial_lse + prow);
        v[b] = load_global_cg(partial_o + prow * HEAD_DIM + part * 8);
      }
    }
    float batch_max = lse_max;
#pragma unroll
    for (int b = 0; b < BATCH; ++b) batch_max = fmaxf(batch_max, lse[b]);
    if (batch_max == neg_inf()) continue;  // no chunk so far saw a token
    // 2^(-inf) = 0: the first batch with a token scales the empty sums by 0.
    const float rescale = fast_exp2(lse_max - batch_max);
    weight_sum *= rescale;
#pragma unroll
    for (int k = 0; k < 8; ++k) acc[k] *= rescale;
    lse_max = batch_max;
#pragma unroll
    for (int b = 0; b < BATCH; ++b) {
      if (c0 + b >= record.num_chunks) break;
      const float w = fast_exp2(lse[b] - lse_max);
      weight_sum += w;
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        float lo, hi;
        unpack2<DType>(v[b].w[k], lo, hi);
        acc[2 * k] += w * lo;
        acc[2 * k + 1] += w * hi;
      }
    }
  }
  const float inv = weight_sum > 0.f ? 1.f / weight_sum : 0.f;
  Chunk16 out;
#pragma unroll
  for (int k = 0; k < 4; ++k) out.w[k] = Dtype16<DType>::pack(acc[2 * k] * inv, acc[2 * k + 1] * inv);
  const int32_t row = record.packed_q_start + i;
  DType* dst = static_cast<DType*>(params.out) + final_row_offset(params, record.q_token_base, row);
  *reinterpret_cast<Chunk16*>(dst + part * 8) = out;
  if (part == 0) {
    write_final_lse(params, record.q_token_base, row,
                    lse_max == neg_inf() ? neg_inf() : lse_max + fast_log2(weight_sum));
  }
}

// Merges this CTA's records: merge_records[merge_indptr[cta] .. merge_indptr[cta + 1]).
// BATCH: the chunks whose loads a thread keeps in flight (5 registers each), as the caller's
// register budget allows.
template <typename DType, int HEAD_DIM, int NUM_THREADS, int BATCH = 8>
__device__ __forceinline__ void merge_partials(const MlaParams& params) {
  constexpr int kThreadsPerRow = HEAD_DIM / 8;
  static_assert(NUM_THREADS % kThreadsPerRow == 0, "a row's threads must not straddle the block");
  constexpr int kRowsPerPass = NUM_THREADS / kThreadsPerRow;
  const int32_t cta = blockIdx.y * gridDim.x + blockIdx.x;
  const int32_t part = threadIdx.x % kThreadsPerRow;
  const int32_t first = params.merge_indptr[cta];
  const int32_t last = params.merge_indptr[cta + 1];
  for (int32_t r = first; r < last; ++r) {
    const MlaMergeRecord record = params.merge_records[r];
    for (int32_t i = threadIdx.x / kThreadsPerRow; i < record.num_rows; i += kRowsPerPass) {
      merge_row<DType, HEAD_DIM, BATCH>(params, record, i, part);
    }
  }
}

}  // namespace mlajit_kernel
