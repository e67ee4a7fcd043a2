#include "family/fleet_matrix.h"

#include <algorithm>
#include <cctype>
#include <optional>

#include <fmt/format.h>

#include "family/family_registry.h"
#include "jit/device_profiles.h"
#include "jit/utility_programs.h"
#include "mlajit/error.h"

namespace mlajit::family {
namespace {

std::string supported_list() {
  std::vector<std::string> texts;
  for (const HeadDims& dims : all_head_dims()) texts.push_back(head_dims_text(dims));
  return fmt::format("{}", fmt::join(texts, ", "));
}

bool all_digits(const std::string& text) {
  return !text.empty() && text.size() <= 6 &&
         std::all_of(text.begin(), text.end(), [](unsigned char c) { return std::isdigit(c); });
}

std::vector<DeviceTarget> targets_for(const FleetMatrixOptions& options) {
  std::vector<std::string> archs = options.archs;
  if (archs.empty()) {
    for (const auto& profile : jit::device_profiles()) archs.push_back(profile.arch);
  }
  std::vector<DeviceTarget> targets;
  for (const auto& arch : archs) {
    DeviceTarget target = profile_target(arch);  // throws naming the known archs
    if (options.smem) {
      target.smem_per_sm = options.smem->smem_per_sm;
      target.smem_per_block_optin = options.smem->smem_per_block_optin;
    }
    targets.push_back(std::move(target));
  }
  return targets;
}

std::vector<const KernelFamily*> families_for(const std::string& kernel) {
  if (kernel == kAutoFamily) return kernel_families();
  return {&find_family(kernel)};
}

template <typename T>
bool kept(const std::vector<T>& filter, const T& value) {
  return filter.empty() || std::find(filter.begin(), filter.end(), value) != filter.end();
}

bool row_kept(const FleetMatrixOptions& options, const MlaShape& shape) {
  return kept(options.dtypes, shape.dtype) && kept(options.kv_dtypes, shape.effective_kv_dtype()) &&
         kept(options.head_dims, HeadDims{shape.head_dim_ckv, shape.head_dim_kpe});
}

std::string row_text(const MlaShape& shape) {
  const DType kv = shape.effective_kv_dtype();
  const std::string scales = shape.kv_scales == KvScales::kPerTensor
                                 ? ""
                                 : fmt::format(" kv_scales={}", kv_scales_name(shape.kv_scales));
  return fmt::format("{}{}{} {}/{}", dtype_name(shape.dtype),
                     kv != shape.dtype ? fmt::format(" kv={}", dtype_name(kv)) : "", scales,
                     shape.head_dim_ckv, shape.head_dim_kpe);
}

void add_spec(const KernelSpec& spec, std::vector<KernelSpec>* specs) {
  const auto same = [&](const KernelSpec& other) { return other.text() == spec.text(); };
  if (std::none_of(specs->begin(), specs->end(), same)) specs->push_back(spec);
}

// Appends the specs of one family's rows on one target, each followed by the program that
// merges its split tiles if it has one; a row the family cannot build there is an error when
// both the family and the archs were asked for by name, else noted in `skipped` (a named
// family over the default archs covers the archs it runs on).
void add_family_rows(const KernelFamily& family, const DeviceTarget& target,
                     const FleetMatrixOptions& options, std::vector<KernelSpec>* specs,
                     std::vector<std::string>* skipped) {
  for (const MlaShape& shape : family.fleet_shapes()) {
    if (!row_kept(options, shape)) continue;
    const std::string reason = family.unsupported_reason(shape, target);
    if (!reason.empty()) {
      const std::string what = fmt::format("kernel family '{}' cannot build {} for {}: {}",
                                           family.name(), row_text(shape), target.arch, reason);
      if (options.kernel != kAutoFamily && !options.archs.empty()) {
        throw Error(ErrorCode::kUnsupported, what);
      }
      skipped->push_back(what);
      continue;
    }
    for (const KernelSpec& spec : family.fleet_specs(shape, target, options.all_tiers)) {
      add_spec(spec, specs);
      if (const std::optional<KernelSpec> merge = family.merge_spec(spec)) add_spec(*merge, specs);
    }
  }
}

bool no_row_filter(const FleetMatrixOptions& options) {
  return options.dtypes.empty() && options.kv_dtypes.empty() && options.head_dims.empty();
}

// merge_states (merge_states.h) compiles once per arch and serves every dtype and head dim;
// it loads by the device's own arch (sm_90, never sm_90a), so arch-specific and PTX targets
// get none.
void add_utility_rows(const DeviceTarget& target, std::vector<KernelSpec>* specs) {
  const std::string& arch = target.arch;
  if (arch.rfind("sm_", 0) != 0 || arch.back() == 'a') return;
  KernelSpec spec;
  spec.family = jit::kMergeStatesProgram;
  spec.arch = arch;
  add_spec(spec, specs);
}

}  // namespace

HeadDims parse_head_dims(const std::string& text) {
  const auto slash = text.find('/');
  const std::string ckv = slash == std::string::npos ? "" : text.substr(0, slash);
  const std::string kpe = slash == std::string::npos ? "" : text.substr(slash + 1);
  if (!all_digits(ckv) || !all_digits(kpe)) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("head dims '{}' are not CKV/KPE (e.g. 512/64); supported: {}", text,
                            supported_list()));
  }
  const HeadDims dims{std::stoi(ckv), std::stoi(kpe)};
  const auto supported = all_head_dims();
  if (std::find(supported.begin(), supported.end(), dims) == supported.end()) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("head dims {} are not implemented by any kernel family; supported: {}",
                            text, supported_list()));
  }
  return dims;
}

std::vector<KernelSpec> fleet_matrix(const FleetMatrixOptions& options) {
  const std::vector<const KernelFamily*> families = families_for(options.kernel);
  std::vector<KernelSpec> specs;
  std::vector<std::string> skipped;
  for (const DeviceTarget& target : targets_for(options)) {
    for (const KernelFamily* family : families) {
      add_family_rows(*family, target, options, &specs, &skipped);
    }
  }
  // The default matrix is what a fleet runs without NVRTC: the families' kernels and the
  // utility programs of the public API. Filtered or one family's matrices hold what was asked.
  if (options.kernel == kAutoFamily && no_row_filter(options) && !specs.empty()) {
    for (const DeviceTarget& target : targets_for(options)) add_utility_rows(target, &specs);
  }
  if (!specs.empty()) return specs;
  if (!skipped.empty()) {
    throw Error(ErrorCode::kUnsupported,
                fmt::format("the precompile matrix is empty: {}", fmt::join(skipped, "; ")));
  }
  throw Error(ErrorCode::kInvalidArgument,
              "the precompile matrix is empty: no kernel family has a row with the asked dtypes "
              "and head dims");
}

}  // namespace mlajit::family
