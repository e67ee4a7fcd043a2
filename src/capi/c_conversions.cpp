#include "capi/c_conversions.h"

#include <cstddef>

#include <fmt/format.h>

#include "capi/c_structs.h"

namespace mlajit::capi {
namespace {

mlajit_dtype to_c_dtype(DType dtype) {
  switch (dtype) {
    case DType::kFloat16: return MLAJIT_FLOAT16;
    case DType::kBFloat16: return MLAJIT_BFLOAT16;
    case DType::kFloat8E4M3: return MLAJIT_FLOAT8_E4M3;
  }
  return MLAJIT_KV_DTYPE_SAME;  // unreachable for a value of the enum
}

bool to_flag(int32_t value, const char* name) {
  if (value != 0 && value != 1) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}={} is not a flag: expected 0 or 1", name, value));
  }
  return value == 1;
}

}  // namespace

DType to_dtype(mlajit_dtype dtype, const char* name) {
  switch (dtype) {
    case MLAJIT_FLOAT16: return DType::kFloat16;
    case MLAJIT_BFLOAT16: return DType::kBFloat16;
    case MLAJIT_FLOAT8_E4M3: return DType::kFloat8E4M3;
    default: break;  // any other int, the range markers included
  }
  throw Error(ErrorCode::kInvalidArgument,
              fmt::format("{}={} is not a dtype: expected MLAJIT_FLOAT16 (0), MLAJIT_BFLOAT16 (1) "
                          "or MLAJIT_FLOAT8_E4M3 (2)",
                          name, static_cast<int>(dtype)));
}

KvScales to_kv_scales(mlajit_kv_scales scales) {
  if (scales != MLAJIT_KV_SCALES_PER_TENSOR && scales != MLAJIT_KV_SCALES_PER_TOKEN_128) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("shape->kv_scales={} is not known: expected "
                            "MLAJIT_KV_SCALES_PER_TENSOR (0) or MLAJIT_KV_SCALES_PER_TOKEN_128 (1)",
                            static_cast<int>(scales)));
  }
  return scales == MLAJIT_KV_SCALES_PER_TOKEN_128 ? KvScales::kPerToken128 : KvScales::kPerTensor;
}

LseBase to_lse_base(mlajit_lse_base base, const char* name) {
  if (base != MLAJIT_LSE_BASE2 && base != MLAJIT_LSE_NATURAL) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}={} is not a base: expected MLAJIT_LSE_BASE2 (0) or "
                            "MLAJIT_LSE_NATURAL (1)",
                            name, static_cast<int>(base)));
  }
  return base == MLAJIT_LSE_NATURAL ? LseBase::kNatural : LseBase::kBase2;
}

mlajit_shape default_shape() {
  const MlaShape cpp;
  mlajit_shape c{};
  c.struct_size = sizeof(c);
  c.num_heads = cpp.num_heads;
  c.head_dim_ckv = cpp.head_dim_ckv;
  c.head_dim_kpe = cpp.head_dim_kpe;
  c.page_size = cpp.page_size;
  c.dtype = to_c_dtype(cpp.dtype);
  c.causal = cpp.causal ? 1 : 0;
  c.kv_dtype = cpp.kv_dtype ? to_c_dtype(*cpp.kv_dtype) : MLAJIT_KV_DTYPE_SAME;
  c.kv_scales = static_cast<mlajit_kv_scales>(cpp.kv_scales);
  return c;
}

mlajit_options default_options() {
  const MlaOptions cpp;
  mlajit_options c{};
  c.struct_size = sizeof(c);
  c.device = cpp.device;
  c.force_tier = cpp.force_tier;
  c.cluster_size = cpp.cluster_size;
  c.force_two_launch = cpp.force_two_launch ? 1 : 0;
  c.lse_base = cpp.lse_base == LseBase::kNatural ? MLAJIT_LSE_NATURAL : MLAJIT_LSE_BASE2;
  c.workspace_bytes = cpp.workspace_bytes;
  c.validate_kv_indices = cpp.validate_kv_indices ? 1 : 0;
  c.kernel = nullptr;  // cpp.kernel: "auto"
  c.compile_mode = static_cast<mlajit_compile_mode>(cpp.compile_mode);
  c.batch_invariant = cpp.batch_invariant ? 1 : 0;
  c.invariant_chunk_tokens = cpp.invariant_chunk_tokens;
  return c;
}

mlajit_batch default_batch() {
  mlajit_batch c{};
  c.struct_size = sizeof(c);
  return c;
}

mlajit_run_args default_run_args() {
  const MlaRunArgs cpp;
  mlajit_run_args c{};
  c.struct_size = sizeof(c);
  c.kv_scale_ckv = cpp.kv_scale_ckv;
  c.kv_scale_kpe = cpp.kv_scale_kpe;
  c.kv_scale_ckv_device = cpp.kv_scale_ckv_device;
  c.kv_scale_kpe_device = cpp.kv_scale_kpe_device;
  return c;
}

MlaShape to_shape(const mlajit_shape* shape) {
  const mlajit_shape c =
      read_struct(shape, default_shape(), "shape", kShapeFirstLayout);
  MlaShape cpp;
  cpp.num_heads = c.num_heads;
  cpp.head_dim_ckv = c.head_dim_ckv;
  cpp.head_dim_kpe = c.head_dim_kpe;
  cpp.page_size = c.page_size;
  cpp.dtype = to_dtype(c.dtype, "shape->dtype");
  cpp.causal = to_flag(c.causal, "shape->causal");
  if (c.kv_dtype != MLAJIT_KV_DTYPE_SAME) cpp.kv_dtype = to_dtype(c.kv_dtype, "shape->kv_dtype");
  cpp.kv_scales = to_kv_scales(c.kv_scales);
  return cpp;
}

