// The hopper family: where it runs and why it refuses, the spec and program it makes, its
// kernel's second parameter (TMA tensor maps or the gather), and its compile for sm_90a.
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <string>

#include "family/hopper/hopper_family.h"
#include "jit/codegen.h"
#include "jit/nvrtc_compiler.h"
#include "kernels/hopper/hopper_params.cuh"
#include "mlajit/error.h"

using mlajit::DType;
using mlajit::Error;
using mlajit::ErrorCode;
using mlajit::KernelSpec;
using mlajit::MlaOptions;
using mlajit::MlaRunArgs;
using mlajit::MlaShape;
using mlajit::family::DeviceTarget;
using mlajit::family::profile_target;

namespace {

const mlajit::family::KernelFamily& hopper() { return mlajit::family::hopper::family(); }

bool contains(const std::string& text, const std::string& needle) {
  return text.find(needle) != std::string::npos;
}

std::string check_refusal(const KernelSpec& spec, ErrorCode code) {
  try {
    hopper().check(spec);
  } catch (const Error& error) {
    CHECK(error.code() == code);
    return error.what();
  }
  FAIL("hopper accepted " << spec.text());
  return "";
}

// A concatenated [page][token][576] cache, as SGLang keeps it: kpe is ckv + 512.
MlaRunArgs concatenated_cache(int page_size) {
  static uint16_t cache[16];  // only the addresses matter here, aligned to 16 bytes
  MlaRunArgs args;
  args.ckv = reinterpret_cast<const void*>((reinterpret_cast<uintptr_t>(cache) + 15) / 16 * 16);
  args.kpe = static_cast<const uint16_t*>(args.ckv) + 512;
  args.ckv_stride_token = args.kpe_stride_token = 576;
  args.ckv_stride_page = args.kpe_stride_page = int64_t{576} * page_size;
  return args;
}

int32_t split_copies(const mlajit::family::KernelRunParams& params) {
  int32_t split = -1;
  std::memcpy(&split, params.bytes.data() + offsetof(mlajit_kernel::HopperTma, split_copies),
              sizeof(split));
  return split;
}

int32_t box_tokens(const mlajit::family::KernelRunParams& params) {
  int32_t tokens = -1;
  std::memcpy(&tokens, params.bytes.data() + offsetof(mlajit_kernel::HopperTma, box_tokens),
              sizeof(tokens));
  return tokens;
}

int32_t tma_enabled(const mlajit::family::KernelRunParams& params) {
  int32_t enabled = -1;
  std::memcpy(&enabled, params.bytes.data() + offsetof(mlajit_kernel::HopperTma, enabled),
              sizeof(enabled));
  return enabled;
}

}  // namespace

TEST_CASE("hopper runs 512/64 in 16-bit on compute capability 9.0 only, saying why not") {
  const MlaShape shape;
  CHECK(hopper().unsupported_reason(shape, profile_target("sm_90")).empty());
  CHECK(hopper().unsupported_reason(shape, profile_target("sm_90a")).empty());
  for (const char* arch : {"sm_80", "sm_89", "sm_100", "sm_120"}) {
    const std::string reason = hopper().unsupported_reason(shape, profile_target(arch));
    INFO(arch);
    CHECK(contains(reason, "compute capability 9.0"));
  }
  MlaShape small = shape;
  small.head_dim_ckv = 256;
  small.head_dim_kpe = 32;
  CHECK(contains(hopper().shape_unsupported_reason(small), "ckv=512 kpe=64 only"));
  CHECK(contains(hopper().shape_unsupported_reason(small), "portable family computes them"));
  MlaShape fp8 = shape;  // the producer dequantizes e4m3 codes to Q's type
  fp8.kv_dtype = DType::kFloat8E4M3;
  CHECK(hopper().shape_unsupported_reason(fp8).empty());
  MlaShape mixed = shape;
  mixed.kv_dtype = DType::kFloat16;
  CHECK(contains(hopper().shape_unsupported_reason(mixed), "KV of that dtype or e4m3"));
  DeviceTarget cramped = profile_target("sm_90");
  cramped.smem_per_block_optin = 200 * 1024;
  CHECK(contains(hopper().unsupported_reason(shape, cramped), "231288 B of shared memory"));
}

