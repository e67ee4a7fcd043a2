#include "family/family_registry.h"

#include <algorithm>

#include <fmt/format.h>

#include "family/hopper/hopper_family.h"
#include "family/portable/portable_family.h"
#include "mlajit/error.h"

namespace mlajit::family {
namespace {

std::string known_names() {
  std::vector<std::string> names{kAutoFamily};
  for (const KernelFamily* family : kernel_families()) names.push_back(family->name());
  return fmt::format("{}", fmt::join(names, ", "));
}

// "portable: <why>; hopper: <why>" for every family's refusal.
template <typename Reason>
std::string reasons_of_all(const Reason& reason) {
  std::vector<std::string> reasons;
  for (const KernelFamily* family : kernel_families()) {
    reasons.push_back(fmt::format("{}: {}", family->name(), reason(*family)));
  }
  return fmt::format("{}", fmt::join(reasons, "; "));
}

}  // namespace

const std::vector<const KernelFamily*>& kernel_families() {
  static const std::vector<const KernelFamily*> families{
      &hopper::family(),
      &portable::family(),
  };
  return families;
}

const KernelFamily* family_named(const std::string& name) noexcept {
  for (const KernelFamily* family : kernel_families()) {
    if (name == family->name()) return family;
  }
  return nullptr;
}

const KernelFamily& find_family(const std::string& name) {
  if (const KernelFamily* family = family_named(name)) return *family;
  throw Error(ErrorCode::kInvalidArgument,
              fmt::format("kernel '{}' is not a kernel family: expected one of {}", name,
                          known_names()));
}

std::vector<HeadDims> all_head_dims() {
  std::vector<HeadDims> all;
  for (const KernelFamily* family : kernel_families()) {
    for (const HeadDims& dims : family->head_dims()) {
      if (std::find(all.begin(), all.end(), dims) == all.end()) all.push_back(dims);
    }
  }
  return all;
}

void check_request(const MlaShape& shape, const std::string& requested) {
  if (requested != kAutoFamily) {
    const std::string reason = find_family(requested).shape_unsupported_reason(shape);
    if (!reason.empty()) throw Error(ErrorCode::kUnsupported, reason);
    return;
  }
  for (const KernelFamily* family : kernel_families()) {
    if (family->shape_unsupported_reason(shape).empty()) return;
  }
  throw Error(ErrorCode::kUnsupported,
              fmt::format("no kernel family computes this shape: {}",
                          reasons_of_all([&](const KernelFamily& family) {
                            return family.shape_unsupported_reason(shape);
                          })));
}

const KernelFamily& select_family(const MlaShape& shape, const DeviceTarget& target,
                                  const std::string& requested, int force_tier) {
  if (requested != kAutoFamily) {
    const KernelFamily& family = find_family(requested);
    if (force_tier != 0 && !family.has_tile_tiers()) {
      throw Error(ErrorCode::kUnsupported,
                  fmt::format("force_tier={} picks a tile tier, and kernel family '{}' has one "
                              "tile config: leave force_tier at 0 or name the portable family",
                              force_tier, requested));
    }
    const std::string reason = family.unsupported_reason(shape, target);
    if (!reason.empty()) {
      throw Error(ErrorCode::kUnsupported,
                  fmt::format("kernel family '{}' cannot run this shape on {}: {}", requested,
                              target.arch, reason));
    }
    return family;
  }
  for (const KernelFamily* family : kernel_families()) {
    if (family->unsupported_reason(shape, target).empty() &&
        family->auto_eligible(shape, target) && (force_tier == 0 || family->has_tile_tiers())) {
      return *family;
    }
  }
  throw Error(ErrorCode::kUnsupported,
              fmt::format("no kernel family runs this shape on {}: {}", target.arch,
                          reasons_of_all([&](const KernelFamily& family) {
                            const std::string reason = family.unsupported_reason(shape, target);
                            return reason.empty() ? std::string("not chosen automatically")
                                                  : reason;
                          })));
}

}  // namespace mlajit::family
