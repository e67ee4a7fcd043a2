// Merging partial attention states: attentions of the same query rows over disjoint KV sets,
// each an output row o_c with its log-sum-exp lse_c, combine into the attention over the union:
//   m = max_c lse_c,  w_c = 2^(lse_c - m),  out = sum_c w_c o_c / sum_c w_c,
//   lse = m + log2(sum_c w_c)
// in fp32, LSEs in base 2 (natural-log LSEs are converted on load and back on store). Taking m
// as the reference keeps every weight in (0, 1], so none overflows.
// A part with lse = -inf saw no KV: it weighs nothing and its output row is never read, so an
// empty part's buffer may hold anything (NaN poison, stale data). All parts empty: out 0 and
// lse -inf, what run() writes for kv_len 0.
//
// One warp per (token, head) row; each lane owns 8 consecutive elements (16 bytes) per pass
// along the row. Memory-bound: every byte of every part is read once, the output written once.
// A lane reads its 16 bytes of every part before it writes those 16 bytes of out, and lane 0
// writes the row's lse only after the whole warp has read the parts' lse: so `out` and `lse`
// may be a part's own buffers (an in-place merge with equal strides).
//
// The host includes this file (after <cstdint>) for MergeStatesParams; the device code is
// compiled only by NVRTC.
#pragma once

namespace mlajit_kernel {

// Bounded so that the parameters travel by value in one kernel parameter (2.1 KB, below the
// 4 KB every arch accepts): no device array of pointers, so a launch allocates nothing and a
// CUDA graph captures it as is.
constexpr int kMaxMergeParts = 64;

struct MergePart {
  const void* out;       // [tokens][heads][head_dim] at the strides below (elements)
  const float* lse;      // [tokens][heads], dense
  int64_t stride_token;  // elements
  int64_t stride_head;
};

struct MergeStatesParams {
  MergePart parts[kMaxMergeParts];  // the first num_parts are used
  void* out;                        // like a part's out
  float* lse;                       // [tokens][heads], dense; null: not written
  int64_t out_stride_token;
  int64_t out_stride_head;
  int64_t num_rows;                 // tokens x heads
  int32_t num_heads;
  int32_t head_dim;                 // a multiple of 8
  int32_t num_parts;                // 1..kMaxMergeParts
  int32_t is_bf16;                  // 1: bf16, 0: f16 (every part and the output)
  int32_t lse_base_e;               // 1: LSEs in and out are natural logs; 0: base 2
  int32_t reserved;
};

}  // namespace mlajit_kernel

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#include "common/ptx_dtype.cuh"
#include "common/ptx_math.cuh"

namespace mlajit_kernel {

constexpr float kLog2e = 1.4426950408889634f;

struct alignas(16) MergeVec16 {
  uint32_t w[4];
};

// A 16-byte store, written out: from the plain struct assignment the compiler emits four 4-byte
// stores. The clobber keeps it after this lane's loads of the same bytes (in-place merges).
__device__ __forceinline__ void store_vec16(void* pointer, const MergeVec16& v) {
  asm volatile("st.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(pointer), "r"(v.w[0]),
               "r"(v.w[1]), "r"(v.w[2]), "r"(v.w[3])
               : "memory");
}

__device__ __forceinline__ float part_lse_base2(const MergeStatesParams& p, int c, int64_t row) {
  const float value = p.parts[c].lse[row];
  return p.lse_base_e ? value * kLog2e : value;  // -inf stays -inf
}

// The row's largest LSE: the reference point of the weights.
__device__ __forceinline__ float max_lse(const MergeStatesParams& p, int64_t row) {
  float m = neg_inf();
  for (int c = 0; c < p.num_parts; ++c) m = fmaxf(m, part_lse_base2(p, c, row));
  return m;
}

// sum_c 2^(lse_c - m) over the parts that saw KV; >= 1 when m is finite (the largest weighs 1).
__device__ __forceinline__ float sum_weights(const MergeStatesParams& p, int64_t row, float m) {
  float sum = 0.f;
  for (int c = 0; c < p.num_parts; ++c) {
    const float l = part_lse_base2(p, c, row);
    if (l != neg_inf()) sum += fast_exp2(l - m);
  }
  return sum;
}

template <typename T>
__device__ __forceinline__ const T* part_row(const MergeStatesParams& p, int c, int64_t token,
                                             int64_t head) {
  const MergePart& part = p.parts[c];
  return static_cast<const T*>(part.out) + token * part.stride_token + head * part.stride_head;
}

// Elements [d, d + 8) of the merged row: sum_c w_c o_c / sum_c w_c.
template <typename T>
__device__ __forceinline__ void merge_slice(const MergeStatesParams& p, int64_t row, int64_t token,
                                            int64_t head, int32_t d, float m, float inv_sum) {
  float acc[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
  if (m != neg_inf()) {
    for (int c = 0; c < p.num_parts; ++c) {
      const float l = part_lse_base2(p, c, row);
      if (l == neg_inf()) continue;  // an empty part: its output is never read
      const float w = fast_exp2(l - m);
      const MergeVec16 v = *reinterpret_cast<const MergeVec16*>(part_row<T>(p, c, token, head) + d);
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        float lo, hi;
        unpack2<T>(v.w[k], lo, hi);
        acc[2 * k] += w * lo;
        acc[2 * k + 1] += w * hi;
      }
    }
  }
  MergeVec16 merged;
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    merged.w[k] = Dtype16<T>::pack(acc[2 * k] * inv_sum, acc[2 * k + 1] * inv_sum);
  }
  T* out = static_cast<T*>(p.out) + token * p.out_stride_token + head * p.out_stride_head;
  store_vec16(out + d, merged);
}

template <typename T>
__device__ __forceinline__ void merge_row(const MergeStatesParams& p, int64_t row, int lane) {
  const int64_t token = row / p.num_heads;
  const int64_t head = row % p.num_heads;
  const float m = max_lse(p, row);
  const float weight_sum = m == neg_inf() ? 0.f : sum_weights(p, row, m);
  const float inv_sum = weight_sum > 0.f ? 1.f / weight_sum : 0.f;
  for (int32_t d = lane * 8; d < p.head_dim; d += 32 * 8) {
    merge_slice<T>(p, row, token, head, d, m, inv_sum);
  }
  if (p.lse == nullptr) return;
  __syncwarp();  // every lane has read the parts' lse: p.lse may be one of them
  if (lane == 0) {
    const float lse2 = m == neg_inf() ? neg_inf() : m + fast_log2(weight_sum);
    p.lse[row] = p.lse_base_e ? lse2 * kLn2 : lse2;
  }
}

template <int THREADS>
__global__ void __launch_bounds__(THREADS) merge_states(const __grid_constant__ MergeStatesParams p) {
  static_assert(THREADS == MLAJIT_EXPECTED_THREADS, "the host launches MLAJIT_EXPECTED_THREADS");
  static_assert(THREADS % 32 == 0, "one warp per row");
  constexpr int kRowsPerBlock = THREADS / 32;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / 32;
  if (row >= p.num_rows) return;  // the whole warp: __syncwarp above sees all 32 lanes
  const int lane = threadIdx.x % 32;
  if (p.is_bf16) {
    merge_row<bf16_t>(p, row, lane);
  } else {
    merge_row<f16_t>(p, row, lane);
  }
}

}  // namespace mlajit_kernel
#endif
