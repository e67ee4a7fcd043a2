#pragma once
// C structs <-> C++ structs of the public API.
#include "mlajit/attention.h"
#include "mlajit/mlajit.h"
#include "mlajit/runtime.h"

namespace mlajit::capi {

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
