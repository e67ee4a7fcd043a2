#pragma once
// The float64 side of merge_states: cutting a problem's KV into disjoint parts (each a problem
// of its own, for mla_reference or run()) and merging their states by the LSE formula. The
// merge of the parts' references must equal the reference over the union: the CPU tests pin
// that; the GPU tests compare the merged GPU parts with the union's reference.
#include <cstdint>
#include <vector>

#include "check/mla_reference.h"

namespace mlajit {

// One part of every request's KV: a CSR batch over the whole problem's pool and queries.
struct MlaKvPart {
  std::vector<int32_t> kv_indptr;   // [B + 1]
  std::vector<int32_t> kv_indices;  // page ids, a run of each request's pages
  std::vector<int32_t> kv_len;      // [B]
};

// Cuts each request's pages into `num_parts` consecutive runs at random page boundaries
// (std::mt19937_64(seed)); runs may be empty. `empty_part` (>= 0) is empty for every request.
// Throws Error(kInvalidArgument) for a causal problem (a causal mask does not split by KV
// this way), num_parts < 1 or empty_part >= num_parts.
std::vector<MlaKvPart> split_kv(const MlaReferenceProblem& whole, int num_parts, uint64_t seed,
                                int empty_part = -1);

// `whole` with its KV batch replaced by `part`'s.
MlaReferenceProblem with_kv(const MlaReferenceProblem& whole, const MlaKvPart& part);

// out = sum_c w_c out_c / sum_c w_c with w_c = 2^(lse_c - max lse), lse = max + log2 sum w
// (base 2, as MlaReferenceResult holds it); parts with lse = -inf are skipped, a row without
// any gets out 0 and lse -inf. Throws Error(kInvalidArgument) on no parts or unequal sizes.
MlaReferenceResult merge_states_reference(const std::vector<MlaReferenceResult>& parts,
                                          int head_dim);

}  // namespace mlajit
