// Device profiles per arch, for choosing and precompiling kernels without the GPU.
#include "jit/device_profiles.h"

#include <fmt/format.h>

#include "mlajit/error.h"

namespace mlajit::jit {

namespace {

constexpr int kKiB = 1024;
// Per-SM shared memory and the per-block opt-in maximum: CUDA C++ Programming Guide,
// "Technical Specifications per Compute Capability" (max shared memory per SM / per block).
// sm_count is one typical part's count, used only for planning defaults without a GPU.
constexpr const char* kGuide = "CUDA C++ Programming Guide, technical specifications table";

// "sm_90a" / "compute_90" / "sm_100f" / "90" -> "90" / "90" / "100" / "90"; "" when not an arch.
std::string arch_digits(const std::string& arch) {
  std::string digits = arch;
  if (digits.rfind("sm_", 0) == 0) digits = digits.substr(3);
  else if (digits.rfind("compute_", 0) == 0) digits = digits.substr(8);
  if (!digits.empty() && (digits.back() == 'a' || digits.back() == 'f')) digits.pop_back();
  const bool number = digits.size() >= 2 && digits.size() <= 3 &&
                      digits.find_first_not_of("0123456789") == std::string::npos;
  return number ? digits : "";
}

std::string known_archs() {
  std::vector<std::string> names;
  for (const auto& profile : device_profiles()) names.push_back(profile.arch);
  return fmt::format("{}", fmt::join(names, ", "));
}

}  // namespace

const std::vector<DeviceProfile>& device_profiles() {
  static const std::vector<DeviceProfile> profiles = {
      {"sm_80", 164 * kKiB, 163 * kKiB, 108, "A100", kGuide},
      {"sm_86", 100 * kKiB, 99 * kKiB, 82, "RTX 3090 (A10: 72 SMs)", kGuide},
      {"sm_87", 164 * kKiB, 163 * kKiB, 16, "Jetson AGX Orin", kGuide},
      {"sm_89", 100 * kKiB, 99 * kKiB, 142, "L40S", kGuide},
      // 228 KiB = 233,472 B per SM measured on the H200 (see notes/cuda-facts.md).
      {"sm_90", 228 * kKiB, 227 * kKiB, 132, "H100 / H200 SXM", kGuide},
      {"sm_100", 228 * kKiB, 227 * kKiB, 148, "B200", kGuide},
      {"sm_103", 228 * kKiB, 227 * kKiB, 148, "B300 (SM count approximate)", kGuide},
      {"sm_110", 228 * kKiB, 227 * kKiB, 20, "Jetson Thor", kGuide},
      {"sm_120", 100 * kKiB, 99 * kKiB, 170, "RTX 5090", kGuide},
      {"sm_121", 100 * kKiB, 99 * kKiB, 48, "DGX Spark (GB10)", kGuide},
  };
  return profiles;
}

const DeviceProfile& device_profile(const std::string& arch) {
  const std::string base = "sm_" + arch_digits(arch);
  for (const auto& profile : device_profiles()) {
    if (profile.arch == base) return profile;
  }
  throw Error(ErrorCode::kInvalidArgument,
              fmt::format("no device profile for arch '{}'; known archs: {}", arch, known_archs()));
}

std::string target_arch(const std::string& requested, const DeviceProfile& profile) {
  const bool bare_number = !requested.empty() &&
                           requested.find_first_not_of("0123456789") == std::string::npos;
  return bare_number ? profile.arch : requested;
}

ComputeCapability compute_capability(const std::string& arch) {
  const std::string digits = arch_digits(arch);
  if (digits.empty()) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("arch '{}' is not sm_XX, sm_XXa, sm_XXf, compute_XX or XX", arch));
  }
  return {std::stoi(digits.substr(0, digits.size() - 1)), digits.back() - '0'};
}

}  // namespace mlajit::jit