MlaOptions to_options(const mlajit_options* options) {
  if (options == nullptr) return MlaOptions{};
  // The 0.1.1 layout ended where kernel starts; a 0.2.0 one without compile_mode is read too.
  const mlajit_options c =
      read_struct(options, default_options(), "options", kOptionsFirstLayout);
  MlaOptions cpp;
  cpp.device = c.device;
  cpp.force_tier = c.force_tier;
  cpp.cluster_size = c.cluster_size;
  cpp.force_two_launch = to_flag(c.force_two_launch, "options->force_two_launch");
  cpp.lse_base = to_lse_base(c.lse_base, "options->lse_base");
  cpp.workspace_bytes = c.workspace_bytes;
  cpp.validate_kv_indices = to_flag(c.validate_kv_indices, "options->validate_kv_indices");
  cpp.batch_invariant = to_flag(c.batch_invariant, "options->batch_invariant");
  cpp.invariant_chunk_tokens = c.invariant_chunk_tokens;
  if (c.kernel != nullptr) cpp.kernel = c.kernel;
  switch (c.compile_mode) {
    case MLAJIT_COMPILE_DEFAULT: cpp.compile_mode = CompileMode::kDefault; break;
    case MLAJIT_COMPILE_AUTO: cpp.compile_mode = CompileMode::kAuto; break;
    case MLAJIT_COMPILE_PROCESS: cpp.compile_mode = CompileMode::kProcess; break;
    case MLAJIT_COMPILE_INLINE: cpp.compile_mode = CompileMode::kInline; break;
    default:
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("options->compile_mode={} is not a compile mode: expected "
                              "MLAJIT_COMPILE_DEFAULT (0), _AUTO (1), _PROCESS (2) or _INLINE (3)",
                              static_cast<int>(c.compile_mode)));
  }
  return cpp;
}

MlaBatch to_batch(const mlajit_batch* batch) {
  const mlajit_batch c = read_struct(batch, default_batch(), "batch");
  MlaBatch cpp;
  cpp.qo_indptr = c.qo_indptr;
  cpp.kv_indptr = c.kv_indptr;
  cpp.kv_len = c.kv_len;
  cpp.batch_size = c.batch_size;
  cpp.kv_indices = c.kv_indices;
  cpp.num_pages = c.num_pages;
  return cpp;
}

MlaRunArgs to_run_args(const mlajit_run_args* args) {
  // The 0.1 layout ended past sm_scale's padding (`reserved`), where the scales start; the
  // values are checked by run(), like every other field here.
  const mlajit_run_args c =
      read_struct(args, default_run_args(), "args", kRunArgsFirstLayout);
  MlaRunArgs cpp;
  cpp.q_nope = c.q_nope;
  cpp.q_nope_stride_token = c.q_nope_stride_token;
  cpp.q_nope_stride_head = c.q_nope_stride_head;
  cpp.q_pe = c.q_pe;
  cpp.q_pe_stride_token = c.q_pe_stride_token;
  cpp.q_pe_stride_head = c.q_pe_stride_head;
  cpp.ckv = c.ckv;
  cpp.ckv_stride_page = c.ckv_stride_page;
  cpp.ckv_stride_token = c.ckv_stride_token;
  cpp.kpe = c.kpe;
  cpp.kpe_stride_page = c.kpe_stride_page;
  cpp.kpe_stride_token = c.kpe_stride_token;
  cpp.kv_indices = c.kv_indices;
  cpp.out = c.out;
  cpp.out_stride_token = c.out_stride_token;
  cpp.out_stride_head = c.out_stride_head;
  cpp.lse = c.lse;
  cpp.num_tokens = c.num_tokens;
  cpp.sm_scale = c.sm_scale;
  cpp.kv_scale_ckv = c.kv_scale_ckv;
  cpp.kv_scale_kpe = c.kv_scale_kpe;
  cpp.kv_scale_ckv_device = c.kv_scale_ckv_device;
  cpp.kv_scale_kpe_device = c.kv_scale_kpe_device;
  cpp.ckv_scales = c.ckv_scales;
  cpp.ckv_scales_stride_page = c.ckv_scales_stride_page;
  cpp.ckv_scales_stride_token = c.ckv_scales_stride_token;
  return cpp;
}

mlajit_tile_info to_tile_info(const TileChoice& choice) {
  mlajit_tile_info c{};
  c.struct_size = sizeof(c);
  c.num_stages = choice.tile.num_stages;
  c.kv_tile = choice.tile.kv_tile;
  c.qk_shard = choice.tile.qk_shard ? 1 : 0;
  c.q_tile = choice.tile.q_tile;
  c.tier = choice.tier;
  c.shared_bytes = choice.shared_bytes;
  copy_text(c.spec_text, choice.spec_text);
  copy_text(c.family, choice.family);
  return c;
}

mlajit_kernel_family_info to_kernel_family_info(const KernelFamilyInfo& family) {
  mlajit_kernel_family_info c{};
  c.struct_size = sizeof(c);
  copy_text(c.name, family.name);
  copy_text(c.summary, family.summary);
  copy_text(c.head_dims, fmt::format("{}", fmt::join(family.head_dims, ",")));
  copy_text(c.archs, fmt::format("{}", fmt::join(family.archs, ",")));
  return c;
}

}  // namespace mlajit::capi
