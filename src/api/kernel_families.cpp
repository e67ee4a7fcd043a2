// kernel_families / kernel_family of the public runtime API, from the family registry.
#include "family/family_registry.h"
#include "jit/device_profiles.h"
#include "mlajit/runtime.h"

namespace mlajit {
namespace {

// Profiled archs where the family serves at least one of its fleet shapes.
std::vector<std::string> served_archs(const family::KernelFamily& kernels) {
  std::vector<std::string> archs;
  for (const jit::DeviceProfile& profile : jit::device_profiles()) {
    const family::DeviceTarget target = family::profile_target(profile.arch);
    for (const MlaShape& shape : kernels.fleet_shapes()) {
      if (kernels.unsupported_reason(shape, target).empty()) {
        archs.push_back(profile.arch);
        break;
      }
    }
  }
  return archs;
}

KernelFamilyInfo info_of(const family::KernelFamily& kernels) {
  KernelFamilyInfo info;
  info.name = kernels.name();
  info.summary = kernels.summary();
  for (const family::HeadDims& dims : kernels.head_dims()) {
    info.head_dims.push_back(family::head_dims_text(dims));
  }
  info.archs = served_archs(kernels);
  return info;
}

}  // namespace

std::vector<KernelFamilyInfo> kernel_families() {
  std::vector<KernelFamilyInfo> all;
  for (const family::KernelFamily* kernels : family::kernel_families()) {
    all.push_back(info_of(*kernels));
  }
  return all;
}

KernelFamilyInfo kernel_family(const std::string& name) {
  return info_of(family::find_family(name));
}

}  // namespace mlajit
