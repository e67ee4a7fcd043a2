#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "kernel_dir_copy.h"
#include "family/portable/portable_tiles.h"
#include "jit/codegen.h"
#include "jit/embedded_kernels.h"
#include "jit/kernel_registry.h"
#include "mlajit/error.h"

using mlajit::DType;
using mlajit::Error;
using mlajit::ErrorCode;
using mlajit::KernelSpec;
using mlajit::TileConfig;
using mlajit::test::KernelDirCopy;
using mlajit::test::ScopedEnv;
using namespace mlajit::jit;
using mlajit::family::profile_target;
using mlajit::family::portable::select_tile_config;
using mlajit::family::portable::shared_storage_bytes;
using mlajit::family::portable::tile_candidates;
using mlajit::family::portable::tile_tier;

namespace {

const char* kProfiledArchs[] = {"sm_80",  "sm_86",  "sm_87",  "sm_89",  "sm_90",
                                "sm_100", "sm_103", "sm_110", "sm_120", "sm_121"};

KernelSpec demo_spec(const std::string& arch) {
  KernelSpec spec;
  spec.family = "grid_barrier_demo";
  spec.arch = arch;
  return spec;
}

KernelSpec mla_spec(const std::string& arch, DType dtype, int ckv, int kpe) {
  KernelSpec spec;
  spec.arch = arch;
  spec.q_dtype = spec.kv_dtype = spec.o_dtype = dtype;
  spec.head_dim_ckv = ckv;
  spec.head_dim_kpe = kpe;
  spec.tile = select_tile_config(spec, profile_target(arch));
  return spec;
}

bool contains(const std::string& text, const std::string& needle) {
  return text.find(needle) != std::string::npos;
}

// The message generate_program refuses `spec` with, after checking the error code; a spec it
// accepts fails the test.
std::string refusal(const KernelSpec& spec, ErrorCode code) {
  try {
    generate_program(spec);
  } catch (const Error& error) {
    CHECK(error.code() == code);
    return error.what();
  }
  FAIL("generate_program accepted " << spec.text());
  return "";
}

bool is_elf(const std::vector<uint8_t>& image) {
  return image.size() > 4 && image[0] == 0x7f && image[1] == 'E' && image[2] == 'L' &&
         image[3] == 'F';
}

bool nvrtc_or_warn() {
  if (NvrtcCompiler::instance().available()) return true;
  WARN("NVRTC is not available, skipping: " << NvrtcCompiler::instance().unavailable_reason());
  return false;
}

struct CompileOutcome {
  std::string spec;
  std::string error;
  size_t bytes = 0;
  double seconds = 0;
};

// Compiles every spec on `threads` threads; Catch2 assertions stay on the calling thread.
std::vector<CompileOutcome> compile_all(const std::vector<KernelSpec>& specs, int threads) {
  std::vector<CompileOutcome> outcomes(specs.size());
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i = next++; i < specs.size(); i = next++) {
      outcomes[i].spec = specs[i].text();
      try {
        const GeneratedProgram program = generate_program(specs[i]);
        const CompileResult result = NvrtcCompiler::instance().compile(program.request);
        outcomes[i].bytes = is_elf(result.image) ? result.image.size() : 0;
        outcomes[i].seconds = result.seconds;
      } catch (const std::exception& error) {
        outcomes[i].error = error.what();
      }
    }
  };
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) pool.emplace_back(worker);
  for (auto& thread : pool) thread.join();
  return outcomes;
}

}  // namespace

