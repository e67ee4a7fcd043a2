// The float64 MLA reference: hand-computed cases, the causal mask, empty KV, paging
// invariance, input validation and the error metric.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "check/mla_reference.h"
#include "mlajit/error.h"

using namespace mlajit;
using Catch::Matchers::Contains;

namespace {

// A problem with one page per token list entry, pages in order, all values zero.
MlaReferenceProblem small_problem(int heads, int ckv, int kpe, int page_size,
                                  const std::vector<int32_t>& q_lens,
                                  const std::vector<int32_t>& kv_lens) {
  MlaReferenceProblem p;
  p.num_heads = heads;
  p.head_dim_ckv = ckv;
  p.head_dim_kpe = kpe;
  p.page_size = page_size;
  p.sm_scale = 1.0;
  p.qo_indptr = {0};
  p.kv_indptr = {0};
  for (size_t b = 0; b < q_lens.size(); ++b) {
    p.qo_indptr.push_back(p.qo_indptr.back() + q_lens[b]);
    const int32_t pages = (kv_lens[b] + page_size - 1) / page_size;
    for (int32_t i = 0; i < pages; ++i) p.kv_indices.push_back(p.kv_indptr.back() + i);
    p.kv_indptr.push_back(p.kv_indptr.back() + pages);
  }
  p.kv_len = kv_lens;
  const size_t tokens = p.qo_indptr.back(), pool = p.kv_indices.size();
  p.q_nope.assign(tokens * heads * ckv, 0.0f);
  p.q_pe.assign(tokens * heads * kpe, 0.0f);
  p.ckv.assign(pool * page_size * ckv, 0.0f);
  p.kpe.assign(pool * page_size * kpe, 0.0f);
  return p;
}

void fill_random(std::vector<float>& values, std::mt19937& rng) {
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  for (float& v : values) v = uniform(rng);
}

std::string reference_error(const MlaReferenceProblem& p) {
  try {
    mla_reference(p);
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::kInvalidArgument);
    return e.what();
  }
  FAIL("mla_reference accepted an invalid problem");
  return "";
}

}  // namespace

TEST_CASE("one head over two tokens matches the softmax computed by hand") {
  // ckv rows (1, 0) and (0, 1); kpe rows 0.5 and 0; q_nope (1, 0), q_pe 2:
  // s0 = 1 + 2 * 0.5 = 2, s1 = 0.
  MlaReferenceProblem p = small_problem(1, 2, 1, 1, {1}, {2});
  p.q_nope = {1, 0};
  p.q_pe = {2};
  p.ckv = {1, 0, 0, 1};
  p.kpe = {0.5f, 0};
  const MlaReferenceResult r = mla_reference(p);
  const double e2 = std::exp(2.0);
  REQUIRE(r.out.size() == 2);
  CHECK(r.out[0] == Approx(e2 / (e2 + 1)).epsilon(1e-14));
  CHECK(r.out[1] == Approx(1 / (e2 + 1)).epsilon(1e-14));
  CHECK(r.lse[0] == Approx(std::log2(e2 + 1)).epsilon(1e-14));

  p.sm_scale = 0.5;  // s0 = 1
  const MlaReferenceResult half = mla_reference(p);
  CHECK(half.out[0] == Approx(std::exp(1.0) / (std::exp(1.0) + 1)).epsilon(1e-14));
  CHECK(half.lse[0] == Approx(std::log2(std::exp(1.0) + 1)).epsilon(1e-14));
}

