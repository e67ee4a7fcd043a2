// `mlajit info`: what this host offers the library: versions, compiler, driver, the kernel
// families, the kernel each GPU (and each profiled arch) gets for the default shape, and the
// cache layers.
#include <algorithm>
#include <map>
#include <memory>

#include <fmt/format.h>

#include "cache_listing.h"
#include "commands.h"
#include "mlajit/error.h"
#include "mlajit/kernel_cache.h"
#include "mlajit/runtime.h"

namespace mlajit::cli {
namespace {

struct InfoArgs {
  bool json = false;
  bool gpu_count = false;
  std::string cache_dir;
};

struct LayerSummary {
  std::string layer, dir;
  size_t entries = 0;
  uint64_t bytes = 0;
  bool writable = false;
};

// The kernel the default shape (MlaShape{}: DeepSeek, 512/64 bf16) gets on a device or an
// arch's profile, or why none serves it.
struct DefaultKernel {
  TileChoice choice;
  std::string error;
};

std::string version_text(int version) {  // 13000 -> "13.0"
  return fmt::format("{}.{}", version / 1000, version % 1000 / 10);
}

std::string join_ints(const std::vector<int>& values) {
  std::string text;
  for (int value : values) text += (text.empty() ? "" : " ") + std::to_string(value);
  return text;
}

template <typename Choose>
DefaultKernel default_kernel(const Choose& choose) {
  DefaultKernel kernel;
  try {
    kernel.choice = choose();
  } catch (const Error& e) {
    kernel.error = e.what();
  }
  return kernel;
}

DefaultKernel device_kernel(int ordinal) {
  return default_kernel([&] { return tile_for(ordinal, MlaShape{}); });
}

DefaultKernel arch_kernel(const std::string& arch) {
  return default_kernel([&] { return tile_for_arch(arch, MlaShape{}); });
}

// Every arch some family serves, in profile order.
std::vector<std::string> profiled_archs(const std::vector<KernelFamilyInfo>& families) {
  std::vector<std::string> archs;
  for (const auto& family : families) {
    for (const auto& arch : family.archs) {
      if (std::find(archs.begin(), archs.end(), arch) == archs.end()) archs.push_back(arch);
    }
  }
  return archs;
}

// No driver: no GPUs (info reports the driver's state on its own line).
std::vector<DeviceSummary> gpus() {
  if (!driver_available()) return {};
  return devices();
}

CacheSettings cache_layers(const std::string& cache_dir, std::vector<LayerSummary>* layers) {
  KernelCache cache(cache_settings_for(cache_dir));
  std::map<std::string, std::pair<size_t, uint64_t>> per_dir;  // entries, bytes
  for (const auto& entry : cache.list()) {
    ++per_dir[entry.dir].first;
    per_dir[entry.dir].second += entry.bytes;
  }
  const CacheSettings& settings = cache.settings();
  for (const auto& dir : settings.read_only_dirs) {
    layers->push_back({"shipped", dir, per_dir[dir].first, per_dir[dir].second, false});
  }
  if (!settings.user_dir.empty()) {
    const auto& totals = per_dir[settings.user_dir];
    layers->push_back({"user", settings.user_dir, totals.first, totals.second,
                       cache.user_dir_writable()});
  }
  return settings;
}

Json nvrtc_json() {
  const CompilerInfo compiler = compiler_info();
  Json nvrtc = Json::object();
  nvrtc.set("available", compiler.available);
  if (!compiler.available) return nvrtc.set("reason", compiler.unavailable_reason);
  Json archs = Json::array();
  for (int arch : compiler.supported_archs) archs.push(arch);
  nvrtc.set("version", version_text(compiler.version)).set("path", compiler.library_path);
  return nvrtc.set("supported_archs", std::move(archs));
}

Json driver_json() {
  Json driver = Json::object();
  const bool available = driver_available();
  driver.set("available", available);
  if (!available) return driver.set("reason", driver_unavailable_reason());
  return driver.set("version", version_text(driver_version()));
}

Json kernel_json(const DefaultKernel& kernel) {
  Json json = Json::object();
  if (!kernel.error.empty()) return json.set("error", kernel.error);
  const TileChoice& c = kernel.choice;
  json.set("family", c.family).set("spec", c.spec_text).set("tier", c.tier);
  json.set("num_stages", c.tile.num_stages).set("kv_tile", c.tile.kv_tile);
  json.set("qk_shard", c.tile.qk_shard).set("q_tile", c.tile.q_tile);
  return json.set("smem_bytes", c.shared_bytes);
}

Json strings_json(const std::vector<std::string>& values) {
  Json list = Json::array();
  for (const auto& value : values) list.push(value);
  return list;
}

Json families_json(const std::vector<KernelFamilyInfo>& families) {
  Json list = Json::array();
  for (const auto& family : families) {
    Json entry = Json::object();
    entry.set("name", family.name).set("summary", family.summary);
    entry.set("head_dims", strings_json(family.head_dims)).set("archs", strings_json(family.archs));
    list.push(std::move(entry));
  }
  return list;
}

Json archs_json(const std::vector<KernelFamilyInfo>& families) {
  Json archs = Json::object();
  for (const auto& arch : profiled_archs(families)) archs.set(arch, kernel_json(arch_kernel(arch)));
  return archs;
}

Json gpus_json(const std::vector<DeviceSummary>& found) {
  Json gpus = Json::array();
  for (const auto& device : found) {
    Json gpu = Json::object();
    gpu.set("ordinal", device.ordinal).set("name", device.name).set("arch", device.arch);
    gpu.set("sm_count", device.sm_count).set("smem_per_sm", device.smem_per_sm);
    gpu.set("smem_per_block_optin", device.smem_per_block_optin).set("l2_bytes", device.l2_bytes);
    gpu.set("cooperative_launch", device.cooperative_launch);
    gpu.set("default_shape_kernel", kernel_json(device_kernel(device.ordinal)));
    gpus.push(std::move(gpu));
  }
  return gpus;
}

Json cache_json(const std::string& cache_dir) {
  std::vector<LayerSummary> layers;
  const CacheSettings settings = cache_layers(cache_dir, &layers);
  Json layers_json = Json::array();
  for (const auto& layer : layers) {
    Json entry = Json::object();
    entry.set("layer", layer.layer).set("dir", layer.dir);
    entry.set("entries", layer.entries).set("bytes", layer.bytes);
    if (layer.layer == "user") entry.set("writable", layer.writable);
    layers_json.push(std::move(entry));
  }
  Json json = Json::object();
  json.set("layers", std::move(layers_json)).set("max_bytes", settings.max_bytes);
  return json.set("no_jit", settings.no_jit).set("lock_wait_ms", settings.lock_wait_ms);
}

std::string kernel_text(const DefaultKernel& kernel) {
  if (!kernel.error.empty()) return "no kernel: " + kernel.error;
  const TileChoice& c = kernel.choice;
  const std::string tier = c.tier != 0 ? fmt::format(" tier {}", c.tier) : "";  // 0: no tiers
  return fmt::format("{}{} ({} B smem): {}", c.family, tier, c.shared_bytes, c.spec_text);
}

void print_families(const std::vector<KernelFamilyInfo>& families) {
  for (const auto& family : families) {
    std::printf("family  %s: %s; head dims %s; archs %s\n", family.name.c_str(),
                family.summary.c_str(), fmt::format("{}", fmt::join(family.head_dims, " ")).c_str(),
                fmt::format("{}", fmt::join(family.archs, " ")).c_str());
  }
}

// Without a GPU (or besides it): what each profiled arch gets, as precompile builds it.
void print_archs(const std::vector<KernelFamilyInfo>& families) {
  for (const auto& arch : profiled_archs(families)) {
    std::printf("arch    %-7s default shape gets %s\n", arch.c_str(),
                kernel_text(arch_kernel(arch)).c_str());
  }
}

void print_toolchain() {
  std::printf("mlajit  %s\n", version());
  const CompilerInfo compiler = compiler_info();
  if (compiler.available) {
    std::printf("NVRTC   %s (%s); archs %s\n", version_text(compiler.version).c_str(),
                compiler.library_path.c_str(), join_ints(compiler.supported_archs).c_str());
  } else {
    std::printf("NVRTC   unavailable: %s\n", compiler.unavailable_reason.c_str());
  }
  if (!driver_available()) {
    std::printf("driver  unavailable: %s\n", driver_unavailable_reason().c_str());
  } else {
    std::printf("driver  CUDA %s\n", version_text(driver_version()).c_str());
  }
}

void print_gpus(const std::vector<DeviceSummary>& found) {
  if (found.empty()) std::printf("GPUs    none\n");
  for (const auto& device : found) {
    std::printf("GPU %d   %s, %s, %d SMs, smem %d B/SM, %d B/block; default shape gets %s\n",
                device.ordinal, device.name.c_str(), device.arch.c_str(), device.sm_count,
                device.smem_per_sm, device.smem_per_block_optin,
                kernel_text(device_kernel(device.ordinal)).c_str());
  }
}

void print_cache(const std::string& cache_dir) {
  std::vector<LayerSummary> layers;
  const CacheSettings settings = cache_layers(cache_dir, &layers);
  for (const auto& layer : layers) {
    std::printf("cache   %-7s %s: %zu entries, %s%s\n", layer.layer.c_str(), layer.dir.c_str(),
                layer.entries, human_bytes(layer.bytes).c_str(),
                layer.layer == "user" && !layer.writable ? " (not writable)" : "");
  }
  std::printf("cache   budget %s, no-JIT %s, lock wait %lld ms\n",
              settings.max_bytes ? human_bytes(settings.max_bytes).c_str() : "unlimited",
              settings.no_jit ? "on" : "off", static_cast<long long>(settings.lock_wait_ms));
}

int run_info(const InfoArgs& args) {
  if (args.gpu_count) {
    // A script branches on this number: a broken driver counts as no GPU, said on stderr.
    size_t count = 0;
    std::string why_none;
    try {
      count = gpus().size();
      if (!driver_available()) why_none = driver_unavailable_reason();
    } catch (const Error& e) {
      why_none = e.what();
    }
    if (!why_none.empty()) std::fprintf(stderr, "mlajit info: no usable GPU: %s\n", why_none.c_str());
    std::printf("%zu\n", count);
    return kExitOk;
  }
  const auto found = gpus();
  const auto families = kernel_families();
  if (args.json) {
    Json report = Json::object();
    report.set("version", version()).set("nvrtc", nvrtc_json());
    report.set("driver", driver_json()).set("families", families_json(families));
    report.set("gpus", gpus_json(found)).set("archs", archs_json(families));
    report.set("cache", cache_json(args.cache_dir));
    std::printf("%s\n", report.dump().c_str());
    return kExitOk;
  }
  print_toolchain();
  print_families(families);
  print_gpus(found);
  print_archs(families);
  print_cache(args.cache_dir);
  return kExitOk;
}

}  // namespace

Command add_info_command(CLI::App& parent) {
  auto args = std::make_shared<InfoArgs>();
  CLI::App* app = parent.add_subcommand(
      "info",
      "Show the library version, NVRTC and driver (or why they are unavailable), the kernel "
      "families, the kernel (family, tier, spec) each GPU and each profiled arch gets for the "
      "default MlaShape (DeepSeek-V3), and the cache layers.");
  app->add_flag("--json", args->json, "print as JSON on stdout (\"gpus\" is always an array)");
  app->add_flag("--gpu-count", args->gpu_count,
                "print only the number of GPUs (0 without a driver) and exit 0");
  app->add_option("--cache-dir", args->cache_dir,
                  "describe this cache directory instead of the layers from the environment");
  return {app, [args] { return run_info(*args); }};
}

}  // namespace mlajit::cli
