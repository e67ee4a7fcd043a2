// The kernel registry over a real NVRTC: what it takes from a cache entry and what it
// recomputes, and that a spec is keyed by the very program it builds.
#include <catch2/catch.hpp>

#include <filesystem>
#include <string>

#include "kernel_dir_copy.h"
#include "temp_dir.h"
#include "jit/cache_layout.h"
#include "jit/codegen.h"
#include "jit/disk_cache.h"
#include "jit/embedded_kernels.h"
#include "jit/kernel_registry.h"
#include "jit/nvrtc_compiler.h"
#include "mlajit/error.h"
#include "mlajit/kernel_spec.h"

namespace fs = std::filesystem;
using namespace mlajit::jit;

using mlajit::test::KernelDirCopy;
using mlajit::test::ScopedEnv;
using mlajit::test::TempDir;

namespace {

mlajit::KernelSpec demo_spec() {
  mlajit::KernelSpec spec;
  spec.family = "grid_barrier_demo";
  spec.arch = "sm_90";
  return spec;
}

CacheOptions user_only(const std::string& dir) {
  CacheOptions options;
  options.user_dir = dir;
  return options;
}

}  // namespace

TEST_CASE("a cache entry's launch shape is checked against codegen, never trusted") {
  if (!NvrtcCompiler::instance().available()) {
    WARN("NVRTC is not available, skipping: " << NvrtcCompiler::instance().unavailable_reason());
    return;
  }
  TempDir dir("mlajit-registry-test");
  const mlajit::KernelSpec spec = demo_spec();
  CompiledKernel honest;
  {
    KernelRegistry registry(user_only(dir.path()));
    honest = registry.compile(spec);
    REQUIRE_FALSE(honest.from_cache);
  }
  // Rewrite the entry, checksums and all, with metadata that lies about the launch shape.
  KernelMetadata lie = honest.metadata;
  lie.geometry.threads_per_block += 32;
  lie.geometry.dynamic_smem_bytes += 4096;
  lie.geometry.cluster.x = 2;
  lie.geometry.cooperative = !lie.geometry.cooperative;
  {
    DiskCache cache(user_only(dir.path()));
    REQUIRE(fs::remove(entry_path(dir.path(), honest.key.hex)));
    cache.get_or_build(honest.key, [&] {
      return CacheEntry{honest.key.text, honest.image, lie.serialize()};
    });
  }
  KernelRegistry fresh(user_only(dir.path()));
  const CompiledKernel loaded = fresh.compile(spec);
  CHECK(loaded.from_cache);
  CHECK(loaded.image == honest.image);
  CHECK(loaded.metadata.geometry == honest.metadata.geometry);
}

TEST_CASE("launch metadata round-trips through its text, and a damaged record is refused") {
  KernelMetadata metadata;
  metadata.spec_text = "portable;q=bf16";
  metadata.lowered_name = "_Z6kernelv";
  metadata.geometry = {256, {2, 1, 1}, 221696, true};
  metadata.compile_seconds = 1.5;
  const KernelMetadata parsed = KernelMetadata::parse(metadata.serialize());
  CHECK(parsed.spec_text == metadata.spec_text);
  CHECK(parsed.lowered_name == metadata.lowered_name);
  CHECK(parsed.geometry == metadata.geometry);
  CHECK(parsed.compile_seconds == metadata.compile_seconds);
  std::string damaged = metadata.serialize();
  damaged.replace(damaged.find("cluster=2x1x1"), 13, "cluster=2x1");
  CHECK_THROWS_AS(KernelMetadata::parse(damaged), mlajit::Error);
}

TEST_CASE("a family's cache key follows its own kernel files, not spin.cuh or another family's") {
  // Keys need no NVRTC: without it the toolkit version stands in.
  KernelRegistry registry(CacheOptions{});
  const mlajit::KernelSpec portable;  // the default spec: portable, sm_90
  const mlajit::KernelSpec demo = demo_spec();
  KernelDirCopy kernels;
  ScopedEnv env("MLAJIT_KERNEL_DIR", kernels.path());
  const std::string portable_key = registry.key_for(portable).hex;
  const std::string demo_key = registry.key_for(demo).hex;
  CHECK(portable_key == KernelRegistry(CacheOptions{}).key_for(portable).hex);  // stable

  auto edit = [&](const std::string& name) {
    kernels.write(name, std::string(embedded_kernel_files().at(name)) + "\n// edited\n");
  };
  auto restore = [&](const std::string& name) {
    kernels.write(name, std::string(embedded_kernel_files().at(name)));
  };
  // Files the portable program does not include: another family's, a utility program's.
  kernels.write("hopper/mla_hopper.cuh", "// another family's kernel\n");
  edit("utility/spin.cuh");
  CHECK(registry.key_for(portable).hex == portable_key);
  edit("portable/mla_fa2.cuh");
  CHECK(registry.key_for(demo).hex == demo_key);  // the demo includes no portable file
  // Its own files: the entry and a shared header it includes.
  CHECK(registry.key_for(portable).hex != portable_key);
  restore("portable/mla_fa2.cuh");
  CHECK(registry.key_for(portable).hex == portable_key);
  edit("common/ptx_mma.cuh");
  CHECK(registry.key_for(portable).hex != portable_key);
  CHECK(registry.key_for(demo).hex == demo_key);
  edit("common/grid_barrier.cuh");
  CHECK(registry.key_for(demo).hex != demo_key);
}

TEST_CASE("compile keys a spec by the program it builds") {
  if (!NvrtcCompiler::instance().available()) {
    WARN("NVRTC is not available, skipping: " << NvrtcCompiler::instance().unavailable_reason());
    return;
  }
  TempDir dir("mlajit-registry-test");
  KernelRegistry registry(user_only(dir.path()));
  const mlajit::KernelSpec spec = demo_spec();
  const CompiledKernel embedded = registry.compile(spec);
  REQUIRE_FALSE(embedded.from_cache);
  CHECK(embedded.key.text.find(generate_program(spec).source_hash) != std::string::npos);
  CHECK(registry.memory_hits() == 0);
  CHECK(registry.compile(spec).from_cache);
  CHECK(registry.memory_hits() == 1);  // the registry's own memory; the cache was not asked
  CHECK(registry.cache().stats().memory_hits + registry.cache().stats().disk_hits == 0);

  // An edited kernel file is another program: another key, a fresh compile, never the cubin
  // built from the embedded source. (One registry serves a spec it has seen from memory, so
  // edits take effect in the next process: a fresh registry over the same cache here.)
  KernelDirCopy kernels;
  kernels.write("common/grid_barrier.cuh",
                std::string(embedded_kernel_files().at("common/grid_barrier.cuh")) + "\n// edited\n");
  GeneratedProgram edited_program;
  CompiledKernel edited;
  {
    ScopedEnv env("MLAJIT_KERNEL_DIR", kernels.path());
    edited_program = generate_program(spec);
    KernelRegistry next_process(user_only(dir.path()));
    edited = next_process.compile(spec);
  }
  CHECK(edited_program.source_hash != generate_program(spec).source_hash);
  CHECK(edited.key.hex != embedded.key.hex);
  CHECK(edited.key.text.find(edited_program.source_hash) != std::string::npos);
  CHECK_FALSE(edited.from_cache);
  // And back on the embedded source, the first entry serves again, from disk.
  KernelRegistry third_process(user_only(dir.path()));
  const CompiledKernel again = third_process.compile(spec);
  CHECK(again.key.hex == embedded.key.hex);
  CHECK(again.from_cache);
  CHECK(third_process.cache().stats().builds == 0);
}