TEST_CASE("a portable program names its kernel instance and sets the prelude constants") {
  const KernelSpec spec = mla_spec("sm_90a", DType::kBFloat16, 512, 64);
  CHECK(spec.text().rfind("portable;", 0) == 0);
  const GeneratedProgram program = generate_program(spec);
  CHECK(program.request.name_expression ==
        "mlajit_kernel::mla_fa2_kernel<mlajit_kernel::MlaConfig<mlajit_kernel::bf16_t, "
        "mlajit_kernel::bf16_t, mlajit_kernel::bf16_t, 512, 64, 2, 64, true, 64, true, true>>");
  CHECK(program.request.arch == "sm_90a");
  CHECK(program.request.random_seed == 0);
  CHECK(program.geometry.threads_per_block == 256);
  CHECK(program.geometry.dynamic_smem_bytes == 221696);
  CHECK(program.geometry.cooperative);
  CHECK(program.geometry.cluster == ClusterDims{});
  const std::string& source = program.request.source;
  CHECK(contains(source, "#define MLAJIT_EXPECTED_SMEM_BYTES 221696\n"));
  CHECK(contains(source, "#define MLAJIT_EXPECTED_THREADS 256\n"));
  CHECK(contains(source, "typedef unsigned long long uint64_t;"));
  CHECK(contains(source, "typedef signed char int8_t;"));
  CHECK(contains(source, spec.text()));
  // The source ends with the one include: nothing else follows the prelude.
  const std::string include = "#include \"portable/mla_fa2.cuh\"\n";
  CHECK(source.size() > include.size());
  CHECK(source.compare(source.size() - include.size(), include.size(), include) == 0);
  CHECK(program.source_hash.size() == 32);
  CHECK(program.source_hash.find_first_not_of("0123456789abcdef") == std::string::npos);
  // NVRTC gets the family's file and what it includes, with their embedded contents: no
  // utility program's file and no other family's.
  for (const auto& [name, contents] : program.request.headers) {
    INFO(name);
    CHECK(embedded_kernel_files().at(name) == contents);
    CHECK((name.rfind("portable/", 0) == 0 || name.rfind("common/", 0) == 0));
  }
  CHECK(program.request.headers.count("portable/narrow_streams.cuh") == 1);
  CHECK(program.request.headers.count("common/fp8_fragments.cuh") == 1);
  CHECK(program.request.headers.count("common/ptx_mma.cuh") == 1);
  CHECK(program.request.headers.count("common/mla_params.cuh") == 1);
  CHECK(program.request.headers.count("utility/spin.cuh") == 0);
}

TEST_CASE("rows=wide leaves the narrow layout out of the program, on every tier") {
  for (int tier = 1; tier <= 3; ++tier) {
    INFO("tier " << tier);
    KernelSpec spec = mla_spec("sm_90", DType::kBFloat16, 512, 64);
    spec.tile = tile_tier(tier);
    const GeneratedProgram with_narrow = generate_program(spec);
    spec.wide_rows_only = true;
    const GeneratedProgram wide = generate_program(spec);
    CHECK(contains(with_narrow.request.name_expression, ", 64, true, true>>"));
    CHECK(contains(wide.request.name_expression, ", 64, true, false>>"));
    CHECK(contains(wide.request.source, spec.text()));
    CHECK(wide.source_hash != with_narrow.source_hash);  // two cubins, two cache entries
    CHECK(wide.geometry == with_narrow.geometry);
  }
}

TEST_CASE("a program's headers are its entry file's include closure, by path below kernels/") {
  const std::map<std::string, std::string> files{
      // Blanks around the '#' count; a commented-out directive names no file.
      {"fam/entry.cuh", "#pragma once\n#include \"common/a.cuh\"\n  #  include \"fam/b.cuh\"\n"
                        "// #include \"gone/commented_out.cuh\"\n"},
      {"common/a.cuh", "#include \"common/c.cuh\"\n#include <cuda_fp16.h>\n"},
      {"common/c.cuh", "#include \"common/a.cuh\"\n"},  // a cycle ends
      {"fam/b.cuh", ""},
      {"other/d.cuh", ""},
  };
  CHECK(included_kernel_files("fam/entry.cuh", files) ==
        std::vector<std::string>{"common/a.cuh", "common/c.cuh", "fam/b.cuh", "fam/entry.cuh"});
  std::map<std::string, std::string> missing = files;
  missing["fam/b.cuh"] = "#include \"common/gone.cuh\"\n";
  try {
    included_kernel_files("fam/entry.cuh", missing);
    FAIL("a missing include was accepted");
  } catch (const Error& error) {
    CHECK(error.code() == ErrorCode::kIoError);
    CHECK(contains(error.what(), "common/gone.cuh (included by fam/b.cuh)"));
  }
}

