// Bad input at every CPU-reachable entry point of the C++ API: the validation that
// BatchMlaAttention's constructor, plan() and run() run before anything reaches the GPU
// (validate_shape, validate_options, validate_run_args, validate_kv_indices, make_plan), and
// the public parsers (KernelSpec::parse, parse_dtype). BatchMlaAttention itself needs a GPU, so
// the functions it calls are tested directly. Each case asserts the error code AND that the
// message names the argument.
//
// The cases live in one table so that docs/RELIABILITY.md can quote the real messages:
//   build/tests/mlajit_tests "[.bad-input-table]"
// prints the table in Markdown.
#include <cmath>
#include <cstdint>
#include <functional>
#include <iostream>
#include <limits>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "attention/run_args_validation.h"
#include "mlajit/attention.h"
#include "mlajit/error.h"
#include "mlajit/kernel_spec.h"
#include "plan/planner.h"

namespace {

using mlajit::Error;
using mlajit::ErrorCode;

struct BadInput {
  std::string entry;     // the function that refuses it (and the public call that reaches it)
  std::string what;      // the bad input, in words
  std::string names;     // what the message must contain: the argument's name
  ErrorCode code;
  std::function<void()> call;
};

// ---- well-formed inputs the cases start from ----------------------------------------------

mlajit::MlaShape good_shape() { return mlajit::MlaShape{}; }  // DeepSeek: 128 heads, 512 + 64

// Fake device addresses: validation only looks at their values, never dereferences them.
const void* fake_pointer(uintptr_t address) { return reinterpret_cast<const void*>(address); }

mlajit::MlaRunArgs good_args(const mlajit::MlaShape& shape) {
  mlajit::MlaRunArgs a;
  const int64_t heads = shape.num_heads, ckv = shape.head_dim_ckv, kpe = shape.head_dim_kpe;
  a.q_nope = fake_pointer(0x100000);
  a.q_nope_stride_head = ckv;
  a.q_nope_stride_token = heads * ckv;
  a.q_pe = fake_pointer(0x200000);
  a.q_pe_stride_head = kpe;
  a.q_pe_stride_token = heads * kpe;
  // One concatenated [page][token][ckv + kpe] cache: kpe = ckv + head_dim_ckv.
  a.ckv = fake_pointer(0x300000);
  a.ckv_stride_token = ckv + kpe;
  a.ckv_stride_page = shape.page_size * (ckv + kpe);
  a.kpe = fake_pointer(0x300000 + 2 * ckv);
  a.kpe_stride_token = ckv + kpe;
  a.kpe_stride_page = shape.page_size * (ckv + kpe);
  a.kv_indices = static_cast<const int32_t*>(fake_pointer(0x400000));
  a.out = const_cast<void*>(fake_pointer(0x500000));
  a.out_stride_head = ckv;
  a.out_stride_token = heads * ckv;
  a.lse = nullptr;
  a.num_tokens = 7;
  a.sm_scale = 1.0f / std::sqrt(192.0f);
  return a;
}
constexpr int64_t kPlannedTokens = 7;

// DeepSeek-V3.2's cache: 656-byte token rows [512 e4m3 codes][4 fp32 scales][64 bf16 kpe].
mlajit::MlaShape v32_shape() {
  mlajit::MlaShape shape;
  shape.kv_dtype = mlajit::DType::kFloat8E4M3;
  shape.kv_scales = mlajit::KvScales::kPerToken128;
  return shape;
}

mlajit::MlaRunArgs v32_args() {
  const mlajit::MlaShape shape = v32_shape();
  mlajit::MlaRunArgs a = good_args(shape);
  constexpr int64_t kRow = 656;
  a.ckv = fake_pointer(0x300000);
  a.ckv_stride_token = kRow;
  a.ckv_stride_page = shape.page_size * kRow;
  a.ckv_scales = static_cast<const float*>(fake_pointer(0x300000 + 512));
  a.ckv_scales_stride_token = kRow / 4;
  a.ckv_scales_stride_page = shape.page_size * kRow / 4;
  a.kpe = fake_pointer(0x300000 + 528);
  a.kpe_stride_token = kRow / 2;
  a.kpe_stride_page = shape.page_size * kRow / 2;
  return a;
}

// Three requests: q_len 1, 2, 4 (7 tokens); kv_len 100, 0, 200 over pages of 64.
struct GoodBatch {
  std::vector<int32_t> qo_indptr{0, 1, 3, 7};
  std::vector<int32_t> kv_indptr{0, 2, 2, 6};
  std::vector<int32_t> kv_len{100, 0, 200};
  std::vector<int32_t> kv_indices{0, 1, 2, 3, 4, 5};

