#pragma once
// C structs <-> C++ structs of the public API.
#include <cstddef>

#include "mlajit/attention.h"
#include "mlajit/mlajit.h"
#include "mlajit/runtime.h"

namespace mlajit::capi {

// Each struct's first layout (see check_size): the offset of its first appended field.
inline constexpr size_t kShapeFirstLayout = offsetof(mlajit_shape, kv_dtype);
inline constexpr size_t kOptionsFirstLayout = offsetof(mlajit_options, kernel);
inline constexpr size_t kBatchFirstLayout = sizeof(mlajit_batch);
inline constexpr size_t kRunArgsFirstLayout = offsetof(mlajit_run_args, kv_scale_ckv);
inline constexpr size_t kMergeStatesArgsFirstLayout = sizeof(mlajit_merge_states_args);

// What the unsized mlajit_*_init symbols fill, for programs built against a header before the
// sized ones: 0.2.0's last layout, which they were built against, as the end of its last field
// (rounded to the struct's alignment), so that a field appended later leaves it as it is.
template <typename T>
constexpr size_t layout_end(size_t last_field_offset, size_t last_field_size) {
  return (last_field_offset + last_field_size + alignof(T) - 1) / alignof(T) * alignof(T);
}
inline constexpr size_t kShapeUnsizedInit =
    layout_end<mlajit_shape>(offsetof(mlajit_shape, kv_scales), sizeof(mlajit_kv_scales));
inline constexpr size_t kOptionsUnsizedInit =
    layout_end<mlajit_options>(offsetof(mlajit_options, invariant_chunk_tokens), sizeof(int32_t));
inline constexpr size_t kBatchUnsizedInit =
    layout_end<mlajit_batch>(offsetof(mlajit_batch, num_pages), sizeof(int64_t));
inline constexpr size_t kRunArgsUnsizedInit =
    layout_end<mlajit_run_args>(offsetof(mlajit_run_args, ckv_scales_stride_token), sizeof(int64_t));
inline constexpr size_t kMergeStatesArgsUnsizedInit = layout_end<mlajit_merge_states_args>(
    offsetof(mlajit_merge_states_args, device), sizeof(int32_t));
static_assert(kShapeUnsizedInit == sizeof(mlajit_shape) &&
                  kOptionsUnsizedInit == sizeof(mlajit_options) &&
                  kBatchUnsizedInit == sizeof(mlajit_batch) &&
                  kRunArgsUnsizedInit == sizeof(mlajit_run_args) &&
                  kMergeStatesArgsUnsizedInit == sizeof(mlajit_merge_states_args),
              "today the unsized init symbols fill the whole struct; once a field is appended, "
              "change this check to <=, not the constants");

mlajit_shape default_shape();
mlajit_options default_options();
mlajit_batch default_batch();
mlajit_run_args default_run_args();

// Throw Error(kInvalidArgument) naming `name` for a value outside the enum.
DType to_dtype(mlajit_dtype dtype, const char* name);
LseBase to_lse_base(mlajit_lse_base base, const char* name);
KvScales to_kv_scales(mlajit_kv_scales scales);

// Read (struct_size checked, missing fields defaulted) and convert; throw Error on bad input.
MlaShape to_shape(const mlajit_shape* shape);
MlaOptions to_options(const mlajit_options* options);  // NULL: defaults
MlaBatch to_batch(const mlajit_batch* batch);
MlaRunArgs to_run_args(const mlajit_run_args* args);

mlajit_tile_info to_tile_info(const TileChoice& choice);
mlajit_kernel_family_info to_kernel_family_info(const KernelFamilyInfo& family);

}  // namespace mlajit::capi
