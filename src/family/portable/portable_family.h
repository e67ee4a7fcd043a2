#pragma once
// The portable family: the FA2-style kernel (kernels/portable/mla_fa2.cuh) for every arch
// from sm_80, in three shared-memory tiers (portable_tiles.h).
#include "family/kernel_family.h"

namespace mlajit::family::portable {

const KernelFamily& family();

}  // namespace mlajit::family::portable