  mlajit::MlaBatch batch() const {
    mlajit::MlaBatch b;
    b.qo_indptr = qo_indptr.data();
    b.kv_indptr = kv_indptr.data();
    b.kv_len = kv_len.data();
    b.batch_size = static_cast<int>(kv_len.size());
    b.kv_indices = kv_indices.data();
    b.num_pages = 8;
    return b;
  }
  // What BatchMlaAttention::plan gives make_plan for a DeepSeek shape on an H200-like device.
  mlajit::plan::PlanInput plan_input() const {
    mlajit::plan::PlanInput in;
    in.qo_indptr = qo_indptr.data();
    in.kv_indptr = kv_indptr.data();
    in.kv_len = kv_len.data();
    in.batch_size = static_cast<int>(kv_len.size());
    in.num_heads = 128;
    in.page_size = 64;
    in.num_ctas = 132;
    return in;
  }
};

// ---- the cases ------------------------------------------------------------------------------

void add_shape_cases(std::vector<BadInput>& cases) {
  auto shape_case = [&](std::string what, std::string names, ErrorCode code,
                        std::function<void(mlajit::MlaShape&)> edit) {
    cases.push_back({"validate_shape (BatchMlaAttention ctor)", std::move(what), std::move(names),
                     code, [edit] {
                       mlajit::MlaShape s = good_shape();
                       edit(s);
                       mlajit::validate_shape(s);
                     }});
  };
  const auto inv = ErrorCode::kInvalidArgument;
  shape_case("num_heads = 0", "num_heads", inv, [](auto& s) { s.num_heads = 0; });
  shape_case("num_heads = -1", "num_heads", inv, [](auto& s) { s.num_heads = -1; });
  shape_case("num_heads = 129", "num_heads", inv, [](auto& s) { s.num_heads = 129; });
  shape_case("page_size = 0", "page_size", inv, [](auto& s) { s.page_size = 0; });
  shape_case("page_size = -64", "page_size", inv, [](auto& s) { s.page_size = -64; });
  shape_case("page_size = 2^20 + 1", "page_size", inv, [](auto& s) { s.page_size = (1 << 20) + 1; });
  shape_case("page_size = INT_MAX", "page_size", inv,
             [](auto& s) { s.page_size = std::numeric_limits<int>::max(); });
  shape_case("dtype = 7 (not an enumerator)", "dtype", inv,
             [](auto& s) { s.dtype = static_cast<mlajit::DType>(7); });
  shape_case("kv_dtype = 7 (not an enumerator)", "kv_dtype", inv,
             [](auto& s) { s.kv_dtype = static_cast<mlajit::DType>(7); });
  shape_case("dtype = e4m3 (queries and output in FP8)", "dtype=e4m3", ErrorCode::kUnsupported,
             [](auto& s) { s.dtype = mlajit::DType::kFloat8E4M3; });
  shape_case("kv_scales = 7 (not an enumerator)", "kv_scales=7", inv,
             [](auto& s) { s.kv_scales = static_cast<mlajit::KvScales>(7); });
  shape_case("kv_scales = token128 over a bf16 cache", "kv_scales=token128 needs kv_dtype=e4m3",
             inv, [](auto& s) { s.kv_scales = mlajit::KvScales::kPerToken128; });
}

// What no family (or the asked one) computes: refused before a device is looked at.
void add_family_cases(std::vector<BadInput>& cases) {
  auto family_case = [&](std::string what, std::string names, ErrorCode code,
                         std::function<void(mlajit::MlaShape&, mlajit::MlaOptions&)> edit) {
    cases.push_back({"validate_shape_and_options (BatchMlaAttention ctor, tile_for)",
                     std::move(what), std::move(names), code, [edit] {
                       mlajit::MlaShape s = good_shape();
                       mlajit::MlaOptions o;
                       edit(s, o);
                       mlajit::validate_shape_and_options(s, o);
                     }});
  };
  const auto unsupported = ErrorCode::kUnsupported;
  family_case("head dims (576, 64)", "head dims", unsupported,
              [](auto& s, auto&) { s.head_dim_ckv = 576; });
  family_case("head dims (512, 32) (mixed models)", "head dims", unsupported,
              [](auto& s, auto&) { s.head_dim_kpe = 32; });
  family_case("head dims (0, 0)", "head dims", unsupported, [](auto& s, auto&) {
    s.head_dim_ckv = 0;
    s.head_dim_kpe = 0;
  });
  family_case("kernel = \"hopper\", head dims (256, 32)", "ckv=512 kpe=64 only", unsupported,
              [](auto& s, auto& o) {
                s.head_dim_ckv = 256;
                s.head_dim_kpe = 32;
                o.kernel = "hopper";
              });
  family_case("kv_dtype = f16 with dtype = bf16", "KV of that dtype or e4m3", unsupported,
              [](auto& s, auto&) { s.kv_dtype = mlajit::DType::kFloat16; });
  family_case("kernel = \"portable\", head dims (576, 64)", "portable family", unsupported,
              [](auto& s, auto& o) {
                o.kernel = "portable";
                s.head_dim_ckv = 576;
              });
  family_case("kv_scales = token128 with head dims (256, 32)", "head_dim_ckv 512", unsupported,
              [](auto& s, auto&) {
                s = v32_shape();
                s.head_dim_ckv = 256;
                s.head_dim_kpe = 32;
              });
}

void add_options_cases(std::vector<BadInput>& cases) {
  auto options_case = [&](std::string what, std::string names,
                          std::function<void(mlajit::MlaOptions&)> edit) {
    cases.push_back({"validate_options (BatchMlaAttention ctor)", std::move(what), std::move(names),
                     ErrorCode::kInvalidArgument, [edit] {
                       mlajit::MlaOptions o;
                       edit(o);
                       mlajit::validate_options(o);
                     }});
  };
  options_case("device = -2", "device", [](auto& o) { o.device = -2; });
  options_case("force_tier = 4", "force_tier", [](auto& o) { o.force_tier = 4; });
  options_case("force_tier = -1", "force_tier", [](auto& o) { o.force_tier = -1; });
  options_case("cluster_size = 3", "cluster_size", [](auto& o) { o.cluster_size = 3; });
  options_case("cluster_size = -1", "cluster_size", [](auto& o) { o.cluster_size = -1; });
  options_case("invariant_chunk_tokens = 1024 without batch_invariant", "batch_invariant is off",
               [](auto& o) { o.invariant_chunk_tokens = 1024; });
  options_case("invariant_chunk_tokens = 1000 (not a multiple of 64)", "invariant_chunk_tokens=1000",
               [](auto& o) {
                 o.batch_invariant = true;
                 o.invariant_chunk_tokens = 1000;
               });
  options_case("invariant_chunk_tokens = -64", "invariant_chunk_tokens=-64", [](auto& o) {
    o.batch_invariant = true;
    o.invariant_chunk_tokens = -64;
  });
  options_case("lse_base = 5", "lse_base",
               [](auto& o) { o.lse_base = static_cast<mlajit::LseBase>(5); });
  options_case("compile_mode = 4", "compile_mode",
               [](auto& o) { o.compile_mode = static_cast<mlajit::CompileMode>(4); });
  options_case("compile_mode = -1", "compile_mode",
               [](auto& o) { o.compile_mode = static_cast<mlajit::CompileMode>(-1); });
  options_case("kernel = \"hoppr\" (no such family)", "'hoppr'",
               [](auto& o) { o.kernel = "hoppr"; });
  options_case("kernel = \"\"", "auto, hopper, portable", [](auto& o) { o.kernel = ""; });
}

void add_pointer_cases(std::vector<BadInput>& cases) {
  auto args_case = [&](std::string what, std::string names,
                       std::function<void(mlajit::MlaRunArgs&)> edit) {
    cases.push_back({"validate_run_args (run)", std::move(what), std::move(names),
                     ErrorCode::kInvalidArgument, [edit] {
                       mlajit::MlaRunArgs a = good_args(good_shape());
                       edit(a);
                       mlajit::validate_run_args(good_shape(), a, kPlannedTokens);
                     }});
  };
  args_case("q_nope null", "q_nope", [](auto& a) { a.q_nope = nullptr; });
  args_case("q_pe null", "q_pe", [](auto& a) { a.q_pe = nullptr; });
  args_case("ckv null", "ckv", [](auto& a) { a.ckv = nullptr; });
  args_case("kpe null", "kpe", [](auto& a) { a.kpe = nullptr; });
  args_case("out null", "out", [](auto& a) { a.out = nullptr; });
  args_case("kv_indices null", "kv_indices", [](auto& a) { a.kv_indices = nullptr; });
  args_case("kv_indices misaligned", "4-byte aligned", [](auto& a) {
    a.kv_indices = reinterpret_cast<const int32_t*>(reinterpret_cast<uintptr_t>(a.kv_indices) + 2);
  });
  args_case("q_nope misaligned (+2 bytes)", "q_nope", [](auto& a) { a.q_nope = fake_pointer(0x100002); });
  args_case("q_pe misaligned (+8 bytes)", "q_pe", [](auto& a) { a.q_pe = fake_pointer(0x200008); });
  args_case("ckv misaligned (+1 byte)", "ckv", [](auto& a) { a.ckv = fake_pointer(0x300001); });
  args_case("kpe misaligned (+4 bytes)", "kpe", [](auto& a) { a.kpe = fake_pointer(0x300404); });
  args_case("out misaligned (+2 bytes)", "out",
            [](auto& a) { a.out = const_cast<void*>(fake_pointer(0x500002)); });
  args_case("lse misaligned (+2 bytes)", "lse", [](auto& a) {
    a.lse = static_cast<float*>(const_cast<void*>(fake_pointer(0x600002)));
  });
  args_case("num_tokens != qo_indptr[batch] (8 vs 7)", "num_tokens", [](auto& a) { a.num_tokens = 8; });
  args_case("num_tokens negative", "num_tokens", [](auto& a) { a.num_tokens = -1; });
  args_case("sm_scale = 0", "sm_scale", [](auto& a) { a.sm_scale = 0; });
  args_case("sm_scale above 1e6", "(0, 1e6]", [](auto& a) { a.sm_scale = 2e6f; });
  args_case("sm_scale negative", "sm_scale", [](auto& a) { a.sm_scale = -0.07f; });
  args_case("sm_scale NaN", "sm_scale",
            [](auto& a) { a.sm_scale = std::numeric_limits<float>::quiet_NaN(); });
  args_case("sm_scale +inf", "sm_scale",
            [](auto& a) { a.sm_scale = std::numeric_limits<float>::infinity(); });
}

// FP8 KV scales: an e4m3 cache's per-tensor scales, and none on a 16-bit cache.
void add_kv_scale_cases(std::vector<BadInput>& cases) {
  static const float device_scale = 1.0f;  // any 4-aligned address: run() never reads it
  auto scale_case = [&](std::string what, std::string names, mlajit::DType kv, mlajit::DType q,
                        std::function<void(mlajit::MlaRunArgs&)> edit) {
    cases.push_back({"validate_run_args (run)", std::move(what), std::move(names),
                     ErrorCode::kInvalidArgument, [edit, kv, q] {
                       mlajit::MlaShape shape = good_shape();
                       shape.dtype = q;
                       shape.kv_dtype = kv;
                       mlajit::MlaRunArgs a = good_args(shape);
                       edit(a);
                       mlajit::validate_run_args(shape, a, kPlannedTokens);
                     }});
  };
  const auto e4m3 = mlajit::DType::kFloat8E4M3, bf16 = mlajit::DType::kBFloat16;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  scale_case("e4m3 KV: kv_scale_ckv = 0", "kv_scale_ckv=0", e4m3, bf16,
             [](auto& a) { a.kv_scale_ckv = 0.0f; });
  scale_case("e4m3 KV: kv_scale_kpe = -1", "kv_scale_kpe=-1", e4m3, bf16,
             [](auto& a) { a.kv_scale_kpe = -1.0f; });
  scale_case("e4m3 KV: kv_scale_ckv = NaN", "kv_scale_ckv=nan", e4m3, bf16,
             [nan](auto& a) { a.kv_scale_ckv = nan; });
  scale_case("e4m3 KV: kv_scale_kpe = inf", "kv_scale_kpe=inf", e4m3, bf16,
             [inf](auto& a) { a.kv_scale_kpe = inf; });
  scale_case("e4m3 KV under f16: kv_scale_ckv = 1000 (448 x 1000 overflows f16)", "overflow f16",
             e4m3, mlajit::DType::kFloat16, [](auto& a) { a.kv_scale_ckv = 1000.0f; });
  scale_case("e4m3 KV: a float and a device pointer for one scale", "kv_scale_ckv_device", e4m3,
             bf16, [](auto& a) {
               a.kv_scale_ckv = 0.5f;
               a.kv_scale_ckv_device = &device_scale;
             });
  scale_case("e4m3 KV: kv_scale_kpe_device misaligned", "not 4-byte aligned", e4m3, bf16,
             [](auto& a) {
               a.kv_scale_kpe_device = reinterpret_cast<const float*>(
                   reinterpret_cast<const char*>(&device_scale) + 1);
             });
  scale_case("bf16 KV: kv_scale_ckv = 0.5", "e4m3 cache only", bf16, bf16,
             [](auto& a) { a.kv_scale_ckv = 0.5f; });
  scale_case("bf16 KV: kv_scale_kpe_device set", "e4m3 cache only", bf16, bf16,
             [](auto& a) { a.kv_scale_kpe_device = &device_scale; });
  scale_case("e4m3 KV, per-tensor scales: ckv_scales set", "kv_scales token128", e4m3, bf16,
             [](auto& a) { a.ckv_scales = &device_scale; });
}

// DeepSeek-V3.2's per-token scales (KvScales::kPerToken128) and its 656-byte rows.
void add_token_scale_cases(std::vector<BadInput>& cases) {
  auto token_case = [&](std::string what, std::string names,
                        std::function<void(mlajit::MlaRunArgs&)> edit) {
    cases.push_back({"validate_run_args (run)", std::move(what), std::move(names),
                     ErrorCode::kInvalidArgument, [edit] {
                       mlajit::MlaRunArgs a = v32_args();
                       edit(a);
                       mlajit::validate_run_args(v32_shape(), a, kPlannedTokens);
                     }});
  };
  token_case("per-token scales: ckv_scales null", "ckv_scales is null",
             [](auto& a) { a.ckv_scales = nullptr; });
  token_case("per-token scales: ckv_scales 4-byte aligned only", "16-byte aligned", [](auto& a) {
    a.ckv_scales = static_cast<const float*>(fake_pointer(0x300000 + 516));
  });
  token_case("per-token scales: ckv_scales_stride_token = 2 (< 4 scales)",
             "ckv_scales_stride_token=2", [](auto& a) { a.ckv_scales_stride_token = 2; });
  token_case("per-token scales: ckv_scales_stride_token = 162 (not 16 bytes)",
             "ckv_scales_stride_token=162", [](auto& a) { a.ckv_scales_stride_token = 162; });
  token_case("per-token scales: ckv_scales_stride_page below a page of tokens",
             "ckv_scales_stride_page", [](auto& a) { a.ckv_scales_stride_page = 164; });
  token_case("per-token scales: kv_scale_ckv = 0.5 as well", "per-tensor KV scales are set",
             [](auto& a) { a.kv_scale_ckv = 0.5f; });
  token_case("per-token scales: kpe_stride_token = 76 bf16 (not 16 bytes)", "kpe_stride_token",
             [](auto& a) { a.kpe_stride_token = 76; });
}

void add_stride_cases(std::vector<BadInput>& cases) {
  auto args_case = [&](std::string what, std::string names,
                       std::function<void(mlajit::MlaRunArgs&)> edit) {
    cases.push_back({"validate_run_args (run)", std::move(what), std::move(names),
                     ErrorCode::kInvalidArgument, [edit] {
                       mlajit::MlaRunArgs a = good_args(good_shape());
                       edit(a);
                       mlajit::validate_run_args(good_shape(), a, kPlannedTokens);
                     }});
  };
  const int64_t huge = std::numeric_limits<int64_t>::max();
  args_case("heads overlap: q_nope_stride_head = 256 < 512", "q_nope_stride_head",
            [](auto& a) { a.q_nope_stride_head = 256; });
  args_case("tokens overlap: q_nope_stride_token = one head", "q_nope_stride_token",
            [](auto& a) { a.q_nope_stride_token = 512; });
  args_case("q_pe_stride_head = 0", "q_pe_stride_head", [](auto& a) { a.q_pe_stride_head = 0; });
  args_case("q_pe_stride_token negative", "q_pe_stride_token",
            [](auto& a) { a.q_pe_stride_token = -8192; });
  args_case("out_stride_head = 504 < 512", "out_stride_head", [](auto& a) { a.out_stride_head = 504; });
  args_case("out tokens overlap", "out_stride_token",
            [](auto& a) { a.out_stride_token = 127 * 512; });
  args_case("ckv_stride_token = 500 (< 512, not a multiple of 8)", "ckv_stride_token",
            [](auto& a) { a.ckv_stride_token = 500; });
  args_case("ckv pages overlap", "ckv_stride_page", [](auto& a) { a.ckv_stride_page = 576 * 63; });
  args_case("kpe_stride_token = 32 < 64", "kpe_stride_token", [](auto& a) { a.kpe_stride_token = 32; });
  args_case("kpe pages overlap", "kpe_stride_page", [](auto& a) { a.kpe_stride_page = 64; });
  args_case("q_nope_stride_head = 516 (not a multiple of 8)", "q_nope_stride_head", [](auto& a) {
    a.q_nope_stride_head = 516;
    a.q_nope_stride_token = 128 * 520;
  });
  args_case("out_stride_token odd", "out_stride_token", [](auto& a) { a.out_stride_token += 1; });
  args_case("q_nope_stride_head = INT64_MAX (overflow)", "q_nope_stride_head",
            [huge](auto& a) { a.q_nope_stride_head = huge; });
  args_case("ckv_stride_token = 2^62 (page extent overflows)", "ckv_stride_token",
            [](auto& a) { a.ckv_stride_token = int64_t{1} << 62; });
  args_case("kpe_stride_page = INT64_MAX", "kpe_stride_page",
            [huge](auto& a) { a.kpe_stride_page = huge; });
  // Strides count elements of each operand's own type: 16 bytes are 16 elements of e4m3.
  cases.push_back({"validate_run_args (run)", "e4m3 KV: ckv_stride_token = 520 (8 elements)",
                   "multiple of 16 elements", ErrorCode::kInvalidArgument, [] {
                     mlajit::MlaShape shape = good_shape();
                     shape.kv_dtype = mlajit::DType::kFloat8E4M3;
                     mlajit::MlaRunArgs a = good_args(shape);
                     a.ckv_stride_token = 520;
                     mlajit::validate_run_args(shape, a, kPlannedTokens);
                   }});
  add_kv_scale_cases(cases);
  add_token_scale_cases(cases);
}

void add_kv_indices_cases(std::vector<BadInput>& cases) {
  auto indices_case = [&](std::string what, std::string names,
                          std::function<void(GoodBatch&, mlajit::MlaBatch&)> edit) {
    cases.push_back({"validate_kv_indices (plan, validate_kv_indices on)", std::move(what),
                     std::move(names), ErrorCode::kInvalidArgument, [edit] {
                       GoodBatch g;
                       mlajit::MlaBatch b = g.batch();
                       edit(g, b);
                       mlajit::validate_kv_indices(b);
                     }});
  };
  indices_case("host kv_indices null", "kv_indices", [](auto&, auto& b) { b.kv_indices = nullptr; });
  indices_case("num_pages = 0", "num_pages", [](auto&, auto& b) { b.num_pages = 0; });
  indices_case("page id = num_pages", "kv_indices[3]", [](auto& g, auto& b) {
    g.kv_indices[3] = 8;
    b.kv_indices = g.kv_indices.data();
  });
  indices_case("page id -1", "kv_indices[5]", [](auto& g, auto& b) {
    g.kv_indices[5] = -1;
    b.kv_indices = g.kv_indices.data();
  });
  indices_case("page id INT32_MAX", "kv_indices[0]", [](auto& g, auto& b) {
    g.kv_indices[0] = std::numeric_limits<int32_t>::max();
    b.kv_indices = g.kv_indices.data();
  });
  indices_case("kv_indptr null", "kv_indptr", [](auto&, auto& b) { b.kv_indptr = nullptr; });
  indices_case("kv_indptr[0] negative", "kv_indptr", [](auto& g, auto& b) {
    g.kv_indptr[0] = -1;
    b.kv_indptr = g.kv_indptr.data();
  });
}

void add_plan_scalar_cases(std::vector<BadInput>& cases) {
  auto plan_case = [&](std::string what, std::string names, ErrorCode code,
                       std::function<void(mlajit::plan::PlanInput&)> edit) {
    cases.push_back({"make_plan (plan)", std::move(what), std::move(names), code, [edit] {
                       GoodBatch g;
                       mlajit::plan::PlanInput in = g.plan_input();
                       edit(in);
                       mlajit::plan::make_plan(in);
                     }});
  };
  const auto inv = ErrorCode::kInvalidArgument;
  plan_case("batch_size = -1", "batch_size", inv, [](auto& in) { in.batch_size = -1; });
  plan_case("num_heads = 0", "num_heads", inv, [](auto& in) { in.num_heads = 0; });
  plan_case("page_size = 0", "page_size", inv, [](auto& in) { in.page_size = 0; });
  plan_case("num_ctas = 0 (no co-resident CTA)", "num_ctas", inv, [](auto& in) { in.num_ctas = 0; });
  plan_case("cta_tile_q = 32", "cta_tile_q", inv, [](auto& in) { in.cta_tile_q = 32; });
  plan_case("kv_tile = 128", "kv_tile", inv, [](auto& in) { in.kv_tile = 128; });
  plan_case("cluster_size = 3", "cluster_size", inv, [](auto& in) { in.cluster_size = 3; });
  plan_case("cluster_size 2 on one CTA", "cluster_size", inv, [](auto& in) {
    in.cluster_size = 2;
    in.num_ctas = 1;
  });
  plan_case("grid beyond gridDim.y (num_ctas = 200000)", "num_ctas", inv, [](auto& in) {
    in.num_ctas = 200000;
    in.cluster_size = 1;
  });
  plan_case("qo_indptr null", "qo_indptr", inv, [](auto& in) { in.qo_indptr = nullptr; });
  plan_case("kv_indptr null", "kv_indptr", inv, [](auto& in) { in.kv_indptr = nullptr; });
  plan_case("kv_len null", "kv_len", inv, [](auto& in) { in.kv_len = nullptr; });
}

void add_plan_array_cases(std::vector<BadInput>& cases) {
  auto plan_case = [&](std::string what, std::string names, ErrorCode code,
                       std::function<void(GoodBatch&)> edit) {
    cases.push_back({"make_plan (plan)", std::move(what), std::move(names), code, [edit] {
                       GoodBatch g;
                       edit(g);
                       mlajit::plan::make_plan(g.plan_input());
                     }});
  };
  const auto inv = ErrorCode::kInvalidArgument;
  plan_case("qo_indptr[0] = 1", "qo_indptr[0]", inv, [](auto& g) { g.qo_indptr[0] = 1; });
  plan_case("qo_indptr[0] negative", "qo_indptr[0]", inv, [](auto& g) { g.qo_indptr[0] = -3; });
  plan_case("qo_indptr decreasing", "qo_indptr[1]", inv, [](auto& g) { g.qo_indptr[2] = 0; });
  plan_case("kv_indptr[0] negative", "kv_indptr[0]", inv, [](auto& g) { g.kv_indptr[0] = -2; });
  plan_case("kv_indptr decreasing", "kv_indptr[2]", inv, [](auto& g) { g.kv_indptr[3] = 1; });
  plan_case("kv_len negative", "kv_len[1]", inv, [](auto& g) { g.kv_len[1] = -1; });
  plan_case("kv_len beyond its pages", "kv_len[0]", inv, [](auto& g) { g.kv_len[0] = 129; });
  plan_case("kv_len INT32_MAX on 4 pages", "kv_len[2]", inv,
            [](auto& g) { g.kv_len[2] = std::numeric_limits<int32_t>::max(); });
  plan_case("one request's q_len x num_heads > 2^31 - 1", "q_len x num_heads", inv, [](auto& g) {
    g.qo_indptr = {0, 1, 2, 1 << 25};
  });
  plan_case("batch too large: 2^30 tokens in 2^10 requests", "batch is too large",
            ErrorCode::kUnsupported, [](auto& g) {
              const int requests = 1 << 10;
              g.qo_indptr.assign(requests + 1, 0);
              g.kv_indptr.assign(requests + 1, 0);
              g.kv_len.assign(requests, 0);
              for (int b = 1; b <= requests; ++b) g.qo_indptr[b] = b << 20;
            });
}

void add_parser_cases(std::vector<BadInput>& cases) {
  auto spec_case = [&](std::string what, std::string names, std::string text) {
    cases.push_back({"KernelSpec::parse", std::move(what), std::move(names),
                     ErrorCode::kInvalidArgument, [text] { mlajit::KernelSpec::parse(text); }});
  };
  const std::string good = mlajit::KernelSpec{}.text();
  auto replace = [&good](const std::string& from, const std::string& to) {
    std::string t = good;
    t.replace(t.find(from), from.size(), to);
    return t;
  };
  spec_case("empty text", "family", "");
  spec_case("unknown field", "'wat'", good + ";wat=1");
  spec_case("field twice", "'stages'", good + ";stages=1");
  spec_case("field missing", "'arch'", good.substr(0, good.find(";arch=")));
  spec_case("ckv = 0", "'ckv'", replace("ckv=512", "ckv=0"));
  spec_case("ckv = 99999999999 (overflows int)", "'ckv'", replace("ckv=512", "ckv=99999999999"));
  spec_case("dtype fp8", "'q'", replace("q=bf16", "q=fp8"));
  spec_case("arch sm_9", "'arch'", replace("arch=sm_90", "arch=sm_9"));
  spec_case("qk_shard = 2", "'qk_shard'", replace("qk_shard=1", "qk_shard=2"));
  spec_case("causal (a run-time value)", "'causal'", good + ";causal=1");
  spec_case("rows = any (the default is written by leaving the field out)", "'rows'",
            replace(";arch=", ";rows=any;arch="));
  cases.push_back({"parse_dtype", "\"fp32\"", "'fp32'", ErrorCode::kInvalidArgument,
                   [] { mlajit::parse_dtype("fp32"); }});
}

const std::vector<BadInput>& all_bad_inputs() {
  static const std::vector<BadInput> cases = [] {
    std::vector<BadInput> c;
    add_shape_cases(c);
    add_family_cases(c);
    add_options_cases(c);
    add_pointer_cases(c);
    add_stride_cases(c);
    add_kv_indices_cases(c);
    add_plan_scalar_cases(c);
    add_plan_array_cases(c);
    add_parser_cases(c);
    return c;
  }();
  return cases;
}

// Runs the case; returns the Error it threw (fails the test when it threw nothing or another type).
Error thrown_by(const BadInput& c) {
  try {
    c.call();
  } catch (const Error& e) {
    return e;
  } catch (const std::exception& e) {
    FAIL("threw a non-mlajit exception: " << e.what());
  }
  FAIL("accepted the bad input");
  return Error(ErrorCode::kInternal, "unreachable");
}

std::string markdown_cell(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '|') out += "\\|";
    else if (c == '\n') out += ' ';
    else out += c;
  }
  return out;
}

}  // namespace

