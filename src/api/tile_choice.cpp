// tile_for / tile_for_arch: the same choice BatchMlaAttention makes, without building it.
#include "attention/kernel_choice.h"
#include "attention/run_args_validation.h"
#include "driver/cuda_driver.h"
#include "mlajit/runtime.h"

namespace mlajit {
namespace {

TileChoice choose(const MlaShape& shape, const family::DeviceTarget& target,
                  const MlaOptions& options) {
  const MlaKernelChoice kernel = choose_kernel(shape, target, options);
  TileChoice choice;
  choice.family = kernel.family->name();
  choice.tile = kernel.spec.tile;
  choice.tier = kernel.family->tier_of(kernel.spec);
  choice.shared_bytes = kernel.family->program(kernel.spec).geometry.dynamic_smem_bytes;
  choice.spec_text = kernel.spec.text();
  return choice;
}

}  // namespace

TileChoice tile_for(int ordinal, const MlaShape& shape, const MlaOptions& options) {
  validate_shape_and_options(shape, options);  // a bad shape is reported as such, also without a GPU
  return choose(shape, device_target(driver::device_info(ordinal)), options);
}

TileChoice tile_for_arch(const std::string& arch, const MlaShape& shape,
                         const MlaOptions& options) {
  validate_shape_and_options(shape, options);
  return choose(shape, family::profile_target(arch), options);
}

}  // namespace mlajit
