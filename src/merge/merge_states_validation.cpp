#include "merge/merge_states_validation.h"

#include <cstdint>
#include <string>

#include <fmt/format.h>

#include "common/tensor_checks.h"
#include "mlajit/error.h"

namespace mlajit {
namespace {

[[noreturn]] void invalid(const std::string& message) {
  throw Error(ErrorCode::kInvalidArgument, "merge_states: " + message);
}

// Messages name what the caller wrote: "merge_states: parts[2].out_stride_head=100 ...".
void check_aligned(const std::string& name, const void* pointer) {
  try {
    require_aligned(name.c_str(), pointer);
  } catch (const Error& e) {
    invalid(e.what());
  }
}

void check_stride(const std::string& name, int64_t stride, int64_t minimum, DType dtype) {
  try {
    require_stride(name.c_str(), stride, minimum, dtype);
  } catch (const Error& e) {
    invalid(e.what());
  }
}

void check_lse_pointer(const std::string& name, const float* lse, bool required) {
  if (lse == nullptr) {
    if (required) {
      invalid(fmt::format("{} is null: every part needs its float32 [num_tokens][num_heads] "
                          "log-sum-exp (run() writes it when MlaRunArgs::lse is set)",
                          name));
    }
    return;
  }
  if (reinterpret_cast<std::uintptr_t>(lse) % 4 != 0) {
    invalid(fmt::format("{}={} is not 4-byte aligned (float32)", name,
                        static_cast<const void*>(lse)));
  }
}

void check_counts(const MergeStatesArgs& args) {
  if (args.num_parts < 1 || args.num_parts > kMaxMergeStateParts) {
    invalid(fmt::format("num_parts={} is out of range: expected 1..{} (merge more parts in "
                        "rounds: a merged state is a part)",
                        args.num_parts, kMaxMergeStateParts));
  }
  if (args.parts == nullptr) {
    invalid(fmt::format("parts is null: a host array of num_parts={} AttentionState is required",
                        args.num_parts));
  }
  if (args.num_heads < 1) {
    invalid(fmt::format("num_heads={} is out of range: expected >= 1", args.num_heads));
  }
  if (args.head_dim < 8 || args.head_dim > 65536 || args.head_dim % 8 != 0) {
    invalid(fmt::format("head_dim={} is out of range: expected a multiple of 8 (16 bytes) in "
                        "8..65536, e.g. 512",
                        args.head_dim));
  }
  if (args.num_tokens < 0 || args.num_tokens > kMaxMergeRows / args.num_heads) {
    invalid(fmt::format("num_tokens={} is out of range: expected 0..{} (num_tokens x num_heads "
                        "rows of num_heads={} must stay within {})",
                        args.num_tokens, kMaxMergeRows / args.num_heads, args.num_heads,
                        kMaxMergeRows));
  }
  if (args.device < -1) {
    invalid(fmt::format("device={} is out of range: expected -1 (current context's device) or "
                        "a device ordinal >= 0",
                        args.device));
  }
}

void check_kinds(const MergeStatesArgs& args) {
  if (args.dtype == DType::kFloat8E4M3) {
    throw Error(ErrorCode::kUnsupported,
                "merge_states: dtype=e4m3: attention outputs are bf16 or f16 (e4m3 is a KV-cache "
                "format)");
  }
  if (dtype_size(args.dtype) == 0) {
    invalid(fmt::format("dtype={} is not a known dtype: expected bf16 or f16",
                        static_cast<int>(args.dtype)));
  }
  if (args.lse_base != LseBase::kBase2 && args.lse_base != LseBase::kNatural) {
    invalid(fmt::format("lse_base={} is not a known base: expected kBase2 (0) or kNatural (1)",
                        static_cast<int>(args.lse_base)));
  }
}

// [num_tokens][num_heads][head_dim] at the given strides.
void check_rows(const std::string& name, const void* out, int64_t stride_token,
                int64_t stride_head, const MergeStatesArgs& args) {
  check_aligned(name, out);
  check_stride(name + "_stride_head", stride_head, args.head_dim, args.dtype);
  check_stride(name + "_stride_token", stride_token,
               (int64_t{args.num_heads} - 1) * stride_head + args.head_dim, args.dtype);
}

// An in-place merge reads a row of the part and writes the same row: with other strides, a
// row written first would be read later as another row of the part.
void check_in_place(const MergeStatesArgs& args, int c) {
  const AttentionState& part = args.parts[c];
  if (part.out != args.out) return;
  if (part.out_stride_token != args.out_stride_token ||
      part.out_stride_head != args.out_stride_head) {
    invalid(fmt::format("out is parts[{}].out but with other strides (out: {}, {}; the part: "
                        "{}, {}): an in-place merge needs the part's strides",
                        c, args.out_stride_token, args.out_stride_head, part.out_stride_token,
                        part.out_stride_head));
  }
}

}  // namespace

void validate_merge_states_args(const MergeStatesArgs& args) {
  check_counts(args);
  check_kinds(args);
  if (args.num_tokens == 0) return;  // nothing is read or written
  check_rows("out", args.out, args.out_stride_token, args.out_stride_head, args);
  check_lse_pointer("lse", args.lse, false);
  for (int c = 0; c < args.num_parts; ++c) {
    const AttentionState& part = args.parts[c];
    const std::string name = fmt::format("parts[{}].out", c);
    check_rows(name, part.out, part.out_stride_token, part.out_stride_head, args);
    check_lse_pointer(fmt::format("parts[{}].lse", c), part.lse, true);
    check_in_place(args, c);
  }
}

}  // namespace mlajit