TEST_CASE("the well-formed inputs the bad-input cases start from are accepted", "[bad-input]") {
  GoodBatch g;
  REQUIRE_NOTHROW(mlajit::validate_shape(good_shape()));
  REQUIRE_NOTHROW(mlajit::validate_options(mlajit::MlaOptions{}));
  REQUIRE_NOTHROW(mlajit::validate_shape_and_options(good_shape(), mlajit::MlaOptions{}));
  REQUIRE_NOTHROW(mlajit::validate_run_args(good_shape(), good_args(good_shape()), kPlannedTokens));
  REQUIRE_NOTHROW(mlajit::validate_kv_indices(g.batch()));
  REQUIRE_NOTHROW(mlajit::plan::make_plan(g.plan_input()));
  REQUIRE_NOTHROW(mlajit::KernelSpec::parse(mlajit::KernelSpec{}.text()));
  // MiniCPM3 dims and the f16 / ln-base variants are valid too.
  mlajit::MlaShape minicpm;
  minicpm.num_heads = 40;
  minicpm.head_dim_ckv = 256;
  minicpm.head_dim_kpe = 32;
  minicpm.page_size = 1;
  minicpm.dtype = mlajit::DType::kFloat16;
  REQUIRE_NOTHROW(mlajit::validate_shape(minicpm));
  REQUIRE_NOTHROW(mlajit::validate_run_args(minicpm, good_args(minicpm), kPlannedTokens));
  mlajit::MlaOptions portable;
  portable.kernel = "portable";
  REQUIRE_NOTHROW(mlajit::validate_shape_and_options(minicpm, portable));
  // An e4m3 cache with its scales as floats, as device pointers, or left at 1.
  mlajit::MlaShape fp8 = good_shape();
  fp8.kv_dtype = mlajit::DType::kFloat8E4M3;
  REQUIRE_NOTHROW(mlajit::validate_shape_and_options(fp8, mlajit::MlaOptions{}));
  mlajit::MlaRunArgs scaled = good_args(fp8);
  REQUIRE_NOTHROW(mlajit::validate_run_args(fp8, scaled, kPlannedTokens));
  scaled.kv_scale_ckv = 0.0173f;
  scaled.kv_scale_kpe = 3.5f;
  REQUIRE_NOTHROW(mlajit::validate_run_args(fp8, scaled, kPlannedTokens));
  static const float device_scales[2] = {0.5f, 2.0f};
  scaled.kv_scale_ckv = scaled.kv_scale_kpe = 1.0f;
  scaled.kv_scale_ckv_device = &device_scales[0];
  scaled.kv_scale_kpe_device = &device_scales[1];
  REQUIRE_NOTHROW(mlajit::validate_run_args(fp8, scaled, kPlannedTokens));
  // DeepSeek-V3.2's 656-byte rows, and the same scales as a tensor of their own.
  REQUIRE_NOTHROW(mlajit::validate_shape_and_options(v32_shape(), mlajit::MlaOptions{}));
  REQUIRE_NOTHROW(mlajit::validate_run_args(v32_shape(), v32_args(), kPlannedTokens));
  mlajit::MlaRunArgs split = v32_args();
  split.ckv_scales_stride_token = 4;
  split.ckv_scales_stride_page = 4 * 64;
  REQUIRE_NOTHROW(mlajit::validate_run_args(v32_shape(), split, kPlannedTokens));
  REQUIRE_NOTHROW(mlajit::KernelSpec::parse(
      "portable;q=bf16;kv=e4m3;kv_scales=token128;o=bf16;ckv=512;kpe=64;stages=2;"
      "kv_tile=64;qk_shard=1;q_tile=64;arch=sm_90"));
}