TEST_CASE("an f16 spec with 256/32 heads names the matching instance") {
  KernelSpec spec = mla_spec("sm_86", DType::kFloat16, 256, 32);
  spec.tile = tile_tier(3);
  const GeneratedProgram program = generate_program(spec);
  CHECK(program.request.name_expression ==
        "mlajit_kernel::mla_fa2_kernel<mlajit_kernel::MlaConfig<mlajit_kernel::f16_t, "
        "mlajit_kernel::f16_t, mlajit_kernel::f16_t, 256, 32, 1, 16, false, 64, true, true>>");
  // Q 64x256 + 64x32 and one stage of KV 16x256 + 16x64 (kpe or P), 2 bytes each, plus
  // 2 x 64 floats of softmax exchange: 32768 + 4096 + 8192 + 2048 + 512.
  CHECK(program.geometry.dynamic_smem_bytes == 47616);
}

namespace {

// The MLA program of `spec` with its instance's dtypes replaced (Q, KV, O).
CompileRequest mla_request_with_dtypes(const KernelSpec& spec, const std::string& q,
                                       const std::string& kv, const std::string& o) {
  CompileRequest request = generate_program(spec).request;
  const std::string dtypes = "MlaConfig<mlajit_kernel::bf16_t, mlajit_kernel::bf16_t, "
                             "mlajit_kernel::bf16_t, ";
  const size_t at = request.name_expression.find(dtypes);
  REQUIRE(at != std::string::npos);
  request.name_expression.replace(at, dtypes.size(),
                                  "MlaConfig<mlajit_kernel::" + q + ", mlajit_kernel::" + kv +
                                      ", mlajit_kernel::" + o + ", ");
  return request;
}

std::string compile_error(const CompileRequest& request) {
  try {
    NvrtcCompiler::instance().compile(request);
  } catch (const Error& error) {
    CHECK(error.code() == ErrorCode::kCompileError);
    return error.what();
  }
  FAIL("NVRTC compiled " << request.name_expression);
  return "";
}

}  // namespace

TEST_CASE("the MLA kernel refuses Q and KV in different types, saying why") {
  if (!nvrtc_or_warn()) return;
  const KernelSpec spec = mla_spec("sm_90", DType::kBFloat16, 512, 64);
  const std::string error = compile_error(mla_request_with_dtypes(spec, "bf16_t", "f16_t", "bf16_t"));
  CHECK(contains(error, "a 16-bit KVType must be QType"));
}

TEST_CASE("the MLA kernel checks the block size the host defines, and takes O in its own type") {
  if (!nvrtc_or_warn()) return;
  KernelSpec spec = mla_spec("sm_86", DType::kBFloat16, 256, 32);
  spec.tile = tile_tier(3);
  CompileRequest request = mla_request_with_dtypes(spec, "bf16_t", "bf16_t", "f16_t");
  CHECK(is_elf(NvrtcCompiler::instance().compile(request).image));
  // The prelude's block size, as a host that launched 128 threads would have written it.
  const std::string defined = "#define MLAJIT_EXPECTED_THREADS 256";
  const size_t at = request.source.find(defined);
  REQUIRE(at != std::string::npos);
  request.source.replace(at, defined.size(), "#define MLAJIT_EXPECTED_THREADS 128");
  CHECK(contains(compile_error(request), "different number of threads per block"));
}

TEST_CASE("the source hash follows every field the kernel source depends on") {
  const KernelSpec spec = mla_spec("sm_90", DType::kBFloat16, 512, 64);
  const std::string hash = generate_program(spec).source_hash;
  CHECK(generate_program(KernelSpec::parse(spec.text())).source_hash == hash);
  std::vector<KernelSpec> variants(4, spec);
  variants[0].kv_dtype = DType::kFloat8E4M3;
  variants[1].q_dtype = variants[1].kv_dtype = variants[1].o_dtype = DType::kFloat16;
  variants[2].head_dim_ckv = 256;
  variants[2].head_dim_kpe = 32;
  variants[3].tile = tile_tier(2);
  for (const KernelSpec& variant : variants) {
    INFO(variant.text());
    CHECK(generate_program(variant).source_hash != hash);
  }
}

