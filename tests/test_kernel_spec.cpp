#include <catch2/catch.hpp>

#include <string>

#include "mlajit/error.h"
#include "mlajit/kernel_spec.h"

using mlajit::DType;
using mlajit::Error;
using mlajit::ErrorCode;
using mlajit::KernelSpec;

namespace {

const std::string kDefaultText =
    "portable;q=bf16;kv=bf16;o=bf16;ckv=512;kpe=64;stages=2;kv_tile=64;qk_shard=1;"
    "q_tile=64;arch=sm_90";

// Parses `text`, expecting kInvalidArgument whose message contains every one of `needles`.
void require_parse_error(const std::string& text, std::initializer_list<std::string> needles) {
  try {
    KernelSpec::parse(text);
    FAIL("parse accepted \"" << text << "\"");
  } catch (const Error& error) {
    CHECK(error.code() == ErrorCode::kInvalidArgument);
    for (const auto& needle : needles) {
      INFO("message: " << error.what());
      CHECK(std::string(error.what()).find(needle) != std::string::npos);
    }
  }
}

}  // namespace

TEST_CASE("the default spec's text is the documented canonical form") {
  CHECK(KernelSpec{}.text() == kDefaultText);
}

TEST_CASE("spec text round-trips through parse for every field value") {
  KernelSpec spec;
  spec.family = "grid_barrier_demo";
  spec.q_dtype = DType::kFloat16;
  spec.kv_dtype = DType::kFloat8E4M3;
  spec.o_dtype = DType::kBFloat16;
  spec.head_dim_ckv = 256;
  spec.head_dim_kpe = 32;
  spec.tile = {1, 16, false, 64};
  for (const char* arch : {"sm_80", "sm_90a", "sm_100f", "compute_90", "sm_121"}) {
    spec.arch = arch;
    const KernelSpec parsed = KernelSpec::parse(spec.text());
    CHECK(parsed == spec);
    CHECK(parsed.text() == spec.text());
    CHECK(parsed.tile == spec.tile);
    CHECK(parsed.o_dtype == DType::kBFloat16);
    CHECK(parsed.kv_dtype == DType::kFloat8E4M3);
  }
  CHECK(KernelSpec::parse(kDefaultText) == KernelSpec{});
}

TEST_CASE("fields after the family may come in any order") {
  const KernelSpec parsed = KernelSpec::parse(
      "portable;arch=sm_90;q_tile=64;qk_shard=1;kv_tile=64;stages=2;kpe=64;ckv=512;"
      "o=bf16;kv=bf16;q=bf16");
  CHECK(parsed == KernelSpec{});
}

TEST_CASE("a bad spec text is rejected naming the field and value") {
  require_parse_error("portable;q=bf16;kv=bf16;o=bf16;ckv=512;kpe=64;stages=2;"
                      "kv_tile=64;qk_shard=1;q_tile=64;arch=sm_90;color=red",
                      {"color", "red"});
  require_parse_error("portable;q=bf16;kv=bf16;o=bf16;ckv=512;kpe=64;stages=2;"
                      "kv_tile=64;qk_shard=1;arch=sm_90",
                      {"q_tile", "missing"});
  require_parse_error(kDefaultText + ";ckv=256", {"ckv", "twice", "512", "256"});
  require_parse_error("portable;q=bf16;kv=bf16;o=bf16;ckv=5x2;kpe=64;stages=2;"
                      "kv_tile=64;qk_shard=1;q_tile=64;arch=sm_90",
                      {"ckv", "5x2"});
  require_parse_error("portable;q=bf16;kv=bf16;o=bf16;ckv=-512;kpe=64;stages=2;"
                      "kv_tile=64;qk_shard=1;q_tile=64;arch=sm_90",
                      {"ckv", "-512"});
  require_parse_error("portable;q=bf16;kv=bf16;o=bf16;ckv=512;kpe=0;stages=2;"
                      "kv_tile=64;qk_shard=1;q_tile=64;arch=sm_90",
                      {"kpe", "'0'"});
  require_parse_error("portable;q=bf16;kv=fp8;o=bf16;ckv=512;kpe=64;stages=2;"
                      "kv_tile=64;qk_shard=1;q_tile=64;arch=sm_90",
                      {"kv", "fp8", "f16, bf16 or e4m3"});
  require_parse_error("portable;q=bf16;kv=bf16;o=bf16;ckv=512;kpe=64;stages=2;"
                      "kv_tile=64;qk_shard=yes;q_tile=64;arch=sm_90",
                      {"qk_shard", "yes", "0 or 1"});
  // The field of specs before the causal mask became a run-time value: named, not "unknown".
  require_parse_error("portable;q=bf16;kv=bf16;o=bf16;ckv=512;kpe=64;causal=1;stages=2;"
                      "kv_tile=64;qk_shard=1;q_tile=64;arch=sm_90",
                      {"'causal' no longer exists", "run-time value", "drop the field"});
  require_parse_error("portable;q=bf16;kv=bf16;o=bf16;ckv=512;kpe=64;stages=2;"
                      "kv_tile=64;qk_shard=1;q_tile=64;arch=hopper",
                      {"arch", "hopper"});
  require_parse_error("MLA;q=bf16", {"family", "MLA"});
  require_parse_error("", {"family"});
  require_parse_error("portable;q", {"'q'", "key=value"});
  require_parse_error("portable;q=bf16;kv=bf16;o=bf16;ckv=99999999999;kpe=64;stages=2;"
                      "kv_tile=64;qk_shard=1;q_tile=64;arch=sm_90",
                      {"ckv", "99999999999"});
}