TEST_CASE("every bad input is refused with its error code and a message naming the argument",
          "[bad-input]") {
  for (const BadInput& c : all_bad_inputs()) {
    INFO(c.entry << ": " << c.what);
    const Error e = thrown_by(c);
    INFO("message: " << e.what());
    CHECK(e.code() == c.code);
    CHECK_THAT(e.what(), Catch::Contains(c.names));
  }
}

TEST_CASE("an empty batch needs no arrays, even with validate_kv_indices on", "[bad-input]") {
  mlajit::plan::PlanInput in;
  in.num_heads = 128;
  in.page_size = 64;
  in.num_ctas = 132;
  const auto plan = mlajit::plan::make_plan(in);
  REQUIRE(plan.work_items.empty());
  // plan() then runs validate_kv_indices on the same batch: it must not read kv_indptr[0],
  // nor ask for a host kv_indices or a page count no request needs.
  REQUIRE_NOTHROW(mlajit::validate_kv_indices(mlajit::MlaBatch{}));
}

TEST_CASE("requests without pages need no host kv_indices, even with validate_kv_indices on",
          "[bad-input]") {
  const std::vector<int32_t> qo_indptr{0, 1, 2}, kv_indptr{0, 0, 0}, kv_len{0, 0};
  mlajit::MlaBatch batch;
  batch.qo_indptr = qo_indptr.data();
  batch.kv_indptr = kv_indptr.data();
  batch.kv_len = kv_len.data();
  batch.batch_size = 2;
  REQUIRE_NOTHROW(mlajit::validate_kv_indices(batch));  // kv_indices null, num_pages 0
}
TEST_CASE("validate_kv_indices reads only the pages between kv_indptr[0] and kv_indptr[batch]",
          "[bad-input]") {
  // An index array shared with other batches: entries outside this batch's range are not its own.
  std::vector<int32_t> qo{0, 1}, kv_indptr{2, 3}, kv_len{10}, indices{-1, 999, 4};
  mlajit::MlaBatch batch;
  batch.qo_indptr = qo.data();
  batch.kv_indptr = kv_indptr.data();
  batch.kv_len = kv_len.data();
  batch.batch_size = 1;
  batch.kv_indices = indices.data();
  batch.num_pages = 5;
  REQUIRE_NOTHROW(mlajit::validate_kv_indices(batch));
}

