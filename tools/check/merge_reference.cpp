#include "check/merge_reference.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include <fmt/format.h>

#include "mlajit/error.h"

namespace mlajit {
namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

[[noreturn]] void invalid(const std::string& message) {
  throw Error(ErrorCode::kInvalidArgument, message);
}

// num_parts + 1 page offsets 0 = cut[0] <= ... <= cut[num_parts] = pages.
std::vector<int32_t> random_cuts(int32_t pages, int num_parts, int empty_part,
                                 std::mt19937_64& rng) {
  const int drawn = num_parts - (empty_part >= 0 ? 1 : 0);
  std::uniform_int_distribution<int32_t> offset(0, pages);
  std::vector<int32_t> inner;
  for (int i = 0; i + 1 < drawn; ++i) inner.push_back(offset(rng));
  std::sort(inner.begin(), inner.end());
  std::vector<int32_t> cuts{0};
  cuts.insert(cuts.end(), inner.begin(), inner.end());
  cuts.push_back(pages);
  // An empty part is a repeated cut: part `empty_part` runs from a cut to itself.
  if (empty_part >= 0) cuts.insert(cuts.begin() + empty_part + 1, cuts[empty_part]);
  return cuts;
}

}  // namespace

std::vector<MlaKvPart> split_kv(const MlaReferenceProblem& whole, int num_parts, uint64_t seed,
                                int empty_part) {
  if (whole.causal) invalid("split_kv: a causal problem does not split by KV into parts");
  if (num_parts < 1) invalid(fmt::format("split_kv: num_parts={}: expected >= 1", num_parts));
  if (empty_part >= num_parts || (empty_part >= 0 && num_parts < 2)) {
    invalid(fmt::format("split_kv: empty_part={} with num_parts={}: expected -1 or a part "
                        "other than the only one",
                        empty_part, num_parts));
  }
  std::mt19937_64 rng(seed);
  std::vector<MlaKvPart> parts(num_parts);
  for (auto& part : parts) part.kv_indptr = {0};
  const size_t batch = whole.kv_len.size();
  for (size_t b = 0; b < batch; ++b) {
    const int32_t first = whole.kv_indptr[b];
    const int32_t pages = whole.kv_indptr[b + 1] - first;
    const int64_t page_size = whole.page_size, kv_len = whole.kv_len[b];
    const std::vector<int32_t> cuts = random_cuts(pages, num_parts, empty_part, rng);
    for (int c = 0; c < num_parts; ++c) {
      MlaKvPart& part = parts[c];
      for (int32_t p = cuts[c]; p < cuts[c + 1]; ++p) part.kv_indices.push_back(whole.kv_indices[first + p]);
      part.kv_indptr.push_back(static_cast<int32_t>(part.kv_indices.size()));
      // Tokens of the request inside pages [cuts[c], cuts[c + 1]): the last page may be partial.
      const int64_t end = std::min<int64_t>(kv_len, cuts[c + 1] * page_size);
      part.kv_len.push_back(static_cast<int32_t>(std::max<int64_t>(0, end - cuts[c] * page_size)));
    }
  }
  return parts;
}

MlaReferenceProblem with_kv(const MlaReferenceProblem& whole, const MlaKvPart& part) {
  MlaReferenceProblem problem = whole;
  problem.kv_indptr = part.kv_indptr;
  problem.kv_indices = part.kv_indices;
  problem.kv_len = part.kv_len;
  return problem;
}

MlaReferenceResult merge_states_reference(const std::vector<MlaReferenceResult>& parts,
                                          int head_dim) {
  if (parts.empty()) invalid("merge_states_reference: no parts");
  const size_t rows = parts[0].lse.size();
  for (size_t c = 0; c < parts.size(); ++c) {
    if (parts[c].lse.size() != rows || parts[c].out.size() != rows * head_dim) {
      invalid(fmt::format("merge_states_reference: part {} has {} rows and {} outputs; expected "
                          "{} and {} x head_dim {}",
                          c, parts[c].lse.size(), parts[c].out.size(), rows, rows, head_dim));
    }
  }
  MlaReferenceResult merged;
  merged.out.assign(rows * head_dim, 0.0);
  merged.lse.assign(rows, kNegInf);
  for (size_t r = 0; r < rows; ++r) {
    double m = kNegInf;
    for (const auto& part : parts) m = std::max(m, part.lse[r]);
    if (m == kNegInf) continue;  // every part empty: out 0, lse -inf
    double sum = 0;
    for (const auto& part : parts) {
      if (part.lse[r] == kNegInf) continue;
      const double w = std::exp2(part.lse[r] - m);
      sum += w;
      for (int d = 0; d < head_dim; ++d) merged.out[r * head_dim + d] += w * part.out[r * head_dim + d];
    }
    for (int d = 0; d < head_dim; ++d) merged.out[r * head_dim + d] /= sum;
    merged.lse[r] = m + std::log2(sum);
  }
  return merged;
}

}  // namespace mlajit
