#include "family/hopper/hopper_family.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include <fmt/format.h>

#include "jit/device_profiles.h"
#include "jit/utility_programs.h"
#include "kernels/hopper/hopper_params.cuh"
#include "mlajit/error.h"

namespace mlajit::family::hopper {
namespace {

// The kernel's geometry (kernels/hopper/mla_hopper.cuh, HopperConfig): a scores warpgroup, two
// output warpgroups and a producer warpgroup; 64 packed query rows by 576 dims against 64-token
// KV tiles in two stages. The kernel static_asserts the threads and shared memory codegen
// writes.
constexpr int kThreadsPerBlock = 512;
constexpr int kRows = 64;
constexpr int kTileTokens = 64;
constexpr int kStages = 2;
constexpr HeadDims kHeadDims{512, 64};
// The fewest heads for which `auto` picks this family on any page size (see auto_eligible).
constexpr int kMinAutoHeads = 32;
// The most heads for which the TMA copies are split with cp.async (HopperTma::split_copies):
// a 16-head decode tile is bound by memory, and more bytes in flight pay (the H200: -4% at
// B=128 L=16384), while at 128 heads the cp.async share slows the compute-bound loop (+6-8%).
// Also the head count, with whole-tile pages, from which `auto` picks this family (16: the
// one measured below 32).
constexpr int kMaxSplitCopyHeads = 16;
// The smallest page the TMA path copies as a box per page (pages dividing the 64-token tile);
// smaller ones, and pages that neither divide nor hold whole tiles, take the cp.async gather.
// H100, 128 heads B=64 L=4096 (docs/PERF.md, 2026-12-07c): boxes per page against the gather
// 0.93x the time at page 32, 0.985x at 16, but 1.29x at 8, 2.1x at 4 and 6.6x at page 1 (576
// boxes a tile: the copy engine's pace per box, not the bytes, sets the tile's).
constexpr int kMinBoxTokens = 16;
// The tile config every hopper spec states (the spec text has one for every family).
const TileConfig kTile{kStages, kTileTokens, false, kRows};

// Q and each KV stage: 64 rows of 576 16-bit values; P: 64 rows of a tile's 64 tokens; then a
// row of rescale factors per stage, the final row sums, six mbarriers per stage (full, empty
// for each token half, scaled, and ready for each half of P) and three more (the row sums
// published and read, P read); 1 KiB of slack to align the base to the 128-byte swizzle's
// 1 KiB atom.
int shared_storage_bytes() {
  const int tile = kRows * (kHeadDims.ckv + kHeadDims.kpe) * 2;
  const int p = kRows * kTileTokens * 2;
  return (1 + kStages) * tile + p + kStages * kRows * 4 + kRows * 4 + (6 * kStages + 3) * 8 +
         1024;
}

// Q and O of one 16-bit type; KV of that type, or e4m3 codes, which the producer dequantizes
// to it (the stages and both wgmma operands are 16-bit).
std::string dtype_reason(DType q, DType kv, DType o) {
  if (o != q || (kv != q && kv != DType::kFloat8E4M3)) {
    return fmt::format("the hopper family needs Q and O of one dtype and KV of that dtype or "
                       "e4m3; got q={} kv={} o={}",
                       dtype_name(q), dtype_name(kv), dtype_name(o));
  }
  return "";
}

class HopperFamily final : public KernelFamily {
 public:
  const char* name() const override { return "hopper"; }
  const char* summary() const override {
    return "wgmma + TMA kernel for compute capability 9.0 (sm_90a): scores, two output and a "
           "producer warpgroup over a two-stage KV ring";
  }
  std::vector<HeadDims> head_dims() const override { return {kHeadDims}; }

  std::string shape_unsupported_reason(const MlaShape& shape) const override {
    if (!(HeadDims{shape.head_dim_ckv, shape.head_dim_kpe} == kHeadDims)) {
      return fmt::format("the hopper family computes head dims ckv=512 kpe=64 only, got ckv={} "
                         "kpe={} (the portable family computes them)",
                         shape.head_dim_ckv, shape.head_dim_kpe);
    }
    return dtype_reason(shape.dtype, shape.effective_kv_dtype(), shape.dtype);
  }

  std::string unsupported_reason(const MlaShape& shape, const DeviceTarget& target) const override {
    std::string reason = shape_unsupported_reason(shape);
    if (!reason.empty()) return reason;
    if (target.cc_major != 9 || target.cc_minor != 0) {
      return fmt::format("the hopper family needs compute capability 9.0 (wgmma, TMA, "
                         "setmaxnreg: sm_90a), device ({}) is {}.{}",
                         target.arch, target.cc_major, target.cc_minor);
    }
    if (!smem_fits(shared_storage_bytes(), target)) {
      return fmt::format("the hopper kernel needs {} B of shared memory per CTA; the target has "
                         "{}",
                         shared_storage_bytes(), smem_limits_text(target));
    }
    return "";
  }

