#include "check/mla_reference.h"

#include <algorithm>
#include <atomic>
#include <thread>
#include <cmath>
#include <limits>
#include <string>

#include <fmt/format.h>

#include "mlajit/error.h"

namespace mlajit {
namespace {

constexpr double kLog2e = 1.4426950408889634074;

template <typename... Args>
[[noreturn]] void invalid(fmt::format_string<Args...> format, Args&&... args) {
  throw Error(ErrorCode::kInvalidArgument,
              "mla_reference: " + fmt::format(format, std::forward<Args>(args)...));
}

void check_size(const char* name, size_t actual, int64_t expected, const char* shape) {
  if (static_cast<int64_t>(actual) != expected)
    invalid("{} has {} elements; expected {} = {}", name, actual, expected, shape);
}

void validate_dims(const MlaReferenceProblem& p) {
  if (p.num_heads < 1) invalid("num_heads must be >= 1, got {}", p.num_heads);
  if (p.head_dim_ckv < 1) invalid("head_dim_ckv must be >= 1, got {}", p.head_dim_ckv);
  if (p.head_dim_kpe < 1) invalid("head_dim_kpe must be >= 1, got {}", p.head_dim_kpe);
  if (p.page_size < 1) invalid("page_size must be >= 1, got {}", p.page_size);
  if (!(p.sm_scale > 0) || !std::isfinite(p.sm_scale))
    invalid("sm_scale must be a positive finite number (e.g. 1/sqrt(head_dim_ckv + "
            "head_dim_kpe)), got {}", p.sm_scale);
}

void validate_indptr(const std::vector<int32_t>& indptr, const char* name, int64_t limit,
                     const char* limit_name) {
  if (indptr.empty()) invalid("{} is empty; it needs batch_size + 1 entries", name);
  if (indptr[0] != 0) invalid("{}[0] must be 0, got {}", name, indptr[0]);
  for (size_t b = 0; b + 1 < indptr.size(); ++b) {
    if (indptr[b] > indptr[b + 1])
      invalid("{} must be non-decreasing: {}[{}]={} > {}[{}]={}", name, name, b, indptr[b], name,
              b + 1, indptr[b + 1]);
  }
  if (indptr.back() > limit)
    invalid("{}[{}]={} exceeds the {} {}", name, indptr.size() - 1, indptr.back(), limit,
            limit_name);
}

// Number of pages in the KV pool, from the ckv and kpe sizes (which must agree).
int64_t validate_pool(const MlaReferenceProblem& p) {
  const int64_t ckv_page = int64_t{p.page_size} * p.head_dim_ckv;
  const int64_t kpe_page = int64_t{p.page_size} * p.head_dim_kpe;
  if (p.ckv.size() % ckv_page != 0)
    invalid("ckv has {} elements, not a whole number of pages of page_size x head_dim_ckv = {}",
            p.ckv.size(), ckv_page);
  const int64_t pages = static_cast<int64_t>(p.ckv.size()) / ckv_page;
  check_size("kpe", p.kpe.size(), pages * kpe_page, "pages x page_size x head_dim_kpe");
  for (size_t i = 0; i < p.kv_indices.size(); ++i) {
    if (p.kv_indices[i] < 0 || p.kv_indices[i] >= pages)
      invalid("kv_indices[{}]={} is outside the pool of {} pages", i, p.kv_indices[i], pages);
  }
  return pages;
}

void validate(const MlaReferenceProblem& p) {
  validate_dims(p);
  validate_pool(p);
  if (p.qo_indptr.empty()) invalid("qo_indptr is empty; it needs batch_size + 1 entries");
  const size_t batch = p.qo_indptr.size() - 1;
  if (p.kv_indptr.size() != batch + 1)
    invalid("kv_indptr has {} entries; qo_indptr says batch_size = {}, so {} are needed",
            p.kv_indptr.size(), batch, batch + 1);
  check_size("kv_len", p.kv_len.size(), static_cast<int64_t>(batch), "batch_size");
  validate_indptr(p.qo_indptr, "qo_indptr", std::numeric_limits<int32_t>::max(), "int32 range");
  validate_indptr(p.kv_indptr, "kv_indptr", static_cast<int64_t>(p.kv_indices.size()),
                  "entries of kv_indices");
  for (size_t b = 0; b < batch; ++b) {
    const int64_t capacity = (int64_t{p.kv_indptr[b + 1]} - p.kv_indptr[b]) * p.page_size;
    if (p.kv_len[b] < 0 || p.kv_len[b] > capacity)
      invalid("kv_len[{}]={} must be in 0..{} (its {} pages x page_size {})", b, p.kv_len[b],
              capacity, capacity / p.page_size, p.page_size);
  }
  const int64_t tokens = p.qo_indptr.back();
  check_size("q_nope", p.q_nope.size(), tokens * p.num_heads * p.head_dim_ckv,
             "tokens x num_heads x head_dim_ckv");
  check_size("q_pe", p.q_pe.size(), tokens * p.num_heads * p.head_dim_kpe,
             "tokens x num_heads x head_dim_kpe");
}

// Where KV token t of request b lives in the pool (row index into ckv / kpe rows).
int64_t kv_row(const MlaReferenceProblem& p, int b, int64_t t) {
  const int32_t page = p.kv_indices[p.kv_indptr[b] + t / p.page_size];
  return int64_t{page} * p.page_size + t % p.page_size;
}

double dot(const float* a, const float* b, int n) {
  double sum = 0;
  for (int i = 0; i < n; ++i) sum += double{a[i]} * double{b[i]};
  return sum;
}

// One (query token, head) row over its visible KV rows: softmax-weighted sum of ckv rows,
// and the base-2 log-sum-exp of the scores.
void attend_row(const MlaReferenceProblem& p, const float* q_nope, const float* q_pe,
                const std::vector<int64_t>& rows, double* out, double* lse) {
  const int ckv = p.head_dim_ckv, kpe = p.head_dim_kpe;
  std::fill(out, out + ckv, 0.0);
  if (rows.empty()) {
    *lse = -std::numeric_limits<double>::infinity();
    return;
  }
  std::vector<double> score(rows.size());
  double max_score = -std::numeric_limits<double>::infinity();
  for (size_t j = 0; j < rows.size(); ++j) {
    const double s = dot(q_nope, &p.ckv[rows[j] * ckv], ckv) + dot(q_pe, &p.kpe[rows[j] * kpe], kpe);
    score[j] = s * p.sm_scale * kLog2e;  // base-2 exponent
    max_score = std::max(max_score, score[j]);
  }
  double sum = 0;
  for (size_t j = 0; j < rows.size(); ++j) {
    const double weight = std::exp2(score[j] - max_score);
    sum += weight;
    const float* value = &p.ckv[rows[j] * ckv];
    for (int d = 0; d < ckv; ++d) out[d] += weight * value[d];
  }
  for (int d = 0; d < ckv; ++d) out[d] /= sum;
  *lse = max_score + std::log2(sum);
}

// Computes every head of one query token; tokens are independent, so threads share them.
void attend_token(const MlaReferenceProblem& p, size_t b, int64_t i, MlaReferenceResult* result) {
  const int heads = p.num_heads, ckv = p.head_dim_ckv, kpe = p.head_dim_kpe;
  const int64_t q_len = p.qo_indptr[b + 1] - p.qo_indptr[b];
  const int64_t kv_len = p.kv_len[b];
  // Bottom-right causal alignment: query i sees tokens t <= kv_len - q_len + i.
  const int64_t visible = p.causal ? std::clamp<int64_t>(kv_len - q_len + i + 1, 0, kv_len) : kv_len;
  std::vector<int64_t> rows(static_cast<size_t>(visible));
  for (int64_t t = 0; t < visible; ++t) rows[t] = kv_row(p, static_cast<int>(b), t);
  const int64_t token = p.qo_indptr[b] + i;
  for (int h = 0; h < heads; ++h) {
    const int64_t row = token * heads + h;
    attend_row(p, &p.q_nope[row * ckv], &p.q_pe[row * kpe], rows, &result->out[row * ckv],
               &result->lse[row]);
  }
}

}  // namespace

MlaReferenceResult mla_reference(const MlaReferenceProblem& p) {
  validate(p);
  const int64_t tokens = p.qo_indptr.back();
  MlaReferenceResult result;
  result.out.assign(static_cast<size_t>(tokens * p.num_heads * p.head_dim_ckv), 0.0);
  result.lse.assign(static_cast<size_t>(tokens * p.num_heads), 0.0);
  std::vector<std::pair<size_t, int64_t>> work;  // (request, query index)
  for (size_t b = 0; b + 1 < p.qo_indptr.size(); ++b) {
    for (int64_t i = 0; i < p.qo_indptr[b + 1] - p.qo_indptr[b]; ++i) work.emplace_back(b, i);
  }
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t w; (w = next.fetch_add(1)) < work.size();) {
      attend_token(p, work[w].first, work[w].second, &result);
    }
  };
  const unsigned threads =
      std::min<size_t>(std::max(1u, std::thread::hardware_concurrency()), work.size());
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (auto& thread : pool) thread.join();
  return result;
}

// Elements equal in both (infinities included, e.g. the lse of rows that see nothing) add
// nothing; an infinity or NaN met anywhere else makes the error infinite, so a comparison
// `error < tolerance` fails instead of passing on a NaN.
double relative_l2_error(const std::vector<double>& actual, const std::vector<double>& expected) {
  if (actual.size() != expected.size())
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("relative_l2_error: sizes differ: actual has {} elements, expected {}",
                            actual.size(), expected.size()));
  double diff = 0, norm = 0;
  for (size_t i = 0; i < actual.size(); ++i) {
    if (actual[i] == expected[i] && std::isinf(expected[i])) continue;
    if (!std::isfinite(actual[i]) || !std::isfinite(expected[i]))
      return std::numeric_limits<double>::infinity();
    const double d = actual[i] - expected[i];
    diff += d * d;
    norm += expected[i] * expected[i];
  }
  if (diff == 0) return 0;
  if (norm == 0) return std::numeric_limits<double>::infinity();
  return std::sqrt(diff) / std::sqrt(norm);
}

}  // namespace mlajit
