#include "attention/run_args_validation.h"

#include <cmath>
#include <cstdint>

#include <fmt/format.h>

#include "common/tensor_checks.h"
#include "family/family_registry.h"

namespace mlajit {
namespace {

[[noreturn]] void invalid(const std::string& message) {
  throw Error(ErrorCode::kInvalidArgument, message);
}

void require_known_dtype(const char* name, DType dtype) {
  if (dtype_size(dtype) == 0) {
    invalid(fmt::format("{}={} is not a known dtype: expected bf16, f16 or e4m3", name,
                        static_cast<int>(dtype)));
  }
}

// The largest e4m3 value (S.1111.110): a dequantized value is at most this times its scale.
constexpr double kE4m3Max = 448.0;
// The largest finite value of the 16-bit type the kernel dequantizes to.
double largest_finite(DType dtype) { return dtype == DType::kFloat16 ? 65504.0 : 3.3895313892515355e38; }

// One operand's scale: a float, or a device pointer with the float left at its default.
void validate_kv_scale(const char* name, float scale, const float* device_scale, DType q) {
  if (device_scale != nullptr) {
    if (scale != 1.0f) {
      invalid(fmt::format("{0}={1} and {0}_device={2} are both set: give the scale as a float "
                          "or as a device pointer (then {0} stays 1)",
                          name, scale, static_cast<const void*>(device_scale)));
    }
    if (reinterpret_cast<std::uintptr_t>(device_scale) % 4 != 0) {
      invalid(fmt::format("{}_device={} is not 4-byte aligned (one fp32)", name,
                          static_cast<const void*>(device_scale)));
    }
    return;
  }
  if (!std::isfinite(scale) || !(scale > 0.0f)) {
    invalid(fmt::format("{}={}: expected a finite scale > 0 (dequantized value = e4m3 value x "
                        "scale)",
                        name, scale));
  }
  if (kE4m3Max * scale > largest_finite(q)) {
    invalid(fmt::format("{}={}: e4m3 values up to {} times this scale overflow {} (largest "
                        "finite {}), the type the kernel dequantizes to",
                        name, scale, kE4m3Max, dtype_name(q), largest_finite(q)));
  }
}

// Whether a per-tensor scale field differs from its default, and the four fields for a message.
bool per_tensor_scales_set(const MlaRunArgs& args) {
  return args.kv_scale_ckv != 1.0f || args.kv_scale_kpe != 1.0f ||
         args.kv_scale_ckv_device != nullptr || args.kv_scale_kpe_device != nullptr;
}
std::string per_tensor_scales_text(const MlaRunArgs& args) {
  return fmt::format("kv_scale_ckv={}, kv_scale_kpe={}, device pointers {} and {}",
                     args.kv_scale_ckv, args.kv_scale_kpe,
                     static_cast<const void*>(args.kv_scale_ckv_device),
                     static_cast<const void*>(args.kv_scale_kpe_device));
}

// DeepSeek-V3.2's per-token scales: a device array (the per-tensor fields left unset) with
// whole 16-byte rows of fp32.
void validate_token_scales(const MlaShape& shape, const MlaRunArgs& args) {
  if (per_tensor_scales_set(args)) {
    invalid(fmt::format("per-tensor KV scales are set ({}) but the shape's kv_scales is token128: "
                        "ckv's scales come from ckv_scales and kpe is not quantized",
                        per_tensor_scales_text(args)));
  }
  if (args.ckv_scales == nullptr) {
    invalid("ckv_scales is null: kv_scales token128 needs a device array of fp32 scales, one per "
            "128 ckv values of each token");
  }
  if (reinterpret_cast<std::uintptr_t>(args.ckv_scales) % 16 != 0) {
    invalid(fmt::format("ckv_scales={} is not 16-byte aligned",
                        static_cast<const void*>(args.ckv_scales)));
  }
  const int64_t per_token = shape.head_dim_ckv / kCkvScaleBlock;
  const auto require_float_stride = [](const char* name, int64_t stride, int64_t minimum) {
    if (stride < minimum || stride > kMaxStride || stride % 4 != 0) {
      invalid(fmt::format("{}={} is invalid: expected a multiple of 4 floats (16 bytes) from {} "
                          "to {}",
                          name, stride, minimum, kMaxStride));
    }
  };
  require_float_stride("ckv_scales_stride_token", args.ckv_scales_stride_token, per_token);
  require_float_stride("ckv_scales_stride_page", args.ckv_scales_stride_page,
                       (shape.page_size - 1) * args.ckv_scales_stride_token + per_token);
}

void validate_kv_scales(const MlaShape& shape, const MlaRunArgs& args) {
  if (shape.kv_scales == KvScales::kPerToken128) return validate_token_scales(shape, args);
  if (args.ckv_scales != nullptr || args.ckv_scales_stride_page != 0 ||
      args.ckv_scales_stride_token != 0) {
    invalid(fmt::format("ckv_scales={} (strides {} / {}) is set but the shape's kv_scales is "
                        "tensor: per-token scales need kv_scales token128",
                        static_cast<const void*>(args.ckv_scales), args.ckv_scales_stride_page,
                        args.ckv_scales_stride_token));
  }
  if (shape.effective_kv_dtype() != DType::kFloat8E4M3) {
    if (per_tensor_scales_set(args)) {
      invalid(fmt::format("KV scales are set ({}) but the KV cache is {}: scales apply to an e4m3 "
                          "cache only",
                          per_tensor_scales_text(args), dtype_name(shape.effective_kv_dtype())));
    }
    return;
  }
  validate_kv_scale("kv_scale_ckv", args.kv_scale_ckv, args.kv_scale_ckv_device, shape.dtype);
  validate_kv_scale("kv_scale_kpe", args.kv_scale_kpe, args.kv_scale_kpe_device, shape.dtype);
}

}  // namespace

void validate_shape(const MlaShape& shape) {
  if (shape.num_heads < 1 || shape.num_heads > 128) {
    invalid(fmt::format("num_heads={} is out of range: expected 1..128", shape.num_heads));
  }
  if (shape.page_size < 1 || shape.page_size > (1 << 20)) {
    invalid(fmt::format("page_size={} is out of range: expected 1..{}", shape.page_size, 1 << 20));
  }
  require_known_dtype("dtype", shape.dtype);
  if (shape.kv_dtype) require_known_dtype("kv_dtype", *shape.kv_dtype);
  if (shape.dtype == DType::kFloat8E4M3) {
    throw Error(ErrorCode::kUnsupported,
                "dtype=e4m3: FP8 is a KV-cache format (kv_dtype); queries and output are bf16 "
                "or f16");
  }
  if (shape.kv_scales != KvScales::kPerTensor && shape.kv_scales != KvScales::kPerToken128) {
    invalid(fmt::format("kv_scales={} is not known: expected 0 (tensor) or 1 (token128)",
                        static_cast<int>(shape.kv_scales)));
  }
  if (shape.kv_scales == KvScales::kPerToken128 && shape.effective_kv_dtype() != DType::kFloat8E4M3) {
    invalid(fmt::format("kv_scales=token128 needs kv_dtype=e4m3, got kv_dtype={}",
                        dtype_name(shape.effective_kv_dtype())));
  }
}

void validate_options(const MlaOptions& options) {
  if (options.device < -1) {
    invalid(fmt::format("device={} is out of range: expected -1 (current context's device) or a "
                        "device ordinal >= 0",
                        options.device));
  }
  if (options.force_tier < 0 || options.force_tier > 3) {
    invalid(fmt::format("force_tier={} is out of range: expected 0 (auto) or 1..3",
                        options.force_tier));
  }
  if (options.cluster_size < 0 || options.cluster_size > 2) {
    invalid(fmt::format("cluster_size={} is out of range: expected 0 (auto), 1 or 2",
                        options.cluster_size));
  }
  if (options.lse_base != LseBase::kBase2 && options.lse_base != LseBase::kNatural) {
    invalid(fmt::format("lse_base={} is not a known base", static_cast<int>(options.lse_base)));
  }
  const int mode = static_cast<int>(options.compile_mode);
  if (mode < static_cast<int>(CompileMode::kDefault) || mode > static_cast<int>(CompileMode::kInline)) {
    invalid(fmt::format("compile_mode={} is not a compile mode: expected 0 (default), 1 (auto), "
                        "2 (process) or 3 (inline)",
                        mode));
  }
  if (options.kernel != family::kAutoFamily) family::find_family(options.kernel);
  // Multiples of 64 are KV-tile multiples for every family and tier (64, 32 and 16 tokens).
  const int chunk = options.invariant_chunk_tokens;
  if (chunk != 0 && !options.batch_invariant) {
    invalid(fmt::format("invariant_chunk_tokens={} is set but batch_invariant is off: the "
                        "length applies to batch-invariant plans only",
                        chunk));
  }
  if (chunk < 0 || chunk % 64 != 0 || chunk > (1 << 24)) {
    invalid(fmt::format("invariant_chunk_tokens={} is out of range: expected 0 (default {}) or "
                        "a multiple of 64 up to 2^24",
                        chunk, kDefaultInvariantChunkTokens));
  }
}

void validate_shape_and_options(const MlaShape& shape, const MlaOptions& options) {
  validate_shape(shape);
  validate_options(options);
  family::check_request(shape, options.kernel);
}

void validate_run_args(const MlaShape& shape, const MlaRunArgs& args, int64_t planned_tokens) {
  const int64_t heads = shape.num_heads;
  const DType q = shape.dtype, kv = shape.effective_kv_dtype();
  require_aligned("q_nope", args.q_nope);
  require_aligned("q_pe", args.q_pe);
  require_aligned("ckv", args.ckv);
  require_aligned("kpe", args.kpe);
  require_aligned("out", args.out);
  if (args.kv_indices == nullptr) invalid("kv_indices is null: a device pointer is required");
  if (reinterpret_cast<std::uintptr_t>(args.kv_indices) % 4 != 0) {
    invalid(fmt::format("kv_indices={} is not 4-byte aligned (int32 page ids)",
                        static_cast<const void*>(args.kv_indices)));
  }
  if (reinterpret_cast<std::uintptr_t>(args.lse) % 4 != 0) {
    invalid(fmt::format("lse={} is not 4-byte aligned", static_cast<void*>(args.lse)));
  }
  if (args.num_tokens != planned_tokens) {
    invalid(fmt::format("num_tokens={} does not match the plan: qo_indptr[batch]={}",
                        args.num_tokens, planned_tokens));
  }
  require_stride("q_nope_stride_head", args.q_nope_stride_head, shape.head_dim_ckv, q);
  require_stride("q_nope_stride_token", args.q_nope_stride_token,
                 (heads - 1) * args.q_nope_stride_head + shape.head_dim_ckv, q);
  require_stride("q_pe_stride_head", args.q_pe_stride_head, shape.head_dim_kpe, q);
  require_stride("q_pe_stride_token", args.q_pe_stride_token,
                 (heads - 1) * args.q_pe_stride_head + shape.head_dim_kpe, q);
  require_stride("out_stride_head", args.out_stride_head, shape.head_dim_ckv, q);
  require_stride("out_stride_token", args.out_stride_token,
                 (heads - 1) * args.out_stride_head + shape.head_dim_ckv, q);
  // ckv and kpe may interleave (one concatenated cache), so each only has to clear its own row.
  require_stride("ckv_stride_token", args.ckv_stride_token, shape.head_dim_ckv, kv);
  require_stride("ckv_stride_page", args.ckv_stride_page,
                 (shape.page_size - 1) * args.ckv_stride_token + shape.head_dim_ckv, kv);
  const DType kpe = shape.kpe_dtype();
  require_stride("kpe_stride_token", args.kpe_stride_token, shape.head_dim_kpe, kpe);
  require_stride("kpe_stride_page", args.kpe_stride_page,
                 (shape.page_size - 1) * args.kpe_stride_token + shape.head_dim_kpe, kpe);
  if (!(args.sm_scale > 0.0f) || args.sm_scale > 1e6f) {
    invalid(fmt::format("sm_scale={} is out of range: expected a value in (0, 1e6], e.g. "
                        "1/sqrt(192) for DeepSeek",
                        args.sm_scale));
  }
  validate_kv_scales(shape, args);
}

void validate_kv_indices(const MlaBatch& batch) {
  if (batch.batch_size <= 0) return;  // no request reads a page
  if (batch.kv_indptr == nullptr) {
    invalid(fmt::format("kv_indptr is null; it must point to batch_size + 1 = {} entries",
                        int64_t{batch.batch_size} + 1));
  }
  // The pages the requests own: kv_indptr[0] need not be 0, and entries before it are unused.
  const int32_t first = batch.kv_indptr[0], end = batch.kv_indptr[batch.batch_size];
  if (first < 0 || first > end) {  // make_plan refuses these first; checked again for direct callers
    invalid(fmt::format("kv_indptr must be non-decreasing from >= 0: kv_indptr[0]={}, "
                        "kv_indptr[{}]={}",
                        first, batch.batch_size, end));
  }
  if (first == end) return;  // requests without pages (kv_len 0 everywhere) read none
  if (batch.kv_indices == nullptr) {
    invalid(fmt::format("validate_kv_indices is on but MlaBatch::kv_indices (host copy) is null; "
                        "it must hold the {} page ids kv_indptr[0]={} .. kv_indptr[{}]={} name",
                        int64_t{end} - first, first, batch.batch_size, end));
  }
  if (batch.num_pages < 1) {
    invalid(fmt::format("validate_kv_indices is on but num_pages={} (expected >= 1: the pages "
                        "in the cache, which the page ids must stay below)",
                        batch.num_pages));
  }
  for (int32_t i = first; i < end; ++i) {
    const int32_t page = batch.kv_indices[i];
    if (page < 0 || page >= batch.num_pages) {
      invalid(fmt::format("kv_indices[{}]={} is out of range: expected 0..{}", i, page,
                          batch.num_pages - 1));
    }
  }
}

}  // namespace mlajit
