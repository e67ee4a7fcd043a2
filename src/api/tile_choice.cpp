// tile_for / tile_for_arch: the same choice BatchMlaAttention makes, without building it.
#include "attention/mla_spec.h"
#include "attention/run_args_validation.h"
#include "driver/cuda_driver.h"
#include "jit/tile_config.h"
#include "mlajit/runtime.h"

namespace mlajit {
namespace {

// The spec BatchMlaAttention would run for `shape` on a device with these limits.
TileChoice choose(const MlaShape& shape, const std::string& arch, int smem_per_sm,
                  int smem_per_block_optin) {
  validate_shape(shape);
  const KernelSpec spec = mla_spec_for(shape, arch, smem_per_sm, smem_per_block_optin);
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
  return choose(shape, jit::target_arch(arch, profile), profile.smem_per_sm,
                profile.smem_per_block_optin);
}

}  // namespace mlajit
