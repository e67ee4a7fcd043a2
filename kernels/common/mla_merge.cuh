// Merging the partial results of split KV chunks: out = sum_c w_c o_c / sum_c w_c with
// w_c = 2^(lse_c - max lse), lse = max + log2(sum w), all in fp32. Partial o and lse were
// written by other CTAs before the grid barrier (or by an earlier launch), so they are read
// with ld.global.cg: the L2 is the point of coherence, this SM's L1 might hold stale lines.
#pragma once
#include "common/block_barrier.cuh"
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

// The merge of some of a row's chunks, held by each of the row's HEAD_DIM / 8 threads for its
// 8 output elements: sum and acc weigh chunk c by 2^(lse_c - max).
struct MergeState {
  float max, sum, acc[8];
};
static_assert(sizeof(MergeState) == kMergeStateFloats * 4, "a merge state is what its scratch holds");

__device__ __forceinline__ MergeState empty_merge_state() {
  return MergeState{neg_inf(), 0.f, {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f}};
}

// Folds chunks [begin, end) of row i into s, BATCH at a time: a batch's partial LSEs and rows
// are all loaded before any is used, so it costs ceil((end - begin) / BATCH) L2 round trips
// (the loads are volatile, to stay after the grid barrier, and would otherwise wait one by
// one), and the running sums are rescaled once per batch whose largest LSE is a new maximum.
template <typename DType, int HEAD_DIM, int BATCH>
__device__ __forceinline__ void accumulate_chunks(const MlaParams& params,
                                                  const MlaMergeRecord& record, int32_t i,
                                                  int32_t part, int32_t begin, int32_t end,
                                                  MergeState& s) {
  const DType* partial_o = static_cast<const DType*>(params.partial_o);
  for (int32_t c0 = begin; c0 < end; c0 += BATCH) {
    float lse[BATCH];
    Chunk16 v[BATCH];
#pragma unroll
    for (int b = 0; b < BATCH; ++b) {
      lse[b] = neg_inf();
      if (c0 + b < end) {
        const int64_t prow = record.partial_row_base +
                             static_cast<int64_t>(c0 + b) * record.partial_stride + i;
        lse[b] = load_global_cg(params.partial_lse + prow);
        v[b] = load_global_cg(partial_o + prow * HEAD_DIM + part * 8);
      }
    }
    float batch_max = s.max;
#pragma unroll
    for (int b = 0; b < BATCH; ++b) batch_max = fmaxf(batch_max, lse[b]);
    if (batch_max == neg_inf()) continue;  // no chunk so far saw a token
    // 2^(-inf) = 0: the first batch with a token scales the empty sums by 0.
    const float rescale = fast_exp2(s.max - batch_max);
    s.sum *= rescale;
#pragma unroll
    for (int k = 0; k < 8; ++k) s.acc[k] *= rescale;
    s.max = batch_max;
#pragma unroll
    for (int b = 0; b < BATCH; ++b) {
      if (c0 + b >= end) break;
      const float w = fast_exp2(lse[b] - s.max);
      s.sum += w;
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        float lo, hi;
        unpack2<DType>(v[b].w[k], lo, hi);
        s.acc[2 * k] += w * lo;
        s.acc[2 * k + 1] += w * hi;
      }
    }
  }
}

// into += other, both over disjoint chunks of one row.
__device__ __forceinline__ void combine_merge_states(MergeState& into, const MergeState& other) {
  const float m = fmaxf(into.max, other.max);
  if (m == neg_inf()) return;
  const float a = fast_exp2(into.max - m), b = fast_exp2(other.max - m);  // 2^(-inf) = 0
  into.max = m;
  into.sum = into.sum * a + other.sum * b;
#pragma unroll
  for (int k = 0; k < 8; ++k) into.acc[k] = into.acc[k] * a + other.acc[k] * b;
}

// Row i's final output (its part's 8 elements) and LSE from the merge of all its chunks.
template <typename DType, int HEAD_DIM>
__device__ __forceinline__ void write_merged_row(const MlaParams& params,
                                                 const MlaMergeRecord& record, int32_t i,
                                                 int32_t part, const MergeState& s) {
  const float inv = s.sum > 0.f ? 1.f / s.sum : 0.f;
  Chunk16 out;
#pragma unroll
  for (int k = 0; k < 4; ++k) out.w[k] = Dtype16<DType>::pack(s.acc[2 * k] * inv, s.acc[2 * k + 1] * inv);
  const int32_t row = record.packed_q_start + i;
  DType* dst = static_cast<DType*>(params.out) + final_row_offset(params, record.q_token_base, row);
  *reinterpret_cast<Chunk16*>(dst + part * 8) = out;
  if (part == 0) {
    write_final_lse(params, record.q_token_base, row,
                    s.max == neg_inf() ? neg_inf() : s.max + fast_log2(s.sum));
  }
}

