#include "jit/kernel_registry.h"

#include <cuda.h>

#include <chrono>
#include <sstream>
#include <stdexcept>

#include <fmt/format.h>

#include "common/logging.h"
#include "jit/codegen.h"
#include "jit/isolated_compile.h"
#include "jit/nvrtc_compiler.h"
#include "mlajit/error.h"

namespace mlajit::jit {
namespace {

// Without NVRTC (cache-only hosts) the version of the toolkit the library was built against
// stands in, so that a cache precompiled with that toolkit is found.
int compiler_version_for_key() {
  const auto& compiler = NvrtcCompiler::instance();
  if (compiler.available()) return compiler.version();
  return CUDA_VERSION / 1000 * 1000 + (CUDA_VERSION % 1000) / 10 * 10;
}

std::string join(const std::vector<std::string>& items, const char* separator) {
  std::string joined;
  for (const auto& item : items) {
    if (!joined.empty()) joined += separator;
    joined += item;
  }
  return joined;
}

// The key of the program as generated: compile() keys and builds one generated program, so
// a kernel file edited under MLAJIT_KERNEL_DIR between two reads cannot file a cubin of the
// old source under the key of the new one.
CacheKey key_for_program(const KernelSpec& spec, const GeneratedProgram& program) {
  const auto options = NvrtcCompiler::instance().options_for(program.request);
  return CacheKey::from_text(fmt::format(
      "spec={}\nsource={}\nname={}\noptions={}\nnvrtc={}\nabi={}\n", spec.text(),
      program.source_hash, program.request.name_expression, join(options, " "),
      compiler_version_for_key(), kLibraryAbiVersion));
}

}  // namespace

std::string KernelMetadata::serialize() const {
  return fmt::format(
      "spec={}\nlowered_name={}\nthreads={}\nsmem={}\ncluster={}x{}x{}\ncooperative={}\n"
      "compile_seconds={:.6f}\n",
      spec_text, lowered_name, geometry.threads_per_block, geometry.dynamic_smem_bytes,
      geometry.cluster.x, geometry.cluster.y, geometry.cluster.z, geometry.cooperative ? 1 : 0,
      compile_seconds);
}

namespace {

// "2x1x1" -> {2, 1, 1}; throws std::invalid_argument as stoi does for a damaged number.
ClusterDims parse_cluster(const std::string& text) {
  const auto first = text.find('x'), second = text.find('x', first + 1);
  if (first == std::string::npos || second == std::string::npos) {
    throw std::invalid_argument("cluster '" + text + "' is not XxYxZ");
  }
  return {std::stoi(text.substr(0, first)), std::stoi(text.substr(first + 1, second - first - 1)),
          std::stoi(text.substr(second + 1))};
}

}  // namespace

KernelMetadata KernelMetadata::parse(const std::string& text) {
  KernelMetadata metadata;
  std::map<std::string, std::string> fields;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    const auto equals = line.find('=');
    if (equals == std::string::npos) {
      throw Error(ErrorCode::kInternal, fmt::format("kernel metadata line without '=': '{}'", line));
    }
    fields[line.substr(0, equals)] = line.substr(equals + 1);
  }
  auto field = [&](const char* name) -> const std::string& {
    auto it = fields.find(name);
    if (it == fields.end()) {
      throw Error(ErrorCode::kInternal, fmt::format("kernel metadata lacks '{}'", name));
    }
    return it->second;
  };
  try {
    metadata.spec_text = field("spec");
    metadata.lowered_name = field("lowered_name");
    metadata.geometry.threads_per_block = std::stoi(field("threads"));
    metadata.geometry.dynamic_smem_bytes = std::stoi(field("smem"));
    metadata.geometry.cluster = parse_cluster(field("cluster"));
    metadata.geometry.cooperative = std::stoi(field("cooperative")) != 0;
    metadata.compile_seconds = std::stod(field("compile_seconds"));
  } catch (const std::logic_error& e) {  // stoi/stod on a damaged number
    throw Error(ErrorCode::kInternal, fmt::format("kernel metadata has a bad number: {}", e.what()));
  }
  return metadata;
}

