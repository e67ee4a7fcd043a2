#include "family/portable/portable_family.h"

#include <algorithm>
#include <numeric>

#include <fmt/format.h>

#include "family/portable/portable_tiles.h"
#include "mlajit/error.h"

namespace mlajit::family::portable {
namespace {

// Two warpgroups of four warps: the kernel's MlaConfig::kThreads, which static_asserts the
// MLAJIT_EXPECTED_THREADS that codegen writes from this geometry.
constexpr int kThreadsPerBlock = 256;
// Tiles of at most this many rows (the kernel's kNarrowRows) take the narrow layout where the
// kernel has it; decode at up to this many heads over an e4m3 cache with per-tensor scales,
// its streams.
constexpr int kNarrowRows = 16;
// Head counts of the fleet rows besides the default 128 (fleet_shapes).
constexpr int kTensorParallel8Heads = 16;
constexpr int kMiniCpm3Heads = 40;
// Per-token scales: four fp32 a token (the kernel's static_assert), DeepSeek-V3.2's ckv width.
constexpr int kTokenScalesCkv = 512;
// mma.sync on bf16 and cp.async: Ampere and later.
constexpr int kMinCcMajor = 8;

std::string dims_list(const std::vector<HeadDims>& dims) {
  std::vector<std::string> texts;
  for (const HeadDims& pair : dims) texts.push_back(head_dims_text(pair));
  return fmt::format("{}", fmt::join(texts, ", "));
}

class PortableFamily final : public KernelFamily {
 public:
  const char* name() const override { return "portable"; }
  const char* summary() const override {
    return "FA2-style mma.sync kernel with a cp.async KV pipeline; every arch from sm_80, three "
           "shared-memory tiers, bf16/f16 or e4m3 KV";
  }
  std::vector<HeadDims> head_dims() const override { return {{512, 64}, {256, 32}}; }

  std::string shape_unsupported_reason(const MlaShape& shape) const override {
    const std::vector<HeadDims> dims = head_dims();
    if (std::find(dims.begin(), dims.end(), HeadDims{shape.head_dim_ckv, shape.head_dim_kpe}) ==
        dims.end()) {
      return fmt::format("head dims ckv={} kpe={} are not supported by the portable family: "
                         "expected (ckv/kpe) {}",
                         shape.head_dim_ckv, shape.head_dim_kpe, dims_list(dims));
    }
    if (shape.kv_scales == KvScales::kPerToken128 && shape.head_dim_ckv != kTokenScalesCkv) {
      return fmt::format("per-token KV scales (kv_scales=token128) take head_dim_ckv {} (a "
                         "token's {} scales are one 16-byte copy), got {}",
                         kTokenScalesCkv, kTokenScalesCkv / kCkvScaleBlock, shape.head_dim_ckv);
    }
    return dtype_reason(shape.dtype, shape.effective_kv_dtype(), shape.dtype);
  }

