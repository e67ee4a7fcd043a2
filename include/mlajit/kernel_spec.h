#pragma once
// KernelSpec: everything that changes the generated code, and nothing else. Its canonical
// text form is what gets hashed into cache keys, logged, and shown by `mlajit list`.
#include <cstdint>
#include <string>

#include "mlajit/export.h"

namespace mlajit {

// kFloat8E4M3 is a KV-cache format only: queries and output are 16-bit.
enum class DType : int { kFloat16 = 0, kBFloat16 = 1, kFloat8E4M3 = 2 };

MLAJIT_API const char* dtype_name(DType dtype) noexcept;  // "f16" / "bf16" / "e4m3"
MLAJIT_API DType parse_dtype(const std::string& text);    // throws Error(kInvalidArgument)
// Bytes per element (2, 2, 1); 0 for a value outside the enum. The one owner of element sizes.
MLAJIT_API int dtype_size(DType dtype) noexcept;

// How an e4m3 KV cache is scaled back to real values.
//  - kPerTensor: ckv and kpe both in e4m3, one scale each (MlaRunArgs::kv_scale_ckv / _kpe).
//  - kPerToken128: ckv in e4m3 with one fp32 scale per 128 values of each token
//    (MlaRunArgs::ckv_scales), kpe unquantized in the queries' dtype: DeepSeek-V3.2's layout
//    (656 bytes a token: 512 codes, 4 scales, 64 bf16 rope values).
enum class KvScales : int { kPerTensor = 0, kPerToken128 = 1 };

MLAJIT_API const char* kv_scales_name(KvScales scales) noexcept;  // "tensor" / "token128"
MLAJIT_API KvScales parse_kv_scales(const std::string& text);     // throws Error(kInvalidArgument)
// ckv values that share one scale under kPerToken128.
inline constexpr int kCkvScaleBlock = 128;

// One shared-memory configuration of the MLA kernel (the reference's three tiers are the
// candidates; see tile_config.h for how one is chosen).
struct MLAJIT_API TileConfig {
  int num_stages = 2;  // KV tiles in flight
  int kv_tile = 64;    // KV tokens per tile
  bool qk_shard = true;  // split QK over the two warpgroups along KV
  int q_tile = 64;     // packed query rows per CTA

  bool operator==(const TileConfig& other) const;
  bool operator!=(const TileConfig& other) const { return !(*this == other); }
};

struct MLAJIT_API KernelSpec {
  std::string family = "portable";  // kernel family, or a utility program ("grid_barrier_demo")
  DType q_dtype = DType::kBFloat16;
  DType kv_dtype = DType::kBFloat16;
  DType o_dtype = DType::kBFloat16;
  KvScales kv_scales = KvScales::kPerTensor;  // of an e4m3 cache
  int head_dim_ckv = 512;
  int head_dim_kpe = 64;
  TileConfig tile;
  // The shape's head count makes every tile a full one (more rows than a family's few-row
  // layout takes): the kernel leaves that layout's code out. Portable sets it on its large tier
  // for head counts that are multiples of 32; no other family has such a layout.
  bool wide_rows_only = false;
  std::string arch = "sm_90";  // NVRTC target: "sm_80", "sm_90a", "compute_90" (PTX), ...

  // Canonical text, e.g.
  // "portable;q=bf16;kv=bf16;o=bf16;ckv=512;kpe=64;stages=2;kv_tile=64;qk_shard=1;q_tile=64;arch=sm_90"
  // The causal mask is not a spec value: kernels take it at run time (MlaShape::causal).
  // kv_scales other than kPerTensor adds ";kv_scales=token128" after kv (a per-tensor spec's
  // text has no such field); wide_rows_only adds ";rows=wide" after q_tile.
  std::string text() const;
  // Inverse of text(); throws Error(kInvalidArgument) naming the offending field.
  static KernelSpec parse(const std::string& text);

  bool operator==(const KernelSpec& other) const { return text() == other.text(); }
  bool operator!=(const KernelSpec& other) const { return !(*this == other); }
};

}  // namespace mlajit