KernelRegistry& KernelRegistry::instance() {
  static KernelRegistry registry(CacheOptions::from_environment());
  return registry;
}

KernelRegistry::KernelRegistry(CacheOptions options, IsolationOptions isolation)
    : cache_(std::make_unique<DiskCache>(std::move(options))), isolation_(std::move(isolation)) {}

CacheKey KernelRegistry::key_for(const KernelSpec& spec) const {
  return key_for_program(spec, generate_program(spec));
}

CompiledKernel KernelRegistry::compile(const KernelSpec& spec, CompileMode mode) {
  const std::string spec_text = spec.text();
  {
    // Hot path: a spec seen before in this process needs no codegen, hashing or disk.
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = compiled_.find(spec_text);
    if (it != compiled_.end()) {
      memory_hits_.fetch_add(1, std::memory_order_relaxed);
      return it->second;
    }
  }
  GeneratedProgram program = generate_program(spec);
  CompiledKernel compiled;
  compiled.key = key_for_program(spec, program);
  compiled.from_cache = true;
  auto log = logger("mlajit.jit");
  CacheEntry entry = cache_->get_or_build(compiled.key, [&] {
    compiled.from_cache = false;
    program.request.random_seed = compiled.key.seed();
    log->info("compiling {} for {}", spec.text(), spec.arch);
    const CompileResult result = compile_isolated(program.request, mode, isolation_, spec.text());
    log->info("compiled {} in {:.1f} ms ({} bytes)", spec.text(), result.seconds * 1e3,
              result.image.size());
    KernelMetadata metadata;
    metadata.spec_text = spec.text();
    metadata.lowered_name = result.lowered_name;
    metadata.geometry = program.geometry;
    metadata.compile_seconds = result.seconds;
    return CacheEntry{compiled.key.text, result.image, metadata.serialize()};
  });
  compiled.metadata = KernelMetadata::parse(entry.metadata);
  if (compiled.metadata.geometry != program.geometry) {
    // The launch shape comes from this library's codegen, never from a file: an entry that
    // disagrees (edited by hand, or written by a broken build) must not size a launch.
    log->warn("cache entry {} for {} records another launch geometry ({}) than codegen's: using "
              "codegen's",
              compiled.key.hex, spec_text, compiled.metadata.serialize());
    compiled.metadata.geometry = program.geometry;
  }
  compiled.image = std::move(entry.payload);
  std::lock_guard<std::mutex> lock(mutex_);
  CompiledKernel remembered = compiled;
  remembered.from_cache = true;  // later callers find it in memory
  compiled_.emplace(spec_text, std::move(remembered));
  return compiled;
}

std::shared_ptr<const LoadedKernel> KernelRegistry::load(const KernelSpec& spec, int device,
                                                         CompileMode mode) {
  const auto slot = std::make_pair(spec.text(), device);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = loaded_.find(slot);
    if (it != loaded_.end()) {
      memory_hits_.fetch_add(1, std::memory_order_relaxed);
      return it->second;
    }
  }
  // Compile outside the lock: the cache makes concurrent callers of one key wait for a
  // single build, and callers of other keys must not wait at all.
  CompiledKernel compiled = compile(spec, mode);
  auto kernel = std::make_shared<LoadedKernel>();
  kernel->metadata = compiled.metadata;
  kernel->library = std::make_shared<driver::Library>(compiled.image);
  kernel->function = kernel->library->function(compiled.metadata.lowered_name, device,
                                               compiled.metadata.geometry.dynamic_smem_bytes);
  std::lock_guard<std::mutex> lock(mutex_);
  auto [it, inserted] = loaded_.emplace(slot, std::move(kernel));
  return it->second;
}

}  // namespace mlajit::jit