// One pass over a record's rows: row group `group` merges row i of the pass (with `slices`
// >= 2, a record of fewer rows than the CTA has row groups, `slices` groups share each row,
// group g taking row g / slices and the g % slices-th contiguous share of its chunks; the
// shares meet in shared memory, `scratch`, kMergeStateFloats floats per thread, and the row's
// first group adds them up in slice order, so the bits depend on the record alone). Every
// thread of the CTA comes here for each pass. One call site of accumulate_chunks and of
// write_merged_row for both forms: each costs NVRTC and ptxas time per instance.
template <typename DType, int HEAD_DIM, int NUM_THREADS, int BATCH>
__device__ __forceinline__ void merge_record_pass(const MlaParams& params,
                                                  const MlaMergeRecord& record, int32_t i,
                                                  int32_t part, int32_t slice, int32_t slices,
                                                  float* scratch) {
  constexpr int kThreadsPerRow = HEAD_DIM / 8;
  MergeState s = empty_merge_state();
  if (i < record.num_rows) {
    accumulate_chunks<DType, HEAD_DIM, BATCH>(params, record, i, part,
                                              record.num_chunks * slice / slices,
                                              record.num_chunks * (slice + 1) / slices, s);
  }
  if (slices >= 2) {
    float* mine = scratch + threadIdx.x;  // float k of thread t at scratch[k * NUM_THREADS + t]
    mine[0] = s.max;
    mine[NUM_THREADS] = s.sum;
#pragma unroll
    for (int k = 0; k < 8; ++k) mine[(2 + k) * NUM_THREADS] = s.acc[k];
    block_barrier_across_roles();
    if (i < record.num_rows && slice == 0) {
      for (int32_t other = 1; other < slices; ++other) {
        const float* theirs = mine + other * kThreadsPerRow;
        MergeState t;
        t.max = theirs[0];
        t.sum = theirs[NUM_THREADS];
#pragma unroll
        for (int k = 0; k < 8; ++k) t.acc[k] = theirs[(2 + k) * NUM_THREADS];
        combine_merge_states(s, t);
      }
    }
    block_barrier_across_roles();  // scratch is free for the next record
  }
  if (i < record.num_rows && slice == 0) write_merged_row<DType, HEAD_DIM>(params, record, i, part, s);
}

// How many row groups share each row of a record (1: a group merges a row alone). Sharing
// costs two block barriers and the exchange, measured on the H100 (2026-12-05) at about the
// time of two L2 round trips more: it pays only for rows of more than kMinSlicedBatches
// batches of chunks (B=1 L=16384 at 128 heads: 64 chunks, 8 batches, 33.3 -> 31.1 us), and
// cost 0.7-1.1 us where rows have 16 or fewer chunks. It depends on the record alone, so a
// batch-invariant plan's bits do too.
constexpr int32_t kMinSlicedBatches = 4;
template <int GROUPS, int BATCH>
__device__ __forceinline__ int32_t merge_slices(const MlaMergeRecord& record) {
  const int32_t batches = (record.num_chunks + BATCH - 1) / BATCH;
  if (batches <= kMinSlicedBatches || record.num_rows <= 0) return 1;
  const int32_t share = GROUPS / record.num_rows;  // 0 or 1: more rows than groups, none shared
  if (share < 2) return 1;
  return share < batches ? share : batches;
}


// Merges this CTA's records: merge_records[merge_indptr[cta] .. merge_indptr[cta + 1]).
// BATCH: the chunks whose loads a thread keeps in flight (5 registers each), as the caller's
// register budget allows. Called by every thread of the CTA, with kMergeScratchBytes<NUM_THREADS> bytes of
// shared memory that nothing else uses any more (records of few rows share each row's chunks
// between row groups through it).
template <typename DType, int HEAD_DIM, int NUM_THREADS, int BATCH = 8>
__device__ __forceinline__ void merge_partials(const MlaParams& params, float* scratch) {
  constexpr int kThreadsPerRow = HEAD_DIM / 8;
  static_assert(NUM_THREADS % kThreadsPerRow == 0, "a row's threads must not straddle the block");
  constexpr int kGroups = NUM_THREADS / kThreadsPerRow;
  const int32_t cta = blockIdx.y * gridDim.x + blockIdx.x;
  const int32_t group = threadIdx.x / kThreadsPerRow;
  const int32_t part = threadIdx.x % kThreadsPerRow;
  const int32_t first = params.merge_indptr[cta];
  const int32_t last = params.merge_indptr[cta + 1];
  for (int32_t r = first; r < last; ++r) {
    const MlaMergeRecord record = params.merge_records[r];
    const int32_t slices = merge_slices<kGroups, BATCH>(record);
    // Shared rows: one pass (fewer rows than groups); else group g takes rows g, g + kGroups..
    const bool shared = slices >= 2;
    const int32_t passes = shared ? 1 : (record.num_rows + kGroups - 1) / kGroups;
    const int32_t row = shared ? group / slices : group;
    const int32_t slice = shared ? group % slices : 0;
    for (int32_t pass = 0; pass < passes; ++pass) {
      merge_record_pass<DType, HEAD_DIM, NUM_THREADS, BATCH>(params, record, row + pass * kGroups,
                                                             part, slice, slices, scratch);
    }
  }
}

}  // namespace mlajit_kernel