TEST_CASE("mixed dtypes and unknown head dims or families are unsupported") {
  KernelSpec mixed = mla_spec("sm_90", DType::kBFloat16, 512, 64);
  mixed.kv_dtype = DType::kFloat16;
  CHECK(contains(refusal(mixed, ErrorCode::kUnsupported), "kv=f16"));
  KernelSpec fp8_kv = mla_spec("sm_90", DType::kBFloat16, 512, 64);
  fp8_kv.kv_dtype = DType::kFloat8E4M3;
  CHECK(generate_program(fp8_kv).request.name_expression.find("e4m3_t") != std::string::npos);
  fp8_kv.q_dtype = fp8_kv.o_dtype = DType::kFloat16;  // e4m3 under either 16-bit type
  CHECK(generate_program(fp8_kv).request.name_expression.find("f16_t, mlajit_kernel::e4m3_t") !=
        std::string::npos);
  for (auto field : {&KernelSpec::q_dtype, &KernelSpec::o_dtype}) {
    KernelSpec fp8 = mla_spec("sm_90", DType::kBFloat16, 512, 64);
    fp8.*field = DType::kFloat8E4M3;
    CHECK(contains(refusal(fp8, ErrorCode::kUnsupported), "FP8 is a KV-cache format"));
  }
  KernelSpec odd = mla_spec("sm_90", DType::kBFloat16, 512, 64);
  odd.head_dim_ckv = 128;
  const std::string odd_message = refusal(odd, ErrorCode::kUnsupported);
  CHECK(contains(odd_message, "ckv=128"));
  CHECK(contains(odd_message, "512/64, 256/32"));
  KernelSpec unknown;
  unknown.family = "flash_decode";
  const std::string unknown_message = refusal(unknown, ErrorCode::kUnsupported);
  CHECK(contains(unknown_message, "flash_decode"));
  CHECK(contains(unknown_message, "portable"));  // the families it knows
  unknown.family = "mla_fa2";  // the portable family's name before 0.2.0
  CHECK(contains(refusal(unknown, ErrorCode::kUnsupported), "mla_fa2"));
}

TEST_CASE("a spec text with tile fields the kernel cannot take is refused naming the field") {
  const std::string good =
      "portable;q=bf16;kv=bf16;o=bf16;ckv=512;kpe=64;stages=2;kv_tile=64;qk_shard=1;"
      "q_tile=64;arch=sm_90";
  CHECK_NOTHROW(generate_program(KernelSpec::parse(good)));
  const std::vector<std::pair<std::string, std::string>> cases{
      // Once a signed overflow in the shared-memory formula, or an NVRTC static_assert.
      {"stages=999999999;kv_tile=999999999", "stages=999999999"},
      {"stages=2;kv_tile=999999999", "kv_tile=999999999"},
      {"stages=2;kv_tile=48", "kv_tile=48"},  // not a multiple of 32 with qk_shard
      {"stages=2;kv_tile=64;qk_shard=1;q_tile=128", "q_tile=128"},
  };
  for (const auto& [fields, named] : cases) {
    std::string text = good;
    for (const std::string& field : {std::string("stages="), std::string("kv_tile="),
                                     std::string("qk_shard="), std::string("q_tile=")}) {
      const auto override_at = fields.find(field);
      if (override_at == std::string::npos) continue;
      const std::string value = fields.substr(override_at, fields.find(';', override_at) - override_at);
      const auto at = text.find(field);
      text.replace(at, text.find(';', at) - at, value);
    }
    INFO(text);
    CHECK(contains(refusal(KernelSpec::parse(text), ErrorCode::kInvalidArgument), named));
  }
}

TEST_CASE("a DType outside the enum is refused naming the field, for every family") {
  // DType is an enum class over int: a C++ caller can cast any int to it. Such a spec once
  // keyed as "q=unknown" (text the parser refuses) and ran the f16 kernel with 2-byte sizes 0.
  for (const char* family : {"portable", "grid_barrier_demo"}) {
    KernelSpec spec = mla_spec("sm_90", DType::kBFloat16, 512, 64);
    spec.family = family;
    spec.q_dtype = spec.kv_dtype = spec.o_dtype = static_cast<DType>(7);
    INFO(family);
    CHECK(contains(refusal(spec, ErrorCode::kInvalidArgument), "q_dtype=7"));
  }
  KernelSpec spec = mla_spec("sm_90", DType::kBFloat16, 512, 64);
  spec.o_dtype = static_cast<DType>(-1);
  CHECK_THROWS_WITH(generate_program(spec), Catch::Contains("o_dtype=-1"));
}

