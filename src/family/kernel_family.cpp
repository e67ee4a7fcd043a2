#include "family/kernel_family.h"

#include <fmt/format.h>

#include "mlajit/error.h"
#include "plan/planner.h"

namespace mlajit::family {

std::string head_dims_text(const HeadDims& dims) { return fmt::format("{}/{}", dims.ckv, dims.kpe); }

std::string KernelFamily::unsupported_reason(const MlaShape& shape, const DeviceTarget&) const {
  return shape_unsupported_reason(shape);
}

bool KernelFamily::auto_eligible(const MlaShape&, const DeviceTarget&) const { return true; }

std::vector<KernelSpec> KernelFamily::fleet_specs(const MlaShape& shape,
                                                  const DeviceTarget& target, bool) const {
  return {spec_for(shape, target, MlaOptions{})};
}

const char* kernel_type_name(DType dtype) {
  switch (dtype) {
    case DType::kBFloat16: return "mlajit_kernel::bf16_t";
    case DType::kFloat16: return "mlajit_kernel::f16_t";
    case DType::kFloat8E4M3: return "mlajit_kernel::e4m3_t";
  }
  throw Error(ErrorCode::kInvalidArgument,
              fmt::format("dtype {} has no kernel type", static_cast<int>(dtype)));
}

const char* kv_kernel_type_name(const KernelSpec& spec) {
  if (spec.kv_scales == KvScales::kPerToken128) return "mlajit_kernel::e4m3_token128_t";
  return kernel_type_name(spec.kv_dtype);
}

std::vector<MlaShape> KernelFamily::fleet_shapes() const {
  std::vector<MlaShape> shapes;
  for (DType dtype : {DType::kBFloat16, DType::kFloat16}) {
    for (const HeadDims& dims : head_dims()) {
      MlaShape shape;
      shape.dtype = dtype;
      shape.head_dim_ckv = dims.ckv;
      shape.head_dim_kpe = dims.kpe;
      shapes.push_back(shape);
    }
  }
  // An e4m3 cache under bf16 queries at DeepSeek's head dims (what FP8 serving engines run),
  // where the family computes it; other FP8 combinations compile on first use or by filter.
  MlaShape shape;
  shape.dtype = DType::kBFloat16;
  shape.kv_dtype = DType::kFloat8E4M3;
  if (shape_unsupported_reason(shape).empty()) shapes.push_back(shape);
  shape.kv_scales = KvScales::kPerToken128;  // DeepSeek-V3.2's cache
  if (shape_unsupported_reason(shape).empty()) shapes.push_back(shape);
  return shapes;
}

int KernelFamily::tier_of(const KernelSpec&) const { return 0; }

KernelSpec KernelFamily::shape_spec(const MlaShape& shape, const std::string& arch) const {
  KernelSpec spec;
  spec.family = name();
  spec.q_dtype = spec.o_dtype = shape.dtype;
  spec.kv_dtype = shape.effective_kv_dtype();
  spec.kv_scales = shape.kv_scales;
  spec.head_dim_ckv = shape.head_dim_ckv;
  spec.head_dim_kpe = shape.head_dim_kpe;
  spec.arch = arch;
  return spec;
}

bool KernelFamily::has_tile_tiers() const { return false; }

std::optional<KernelSpec> KernelFamily::merge_spec(const KernelSpec&) const { return std::nullopt; }

int64_t KernelFamily::plan_item_overhead_tokens(const MlaShape&) const {
  return plan::kItemOverheadTokens;
}

KernelRunParams KernelFamily::run_params(const MlaShape&, const KernelSpec&,
                                         const MlaRunArgs&) const {
  return {};
}

// FP8 is a KV-cache format: every family computes in, and writes, 16-bit queries and output.
void KernelFamily::check(const KernelSpec& spec) const {
  for (const auto& [field, dtype] : {std::pair{"q", spec.q_dtype}, std::pair{"o", spec.o_dtype}}) {
    if (dtype == DType::kFloat8E4M3) {
      throw Error(ErrorCode::kUnsupported,
                  fmt::format("kernel spec field '{}' is e4m3: FP8 is a KV-cache format; "
                              "queries and output are bf16 or f16 (in \"{}\")",
                              field, spec.text()));
    }
  }
  if (spec.kv_scales != KvScales::kPerTensor && spec.kv_scales != KvScales::kPerToken128) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("kernel spec kv_scales={} is not known: expected per-tensor (0) or "
                            "token128 (1) (in \"{}\")",
                            static_cast<int>(spec.kv_scales), spec.text()));
  }
  if (spec.kv_scales == KvScales::kPerToken128 && spec.kv_dtype != DType::kFloat8E4M3) {
    throw Error(ErrorCode::kUnsupported,
                fmt::format("kernel spec field 'kv_scales' is token128 but kv is {}: per-token "
                            "scales apply to an e4m3 cache (in \"{}\")",
                            dtype_name(spec.kv_dtype), spec.text()));
  }
  check_spec(spec);
}

}  // namespace mlajit::family
