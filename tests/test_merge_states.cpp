// merge_states without a GPU: the float64 merge of KV parts equals the reference over their
// union (the formula the kernel implements, and the GPU tests' ground truth), and every bad
// argument of the C++ and C forms is refused, before the driver is touched, with a message
// naming it. The program's generation and NVRTC compile are in test_codegen.cpp.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "check/merge_reference.h"
#include "check/mla_reference.h"
#include "merge/merge_states_validation.h"
#include "mlajit/error.h"
#include "mlajit/merge_states.h"
#include "mlajit/mlajit.h"

namespace mlajit {
namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// Small random problem: 3 heads, 32/8 head dims, pages of 4, requests with kv 0, 1, 17, 40
// (an empty request, a partial last page), one query each.
MlaReferenceProblem small_problem(uint64_t seed) {
  MlaReferenceProblem p;
  p.num_heads = 3;
  p.head_dim_ckv = 32;
  p.head_dim_kpe = 8;
  p.page_size = 4;
  p.sm_scale = 1.0 / std::sqrt(40.0);
  p.kv_len = {0, 1, 17, 40};
  p.qo_indptr = {0, 1, 2, 3, 4};
  p.kv_indptr = {0};
  int32_t next_page = 0;
  for (int32_t len : p.kv_len) {
    for (int32_t page = 0; page < (len + 3) / 4; ++page) p.kv_indices.push_back(next_page++);
    p.kv_indptr.push_back(static_cast<int32_t>(p.kv_indices.size()));
  }
  std::mt19937_64 rng(seed);
  // Scores of a few units: weights that differ by orders of magnitude between parts.
  std::uniform_real_distribution<float> uniform(-2.0f, 2.0f);
  auto fill = [&](std::vector<float>& v, size_t n) {
    v.resize(n);
    for (auto& x : v) x = uniform(rng);
  };
  fill(p.q_nope, 4 * 3 * 32);
  fill(p.q_pe, 4 * 3 * 8);
  fill(p.ckv, size_t(next_page) * 4 * 32);
  fill(p.kpe, size_t(next_page) * 4 * 8);
  return p;
}

double max_abs_difference(const std::vector<double>& a, const std::vector<double>& b) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] == b[i]) continue;  // equal infinities included
    worst = std::max(worst, std::abs(a[i] - b[i]));
  }
  return worst;
}

void check_merge_of_parts_equals_union(int num_parts, int empty_part, uint64_t seed) {
  const MlaReferenceProblem whole = small_problem(seed);
  const MlaReferenceResult expected = mla_reference(whole);
  std::vector<MlaReferenceResult> states;
  for (const MlaKvPart& part : split_kv(whole, num_parts, seed, empty_part)) {
    states.push_back(mla_reference(with_kv(whole, part)));
  }
  const MlaReferenceResult merged = merge_states_reference(states, whole.head_dim_ckv);
  INFO("parts " << num_parts << " empty part " << empty_part << " seed " << seed);
  CHECK(max_abs_difference(merged.out, expected.out) < 1e-12);
  CHECK(max_abs_difference(merged.lse, expected.lse) < 1e-12);
  CHECK(merged.lse[0] == kNegInf);  // request 0 has no KV in any part
  for (int d = 0; d < whole.head_dim_ckv; ++d) CHECK(merged.out[d] == 0.0);
}

}  // namespace

TEST_CASE("merging the references of KV parts gives the reference over their union") {
  for (int parts : {1, 2, 3, 8}) check_merge_of_parts_equals_union(parts, -1, 100 + parts);
}

TEST_CASE("an empty KV part contributes nothing to the float64 merge") {
  check_merge_of_parts_equals_union(2, 0, 7);
  check_merge_of_parts_equals_union(3, 1, 8);
  check_merge_of_parts_equals_union(8, 7, 9);
}

TEST_CASE("split_kv cuts every request's pages into consecutive runs that cover its KV") {
  const MlaReferenceProblem whole = small_problem(3);
  const std::vector<MlaKvPart> parts = split_kv(whole, 3, 11, 1);
  REQUIRE(parts.size() == 3);
  for (size_t b = 0; b < whole.kv_len.size(); ++b) {
    int64_t tokens = 0;
    std::vector<int32_t> pages;
    for (const MlaKvPart& part : parts) {
      tokens += part.kv_len[b];
      pages.insert(pages.end(), part.kv_indices.begin() + part.kv_indptr[b],
                   part.kv_indices.begin() + part.kv_indptr[b + 1]);
    }
    CHECK(tokens == whole.kv_len[b]);
    CHECK(pages == std::vector<int32_t>(whole.kv_indices.begin() + whole.kv_indptr[b],
                                        whole.kv_indices.begin() + whole.kv_indptr[b + 1]));
    CHECK(parts[1].kv_len[b] == 0);  // the forced empty part
  }
  MlaReferenceProblem causal = whole;
  causal.causal = true;
  CHECK_THROWS_WITH(split_kv(causal, 2, 1), Catch::Contains("causal"));
  CHECK_THROWS_WITH(split_kv(whole, 2, 1, 2), Catch::Contains("empty_part=2"));
}