TEST_CASE("hopper specs target sm_90a with its one tile, and its program launches 512 threads") {
  MlaShape shape;
  shape.dtype = DType::kFloat16;
  shape.causal = true;
  const KernelSpec spec = hopper().spec_for(shape, profile_target("sm_90"), MlaOptions{});
  CHECK(spec.text() ==
        "hopper;q=f16;kv=f16;o=f16;ckv=512;kpe=64;stages=2;kv_tile=64;qk_shard=0;"
        "q_tile=64;arch=sm_90a");
  MlaShape full = shape;  // the causal mask is a run-time value: one spec serves both
  full.causal = false;
  CHECK(hopper().spec_for(full, profile_target("sm_90"), MlaOptions{}) == spec);
  hopper().check(spec);
  const mlajit::jit::KernelProgram program = hopper().program(spec);
  CHECK(program.entry_file == "hopper/mla_hopper.cuh");
  CHECK(program.name_expression ==
        "mlajit_kernel::mla_hopper_kernel<mlajit_kernel::HopperConfig<mlajit_kernel::f16_t, "
        "mlajit_kernel::f16_t, mlajit_kernel::f16_t, 512, 64>>");
  CHECK(program.geometry.threads_per_block == 512);
  // Q and two KV stages of 64 x 576 x 2 B, P (64 x 64 x 2 B), a factor row per stage, the row
  // sums, 15 barriers, and 1 KiB to align the swizzled tiles.
  CHECK(program.geometry.dynamic_smem_bytes == 3 * 73728 + 8192 + 2 * 256 + 256 + 120 + 1024);
  // No grid barrier: split tiles merge in a launch of the merge program, bf16 or f16 by the
  // output, on the device's plain arch.
  CHECK_FALSE(program.geometry.cooperative);
  const std::optional<KernelSpec> merge = hopper().merge_spec(spec);
  REQUIRE(merge.has_value());
  CHECK(merge->text() ==
        "mla_merge;q=f16;kv=f16;o=f16;ckv=512;kpe=64;stages=2;kv_tile=64;qk_shard=1;q_tile=64;"
        "arch=sm_90");
  // bf16 / f16, and bf16 over an e4m3 cache (per-tensor or per-token scales)
  CHECK(hopper().fleet_shapes().size() == 4);
  MlaShape fp8;
  fp8.kv_dtype = DType::kFloat8E4M3;
  const KernelSpec codes = hopper().spec_for(fp8, profile_target("sm_90"), MlaOptions{});
  CHECK(codes.text() ==
        "hopper;q=bf16;kv=e4m3;o=bf16;ckv=512;kpe=64;stages=2;kv_tile=64;qk_shard=0;"
        "q_tile=64;arch=sm_90a");
  hopper().check(codes);
  CHECK(hopper().program(codes).name_expression ==
        "mlajit_kernel::mla_hopper_kernel<mlajit_kernel::HopperConfig<mlajit_kernel::bf16_t, "
        "mlajit_kernel::e4m3_t, mlajit_kernel::bf16_t, 512, 64>>");
  // The stages hold the codes converted to f16: the same shared memory.
  CHECK(hopper().program(codes).geometry.dynamic_smem_bytes == program.geometry.dynamic_smem_bytes);
  // DeepSeek-V3.2's cache: the producer dequantizes with each token's scales (Q's type stages).
  fp8.kv_scales = mlajit::KvScales::kPerToken128;
  const KernelSpec v32 = hopper().spec_for(fp8, profile_target("sm_90"), MlaOptions{});
  CHECK(v32.text() ==
        "hopper;q=bf16;kv=e4m3;kv_scales=token128;o=bf16;ckv=512;kpe=64;stages=2;"
        "kv_tile=64;qk_shard=0;q_tile=64;arch=sm_90a");
  hopper().check(v32);
  CHECK(hopper().program(v32).name_expression ==
        "mlajit_kernel::mla_hopper_kernel<mlajit_kernel::HopperConfig<mlajit_kernel::bf16_t, "
        "mlajit_kernel::e4m3_token128_t, mlajit_kernel::bf16_t, 512, 64>>");
  CHECK(hopper().program(v32).geometry.dynamic_smem_bytes == program.geometry.dynamic_smem_bytes);
}