  // Measured on the H200 (docs/PERF.md, 2026-12-01 and 2026-12-02): from 32 heads (and at 16
  // heads with 2-4 speculative tokens) it runs 1.3-2.3x the portable kernel, pages of 64 or of
  // 1. A 16-head decode step fills a quarter of its 64-row MMA tile and is bound by memory:
  // with whole-tile pages (TMA copies split with cp.async) it is 1-3.5% faster than the
  // portable kernel's narrow tiles on every baseline shape, with smaller pages (the cp.async
  // gather) up to 12% slower (page size 1). Below 16 heads nothing was measured. The query
  // length is not known when the kernel is chosen, so the head count and page size decide.
  // An e4m3 cache (H100, 2026-12-05): from 32 heads the hopper kernel, its producer
  // dequantizing into the stages, runs FP8 faster than the portable kernel; at 16 heads the
  // portable kernel's narrow streams, which multiply the codes without expanding them, are
  // ~2x faster, on any page size.
  bool auto_eligible(const MlaShape& shape, const DeviceTarget&) const override {
    if (shape.num_heads >= kMinAutoHeads) return true;
    if (shape.effective_kv_dtype() == DType::kFloat8E4M3) return false;
    return shape.num_heads == kMaxSplitCopyHeads && shape.page_size % kTileTokens == 0;
  }

  // wgmma and setmaxnreg exist only on the arch-specific target, whatever 9.0 arch is asked.
  KernelSpec spec_for(const MlaShape& shape, const DeviceTarget&,
                      const MlaOptions&) const override {
    KernelSpec spec = shape_spec(shape, "sm_90a");
    spec.tile = kTile;
    return spec;
  }

  jit::KernelProgram program(const KernelSpec& spec) const override {
    jit::KernelProgram program;
    program.entry_file = "hopper/mla_hopper.cuh";
    program.name_expression = fmt::format(
        "mlajit_kernel::mla_hopper_kernel<mlajit_kernel::HopperConfig<{}, {}, {}, {}, {}>>",
        kernel_type_name(spec.q_dtype), kv_kernel_type_name(spec),
        kernel_type_name(spec.o_dtype),
        spec.head_dim_ckv, spec.head_dim_kpe);
    program.geometry.threads_per_block = kThreadsPerBlock;
    program.geometry.dynamic_smem_bytes = shared_storage_bytes();
    return program;
  }

  // The kernel holds no merge: a second launch, a programmatic dependent of the attention
  // launch, merges split tiles. On the H100 that path ran within 2% of the grid barrier on
  // every split shape (docs/PERF.md, "The merge as a programmatic dependent launch"), and the
  // merge was a fifth of the kernel's cold compile. The merge program serves every spec of
  // the output's dtype, by the device's own arch (it needs no arch-specific instruction).
  std::optional<KernelSpec> merge_spec(const KernelSpec& spec) const override {
    KernelSpec merge;
    merge.family = jit::kMlaMergeProgram;
    merge.q_dtype = merge.kv_dtype = merge.o_dtype = spec.o_dtype;
    merge.head_dim_ckv = spec.head_dim_ckv;
    merge.head_dim_kpe = spec.head_dim_kpe;
    merge.arch = jit::device_profile(spec.arch).arch;  // sm_90a -> sm_90
    return merge;
  }

