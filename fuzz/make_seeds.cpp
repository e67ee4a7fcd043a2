// Writes the seed corpora under <out>/<target>/ (committed as fuzz/corpus/): valid inputs of
// each shape the parsers take, and a few typical damages, so the fuzzers start from inputs
// that reach deep into the code. Run: fuzz_make_seeds fuzz/corpus
#include <array>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "jit/disk_cache.h"
#include "mlajit/kernel_spec.h"

namespace fs = std::filesystem;
using mlajit::jit::CacheEntry;

namespace {

void write(const fs::path& dir, const std::string& name, const std::vector<uint8_t>& bytes) {
  fs::create_directories(dir);
  std::ofstream out(dir / name, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

void write_text(const fs::path& dir, const std::string& name, const std::string& text) {
  write(dir, name, std::vector<uint8_t>(text.begin(), text.end()));
}

void cache_entry_seeds(const fs::path& dir) {
  const std::vector<uint8_t> small = mlajit::jit::encode_cache_entry(
      {"spec=grid_barrier_demo;q=bf16\nnvrtc=13000\n", {0x7f, 'E', 'L', 'F', 2, 1, 1, 0},
       "spec=grid_barrier_demo\nlowered_name=_Z4demo\nthreads=256\nsmem=0\ncluster=1x1x1\n"
       "cooperative=1\n"});
  write(dir, "valid_small", small);
  write(dir, "valid_empty_fields", mlajit::jit::encode_cache_entry({"", {}, ""}));
  std::vector<uint8_t> payload(300);
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<uint8_t>(i * 7);
  write(dir, "valid_300b", mlajit::jit::encode_cache_entry({"k", payload, "m"}));
  write(dir, "truncated", std::vector<uint8_t>(small.begin(), small.begin() + small.size() / 2));
  std::vector<uint8_t> bad_magic = small;
  bad_magic[0] = 'X';
  write(dir, "bad_magic", bad_magic);
  std::vector<uint8_t> flipped = small;
  flipped.back() ^= 1;
  write(dir, "flipped_payload", flipped);
}

void spec_seeds(const fs::path& dir) {
  mlajit::KernelSpec spec;
  write_text(dir, "mla_default", spec.text());
  spec.q_dtype = spec.kv_dtype = spec.o_dtype = mlajit::DType::kFloat16;
  spec.head_dim_ckv = 256;
  spec.head_dim_kpe = 32;
  spec.tile.num_stages = 1;
  spec.tile.kv_tile = 32;
  spec.tile.qk_shard = false;
  spec.arch = "sm_90a";
  write_text(dir, "mla_f16_256", spec.text());
  spec.q_dtype = spec.o_dtype = mlajit::DType::kBFloat16;
  spec.kv_dtype = mlajit::DType::kFloat8E4M3;
  write_text(dir, "mla_fp8_kv", spec.text());
  mlajit::KernelSpec demo;
  demo.family = "grid_barrier_demo";
  demo.arch = "compute_80";
  write_text(dir, "demo_ptx", demo.text());
  write_text(dir, "reordered",
             "spin;arch=sm_100f;q_tile=64;qk_shard=1;kv_tile=64;stages=2;kpe=64;ckv=512;"
             "o=bf16;kv=bf16;q=bf16");
  // A text from before the causal mask became a run-time value (refused by name).
  write_text(dir, "old_causal_field",
             "portable;q=bf16;kv=bf16;o=bf16;ckv=512;kpe=64;causal=1;stages=2;kv_tile=64;"
             "qk_shard=1;q_tile=64;arch=sm_90");
  write_text(dir, "missing_field", "portable;q=bf16;kv=bf16");
}

// The planner harness's format: see fuzz_planner.cpp.
void planner_seeds(const fs::path& dir) {
  auto u16 = [](std::vector<uint8_t>& v, uint16_t x) {
    v.push_back(x & 0xff);
    v.push_back(x >> 8);
  };
  auto u32 = [&u16](std::vector<uint8_t>& v, uint32_t x) {
    u16(v, x & 0xffff);
    u16(v, x >> 16);
  };
  // flags, batch, heads, page_size, num_ctas, null choice, then per request q_len, pages, kv_len.
  auto structured = [&](uint8_t flags, int heads, int page, int ctas,
                        std::vector<std::array<uint32_t, 3>> requests) {
    std::vector<uint8_t> v{flags, static_cast<uint8_t>(requests.size()), static_cast<uint8_t>(heads)};
    u16(v, page);
    u16(v, ctas);
    v.push_back(0);
    for (const auto& r : requests) {
      u16(v, r[0]);
      v.push_back(static_cast<uint8_t>(r[1]));
      u32(v, r[2]);
    }
    return v;
  };
  write(dir, "decode_b4", structured(0, 128, 64, 132, {{1, 40, 2500}, {1, 2, 100}, {1, 200, 12700}, {1, 1, 1}}));
  write(dir, "prefill_causal", structured(1, 16, 64, 132, {{300, 10, 600}, {17, 3, 150}}));
  write(dir, "pinned_cluster2_kv16", structured(8 | 32, 128, 1, 264, {{2, 250, 249}, {0, 0, 0}}));
  write(dir, "minicpm_page1", structured(0, 40, 1, 78, {{5, 200, 199}}));
  write(dir, "empty_batch", structured(0, 128, 64, 132, {}));
  // Raw: qo_indptr[0], kv_indptr[0], then per request qo_indptr, kv_indptr, kv_len.
  std::vector<uint8_t> raw{2, 2, 128};
  u16(raw, 64);
  u16(raw, 132);
  raw.push_back(0);
  for (uint32_t x : {0u, 0u, 3u, 2u, 100u, 5u, 4u, 150u}) u32(raw, x);
  write(dir, "raw_valid", raw);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: fuzz_make_seeds CORPUS_DIR\n");
    return 2;
  }
  const fs::path root = argv[1];
  cache_entry_seeds(root / "fuzz_cache_entry");
  spec_seeds(root / "fuzz_kernel_spec");
  planner_seeds(root / "fuzz_planner");
  return 0;
}
