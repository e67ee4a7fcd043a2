// KernelSpec -> NVRTC program. The main translation unit is a generated prelude and one
// #include of the family's entry file; that file and the kernel files it includes travel as
// named headers, so the kernels need no toolkit header and no include path. NVRTC matches a
// header by the exact text of the directive (never relative to the including file), so every
// kernel file includes others by their path below kernels/: "common/ptx_mma.cuh".
#include "jit/codegen.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <xxhash.h>

#include "common/logging.h"
#include "family/family_registry.h"
#include "jit/embedded_kernels.h"
#include "jit/utility_programs.h"
#include "mlajit/error.h"

namespace mlajit::jit {

namespace {

namespace fs = std::filesystem;

// NVRTC has no <cstdint>: the prelude gives the kernels the fixed-width types.
constexpr const char* kIntegerTypes =
    "typedef signed char int8_t;\n"
    "typedef short int16_t;\n"
    "typedef int int32_t;\n"
    "typedef long long int64_t;\n"
    "typedef unsigned char uint8_t;\n"
    "typedef unsigned short uint16_t;\n"
    "typedef unsigned int uint32_t;\n"
    "typedef unsigned long long uint64_t;\n";

std::string read_file(const fs::path& path) {
  std::ifstream stream(path, std::ios::binary);
  if (!stream.is_open()) {
    throw Error(ErrorCode::kIoError, fmt::format("cannot open kernel source {}", path.string()));
  }
  std::ostringstream contents;
  contents << stream.rdbuf();
  if (stream.bad()) {
    throw Error(ErrorCode::kIoError, fmt::format("cannot read kernel source {}", path.string()));
  }
  return contents.str();
}

bool is_kernel_file_name(const fs::path& path) { return path.extension() == ".cuh"; }

std::map<std::string, std::string> read_kernel_dir(const std::string& dir) {
  std::error_code error;
  fs::recursive_directory_iterator entries(dir, error), end;
  if (error) {
    throw Error(ErrorCode::kIoError,
                fmt::format("MLAJIT_KERNEL_DIR={} cannot be opened ({}); unset it to use the "
                            "kernels built into the library",
                            dir, error.message()));
  }
  std::map<std::string, std::string> files;
  for (; entries != end; entries.increment(error)) {
    if (error) {
      throw Error(ErrorCode::kIoError,
                  fmt::format("MLAJIT_KERNEL_DIR={} cannot be listed: {}", dir, error.message()));
    }
    const fs::path& path = entries->path();
    if (!is_kernel_file_name(path)) continue;
    // A directory named *.cuh would be hashed into the key as an empty header and fail in
    // NVRTC with an unrelated message.
    if (!fs::is_regular_file(path)) {
      throw Error(ErrorCode::kIoError,
                  fmt::format("kernel source {} is not a regular file", path.string()));
    }
    files[fs::relative(path, dir).generic_string()] = read_file(path);
  }
  return files;
}

// The name of a line's `#include "name"`, "" for any other line (angle-bracket includes name
// toolkit headers, which the kernels do not use).
std::string quoted_include(const std::string& line) {
  size_t at = line.find_first_not_of(" \t");
  if (at == std::string::npos || line[at] != '#') return "";
  at = line.find_first_not_of(" \t", at + 1);
  if (at == std::string::npos || line.compare(at, 7, "include") != 0) return "";
  const size_t open = line.find_first_not_of(" \t", at + 7);
  if (open == std::string::npos || line[open] != '"') return "";
  const size_t close = line.find('"', open + 1);
  return close == std::string::npos ? "" : line.substr(open + 1, close - open - 1);
}

// The family's program, or a utility program's; a family checks the spec first.
KernelProgram program_for(const KernelSpec& spec) {
  if (const family::KernelFamily* kernels = family::family_named(spec.family)) {
    kernels->check(spec);
    return kernels->program(spec);
  }
  if (std::optional<KernelProgram> utility = utility_program(spec)) return *utility;
  std::vector<std::string> families;
  for (const family::KernelFamily* kernels : family::kernel_families()) {
    families.push_back(kernels->name());
  }
  throw Error(ErrorCode::kUnsupported,
              fmt::format("unknown kernel family '{}': expected a family ({}) or a utility "
                          "program ({})",
                          spec.family, fmt::join(families, ", "),
                          fmt::join(utility_program_names(), ", ")));
}

// A C++ caller can cast any int to a DType; such a spec has no text to key or parse back.
void check_dtypes(const KernelSpec& spec) {
  for (const auto& [field, dtype] : {std::pair{"q_dtype", spec.q_dtype},
                                     std::pair{"kv_dtype", spec.kv_dtype},
                                     std::pair{"o_dtype", spec.o_dtype}}) {
    if (dtype_size(dtype) == 0) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("KernelSpec::{}={} is not a DType: expected kFloat16 (0), "
                              "kBFloat16 (1) or kFloat8E4M3 (2)",
                              field, static_cast<int>(dtype)));
    }
  }
}