// ---- argument checks ------------------------------------------------------------------------

namespace {

// Two parts of 2 tokens x 16 heads x 512 bf16, dense, at made-up aligned device addresses: the
// checks read no memory, and a bad argument is refused before the driver is touched.
struct MergeFixture {
  AttentionState parts[2];
  MergeStatesArgs args;

  MergeFixture() {
    for (int c = 0; c < 2; ++c) {
      parts[c].out = reinterpret_cast<const void*>(uintptr_t{0x100000} * (c + 1));
      parts[c].out_stride_token = 16 * 512;
      parts[c].out_stride_head = 512;
      parts[c].lse = reinterpret_cast<const float*>(uintptr_t{0x800000} + 0x1000 * c);
    }
    args.parts = parts;
    args.num_parts = 2;
    args.out = reinterpret_cast<void*>(uintptr_t{0x400000});
    args.out_stride_token = 16 * 512;
    args.out_stride_head = 512;
    args.lse = reinterpret_cast<float*>(uintptr_t{0x900000});
    args.num_tokens = 2;
    args.num_heads = 16;
    args.head_dim = 512;
  }
};

// The message merge_states refuses `args` with, after checking the code.
std::string refusal(const MergeStatesArgs& args, ErrorCode code = ErrorCode::kInvalidArgument) {
  try {
    validate_merge_states_args(args);
  } catch (const Error& error) {
    CHECK(error.code() == code);
    return error.what();
  }
  FAIL("the arguments were accepted");
  return "";
}

}  // namespace

TEST_CASE("well-formed merge_states arguments pass the checks") {
  MergeFixture f;
  CHECK_NOTHROW(validate_merge_states_args(f.args));
  f.args.lse = nullptr;  // the merged lse is optional
  CHECK_NOTHROW(validate_merge_states_args(f.args));
  f.args.out = const_cast<void*>(f.parts[1].out);  // in place, same strides
  CHECK_NOTHROW(validate_merge_states_args(f.args));
  f.args.num_parts = 1;
  CHECK_NOTHROW(validate_merge_states_args(f.args));
}

TEST_CASE("every bad merge_states argument is refused naming it, its value and what is expected") {
  using Catch::Contains;
  {
    MergeFixture f;
    f.args.num_parts = 0;
    CHECK_THAT(refusal(f.args), Contains("num_parts=0 is out of range: expected 1..64"));
    f.args.num_parts = 65;
    CHECK_THAT(refusal(f.args), Contains("num_parts=65"));
  }
  {
    MergeFixture f;
    f.args.parts = nullptr;
    CHECK_THAT(refusal(f.args), Contains("parts is null"));
  }
  {
    MergeFixture f;
    f.args.num_heads = 0;
    CHECK_THAT(refusal(f.args), Contains("num_heads=0"));
  }
  for (int head_dim : {0, 4, 12, 65544}) {
    MergeFixture f;
    f.args.head_dim = head_dim;
    CHECK_THAT(refusal(f.args), Contains("head_dim=" + std::to_string(head_dim)) &&
                                    Contains("multiple of 8"));
  }
  {
    MergeFixture f;
    f.args.num_tokens = -1;
    CHECK_THAT(refusal(f.args), Contains("num_tokens=-1"));
    f.args.num_tokens = int64_t{1} << 40;
    CHECK_THAT(refusal(f.args), Contains("num_tokens=1099511627776 is out of range"));
  }
  {
    MergeFixture f;
    f.args.dtype = DType::kFloat8E4M3;
    CHECK_THAT(refusal(f.args, ErrorCode::kUnsupported), Contains("dtype=e4m3"));
    f.args.dtype = static_cast<DType>(9);
    CHECK_THAT(refusal(f.args), Contains("dtype=9 is not a known dtype"));
  }
  {
    MergeFixture f;
    f.args.lse_base = static_cast<LseBase>(2);
    CHECK_THAT(refusal(f.args), Contains("lse_base=2"));
  }
  {
    MergeFixture f;
    f.args.device = -2;
    CHECK_THAT(refusal(f.args), Contains("device=-2"));
  }
}

