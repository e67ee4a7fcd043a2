#pragma once
// A float64 CPU implementation of batched MLA over a paged KV cache: the ground truth for
// the tests and `mlajit verify`. Same semantics as the kernel: packed heads, ragged batch,
// bottom-right-aligned causal mask, kv_len = 0 -> out = 0 and lse = -inf.
#include <cstdint>
#include <vector>

namespace mlajit {

struct MlaReferenceProblem {
  int num_heads = 0;
  int head_dim_ckv = 512;
  int head_dim_kpe = 64;
  int page_size = 1;
  bool causal = false;
  double sm_scale = 0;
  std::vector<int32_t> qo_indptr;   // [B + 1]
  std::vector<int32_t> kv_indptr;   // [B + 1], pages
  std::vector<int32_t> kv_indices;  // page ids
  std::vector<int32_t> kv_len;      // [B]
  std::vector<float> q_nope;        // [tokens][heads][ckv], dense
  std::vector<float> q_pe;          // [tokens][heads][kpe], dense
  std::vector<float> ckv;           // [pages][page_size][ckv], dense
  std::vector<float> kpe;           // [pages][page_size][kpe], dense
};

struct MlaReferenceResult {
  std::vector<double> out;  // [tokens][heads][ckv]
  std::vector<double> lse;  // [tokens][heads], base 2 (log2 of the sum of 2^(s*log2e))
};

// Throws Error(kInvalidArgument) on inconsistent sizes.
MlaReferenceResult mla_reference(const MlaReferenceProblem& problem);

// ||a - b|| / ||b|| over all elements (0 when both are all zero).
double relative_l2_error(const std::vector<double>& actual, const std::vector<double>& expected);

}  // namespace mlajit