  // The kernel's HopperTma: tensor maps of the cache as [page][token][column] when every
  // 64-token tile lies inside one page or is made of whole pages (the planner starts chunks on
  // multiples of the tile): a box of 64 tokens, or one per page; else none: the kernel gathers
  // the tiles with cp.async.
  KernelRunParams run_params(const MlaShape& shape, const KernelSpec& spec,
                             const MlaRunArgs& args) const override {
    KernelRunParams params;
    params.bytes.assign(sizeof(mlajit_kernel::HopperTma), 0);
    const uint64_t element = dtype_size(spec.kv_dtype);
    // An e4m3 cache's codes come through the producer's registers (the kernel dequantizes
    // them on the way into the stages), never by TMA.
    const int32_t enabled =
        spec.kv_dtype != DType::kFloat8E4M3 && tma_fits(shape, spec, args, element) ? 1 : 0;
    const int32_t box_tokens = std::min(shape.page_size, kTileTokens);
    // The split copy's cp.async share reads one page a tile: pages of whole tiles only.
    const int32_t split_copies =
        enabled && shape.num_heads <= kMaxSplitCopyHeads && box_tokens == kTileTokens ? 1 : 0;
    auto put = [&](size_t offset, int32_t value) {
      std::memcpy(params.bytes.data() + offset, &value, sizeof(value));
    };
    put(offsetof(mlajit_kernel::HopperTma, enabled), enabled);
    put(offsetof(mlajit_kernel::HopperTma, split_copies), split_copies);
    put(offsetof(mlajit_kernel::HopperTma, box_tokens), enabled ? box_tokens : 0);
    if (!enabled) return params;
    // The page count is not known to run(): the map allows any page id (the ids were checked
    // by the caller, or by plan() with validate_kv_indices).
    const uint64_t pages = uint64_t{1} << 31;
    auto map = [&](size_t offset, const void* base, int columns, int64_t stride_page,
                   int64_t stride_token) {
      TensorMapRequest request;
      request.offset = offset;
      request.global_address = base;
      request.dtype = spec.kv_dtype;
      request.dims = {static_cast<uint64_t>(columns), static_cast<uint64_t>(shape.page_size), pages};
      request.strides = {static_cast<uint64_t>(stride_token) * element,
                         static_cast<uint64_t>(stride_page) * element};
      request.box = {64, static_cast<uint32_t>(box_tokens), 1};
      return request;
    };
    params.tensor_maps = {
        map(offsetof(mlajit_kernel::HopperTma, ckv), args.ckv, spec.head_dim_ckv,
            args.ckv_stride_page, args.ckv_stride_token),
        map(offsetof(mlajit_kernel::HopperTma, kpe), args.kpe, spec.head_dim_kpe,
            args.kpe_stride_page, args.kpe_stride_token)};
    return params;
  }

  // Whether TMA boxes can copy the tiles: whole tiles per page or whole pages per tile (of
  // kMinBoxTokens or more), and the layout rules of a tensor map (16-byte aligned base and
  // strides, rows no longer than the token stride, pages no longer than the page stride); the
  // run arguments were validated already, these hold for every layout but exotic ones, which
  // the gather serves.
  static bool tma_fits(const MlaShape& shape, const KernelSpec& spec, const MlaRunArgs& args,
                       uint64_t element) {
    const bool whole_tiles = shape.page_size % kTileTokens == 0;
    const bool whole_pages = kTileTokens % shape.page_size == 0 && shape.page_size >= kMinBoxTokens;
    if (!whole_tiles && !whole_pages) return false;
    auto fits = [&](const void* base, int columns, int64_t stride_page, int64_t stride_token) {
      const uint64_t token = stride_token * element, page = stride_page * element;
      return reinterpret_cast<uintptr_t>(base) % 16 == 0 && token % 16 == 0 && page % 16 == 0 &&
             token >= columns * element && page >= shape.page_size * token;
    };
    return fits(args.ckv, spec.head_dim_ckv, args.ckv_stride_page, args.ckv_stride_token) &&
           fits(args.kpe, spec.head_dim_kpe, args.kpe_stride_page, args.kpe_stride_token);
  }

 protected:
  void check_spec(const KernelSpec& spec) const override {
    const std::string dtypes = dtype_reason(spec.q_dtype, spec.kv_dtype, spec.o_dtype);
    if (!dtypes.empty()) {
      throw Error(ErrorCode::kUnsupported, fmt::format("{} (in \"{}\")", dtypes, spec.text()));
    }
    if (!(HeadDims{spec.head_dim_ckv, spec.head_dim_kpe} == kHeadDims)) {
      throw Error(ErrorCode::kUnsupported,
                  fmt::format("the hopper family computes ckv=512 kpe=64 only (in \"{}\")",
                              spec.text()));
    }
    if (spec.tile != kTile) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("the hopper kernel has one tile config: stages=2 kv_tile=64 "
                              "qk_shard=0 q_tile=64 (in \"{}\")",
                              spec.text()));
    }
    if (spec.wide_rows_only) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("the hopper kernel has no layout for few-row tiles to leave out: "
                              "drop rows=wide (in \"{}\")",
                              spec.text()));
    }
    if (spec.arch != "sm_90a") {
      throw Error(ErrorCode::kUnsupported,
                  fmt::format("the hopper kernel uses wgmma and setmaxnreg: arch must be sm_90a, "
                              "got {} (in \"{}\")",
                              spec.arch, spec.text()));
    }
  }
};

}  // namespace

const KernelFamily& family() {
  static const HopperFamily instance;
  return instance;
}

}  // namespace mlajit::family::hopper