TEST_CASE("merge_states checks every part's pointers and strides, by index") {
  using Catch::Contains;
  {
    MergeFixture f;
    f.parts[1].out = nullptr;
    CHECK_THAT(refusal(f.args), Contains("parts[1].out is null"));
    f.parts[1].out = reinterpret_cast<const void*>(uintptr_t{0x100008});
    CHECK_THAT(refusal(f.args), Contains("parts[1].out=0x100008 is not 16-byte aligned"));
  }
  {
    MergeFixture f;
    f.parts[0].lse = nullptr;
    CHECK_THAT(refusal(f.args), Contains("parts[0].lse is null"));
    f.parts[0].lse = reinterpret_cast<const float*>(uintptr_t{0x800002});
    CHECK_THAT(refusal(f.args), Contains("parts[0].lse=0x800002 is not 4-byte aligned"));
  }
  {
    MergeFixture f;
    f.parts[1].out_stride_head = 256;
    CHECK_THAT(refusal(f.args), Contains("parts[1].out_stride_head=256 is too small"));
    f.parts[1].out_stride_head = 516;
    CHECK_THAT(refusal(f.args), Contains("parts[1].out_stride_head=516 is not a multiple of 8"));
  }
  {
    MergeFixture f;
    f.parts[0].out_stride_token = 512;  // heads would overlap the next token
    CHECK_THAT(refusal(f.args), Contains("parts[0].out_stride_token=512 is too small"));
  }
  {
    MergeFixture f;
    f.args.out = nullptr;
    CHECK_THAT(refusal(f.args), Contains("merge_states: out is null"));
  }
  {
    MergeFixture f;
    f.args.out_stride_head = 1 + (int64_t{1} << 40);
    CHECK_THAT(refusal(f.args), Contains("out_stride_head=1099511627777 is too large"));
  }
  {
    MergeFixture f;
    f.args.lse = reinterpret_cast<float*>(uintptr_t{0x900001});
    CHECK_THAT(refusal(f.args), Contains("lse=0x900001 is not 4-byte aligned"));
  }
  {
    MergeFixture f;
    f.args.out = const_cast<void*>(f.parts[0].out);
    f.args.out_stride_token = 32 * 512;
    CHECK_THAT(refusal(f.args), Contains("out is parts[0].out but with other strides"));
  }
}

TEST_CASE("merge_states of no tokens reads nothing and needs no pointers or GPU") {
  MergeStatesArgs args;
  AttentionState part;  // all null
  args.parts = &part;
  args.num_parts = 1;
  args.num_heads = 128;
  CHECK_NOTHROW(merge_states(args, nullptr));
  args.num_heads = 0;  // the counts are still checked
  CHECK_THROWS_AS(merge_states(args, nullptr), Error);
}

TEST_CASE("the public merge_states refuses bad arguments before it needs a driver") {
  MergeFixture f;
  f.parts[1].lse = nullptr;
  try {
    merge_states(f.args, nullptr);
    FAIL("accepted");
  } catch (const Error& error) {
    CHECK(error.code() == ErrorCode::kInvalidArgument);
    CHECK_THAT(std::string(error.what()), Catch::Contains("parts[1].lse is null"));
  }
}

}  // namespace mlajit

// ---- the C ABI ------------------------------------------------------------------------------

TEST_CASE("mlajit_merge_states returns a status and a message for every bad argument") {
  using Catch::Contains;
  CHECK(mlajit_merge_states(nullptr, nullptr) == MLAJIT_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(std::string(mlajit_last_error()), Contains("args is NULL"));

  mlajit_merge_states_args args;
  mlajit_merge_states_args_init(&args);
  CHECK(args.struct_size == sizeof(args));
  CHECK(args.head_dim == 512);
  CHECK(args.dtype == MLAJIT_BFLOAT16);
  CHECK(args.lse_base == MLAJIT_LSE_BASE2);
  CHECK(args.device == -1);

  // Defaults alone: no parts.
  CHECK(mlajit_merge_states(&args, nullptr) == MLAJIT_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(std::string(mlajit_last_error()), Contains("num_parts=0"));

  mlajit_attention_state parts[2] = {};
  args.parts = parts;
  args.num_parts = 1000;  // never read past the array: refused by count first
  CHECK(mlajit_merge_states(&args, nullptr) == MLAJIT_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(std::string(mlajit_last_error()), Contains("num_parts=1000"));

  args.num_parts = 2;
  args.num_heads = 16;
  args.num_tokens = 1;
  args.dtype = static_cast<mlajit_dtype>(7);
  CHECK(mlajit_merge_states(&args, nullptr) == MLAJIT_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(std::string(mlajit_last_error()), Contains("args->dtype=7"));
  args.dtype = MLAJIT_FLOAT8_E4M3;
  CHECK(mlajit_merge_states(&args, nullptr) == MLAJIT_ERROR_UNSUPPORTED);
  args.dtype = MLAJIT_FLOAT16;
  args.lse_base = static_cast<mlajit_lse_base>(5);
  CHECK(mlajit_merge_states(&args, nullptr) == MLAJIT_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(std::string(mlajit_last_error()), Contains("args->lse_base=5"));
  args.lse_base = MLAJIT_LSE_NATURAL;
  CHECK(mlajit_merge_states(&args, nullptr) == MLAJIT_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(std::string(mlajit_last_error()), Contains("out is null"));

  args.struct_size = sizeof(args) + 8;
  CHECK(mlajit_merge_states(&args, nullptr) == MLAJIT_ERROR_UNSUPPORTED);
  args.struct_size = 4;
  CHECK(mlajit_merge_states(&args, nullptr) == MLAJIT_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(std::string(mlajit_last_error()), Contains("struct_size=4"));

  mlajit_merge_states_args_init(&args);
  args.parts = parts;
  args.num_parts = 2;
  args.num_heads = 16;  // num_tokens 0: nothing to do, success without a GPU
  CHECK(mlajit_merge_states(&args, nullptr) == MLAJIT_OK);
  CHECK(std::string(mlajit_last_error()).empty());
}