TEST_CASE("the demo program ignores dtypes and head dims") {
  KernelSpec spec = demo_spec("sm_90");
  const GeneratedProgram program = generate_program(spec);
  CHECK(program.request.name_expression == "mlajit_kernel::grid_barrier_demo<256>");
  CHECK(program.geometry.threads_per_block == 256);
  CHECK(program.geometry.dynamic_smem_bytes == 0);
  CHECK(program.geometry.cooperative);
  CHECK(contains(program.request.source, "#define MLAJIT_EXPECTED_SMEM_BYTES 0\n"));
  CHECK(program.request.headers.size() == 3);  // the demo, the grid barrier and its block barrier
  CHECK(program.request.headers.count("common/grid_barrier.cuh") == 1);
  CHECK(program.request.headers.count("common/block_barrier.cuh") == 1);
  spec.head_dim_ckv = 7;
  spec.kv_dtype = DType::kFloat16;
  CHECK(generate_program(spec).request.name_expression == program.request.name_expression);
}

TEST_CASE("kernel sources from MLAJIT_KERNEL_DIR replace the embedded ones") {
  const KernelSpec spec = demo_spec("sm_90");
  const GeneratedProgram embedded = generate_program(spec);
  KernelDirCopy dir;
  {
    ScopedEnv env("MLAJIT_KERNEL_DIR", dir.path());
    CHECK(generate_program(spec).source_hash == embedded.source_hash);  // same bytes
    const std::string original(embedded_kernel_files().at("common/grid_barrier.cuh"));
    dir.write("common/grid_barrier.cuh", original + "\n// edited\n");
    const GeneratedProgram edited = generate_program(spec);
    CHECK(edited.source_hash != embedded.source_hash);
    CHECK(contains(edited.request.headers.at("common/grid_barrier.cuh"), "// edited"));
  }
  CHECK(generate_program(spec).source_hash == embedded.source_hash);
  {
    // A directory with a kernel file's name once read as an empty header.
    KernelDirCopy with_directory;
    std::filesystem::remove(with_directory.sub("common/grid_barrier.cuh"));
    std::filesystem::create_directory(with_directory.sub("common/grid_barrier.cuh"));
    ScopedEnv env("MLAJIT_KERNEL_DIR", with_directory.path());
    CHECK(contains(refusal(spec, ErrorCode::kIoError), "grid_barrier.cuh is not a regular file"));
  }
  {
    ScopedEnv env("MLAJIT_KERNEL_DIR", dir.sub("does-not-exist"));
    CHECK(contains(refusal(spec, ErrorCode::kIoError), "does-not-exist"));
  }
}

TEST_CASE("the grid barrier demo compiles for every profiled arch") {
  if (!nvrtc_or_warn()) return;
  std::vector<KernelSpec> specs;
  for (const char* arch : kProfiledArchs) specs.push_back(demo_spec(arch));
  const std::vector<CompileOutcome> outcomes = compile_all(specs, 2);
  for (const CompileOutcome& outcome : outcomes) {
    INFO(outcome.spec << ": " << outcome.error);
    CHECK(outcome.error.empty());
    CHECK(outcome.bytes > 0);
    WARN(outcome.spec.substr(outcome.spec.rfind('=') + 1)
         << ": " << static_cast<int>(outcome.seconds * 1000) << " ms, " << outcome.bytes
         << " B");
  }
}

namespace {

KernelSpec merge_spec(const std::string& arch) {
  KernelSpec spec;
  spec.family = "merge_states";
  spec.arch = arch;
  return spec;
}

}  // namespace