TEST_CASE("hopper refuses spec texts its kernel cannot take, naming the field") {
  const KernelSpec good = hopper().spec_for(MlaShape{}, profile_target("sm_90"), MlaOptions{});
  KernelSpec plain = good;
  plain.arch = "sm_90";
  CHECK(contains(check_refusal(plain, ErrorCode::kUnsupported), "arch must be sm_90a"));
  KernelSpec token_scaled = good;
  token_scaled.kv_scales = mlajit::KvScales::kPerToken128;  // over a 16-bit cache: no family
  CHECK(contains(check_refusal(token_scaled, ErrorCode::kUnsupported), "apply to an e4m3 cache"));
  KernelSpec tiled = good;
  tiled.tile.num_stages = 3;
  CHECK(contains(check_refusal(tiled, ErrorCode::kInvalidArgument), "one tile config"));
  KernelSpec mixed = good;
  mixed.o_dtype = DType::kFloat16;
  CHECK(contains(check_refusal(mixed, ErrorCode::kUnsupported), "Q and O of one dtype"));
  KernelSpec small = good;
  small.head_dim_ckv = 256;
  small.head_dim_kpe = 32;
  CHECK(contains(check_refusal(small, ErrorCode::kUnsupported), "ckv=512 kpe=64 only"));
}

TEST_CASE("hopper's second parameter holds TMA maps for pages of whole tiles or whole pages per tile, none otherwise") {
  const KernelSpec spec = hopper().spec_for(MlaShape{}, profile_target("sm_90"), MlaOptions{});
  MlaShape shape;
  for (int page : {64, 128, 256}) {
    shape.page_size = page;
    const auto params = hopper().run_params(shape, spec, concatenated_cache(page));
    INFO("page " << page);
    CHECK(params.bytes.size() == sizeof(mlajit_kernel::HopperTma));
    CHECK(tma_enabled(params) == 1);
    REQUIRE(params.tensor_maps.size() == 2);
    const auto& ckv = params.tensor_maps[0];
    CHECK(ckv.offset == offsetof(mlajit_kernel::HopperTma, ckv));
    CHECK(ckv.dims == std::vector<uint64_t>{512, static_cast<uint64_t>(page), uint64_t{1} << 31});
    CHECK(ckv.strides == std::vector<uint64_t>{1152, 1152 * static_cast<uint64_t>(page)});
    CHECK(ckv.box == std::vector<uint32_t>{64, 64, 1});
    CHECK(box_tokens(params) == 64);
    const auto& kpe = params.tensor_maps[1];
    CHECK(kpe.offset == offsetof(mlajit_kernel::HopperTma, kpe));
    CHECK(kpe.dims[0] == 64);
    CHECK(static_cast<const char*>(kpe.global_address) -
              static_cast<const char*>(ckv.global_address) ==
          1024);
  }
  for (int page : {16, 32}) {  // whole pages per tile: a box per page
    shape.page_size = page;
    const auto params = hopper().run_params(shape, spec, concatenated_cache(page));
    INFO("page " << page);
    CHECK(tma_enabled(params) == 1);
    CHECK(box_tokens(params) == page);
    REQUIRE(params.tensor_maps.size() == 2);
    CHECK(params.tensor_maps[0].dims ==
          std::vector<uint64_t>{512, static_cast<uint64_t>(page), uint64_t{1} << 31});
    CHECK(params.tensor_maps[0].box == std::vector<uint32_t>{64, static_cast<uint32_t>(page), 1});
    CHECK(params.tensor_maps[1].box == std::vector<uint32_t>{64, static_cast<uint32_t>(page), 1});
  }
  // Pages too small for a box each (the copy engine's pace per box), and pages that neither
  // hold whole tiles nor divide them: the gather.
  for (int page : {1, 2, 8, 24, 48, 96}) {
    shape.page_size = page;
    const auto params = hopper().run_params(shape, spec, concatenated_cache(page));
    INFO("page " << page);
    CHECK(tma_enabled(params) == 0);
    CHECK(box_tokens(params) == 0);
    CHECK(params.tensor_maps.empty());
  }
  shape.page_size = 64;
  MlaRunArgs odd = concatenated_cache(64);
  odd.ckv_stride_page = 576 * 32;  // pages overlap: no tensor map describes them
  CHECK(tma_enabled(hopper().run_params(shape, spec, odd)) == 0);
  // An e4m3 cache's codes come through the producer's registers, on every page size.
  MlaShape fp8 = shape;
  fp8.kv_dtype = DType::kFloat8E4M3;
  const KernelSpec codes = hopper().spec_for(fp8, profile_target("sm_90"), MlaOptions{});
  for (int page : {1, 64, 256}) {
    fp8.page_size = page;
    const auto params = hopper().run_params(fp8, codes, concatenated_cache(page));
    INFO("e4m3, page " << page);
    CHECK(tma_enabled(params) == 0);
    CHECK(params.tensor_maps.empty());
  }
}