  std::string unsupported_reason(const MlaShape& shape, const DeviceTarget& target) const override {
    std::string reason = shape_unsupported_reason(shape);
    if (!reason.empty()) return reason;
    if (target.cc_major < kMinCcMajor) {
      return fmt::format("the portable family needs compute capability {}.0, device ({}) is {}.{}",
                         kMinCcMajor, target.arch, target.cc_major, target.cc_minor);
    }
    try {
      select_tile_config(base_spec(shape, target), target);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }

  KernelSpec spec_for(const MlaShape& shape, const DeviceTarget& target,
                      const MlaOptions& options) const override {
    KernelSpec spec = base_spec(shape, target);
    return with_tile(spec, shape, options.force_tier != 0 ? tile_tier(options.force_tier)
                                                          : select_tile_config(spec, target));
  }

  std::vector<KernelSpec> fleet_specs(const MlaShape& shape, const DeviceTarget& target,
                                      bool every_tile) const override {
    std::vector<KernelSpec> specs{spec_for(shape, target, MlaOptions{})};
    if (!every_tile) return specs;
    for (const TileConfig& tile : tile_candidates()) {
      if (tile != specs.front().tile && tile_fits(specs.front(), tile, target)) {
        specs.push_back(with_tile(specs.front(), shape, tile));
      }
    }
    return specs;
  }

  // The base rows have 128 heads: DeepSeek-V2/V3 and Kimi-K2 on one GPU (64 and 32 heads take
  // the same specs). At their head dims a row at 16 heads as well (tensor-parallel over 8, and
  // every head count that is not a multiple of 32: the large tier's kernel with the narrow
  // layout); MiniCPM3's 256/32 has 40 heads.
  std::vector<MlaShape> fleet_shapes() const override {
    std::vector<MlaShape> shapes;
    for (MlaShape shape : KernelFamily::fleet_shapes()) {
      if (shape.head_dim_ckv == 512) {
        shapes.push_back(shape);
        shape.num_heads = kTensorParallel8Heads;
      } else {
        shape.num_heads = kMiniCpm3Heads;
      }
      shapes.push_back(shape);
    }
    return shapes;
  }

  int tier_of(const KernelSpec& spec) const override { return portable::tier_of(spec.tile); }
  bool has_tile_tiers() const override { return true; }

  // Decode with <= 16 heads over an e4m3 cache runs the narrow streams (narrow_streams.cuh),
  // whose tiles cost ~0.6x a bf16 tile while an item's fixed work (Q, pipeline fill, the
  // streams' merge, output) stays: twice the default overhead. On the H200 (2026-12-02, e4m3,
  // 16 heads) it planned B=64 L=16384 without the CTAs of 16 short items that set the time
  // at 96 (215.5 -> 192.4 us), B=128 L=16384 unsplit (362.2 -> 353.7); the other 16-head
  // shapes within 1%.
  int64_t plan_item_overhead_tokens(const MlaShape& shape) const override {
    const bool streams = shape.kv_dtype == DType::kFloat8E4M3 &&
                         shape.kv_scales == KvScales::kPerTensor &&
                         shape.num_heads <= kNarrowRows;
    return (streams ? 2 : 1) * KernelFamily::plan_item_overhead_tokens(shape);
  }

  jit::KernelProgram program(const KernelSpec& spec) const override {
    jit::KernelProgram program;
    program.entry_file = "portable/mla_fa2.cuh";
    // Page ids are always fetched a tile ahead (PAGE_IDS_AHEAD): it is what small pages need,
    // costs large pages nothing measurable, and a second variant per page size would double
    // the fleet matrix. The narrow layout (NARROW_TILES, chosen per tile at run time) unless
    // the spec rules it out: on every tier, since rows=wide keeps it out of the 64-row tiles
    // of head counts that never use it (on the smaller tiers it cost those 7-8% on the H200
    // in November, through register allocation, while narrow tiles gained 1.6-1.8x).
    program.name_expression = fmt::format(
        "mlajit_kernel::mla_fa2_kernel<mlajit_kernel::MlaConfig<{}, {}, {}, {}, {}, {}, {}, {}, {}, "
        "true, {}>>",
        kernel_type_name(spec.q_dtype), kv_kernel_type_name(spec),
        kernel_type_name(spec.o_dtype),
        spec.head_dim_ckv, spec.head_dim_kpe, spec.tile.num_stages,
        spec.tile.kv_tile, spec.tile.qk_shard, spec.tile.q_tile,
        !spec.wide_rows_only);
    program.geometry.threads_per_block = kThreadsPerBlock;
    program.geometry.dynamic_smem_bytes = shared_storage_bytes(spec, spec.tile);
    program.geometry.cooperative = true;  // phase 0 merges behind a grid barrier
    return program;
  }

 protected:
  void check_spec(const KernelSpec& spec) const override {
    const std::string dtypes = dtype_reason(spec.q_dtype, spec.kv_dtype, spec.o_dtype);
    if (!dtypes.empty()) {
      throw Error(ErrorCode::kUnsupported, fmt::format("{} (in \"{}\")", dtypes, spec.text()));
    }
    MlaShape shape;
    shape.head_dim_ckv = spec.head_dim_ckv;
    shape.head_dim_kpe = spec.head_dim_kpe;
    shape.dtype = spec.q_dtype;
    shape.kv_dtype = spec.kv_dtype;
    shape.kv_scales = spec.kv_scales;
    const std::string dims = shape_unsupported_reason(shape);
    if (!dims.empty()) throw Error(ErrorCode::kUnsupported, dims);
    shared_storage_bytes(spec, spec.tile);  // names a tile field the kernel cannot take
  }

 private:
  // The kernel multiplies Q by KV in one 16-bit type and writes O in it; an e4m3 cache is
  // dequantized to Q's type in shared memory.
  static std::string dtype_reason(DType q, DType kv, DType o) {
    if ((kv != q && kv != DType::kFloat8E4M3) || o != q) {
      return fmt::format("the portable family needs Q and O of one dtype and KV of that dtype or "
                         "e4m3; got q={} kv={} o={}",
                         dtype_name(q), dtype_name(kv), dtype_name(o));
    }
    return "";
  }

  KernelSpec base_spec(const MlaShape& shape, const DeviceTarget& target) const {
    return shape_spec(shape, target.arch);
  }

  // `spec` on `tile`, with the narrow layout left out where no tile of
  // `shape` can take it.
  static KernelSpec with_tile(KernelSpec spec, const MlaShape& shape, const TileConfig& tile) {
    spec.tile = tile;
    spec.wide_rows_only = every_tile_wide(shape, tile);
    return spec;
  }

  // Whether no tile of `shape` can have 1..kNarrowRows rows. A request's q_len * num_heads
  // packed rows are cut into tiles at multiples of q_tile (a cluster's second CTA starts one
  // q_tile on), so a tile's row count is a multiple of gcd(num_heads, q_tile) (or <= 0: an idle
  // cluster CTA); when that exceeds kNarrowRows (num_heads a multiple of 32 at q_tile 64),
  // every tile is wide whatever the q_lens.
  static bool every_tile_wide(const MlaShape& shape, const TileConfig& tile) {
    return std::gcd(shape.num_heads, tile.q_tile) > kNarrowRows;
  }
};

}  // namespace

const KernelFamily& family() {
  static const PortableFamily instance;
  return instance;
}

}  // namespace mlajit::family::portable