TEST_CASE("the causal mask is aligned to the bottom right") {
  // Zero queries: every visible token weighs the same, so out is the mean of the visible ckv
  // rows and lse = log2(count). q_len 2, kv_len 3: query 0 sees 2 tokens, query 1 all 3.
  MlaReferenceProblem p = small_problem(2, 1, 1, 2, {2}, {3});
  p.kv_indices = {1, 0};  // tokens 0-1 on page 1, token 2 on page 0
  p.ckv = {30, 99, 10, 20};  // page 0: token 2 = 30, slot 1 unused; page 1: tokens 0, 1
  p.causal = true;
  const MlaReferenceResult r = mla_reference(p);
  for (int h = 0; h < 2; ++h) {
    CHECK(r.out[0 * 2 + h] == Approx(15.0));
    CHECK(r.lse[0 * 2 + h] == Approx(1.0));
    CHECK(r.out[1 * 2 + h] == Approx(20.0));
    CHECK(r.lse[1 * 2 + h] == Approx(std::log2(3.0)));
  }
  p.causal = false;
  const MlaReferenceResult full = mla_reference(p);
  CHECK(full.out[0] == Approx(20.0));
  CHECK(full.lse[0] == Approx(std::log2(3.0)));
}

TEST_CASE("rows that see no KV give zero output and lse minus infinity") {
  MlaReferenceProblem p = small_problem(2, 3, 2, 4, {1, 3}, {0, 1});
  std::mt19937 rng(7);
  fill_random(p.q_nope, rng);
  fill_random(p.q_pe, rng);
  fill_random(p.ckv, rng);
  fill_random(p.kpe, rng);
  p.causal = true;  // request 1: q_len 3 > kv_len 1, so queries 0 and 1 see nothing
  const MlaReferenceResult r = mla_reference(p);
  const double neg_inf = -std::numeric_limits<double>::infinity();
  for (int row : {0, 1, 2, 3, 4, 5}) {  // token 0 (request 0), tokens 1-2 (request 1, early)
    CHECK(r.lse[row] == neg_inf);
    for (int d = 0; d < 3; ++d) CHECK(r.out[row * 3 + d] == 0.0);
  }
  for (int row : {6, 7}) {  // last query of request 1 sees its one token
    CHECK(r.lse[row] == Approx(p.sm_scale * std::log2(std::exp(1.0)) *
                               (p.q_nope[row * 3] * p.ckv[0] + p.q_nope[row * 3 + 1] * p.ckv[1] +
                                p.q_nope[row * 3 + 2] * p.ckv[2] + p.q_pe[row * 2] * p.kpe[0] +
                                p.q_pe[row * 2 + 1] * p.kpe[1])));
    for (int d = 0; d < 3; ++d) CHECK(r.out[row * 3 + d] == Approx(p.ckv[d]));
  }
}

TEST_CASE("permuting the pages of the pool does not change the result") {
  const uint32_t seed = 20260601u;
  INFO("seed " << seed);
  std::mt19937 rng(seed);
  MlaReferenceProblem p = small_problem(3, 8, 4, 4, {1, 2, 3}, {9, 4, 13});
  fill_random(p.q_nope, rng);
  fill_random(p.q_pe, rng);
  fill_random(p.ckv, rng);
  fill_random(p.kpe, rng);
  p.causal = true;
  p.sm_scale = 0.3;
  const MlaReferenceResult before = mla_reference(p);

  const int pages = static_cast<int>(p.kv_indices.size());
  std::vector<int32_t> where(pages);  // old page -> new page
  std::iota(where.begin(), where.end(), 0);
  std::shuffle(where.begin(), where.end(), rng);
  MlaReferenceProblem moved = p;
  for (int old_page = 0; old_page < pages; ++old_page) {
    std::copy_n(&p.ckv[old_page * 4 * 8], 4 * 8, &moved.ckv[where[old_page] * 4 * 8]);
    std::copy_n(&p.kpe[old_page * 4 * 4], 4 * 4, &moved.kpe[where[old_page] * 4 * 4]);
  }
  for (int32_t& page : moved.kv_indices) page = where[page];
  const MlaReferenceResult after = mla_reference(moved);
  CHECK(after.out == before.out);
  CHECK(after.lse == before.lse);
}

