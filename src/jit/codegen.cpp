// KernelSpec -> NVRTC program. The main translation unit is a generated prelude and one
// #include of the family's kernel file; every kernel file travels as a named header, so the
// kernels need no toolkit header and no include path.
#include "jit/codegen.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <xxhash.h>

#include "common/logging.h"
#include "jit/embedded_kernels.h"
#include "jit/tile_config.h"
#include "mlajit/error.h"

namespace mlajit::jit {

namespace {

constexpr int kMlaThreads = 256;
constexpr int kDemoThreads = 256;

struct HeadDims {
  int ckv, kpe;
};
constexpr HeadDims kMlaHeadDims[] = {{512, 64}, {256, 32}};

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

std::string read_file(const std::string& path) {
  // A directory named *.cuh opens fine and reads as nothing: it would be hashed into the key
  // as an empty header and fail in NVRTC with an unrelated message.
  struct stat info;
  if (::stat(path.c_str(), &info) == 0 && !S_ISREG(info.st_mode)) {
    throw Error(ErrorCode::kIoError, fmt::format("kernel source {} is not a regular file", path));
  }
  std::ifstream stream(path, std::ios::binary);
  if (!stream.is_open()) {
    throw Error(ErrorCode::kIoError, fmt::format("cannot open kernel source {}", path));
  }
  std::ostringstream contents;
  contents << stream.rdbuf();
  if (stream.bad()) {
    throw Error(ErrorCode::kIoError, fmt::format("cannot read kernel source {}", path));
  }
  return contents.str();
}

std::map<std::string, std::string> read_kernel_dir(const std::string& dir) {
  DIR* listing = opendir(dir.c_str());
  if (listing == nullptr) {
    throw Error(ErrorCode::kIoError,
                fmt::format("MLAJIT_KERNEL_DIR={} cannot be opened; unset it to use the kernels "
                            "built into the library",
                            dir));
  }
  std::vector<std::string> names;
  while (const dirent* entry = readdir(listing)) {
    const std::string name = entry->d_name;
    if (name.size() > 4 && name.compare(name.size() - 4, 4, ".cuh") == 0) names.push_back(name);
  }
  closedir(listing);
  std::map<std::string, std::string> files;
  for (const auto& name : names) files[name] = read_file(dir + "/" + name);
  return files;
}

std::string dtype_type(DType dtype) {
  return dtype == DType::kBFloat16 ? "mlajit_kernel::bf16_t" : "mlajit_kernel::f16_t";
}

std::string supported_head_dims() {
  std::vector<std::string> pairs;
  for (const auto& dims : kMlaHeadDims) pairs.push_back(fmt::format("{}/{}", dims.ckv, dims.kpe));
  return fmt::format("{}", fmt::join(pairs, ", "));
}

// A C++ caller can cast any int to a DType; such a spec has no text to key or parse back.
void check_dtypes(const KernelSpec& spec) {
  for (const auto& [field, dtype] : {std::pair{"q_dtype", spec.q_dtype},
                                     std::pair{"kv_dtype", spec.kv_dtype},
                                     std::pair{"o_dtype", spec.o_dtype}}) {
    if (dtype_size(dtype) == 0) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("KernelSpec::{}={} is not a DType: expected kFloat16 (0) or "
                              "kBFloat16 (1)",
                              field, static_cast<int>(dtype)));
    }
  }
}

void check_mla_spec(const KernelSpec& spec) {
  if (spec.q_dtype != spec.kv_dtype || spec.q_dtype != spec.o_dtype) {
    throw Error(ErrorCode::kUnsupported,
                fmt::format("the mla_fa2 kernel needs one dtype for Q, KV and O; got q={} kv={} "
                            "o={}",
                            dtype_name(spec.q_dtype), dtype_name(spec.kv_dtype),
                            dtype_name(spec.o_dtype)));
  }
  const bool known = std::any_of(std::begin(kMlaHeadDims), std::end(kMlaHeadDims), [&](auto d) {
    return d.ckv == spec.head_dim_ckv && d.kpe == spec.head_dim_kpe;
  });
  if (!known) {
    throw Error(ErrorCode::kUnsupported,
                fmt::format("the mla_fa2 kernel has no head dims ckv={} kpe={}; supported "
                            "(ckv/kpe): {}",
                            spec.head_dim_ckv, spec.head_dim_kpe, supported_head_dims()));
  }
}

std::string mla_name_expression(const KernelSpec& spec) {
  return fmt::format(
      "mlajit_kernel::mla_fa2_kernel<mlajit_kernel::MlaConfig<{}, {}, {}, {}, {}, {}, {}, {}, {}, {}>>",
      dtype_type(spec.q_dtype), dtype_type(spec.kv_dtype), dtype_type(spec.o_dtype),
      spec.head_dim_ckv, spec.head_dim_kpe,
      spec.causal ? "true" : "false", spec.tile.num_stages, spec.tile.kv_tile,
      spec.tile.qk_shard ? "true" : "false", spec.tile.q_tile);
}

std::string prelude(const KernelSpec& spec, int smem_bytes) {
  std::string text = fmt::format("// Generated by mlajit codegen for spec:\n//   {}\n", spec.text());
  text += kIntegerTypes;
  if (spec.family == "mla_fa2") {
    text += fmt::format("#define MLAJIT_EXPECTED_SMEM_BYTES {}\n", smem_bytes);
  }
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
  GeneratedProgram program;
  std::string family_file;
  if (spec.family == "mla_fa2") {
    check_mla_spec(spec);
    family_file = "mla_fa2.cuh";
    program.request.name_expression = mla_name_expression(spec);
    program.threads_per_block = kMlaThreads;
    program.dynamic_smem_bytes = mla_shared_storage_bytes(spec, spec.tile);
  } else if (spec.family == "grid_barrier_demo") {
    // The demo ignores dtypes, head dims and tile: one instance serves every spec.
    family_file = "grid_barrier_demo.cuh";
    program.request.name_expression = fmt::format("mlajit_kernel::grid_barrier_demo<{}>",
                                                  kDemoThreads);
    program.threads_per_block = kDemoThreads;
    program.dynamic_smem_bytes = 0;
  } else if (spec.family == "spin") {
    // The benchmark's GPU-holding kernel; like the demo it ignores the rest of the spec.
    family_file = "spin.cuh";
    program.request.name_expression = "mlajit_kernel::spin_kernel<0>";
    program.threads_per_block = 32;
    program.dynamic_smem_bytes = 0;
  } else {
    throw Error(ErrorCode::kUnsupported,
                fmt::format("unknown kernel family '{}': expected mla_fa2, grid_barrier_demo or spin",
                            spec.family));
  }
  if (!kernel_files.count(family_file)) {
    logger("mlajit.jit")->warn("kernel file {} for family {} is not among the kernel sources; "
                               "compiling this program will fail",
                               family_file, spec.family);
  }
  program.request.program_name = spec.family + ".cu";
  program.request.source =
      prelude(spec, program.dynamic_smem_bytes) + fmt::format("#include \"{}\"\n", family_file);
  program.request.headers = kernel_files;
  program.request.arch = spec.arch;
  program.source_hash = source_hash(program.request.source, program.request.headers);
  return program;
}

}  // namespace mlajit::jit