TEST_CASE("a batch just under the tile cap is still planned", "[bad-input]") {
  // 2^24 tiles is the cap; one request of 2^14 tokens x 128 heads is 2^15 tiles: far below,
  // and plans in well under a second.
  std::vector<int32_t> qo{0, 1 << 14}, kv_indptr{0, 1}, kv_len{64};
  mlajit::plan::PlanInput in;
  in.qo_indptr = qo.data();
  in.kv_indptr = kv_indptr.data();
  in.kv_len = kv_len.data();
  in.batch_size = 1;
  in.num_heads = 128;
  in.page_size = 64;
  in.num_ctas = 132;
  const auto plan = mlajit::plan::make_plan(in);
  REQUIRE(plan.work_items.size() >= (size_t{1} << 15) / plan.cluster_size);
}

// Not a test: prints the cases and their real messages as a Markdown table for
// docs/RELIABILITY.md. Run with: mlajit_tests "[.bad-input-table]"
TEST_CASE("print the bad-input table", "[.bad-input-table]") {
  std::cout << "| entry point | bad input | code | message |\n|---|---|---|---|\n";
  for (const BadInput& c : all_bad_inputs()) {
    const Error e = thrown_by(c);
    std::cout << "| " << markdown_cell(c.entry) << " | " << markdown_cell(c.what) << " | "
              << mlajit::error_code_name(e.code()) << " | `" << markdown_cell(e.what())
              << "` |\n";
  }
}
