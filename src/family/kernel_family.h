#pragma once
// KernelFamily: one way of computing MLA on a class of GPUs (portable, hopper, ...), in one
// home. A family states the shapes it computes and why it refuses one, maps shape + device +
// options to its KernelSpec, checks spec texts, and turns a spec into the program codegen
// builds (entry file, kernel instance, launch geometry). Everything above the families
// (attention, workspace, cache, CLI) asks the registry (family_registry.h) and stays
// family-agnostic. Families are stateless singletons.
#include <optional>
#include <string>
#include <vector>

#include "family/device_target.h"
#include "jit/kernel_program.h"
#include "mlajit/attention.h"
#include "mlajit/kernel_spec.h"

namespace mlajit::family {

// A TMA tensor map that a kernel parameter holds, described without the driver (this layer
// never calls it; the attention layer encodes it with cuTensorMapEncodeTiled): a tiled map of
// 16-bit elements, 128-byte swizzle, dimensions innermost first.
struct TensorMapRequest {
  size_t offset = 0;                  // where the 128 encoded bytes go in KernelRunParams::bytes
  const void* global_address = nullptr;
  DType dtype = DType::kBFloat16;
  std::vector<uint64_t> dims;         // elements
  std::vector<uint64_t> strides;      // bytes, of dims 1..rank-1
  std::vector<uint32_t> box;          // elements
};

// A kernel's parameters after MlaParams for one run(): the packed struct, with the tensor maps
// to encode into it. Empty for a kernel that takes MlaParams alone.
struct KernelRunParams {
  std::vector<unsigned char> bytes;
  std::vector<TensorMapRequest> tensor_maps;
};

struct HeadDims {
  int ckv = 512;
  int kpe = 64;
  bool operator==(const HeadDims& other) const { return ckv == other.ckv && kpe == other.kpe; }
};
std::string head_dims_text(const HeadDims& dims);  // "512/64"
// The kernel sources' name of a dtype's element type ("mlajit_kernel::bf16_t", ...), for the
// template arguments of a family's name expression.
const char* kernel_type_name(DType dtype);
// The kernel's type for the spec's KV cache: its dtype's, or the per-token-scaled e4m3 cache's.
const char* kv_kernel_type_name(const KernelSpec& spec);

class KernelFamily {
 public:
  virtual ~KernelFamily() = default;

  virtual const char* name() const = 0;     // the spec text's first field: "portable"
  virtual const char* summary() const = 0;  // one line for `mlajit info`
  virtual std::vector<HeadDims> head_dims() const = 0;  // the (ckv, kpe) pairs it computes

  // Why the family cannot compute `shape` on any device, "" when it can (head dims, dtypes).
  virtual std::string shape_unsupported_reason(const MlaShape& shape) const = 0;
  // Why not on `target`, "" when it can; by default only the shape's reason. Families add the
  // device's conditions: "hopper needs compute capability 9.0, device is 8.0".
  virtual std::string unsupported_reason(const MlaShape& shape, const DeviceTarget& target) const;
  // Whether `auto` may pick it for a shape it supports on `target` (the registry's order is
  // the preference order; a family may decline shapes it serves, but slower than the next).
  virtual bool auto_eligible(const MlaShape& shape, const DeviceTarget& target) const;

  // The spec that computes a supported `shape` on `target` (MlaOptions::force_tier and such
  // apply). Throws Error(kUnsupported) when no configuration fits the target.
  virtual KernelSpec spec_for(const MlaShape& shape, const DeviceTarget& target,
                              const MlaOptions& options) const = 0;
  // The specs `mlajit precompile` builds for `shape` on `target`: spec_for's, and with
  // `every_tile` every other tile config a debug option could force.
  virtual std::vector<KernelSpec> fleet_specs(const MlaShape& shape, const DeviceTarget& target,
                                              bool every_tile) const;
  // The shapes of its rows of the default fleet matrix: by default bf16 and f16 x its head
  // dims, and bf16 queries over an e4m3 cache at 512/64 (both scale layouts) where it computes
  // them. The causal mask is a run-time value: one spec serves both.
  virtual std::vector<MlaShape> fleet_shapes() const;
  // The tile tier of one of its specs (1 = largest) for reports; 0 when it has no tiers.
  virtual int tier_of(const KernelSpec& spec) const;
  // Whether MlaOptions::force_tier can pick one of its tile configs (a debug option).
  virtual bool has_tile_tiers() const;
  // What one work item costs beyond its KV tokens, in KV tokens, for the planner
  // (plan::PlanInput::item_overhead_tokens): by default the planner's, plan::kItemOverheadTokens.
  virtual int64_t plan_item_overhead_tokens(const MlaShape& shape) const;

  // Throws Error(kUnsupported / kInvalidArgument) naming the field when `spec` (e.g. a spec
  // text from the command line) is not one of this family's kernels. Any family refuses e4m3
  // queries or output; check_spec adds the family's own conditions.
  void check(const KernelSpec& spec) const;
  // The program of a spec that passed check().
  virtual jit::KernelProgram program(const KernelSpec& spec) const = 0;
  // The kernel's parameters after MlaParams for a run of `spec` over `args` (empty by
  // default). They may depend on the KV tensors only (ckv, kpe and their strides): the
  // attention layer rebuilds them when those change and reuses them otherwise.
  virtual KernelRunParams run_params(const MlaShape& shape, const KernelSpec& spec,
                                     const MlaRunArgs& args) const;
  // The program that merges the split tiles of `spec`'s kernel in a launch of its own (a
  // utility program, jit::kMlaMergeProgram), or none (the default): the kernel merges them
  // itself, behind a grid barrier (phase 0) or in a second launch of itself (phase 2). Its
  // cubins belong to the family's fleet rows.
  virtual std::optional<KernelSpec> merge_spec(const KernelSpec& spec) const;

 protected:
  virtual void check_spec(const KernelSpec& spec) const = 0;
  // The fields every family takes from the shape as they are (its name, the dtypes, head dims
  // and mask) for `arch`; spec_for adds the tile.
  KernelSpec shape_spec(const MlaShape& shape, const std::string& arch) const;
};

}  // namespace mlajit::family
