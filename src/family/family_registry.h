#pragma once
// The kernel families, in preference order, and the one choice of a family for a shape on a
// device. Adding a family is one line in family_registry.cpp.
#include <string>
#include <vector>

#include "family/device_target.h"
#include "family/kernel_family.h"
#include "mlajit/attention.h"

namespace mlajit::family {

// What MlaOptions::kernel names to let the registry choose.
constexpr const char* kAutoFamily = "auto";

// Every family, best first: `auto` takes the first one that supports a shape and is eligible.
const std::vector<const KernelFamily*>& kernel_families();
// nullptr when no family has that name (utility programs are not families).
const KernelFamily* family_named(const std::string& name) noexcept;
// Throws Error(kInvalidArgument) listing the known names (and "auto").
const KernelFamily& find_family(const std::string& name);
// Every family's head-dim pairs, without repeats, in registry order.
std::vector<HeadDims> all_head_dims();

// What can be known without a device: `requested` ("auto" or a name) is a family, and that
// family (with "auto": some family) computes `shape` on some device. Throws
// Error(kInvalidArgument) for an unknown name, Error(kUnsupported) saying why otherwise.
void check_request(const MlaShape& shape, const std::string& requested);
// The family that computes `shape` on `target`: `requested` if it can, or with "auto" the first
// eligible family that can. A nonzero `force_tier` (MlaOptions) needs a family with tile tiers:
// "auto" then takes the first such family, a named family without tiers is refused. Throws as
// check_request, and Error(kUnsupported) with each family's reason when none can.
const KernelFamily& select_family(const MlaShape& shape, const DeviceTarget& target,
                                  const std::string& requested, int force_tier = 0);

}  // namespace mlajit::family
