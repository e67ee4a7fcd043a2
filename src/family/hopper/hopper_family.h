#pragma once
// The hopper family: the wgmma + TMA kernel (kernels/hopper/mla_hopper.cuh) for compute
// capability 9.0 (H100, H200, H800, H20), compiled for the arch-specific target sm_90a.
#include "family/kernel_family.h"

namespace mlajit::family::hopper {

const KernelFamily& family();

}  // namespace mlajit::family::hopper