TEST_CASE("tokens past kv_len in the last page are never read") {
  MlaReferenceProblem p = small_problem(1, 2, 1, 4, {1}, {2});
  std::mt19937 rng(3);
  fill_random(p.q_nope, rng);
  fill_random(p.q_pe, rng);
  fill_random(p.ckv, rng);
  fill_random(p.kpe, rng);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (int slot = 2; slot < 4; ++slot) {
    p.ckv[slot * 2] = p.ckv[slot * 2 + 1] = nan;
    p.kpe[slot] = nan;
  }
  const MlaReferenceResult r = mla_reference(p);
  for (double v : r.out) CHECK(std::isfinite(v));
  CHECK(std::isfinite(r.lse[0]));
}

TEST_CASE("large scores do not overflow the softmax") {
  MlaReferenceProblem p = small_problem(1, 1, 1, 1, {1}, {2});
  p.q_nope = {1000};
  p.ckv = {1, 2};  // scores 1000 and 2000
  const MlaReferenceResult r = mla_reference(p);
  CHECK(r.out[0] == Approx(2.0));
  CHECK(r.lse[0] == Approx(2000 * std::log2(std::exp(1.0))));
}

TEST_CASE("inconsistent reference problems are rejected naming the field") {
  const MlaReferenceProblem good = small_problem(2, 4, 2, 2, {1, 2}, {3, 4});
  REQUIRE_NOTHROW(mla_reference(good));
  MlaReferenceProblem p = good;
  p.q_nope.pop_back();
  CHECK_THAT(reference_error(p), Contains("q_nope has 23 elements; expected 24"));
  p = good;
  p.q_pe.push_back(0);
  CHECK_THAT(reference_error(p), Contains("q_pe has 13 elements; expected 12"));
  p = good;
  p.kpe.pop_back();
  CHECK_THAT(reference_error(p), Contains("kpe has"));
  p = good;
  p.ckv.pop_back();
  CHECK_THAT(reference_error(p), Contains("ckv has"));
  p = good;
  p.kv_indices[1] = 9;
  CHECK_THAT(reference_error(p), Contains("kv_indices[1]=9 is outside the pool of 4 pages"));
  p = good;
  p.kv_len[1] = 5;
  CHECK_THAT(reference_error(p), Contains("kv_len[1]=5 must be in 0..4"));
  p = good;
  p.kv_len.pop_back();
  CHECK_THAT(reference_error(p), Contains("kv_len has 1 elements; expected 2"));
  p = good;
  p.kv_indptr = {0, 2};
  CHECK_THAT(reference_error(p), Contains("kv_indptr has 2 entries"));
  p = good;
  p.qo_indptr = {0, 2, 1};
  CHECK_THAT(reference_error(p), Contains("qo_indptr must be non-decreasing: qo_indptr[1]=2 > qo_indptr[2]=1"));
  p = good;
  p.kv_indptr[2] = 5;
  CHECK_THAT(reference_error(p), Contains("kv_indptr[2]=5 exceeds the 4 entries of kv_indices"));
  p = good;
  p.sm_scale = 0;
  CHECK_THAT(reference_error(p), Contains("sm_scale must be a positive finite number"));
  p = good;
  p.num_heads = 0;
  CHECK_THAT(reference_error(p), Contains("num_heads must be >= 1, got 0"));
  p = good;
  p.page_size = 0;
  CHECK_THAT(reference_error(p), Contains("page_size must be >= 1, got 0"));
}

TEST_CASE("relative L2 error measures against the expected norm") {
  CHECK(relative_l2_error({1, 2}, {1, 1}) == Approx(1 / std::sqrt(2.0)));
  CHECK(relative_l2_error({3, 4}, {3, 4}) == 0.0);
  CHECK(relative_l2_error({0, 0}, {0, 0}) == 0.0);
  CHECK(relative_l2_error({}, {}) == 0.0);
  CHECK(std::isinf(relative_l2_error({1, 0}, {0, 0})));
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  CHECK(relative_l2_error({-inf, 2}, {-inf, 1}) == Approx(1.0));  // equal infinities ignored
  CHECK(std::isinf(relative_l2_error({nan, 1}, {1, 1})));
  CHECK(std::isinf(relative_l2_error({1, 1}, {-inf, 1})));
  CHECK_THROWS_AS(relative_l2_error({1}, {1, 2}), Error);
}
