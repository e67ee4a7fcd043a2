// tile_for / tile_for_arch: the same choice BatchMlaAttention makes, without building it.
#include "attention/run_args_validation.h"
#include "driver/cuda_driver.h"
#include "jit/tile_config.h"
#include "mlajit/runtime.h"

namespace mlajit {
namespace {

// Mirrors make_spec() of batch_mla_attention.cpp (without force_tier): the spec of a shape
// on a device with these shared-memory limits.
TileChoice choose(const MlaShape& shape, const std::string& arch, int smem_per_sm,
                  int smem_per_block_optin) {
  validate_shape(shape);
  KernelSpec spec;
  spec.family = "mla_fa2";
  spec.q_dtype = spec.kv_dtype = spec.o_dtype = shape.dtype;
  spec.head_dim_ckv = shape.head_dim_ckv;
  spec.head_dim_kpe = shape.head_dim_kpe;
  spec.causal = shape.causal;
  spec.arch = arch;
  spec.tile = jit::select_tile_config(spec, smem_per_sm, smem_per_block_optin);
  TileChoice choice;
  choice.tile = spec.tile;
  choice.tier = jit::tier_of(spec.tile);
  choice.shared_bytes = jit::mla_shared_storage_bytes(spec, spec.tile);
  choice.spec_text = spec.text();
  return choice;
}

}  // namespace

TileChoice tile_for(int ordinal, const MlaShape& shape) {
  validate_shape(shape);  // a bad shape is reported as such, also without a GPU
  const driver::DeviceInfo info = driver::device_info(ordinal);
  return choose(shape, info.arch(), info.smem_per_sm, info.smem_per_block_optin);
}

TileChoice tile_for_arch(const std::string& arch, const MlaShape& shape) {
  validate_shape(shape);
  const jit::DeviceProfile& profile = jit::device_profile(arch);
  return choose(shape, arch, profile.smem_per_sm, profile.smem_per_block_optin);
}

}  // namespace mlajit