TEST_CASE("the merge_states program holds its kernel and the two common headers it includes") {
  const GeneratedProgram program = generate_program(merge_spec("sm_90"));
  CHECK(program.request.name_expression == "mlajit_kernel::merge_states<128>");
  CHECK(program.geometry.threads_per_block == 128);
  CHECK(program.geometry.dynamic_smem_bytes == 0);
  CHECK_FALSE(program.geometry.cooperative);
  std::vector<std::string> headers;
  for (const auto& [name, contents] : program.request.headers) headers.push_back(name);
  CHECK(headers == std::vector<std::string>{"common/ptx_dtype.cuh", "common/ptx_math.cuh",
                                            "merge/merge_states.cuh"});
  // Its key follows its own files only: the attention kernel's files are not in it.
  CHECK(program.request.headers.count("portable/mla_fa2.cuh") == 0);
}

TEST_CASE("the merge_states program compiles for every profiled arch") {
  if (!nvrtc_or_warn()) return;
  std::vector<KernelSpec> specs;
  for (const char* arch : kProfiledArchs) specs.push_back(merge_spec(arch));
  for (const CompileOutcome& outcome : compile_all(specs, 2)) {
    INFO(outcome.spec << ": " << outcome.error);
    CHECK(outcome.error.empty());
    CHECK(outcome.bytes > 0);
  }
  const CompileResult result =
      NvrtcCompiler::instance().compile(generate_program(merge_spec("sm_90")).request);
  CHECK(result.lowered_name == "_ZN13mlajit_kernel12merge_statesILi128EEEvNS_17MergeStatesParamsE");
}

TEST_CASE("a demo compile gives the same cubin twice with the same seed") {
  if (!nvrtc_or_warn()) return;
  GeneratedProgram program = generate_program(demo_spec("sm_90a"));
  program.request.random_seed = 0x5eed;
  const CompileResult first = NvrtcCompiler::instance().compile(program.request);
  const CompileResult second = NvrtcCompiler::instance().compile(program.request);
  CHECK(is_elf(first.image));
  CHECK(first.image == second.image);
  CHECK(first.lowered_name == "_ZN13mlajit_kernel17grid_barrier_demoILi256EEEvNS_10DemoParamsE");
}

// The default matrix: archs x dtypes x head dims, each with its arch's selected tier,
// plus every tier that fits on sm_90 and sm_80. Only a representative subset runs by default
// (the full matrix is tagged [.full]) so the CPU suite stays within its time budget.
namespace {

std::vector<KernelSpec> mla_matrix(bool full) {
  std::vector<KernelSpec> specs;
  const char* archs[] = {"sm_80", "sm_86", "sm_89", "sm_90", "sm_100", "sm_120"};
  for (const char* arch : archs) {
    for (DType dtype : {DType::kBFloat16, DType::kFloat16}) {
      for (int ckv : {512, 256}) {
        const KernelSpec spec = mla_spec(arch, dtype, ckv, ckv / 8);
        // Subset: each arch once per dtype, the head dims alternating.
        const bool representative = (dtype == DType::kBFloat16) == (ckv == 512);
        if (full || representative) specs.push_back(spec);
      }
    }
  }
  for (const char* arch : {"sm_90", "sm_80"}) {
    for (const TileConfig& tile : tile_candidates()) {
      KernelSpec spec = mla_spec(arch, DType::kBFloat16, 512, 64);
      const int bytes = shared_storage_bytes(spec, tile);
      if (tile == spec.tile || bytes > profile_target(arch).smem_per_block_optin) continue;
      spec.tile = tile;
      specs.push_back(spec);
    }
  }
  return specs;
}

void compile_mla_matrix(bool full) {
  if (!nvrtc_or_warn()) return;
  REQUIRE(embedded_kernel_files().count("portable/mla_fa2.cuh") == 1);
  const std::vector<KernelSpec> specs = mla_matrix(full);
  const auto start = std::chrono::steady_clock::now();
  const std::vector<CompileOutcome> outcomes = compile_all(specs, 2);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (const CompileOutcome& outcome : outcomes) {
    INFO(outcome.spec << ":\n" << outcome.error);
    CHECK(outcome.error.empty());
    CHECK(outcome.bytes > 0);
  }
  WARN("compiled " << specs.size() << " MLA specs in " << seconds << " s on 2 threads");
}

}  // namespace

TEST_CASE("NVRTC compiles the MLA kernel for every spec in the default matrix") {
  compile_mla_matrix(false);
}

TEST_CASE("NVRTC compiles the MLA kernel for the full matrix", "[.full]") {
  compile_mla_matrix(true);
}