TEST_CASE("hopper splits its KV copies between TMA and cp.async at 16 heads or fewer") {
  const KernelSpec spec = hopper().spec_for(MlaShape{}, profile_target("sm_90"), MlaOptions{});
  MlaShape shape;
  shape.page_size = 64;
  for (int heads : {1, 8, 16, 17, 32, 128}) {
    shape.num_heads = heads;
    const auto params = hopper().run_params(shape, spec, concatenated_cache(64));
    INFO("heads " << heads);
    CHECK(tma_enabled(params) == 1);
    CHECK(split_copies(params) == (heads <= 16 ? 1 : 0));
  }
  shape.num_heads = 16;
  for (int page : {16, 24}) {  // a box per page, or the gather: nothing to split
    shape.page_size = page;
    INFO("page " << page);
    CHECK(split_copies(hopper().run_params(shape, spec, concatenated_cache(page))) == 0);
  }
}

TEST_CASE("the hopper kernel compiles with NVRTC for sm_90a in every fleet shape") {
  auto& compiler = mlajit::jit::NvrtcCompiler::instance();
  if (!compiler.available()) {
    WARN("NVRTC is not available: " << compiler.unavailable_reason());
    return;
  }
  for (const MlaShape& shape : hopper().fleet_shapes()) {
    const KernelSpec spec = hopper().spec_for(shape, profile_target("sm_90"), MlaOptions{});
    INFO(spec.text());
    const auto program = mlajit::jit::generate_program(spec);
    // The family names only the entry file; codegen follows its includes.
    CHECK(program.request.headers.count("hopper/mla_hopper.cuh") == 1);
    CHECK(program.request.headers.count("common/ptx_tma.cuh") == 1);
    CHECK(program.request.headers.count("portable/mla_fa2.cuh") == 0);
    const auto result = compiler.compile(program.request);
    CHECK(result.image.size() > 1000);
    CHECK(result.lowered_name.find("mla_hopper_kernel") != std::string::npos);

    const KernelSpec merge_spec = *hopper().merge_spec(spec);
    const auto merge = mlajit::jit::generate_program(merge_spec);
    CHECK(merge.request.headers.count("merge/mla_merge_launch.cuh") == 1);
    CHECK(merge.request.headers.count("hopper/mla_hopper.cuh") == 0);
    // 512 threads and the merge's scratch, a merge state (10 floats) a thread.
    CHECK(merge.geometry.threads_per_block == 512);
    CHECK(merge.geometry.dynamic_smem_bytes == 512 * 10 * 4);
    const auto merged = compiler.compile(merge.request);
    CHECK(merged.image.size() > 1000);
    CHECK(merged.lowered_name.find("mla_merge_kernel") != std::string::npos);
  }
}
