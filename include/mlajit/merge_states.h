#pragma once
// merge_states: combines partial attentions of the same query rows over disjoint KV sets into
// the attention over their union (cascade attention over a shared prefix, context-parallel
// decode where each device holds part of the KV). Each part is an output [tokens][heads][dim]
// with its log-sum-exp [tokens][heads], as BatchMlaAttention::run writes them:
//   m = max_c lse_c,  w_c = exp(lse_c - m),  out = sum_c w_c out_c / sum_c w_c,
//   lse = m + log(sum_c w_c)                      (logs in the base of MergeStatesArgs::lse_base)
// A part with lse = -inf (it saw no KV) contributes nothing and its output is not read; when
// every part of a row is empty the row gets out = 0 and lse = -inf, as run() gives kv_len 0.
// One kernel launch on the caller's stream, compiled and cached like an attention kernel;
// CUDA-graph capturable (the parts travel by value: nothing is allocated or copied).
#include <cstdint>

#include "mlajit/attention.h"
#include "mlajit/export.h"
#include "mlajit/kernel_spec.h"

namespace mlajit {

// The most parts one merge_states call takes; merge more in rounds (a merged state is a part).
constexpr int kMaxMergeStateParts = 64;

// One partial attention state. Device pointers; strides in elements, last dimension contiguous.
struct AttentionState {
  const void* out = nullptr;  // [num_tokens][num_heads][head_dim] of MergeStatesArgs::dtype
  int64_t out_stride_token = 0, out_stride_head = 0;
  const float* lse = nullptr;  // [num_tokens][num_heads] float32, dense (as run() writes it)
};

struct MergeStatesArgs {
  const AttentionState* parts = nullptr;  // host array of num_parts states
  int num_parts = 0;                      // 1..kMaxMergeStateParts
  void* out = nullptr;   // [num_tokens][num_heads][head_dim]; may be a part's own out (same strides)
  int64_t out_stride_token = 0, out_stride_head = 0;
  float* lse = nullptr;  // optional [num_tokens][num_heads] float32, dense; may be a part's lse
  int64_t num_tokens = 0;
  int num_heads = 0;     // >= 1
  int head_dim = 512;    // a multiple of 8 (16 bytes), 8..65536: 512 for DeepSeek's ckv
  DType dtype = DType::kBFloat16;  // of every part's out and of out: bf16 or f16
  LseBase lse_base = LseBase::kBase2;  // of every part's lse and of lse (MlaOptions::lse_base)
  int device = -1;       // CUDA ordinal the tensors live on; -1: the current context's, else 0
};

// Checks every argument (Error(kInvalidArgument) naming the field, its value and what is
// expected; e4m3 is Error(kUnsupported)), then launches on `stream` (a CUstream; nullptr =
// legacy default stream) of the device. Pointers: 16-byte aligned outs with strides of whole
// 16 bytes, 4-byte aligned lse. num_tokens 0 launches nothing (and null pointers pass then).
// Overlap between out/lse and a part other than in the same place is undefined.
MLAJIT_API void merge_states(const MergeStatesArgs& args, void* stream);

}  // namespace mlajit