// The launch constants go in as macros so that the kernel can static_assert that it was
// built for the geometry the host launches with.
std::string prelude(const KernelSpec& spec, const KernelProgram& program) {
  std::string text = fmt::format("// Generated by mlajit codegen for spec:\n//   {}\n", spec.text());
  text += kIntegerTypes;
  text += fmt::format("#define MLAJIT_EXPECTED_THREADS {}\n", program.geometry.threads_per_block);
  text += fmt::format("#define MLAJIT_EXPECTED_SMEM_BYTES {}\n", program.geometry.dynamic_smem_bytes);
  for (const auto& [name, value] : program.defines) text += fmt::format("#define {} {}\n", name, value);
  return text;
}

// Length-prefixed so that moving bytes between a name and its contents changes the hash.
void hash_piece(XXH3_state_t* state, const std::string& piece) {
  const uint64_t size = piece.size();
  XXH3_128bits_update(state, &size, sizeof(size));
  XXH3_128bits_update(state, piece.data(), piece.size());
}

std::string source_hash(const std::string& source,
                        const std::map<std::string, std::string>& headers) {
  XXH3_state_t* state = XXH3_createState();
  XXH3_128bits_reset(state);
  hash_piece(state, source);
  for (const auto& [name, contents] : headers) {  // std::map: name order
    hash_piece(state, name);
    hash_piece(state, contents);
  }
  const XXH128_hash_t hash = XXH3_128bits_digest(state);
  XXH3_freeState(state);
  return fmt::format("{:016x}{:016x}", hash.high64, hash.low64);
}

}  // namespace

std::vector<std::string> included_kernel_files(
    const std::string& entry, const std::map<std::string, std::string>& kernel_files) {
  std::set<std::string> seen{entry};
  std::vector<std::pair<std::string, std::string>> pending{{entry, "the program"}};
  while (!pending.empty()) {
    const auto [name, includer] = pending.back();
    pending.pop_back();
    const auto file = kernel_files.find(name);
    if (file == kernel_files.end()) {
      throw Error(ErrorCode::kIoError,
                  fmt::format("kernel file {} (included by {}) is not among the kernel sources",
                              name, includer));
    }
    std::istringstream lines(file->second);
    for (std::string line; std::getline(lines, line);) {
      const std::string included = quoted_include(line);
      if (!included.empty() && seen.insert(included).second) pending.push_back({included, name});
    }
  }
  return {seen.begin(), seen.end()};
}

std::map<std::string, std::string> kernel_sources() {
  const char* dir = std::getenv("MLAJIT_KERNEL_DIR");
  if (dir != nullptr && *dir != '\0') {
    logger("mlajit.jit")->warn("kernel sources come from disk (MLAJIT_KERNEL_DIR={}), not from "
                               "the copy built into the library",
                               dir);
    return read_kernel_dir(dir);
  }
  std::map<std::string, std::string> files;
  for (const auto& [name, contents] : embedded_kernel_files()) files[name] = std::string(contents);
  return files;
}

GeneratedProgram generate_program(const KernelSpec& spec) {
  return generate_program(spec, kernel_sources());
}

GeneratedProgram generate_program(const KernelSpec& spec,
                                  const std::map<std::string, std::string>& kernel_files) {
  check_dtypes(spec);
  const KernelProgram program = program_for(spec);
  GeneratedProgram generated;
  generated.geometry = program.geometry;
  CompileRequest& request = generated.request;
  request.program_name = spec.family + ".cu";
  request.source = prelude(spec, program) + fmt::format("#include \"{}\"\n", program.entry_file);
  for (const std::string& name : included_kernel_files(program.entry_file, kernel_files)) {
    request.headers[name] = kernel_files.at(name);
  }
  request.name_expression = program.name_expression;
  request.arch = spec.arch;
  generated.source_hash = source_hash(request.source, request.headers);
  return generated;
}

}  // namespace mlajit::jit