TEST_CASE("per-token KV scales add one field after kv; per-tensor specs' texts are unchanged") {
  KernelSpec spec;
  spec.kv_dtype = DType::kFloat8E4M3;
  const std::string per_tensor = spec.text();
  CHECK(per_tensor.find("kv_scales") == std::string::npos);
  spec.kv_scales = mlajit::KvScales::kPerToken128;
  const std::string per_token = spec.text();
  CHECK(per_token.find(";kv=e4m3;kv_scales=token128;o=bf16;") != std::string::npos);
  CHECK(KernelSpec::parse(per_token) == spec);
  CHECK(KernelSpec::parse(per_token).kv_scales == mlajit::KvScales::kPerToken128);
  CHECK(KernelSpec::parse(per_tensor).kv_scales == mlajit::KvScales::kPerTensor);
  CHECK(per_token != per_tensor);  // so are their cache keys
  // text() never writes the default: parse() refuses it, as any other unknown value.
  std::string written = per_token;
  written.replace(written.find("token128"), 8, "tensor");
  require_parse_error(written, {"'kv_scales'", "'tensor'", "leaving the field out"});
  written.replace(written.find("tensor"), 6, "block64");
  require_parse_error(written, {"'kv_scales'", "'block64'"});
  require_parse_error(per_token + ";kv_scales=token128", {"appears twice"});
  CHECK(mlajit::parse_kv_scales("token128") == mlajit::KvScales::kPerToken128);
  CHECK_THROWS_AS(mlajit::parse_kv_scales("per-token"), Error);
}

TEST_CASE("rows=wide adds one field after q_tile; other specs' texts are unchanged") {
  KernelSpec spec;
  const std::string any_rows = spec.text();
  CHECK(any_rows.find("rows") == std::string::npos);
  spec.wide_rows_only = true;
  const std::string wide = spec.text();
  CHECK(wide.find(";q_tile=64;rows=wide;arch=sm_90") != std::string::npos);
  CHECK(KernelSpec::parse(wide) == spec);
  CHECK(KernelSpec::parse(wide).wide_rows_only);
  CHECK_FALSE(KernelSpec::parse(any_rows).wide_rows_only);
  CHECK(wide != any_rows);  // so are their cache keys
  std::string written = wide;
  written.replace(written.find("rows=wide"), 9, "rows=any");
  require_parse_error(written, {"'rows'", "'any'", "leaving the field out"});
  require_parse_error(wide + ";rows=wide", {"appears twice"});
}

TEST_CASE("dtype names parse back and have their sizes") {
  for (DType dtype : {DType::kFloat16, DType::kBFloat16, DType::kFloat8E4M3}) {
    CHECK(mlajit::parse_dtype(mlajit::dtype_name(dtype)) == dtype);
  }
  CHECK(mlajit::dtype_size(DType::kFloat16) == 2);
  CHECK(mlajit::dtype_size(DType::kBFloat16) == 2);
  CHECK(mlajit::dtype_size(DType::kFloat8E4M3) == 1);
  CHECK(mlajit::dtype_size(static_cast<DType>(7)) == 0);
  CHECK(std::string(mlajit::dtype_name(DType::kBFloat16)) == "bf16");
  CHECK(std::string(mlajit::dtype_name(DType::kFloat8E4M3)) == "e4m3");
  CHECK_THROWS_AS(mlajit::parse_dtype("float16"), Error);
  CHECK_THROWS_AS(mlajit::parse_dtype("fp8"), Error);
}

TEST_CASE("tile configs compare by every field") {
  const mlajit::TileConfig base{2, 64, true, 64};
  CHECK(base == mlajit::TileConfig{2, 64, true, 64});
  CHECK(base != mlajit::TileConfig{1, 64, true, 64});
  CHECK(base != mlajit::TileConfig{2, 32, true, 64});
  CHECK(base != mlajit::TileConfig{2, 64, false, 64});
  CHECK(base != mlajit::TileConfig{2, 64, true, 32});
}
