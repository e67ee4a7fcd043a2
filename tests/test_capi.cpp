// The C ABI without a GPU: null handles and pointers, struct_size checks, shape errors, the
// no-driver status, version, tile queries, and precompile by spec text (in a subprocess with
// its own MLAJIT_CACHE_DIR).
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>

#include "temp_dir.h"
#include "capi/c_conversions.h"
#include "capi/c_structs.h"
#include "jit/nvrtc_compiler.h"
#include "mlajit/kernel_spec.h"
#include "mlajit/mlajit.h"
#include "mlajit/runtime.h"

namespace fs = std::filesystem;

using mlajit::test::TempDir;

namespace {

std::string last_error() { return mlajit_last_error(); }

mlajit_shape deepseek_shape() {
  mlajit_shape shape;
  mlajit_shape_init(&shape);
  return shape;
}

struct ProcessResult {
  int exit_code = -1;
  std::string out;
};

ProcessResult run_worker(const std::string& environment, const std::string& argument) {
  const std::string command = environment + " '" + std::string(MLAJIT_TEST_WORKER_DIR) +
                              "/capi_precompile' '" + argument + "' 2>/dev/null";
  ProcessResult result;
  FILE* pipe = popen(command.c_str(), "r");
  REQUIRE(pipe != nullptr);
  char buffer[4096];
  while (size_t n = std::fread(buffer, 1, sizeof(buffer), pipe)) result.out.append(buffer, n);
  const int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

std::string field(const std::string& out, const std::string& name) {
  const auto start = out.find(name + "=");
  if (start == std::string::npos) return "<missing>";
  const auto value = start + name.size() + 1;
  return out.substr(value, out.find_first_of(" \n", value) - value);
}

}  // namespace

TEST_CASE("the C ABI reports its version in three consistent forms") {
  CHECK(std::string(mlajit_version()) == MLAJIT_VERSION_STRING);
  CHECK(std::string(mlajit::version()) == MLAJIT_VERSION_STRING);
  int major = -1, minor = -1, patch = -1;
  mlajit_version_numbers(&major, &minor, &patch);
  CHECK(major == MLAJIT_VERSION_MAJOR);
  CHECK(minor == MLAJIT_VERSION_MINOR);
  CHECK(patch == MLAJIT_VERSION_PATCH);
  mlajit_version_numbers(nullptr, nullptr, nullptr);  // any pointer may be NULL
  CHECK(std::string(mlajit_status_name(MLAJIT_OK)) == "ok");
  CHECK(std::string(mlajit_status_name(MLAJIT_ERROR_INVALID_ARGUMENT)) == "invalid argument");
  CHECK(std::string(mlajit_status_name(static_cast<mlajit_status>(99))) == "unknown status");
}

TEST_CASE("C status codes mirror the C++ error codes") {
  CHECK(MLAJIT_ERROR_INVALID_ARGUMENT == static_cast<int>(mlajit::ErrorCode::kInvalidArgument));
  CHECK(MLAJIT_ERROR_UNSUPPORTED == static_cast<int>(mlajit::ErrorCode::kUnsupported));
  CHECK(MLAJIT_ERROR_NO_DRIVER == static_cast<int>(mlajit::ErrorCode::kNoDriver));
  CHECK(MLAJIT_ERROR_NO_DEVICE == static_cast<int>(mlajit::ErrorCode::kNoDevice));
  CHECK(MLAJIT_ERROR_CUDA == static_cast<int>(mlajit::ErrorCode::kCudaError));
  CHECK(MLAJIT_ERROR_NO_COMPILER == static_cast<int>(mlajit::ErrorCode::kNoCompiler));
  CHECK(MLAJIT_ERROR_COMPILE == static_cast<int>(mlajit::ErrorCode::kCompileError));
  CHECK(MLAJIT_ERROR_CACHE_MISS == static_cast<int>(mlajit::ErrorCode::kCacheMiss));
  CHECK(MLAJIT_ERROR_IO == static_cast<int>(mlajit::ErrorCode::kIoError));
  CHECK(MLAJIT_ERROR_INTERNAL == static_cast<int>(mlajit::ErrorCode::kInternal));
}

TEST_CASE("C calls on a NULL handle fail with a message instead of crashing") {
  mlajit_batch batch;
  mlajit_batch_init(&batch);
  CHECK(mlajit_attention_plan(nullptr, &batch, nullptr) == MLAJIT_ERROR_INVALID_ARGUMENT);
  CHECK(last_error().find("attention is NULL") != std::string::npos);
  mlajit_run_args args;
  mlajit_run_args_init(&args);
  CHECK(mlajit_attention_run(nullptr, &args, nullptr) == MLAJIT_ERROR_INVALID_ARGUMENT);
  CHECK(last_error().find("mlajit_attention_run") != std::string::npos);
  mlajit_plan_info info;
  info.struct_size = sizeof(info);
  CHECK(mlajit_attention_plan_info(nullptr, &info) == MLAJIT_ERROR_INVALID_ARGUMENT);
  char text[8];
  CHECK(mlajit_attention_spec_text(nullptr, text, sizeof(text), nullptr) ==
        MLAJIT_ERROR_INVALID_ARGUMENT);
  mlajit_attention_destroy(nullptr);  // a no-op
  const mlajit_shape shape = deepseek_shape();
  CHECK(mlajit_attention_create(&shape, nullptr, nullptr) == MLAJIT_ERROR_INVALID_ARGUMENT);
  CHECK(last_error().find("out is NULL") != std::string::npos);
  mlajit_attention_t* attention = reinterpret_cast<mlajit_attention_t*>(0x1);
  CHECK(mlajit_attention_create(nullptr, nullptr, &attention) == MLAJIT_ERROR_INVALID_ARGUMENT);
  CHECK(attention == nullptr);  // cleared on failure
  CHECK(last_error().find("shape is NULL") != std::string::npos);
}

TEST_CASE("a struct_size the library does not know is refused with a message") {
  mlajit_attention_t* attention = nullptr;
  mlajit_shape shape = deepseek_shape();
  shape.struct_size = 0;
  CHECK(mlajit_attention_create(&shape, nullptr, &attention) == MLAJIT_ERROR_INVALID_ARGUMENT);
  CHECK(last_error().find("shape->struct_size=0 is too small") != std::string::npos);
  shape.struct_size = sizeof(shape) + 8;
  CHECK(mlajit_attention_create(&shape, nullptr, &attention) == MLAJIT_ERROR_UNSUPPORTED);
  CHECK(last_error().find("newer mlajit.h") != std::string::npos);

  shape = deepseek_shape();
  mlajit_options options;
  mlajit_options_init(&options);
  options.struct_size = 4;
  CHECK(mlajit_attention_create(&shape, &options, &attention) == MLAJIT_ERROR_INVALID_ARGUMENT);
  CHECK(last_error().find("options->struct_size=4") != std::string::npos);
  CHECK(attention == nullptr);

  mlajit_tile_info tile;
  tile.struct_size = 3;
  CHECK(mlajit_tile_for_arch("sm_90", &shape, &tile) == MLAJIT_ERROR_INVALID_ARGUMENT);
  mlajit_cache_stats stats;
  stats.struct_size = sizeof(stats) * 2;
  CHECK(mlajit_cache_stats_get(&stats) == MLAJIT_ERROR_UNSUPPORTED);
}

namespace {

// A caller's struct of `size` bytes inside a buffer of canary bytes: what an init function
// writes past `size` would land in the program's next variable.
template <typename T>
struct Guarded {
  static constexpr unsigned char kCanary = 0xab;
  alignas(T) unsigned char bytes[sizeof(T) + 64];
  Guarded() { std::memset(bytes, kCanary, sizeof(bytes)); }
  T* get() { return reinterpret_cast<T*>(bytes); }
  bool untouched_from(size_t offset) const {
    for (size_t i = offset; i < sizeof(bytes); ++i) {
      if (bytes[i] != kCanary) return false;
    }
    return true;
  }
};

template <typename T, typename Init>
void check_sized_init(Init init_sized, void (*unsized)(T*), size_t first_layout,
                      size_t unsized_bytes, const std::string& function) {
  CAPTURE(function);
  for (const size_t size : {first_layout, sizeof(T)}) {
    Guarded<T> caller;
    CHECK(init_sized(caller.get(), size) == MLAJIT_OK);
    CHECK(caller.get()->struct_size == size);
    CHECK(caller.untouched_from(size));
  }
  Guarded<T> caller;
  CHECK(init_sized(caller.get(), first_layout - 1) == MLAJIT_ERROR_INVALID_ARGUMENT);
  CHECK(last_error().find(function + ": struct_size=" + std::to_string(first_layout - 1) +
                          " is too small") != std::string::npos);
  CHECK(init_sized(caller.get(), sizeof(T) + 8) == MLAJIT_ERROR_UNSUPPORTED);
  CHECK(last_error().find("newer mlajit.h") != std::string::npos);
  CHECK(caller.untouched_from(0));
  CHECK(init_sized(nullptr, sizeof(T)) == MLAJIT_ERROR_INVALID_ARGUMENT);
  CHECK(last_error().find(function + ": the struct pointer is NULL") != std::string::npos);
  unsized(caller.get());
  CHECK(caller.get()->struct_size == unsized_bytes);
  CHECK(caller.untouched_from(unsized_bytes));
  unsized(nullptr);  // nothing to fill, nothing to report
}

}  // namespace

TEST_CASE("the init functions write no byte past the caller's struct, whatever its header") {
  using namespace mlajit::capi;
  check_sized_init<mlajit_shape>(mlajit_shape_init_sized, &(mlajit_shape_init), kShapeFirstLayout,
                                 kShapeUnsizedInit, "mlajit_shape_init_sized");
  check_sized_init<mlajit_options>(mlajit_options_init_sized, &(mlajit_options_init),
                                   kOptionsFirstLayout, kOptionsUnsizedInit,
                                   "mlajit_options_init_sized");
  check_sized_init<mlajit_batch>(mlajit_batch_init_sized, &(mlajit_batch_init), kBatchFirstLayout,
                                 kBatchUnsizedInit, "mlajit_batch_init_sized");
  check_sized_init<mlajit_run_args>(mlajit_run_args_init_sized, &(mlajit_run_args_init),
                                    kRunArgsFirstLayout, kRunArgsUnsizedInit,
                                    "mlajit_run_args_init_sized");
  check_sized_init<mlajit_merge_states_args>(
      mlajit_merge_states_args_init_sized, &(mlajit_merge_states_args_init),
      kMergeStatesArgsFirstLayout, kMergeStatesArgsUnsizedInit,
      "mlajit_merge_states_args_init_sized");
}

TEST_CASE("an init for an older header fills that header's fields with their defaults") {
  Guarded<mlajit_shape> old_shape;
  REQUIRE(mlajit_shape_init_sized(old_shape.get(), mlajit::capi::kShapeFirstLayout) == MLAJIT_OK);
  CHECK(old_shape.get()->num_heads == 128);
  CHECK(old_shape.get()->head_dim_ckv == 512);
  CHECK(old_shape.get()->page_size == 64);
  // Read back by the library, the fields the older header lacks take their defaults.
  const mlajit::MlaShape read = mlajit::capi::to_shape(old_shape.get());
  CHECK(read.num_heads == 128);
  CHECK_FALSE(read.kv_dtype.has_value());

  mlajit_run_args args;
  mlajit_run_args_init(&args);  // the macro: this header's size
  CHECK(args.struct_size == sizeof(args));
  CHECK(args.kv_scale_ckv == 1.0f);
  CHECK(args.ckv_scales == nullptr);
}

TEST_CASE("a plan-info struct from the 0.1.0 header is filled without its appended fields") {
  // mlajit_attention_plan_info writes through write_struct with the first layout's size; a
  // handle needs a GPU, so the write itself is checked here.
  const size_t first_layout = offsetof(mlajit_plan_info, workspace_bytes);
  mlajit_plan_info value{};
  value.grid_ctas = 132;
  value.workspace_bytes = 7;
  value.workspace_bytes_needed = 9;
  mlajit_plan_info old{};
  old.struct_size = first_layout;
  old.workspace_bytes = 1234;  // beyond the old caller's struct: must stay as it is
  mlajit::capi::write_struct(&old, value, "info", first_layout);
  CHECK(old.grid_ctas == 132);
  CHECK(old.struct_size == first_layout);
  CHECK(old.workspace_bytes == 1234);
  mlajit_plan_info current{};
  current.struct_size = sizeof(current);
  mlajit::capi::write_struct(&current, value, "info", first_layout);
  CHECK(current.workspace_bytes_needed == 9);
  mlajit_plan_info too_small{};
  too_small.struct_size = first_layout - 8;
  CHECK_THROWS_WITH(mlajit::capi::write_struct(&too_small, value, "info", first_layout),
                    Catch::Contains("info->struct_size=" + std::to_string(first_layout - 8) +
                                    " is too small: expected " + std::to_string(sizeof(value)) +
                                    ", or " + std::to_string(first_layout) + " from an older"));
}

TEST_CASE("options from older headers are read without compile_mode, which is checked") {
  // The 0.1.1 struct ended at validate_kv_indices, padded to 8 bytes: `kernel` (a pointer)
  // starts past that padding, so neither it nor compile_mode can be read from those bytes.
  struct options_0_1_1 {
    size_t struct_size;
    int32_t device, force_tier, cluster_size, force_two_launch;
    mlajit_lse_base lse_base;
    uint64_t workspace_bytes;
    int32_t validate_kv_indices;
  };
  STATIC_REQUIRE(offsetof(mlajit_options, kernel) == sizeof(options_0_1_1));
  mlajit_options options;
  mlajit_options_init(&options);
  CHECK(options.struct_size == sizeof(mlajit_options));
  CHECK(options.compile_mode == MLAJIT_COMPILE_DEFAULT);
  options.compile_mode = MLAJIT_COMPILE_PROCESS;
  CHECK(mlajit::capi::to_options(&options).compile_mode == mlajit::CompileMode::kProcess);
  options.compile_mode = MLAJIT_COMPILE_INLINE;
  CHECK(mlajit::capi::to_options(&options).compile_mode == mlajit::CompileMode::kInline);

  mlajit_options old;
  std::memset(&old, 0x5a, sizeof(old));  // what an older program leaves beyond its struct
  old.struct_size = sizeof(options_0_1_1);
  old.device = 3;
  old.force_tier = 0;
  old.cluster_size = 0;
  old.force_two_launch = 0;
  old.lse_base = MLAJIT_LSE_BASE2;
  old.workspace_bytes = 0;
  old.validate_kv_indices = 1;
  const mlajit::MlaOptions read = mlajit::capi::to_options(&old);
  CHECK(read.device == 3);
  CHECK(read.validate_kv_indices);
  CHECK(read.compile_mode == mlajit::CompileMode::kDefault);
  // A program built before compile_mode was appended (kernel was the last field) passes its
  // kernel and gets the default mode, whatever lies past its struct.
  old.struct_size = offsetof(mlajit_options, compile_mode);
  old.kernel = "portable";
  const mlajit::MlaOptions read_kernel = mlajit::capi::to_options(&old);
  CHECK(read_kernel.kernel == "portable");
  CHECK(read_kernel.compile_mode == mlajit::CompileMode::kDefault);
  old.struct_size = sizeof(options_0_1_1) - 4;
  CHECK_THROWS_WITH(mlajit::capi::to_options(&old),
                    Catch::Contains("options->struct_size=" + std::to_string(sizeof(options_0_1_1) - 4) +
                                    " is too small") &&
                        Catch::Contains(", or " + std::to_string(sizeof(options_0_1_1)) + " from an older"));

  options.compile_mode = static_cast<mlajit_compile_mode>(9);
  CHECK_THROWS_WITH(mlajit::capi::to_options(&options),
                    Catch::Contains("options->compile_mode=9 is not a compile mode"));
  mlajit_attention_t* attention = nullptr;
  const mlajit_shape shape = deepseek_shape();
  CHECK(mlajit_attention_create(&shape, &options, &attention) == MLAJIT_ERROR_INVALID_ARGUMENT);
  CHECK(last_error().find("compile_mode=9") != std::string::npos);
}

TEST_CASE("run args carry the FP8 KV scales, and the 0.1 layout is read without them") {
  // The 0.1 struct ended at sm_scale, padded to 8 bytes (`reserved` names that padding): the
  // scales start past every byte an older program's struct_size covers.
  struct run_args_0_1 {
    size_t struct_size;
    const void* q_nope;
    int64_t q_nope_stride_token, q_nope_stride_head;
    const void* q_pe;
    int64_t q_pe_stride_token, q_pe_stride_head;
    const void* ckv;
    int64_t ckv_stride_page, ckv_stride_token;
    const void* kpe;
    int64_t kpe_stride_page, kpe_stride_token;
    const int32_t* kv_indices;
    void* out;
    int64_t out_stride_token, out_stride_head;
    float* lse;
    int64_t num_tokens;
    float sm_scale;
  };
  STATIC_REQUIRE(offsetof(mlajit_run_args, kv_scale_ckv) == sizeof(run_args_0_1));
  STATIC_REQUIRE(sizeof(mlajit_run_args) == offsetof(mlajit_run_args, ckv_scales_stride_token) +
                                                sizeof(int64_t));  // no new tail padding

  mlajit_run_args args;
  std::memset(&args, 0x5a, sizeof(args));
  mlajit_run_args_init(&args);
  CHECK(args.struct_size == sizeof(mlajit_run_args));
  CHECK(args.kv_scale_ckv == 1.0f);
  CHECK(args.kv_scale_kpe == 1.0f);
  CHECK(args.kv_scale_ckv_device == nullptr);
  CHECK(args.kv_scale_kpe_device == nullptr);
  const mlajit::MlaRunArgs defaults = mlajit::capi::to_run_args(&args);
  CHECK(defaults.kv_scale_ckv == 1.0f);
  CHECK(defaults.kv_scale_kpe == 1.0f);
  CHECK(defaults.kv_scale_ckv_device == nullptr);
  CHECK(defaults.kv_scale_kpe_device == nullptr);

  // Each field reaches MlaRunArgs as given; the values are run()'s to check, not the ABI's.
  const float device_scales[2] = {0.5f, 0.25f};
  args.sm_scale = 0.0721f;
  args.kv_scale_ckv = 0.0125f;
  args.kv_scale_kpe = 3.5f;
  const mlajit::MlaRunArgs floats = mlajit::capi::to_run_args(&args);
  CHECK(floats.sm_scale == 0.0721f);
  CHECK(floats.kv_scale_ckv == 0.0125f);
  CHECK(floats.kv_scale_kpe == 3.5f);
  CHECK(floats.kv_scale_ckv_device == nullptr);
  args.kv_scale_ckv = args.kv_scale_kpe = 1.0f;
  args.kv_scale_ckv_device = &device_scales[0];
  args.kv_scale_kpe_device = &device_scales[1];
  const mlajit::MlaRunArgs pointers = mlajit::capi::to_run_args(&args);
  CHECK(pointers.kv_scale_ckv_device == &device_scales[0]);
  CHECK(pointers.kv_scale_kpe_device == &device_scales[1]);
  CHECK(pointers.kv_scale_ckv == 1.0f);

  // A program built against the 0.1 header: whatever lies past its struct is never read.
  mlajit_run_args old;
  std::memset(&old, 0x5a, sizeof(old));
  old.struct_size = sizeof(run_args_0_1);
  old.num_tokens = 7;
  old.sm_scale = 0.125f;
  const mlajit::MlaRunArgs read = mlajit::capi::to_run_args(&old);
  CHECK(read.num_tokens == 7);
  CHECK(read.sm_scale == 0.125f);
  CHECK(read.kv_scale_ckv == 1.0f);
  CHECK(read.kv_scale_kpe == 1.0f);
  CHECK(read.kv_scale_ckv_device == nullptr);
  CHECK(read.kv_scale_kpe_device == nullptr);
  old.struct_size = sizeof(run_args_0_1) - 8;
  CHECK_THROWS_WITH(mlajit::capi::to_run_args(&old),
                    Catch::Contains("args->struct_size=" + std::to_string(sizeof(run_args_0_1) - 8) +
                                    " is too small: expected " + std::to_string(sizeof(args))) &&
                        Catch::Contains(", or " + std::to_string(sizeof(run_args_0_1)) + " from an older"));
  old.struct_size = sizeof(args) + 8;
  CHECK_THROWS_WITH(mlajit::capi::to_run_args(&old),
                    Catch::Contains("is larger than this library's"));
}

TEST_CASE("shape and run args carry per-token KV scales; the layouts before them are read "
          "without them") {
  // Programs built before kv_scales: the shape ended at kv_dtype (tail padding to 40 bytes,
  // which `reserved` now names), the run args at kv_scale_kpe_device.
  STATIC_REQUIRE(offsetof(mlajit_shape, kv_scales) == offsetof(mlajit_shape, reserved) + 4);
  STATIC_REQUIRE(offsetof(mlajit_shape, reserved) % 8 == 4);
  const size_t shape_before = offsetof(mlajit_shape, reserved) + 4;
  const size_t args_before = offsetof(mlajit_run_args, ckv_scales);
  STATIC_REQUIRE(offsetof(mlajit_run_args, ckv_scales) ==
                 offsetof(mlajit_run_args, kv_scale_kpe_device) + sizeof(const float*));

  mlajit_shape shape;
  std::memset(&shape, 0x5a, sizeof(shape));
  mlajit_shape_init(&shape);
  CHECK(shape.kv_scales == MLAJIT_KV_SCALES_PER_TENSOR);
  shape.kv_dtype = MLAJIT_FLOAT8_E4M3;
  shape.kv_scales = MLAJIT_KV_SCALES_PER_TOKEN_128;
  CHECK(mlajit::capi::to_shape(&shape).kv_scales == mlajit::KvScales::kPerToken128);
  shape.kv_scales = static_cast<mlajit_kv_scales>(5);
  CHECK_THROWS_WITH(mlajit::capi::to_shape(&shape),
                    Catch::Contains("shape->kv_scales=5 is not known"));
  // What lies past an older program's struct (its padding included) is never read.
  shape.struct_size = shape_before;
  CHECK(mlajit::capi::to_shape(&shape).kv_scales == mlajit::KvScales::kPerTensor);

  mlajit_run_args args;
  std::memset(&args, 0x5a, sizeof(args));
  mlajit_run_args_init(&args);
  CHECK(args.ckv_scales == nullptr);
  CHECK(args.ckv_scales_stride_page == 0);
  CHECK(args.ckv_scales_stride_token == 0);
  alignas(16) const float scales[4] = {1, 2, 3, 4};
  args.ckv_scales = scales;
  args.ckv_scales_stride_page = 164 * 64;
  args.ckv_scales_stride_token = 164;
  const mlajit::MlaRunArgs read = mlajit::capi::to_run_args(&args);
  CHECK(read.ckv_scales == scales);
  CHECK(read.ckv_scales_stride_page == 164 * 64);
  CHECK(read.ckv_scales_stride_token == 164);
  args.struct_size = args_before;
  const mlajit::MlaRunArgs older = mlajit::capi::to_run_args(&args);
  CHECK(older.ckv_scales == nullptr);
  CHECK(older.ckv_scales_stride_token == 0);
}

TEST_CASE("an invalid shape is reported before the GPU is touched") {
  mlajit_attention_t* attention = nullptr;
  mlajit_shape shape = deepseek_shape();
  shape.num_heads = 0;
  CHECK(mlajit_attention_create(&shape, nullptr, &attention) == MLAJIT_ERROR_INVALID_ARGUMENT);
  CHECK(last_error().find("num_heads=0") != std::string::npos);

  shape = deepseek_shape();
  shape.head_dim_ckv = 384;
  CHECK(mlajit_attention_create(&shape, nullptr, &attention) == MLAJIT_ERROR_UNSUPPORTED);
  CHECK(last_error().find("ckv=384") != std::string::npos);

  shape = deepseek_shape();
  shape.dtype = static_cast<mlajit_dtype>(7);
  CHECK(mlajit_attention_create(&shape, nullptr, &attention) == MLAJIT_ERROR_INVALID_ARGUMENT);
  CHECK(last_error().find("dtype=7") != std::string::npos);

  shape = deepseek_shape();
  shape.causal = 2;
  CHECK(mlajit_attention_create(&shape, nullptr, &attention) == MLAJIT_ERROR_INVALID_ARGUMENT);
  CHECK(last_error().find("causal=2") != std::string::npos);

  shape = deepseek_shape();
  mlajit_options options;
  mlajit_options_init(&options);
  options.force_tier = 9;
  CHECK(mlajit_attention_create(&shape, &options, &attention) == MLAJIT_ERROR_INVALID_ARGUMENT);
  CHECK(last_error().find("force_tier=9") != std::string::npos);
  CHECK(attention == nullptr);
}

TEST_CASE("a shape and options from the 0.1 header are read without their appended fields") {
  mlajit_attention_t* attention = nullptr;
  // Garbage beyond an old caller's struct must never be read: the kernel pointer below would
  // crash, the kv_dtype would be refused.
  mlajit_shape shape = deepseek_shape();
  shape.struct_size = offsetof(mlajit_shape, kv_dtype);
  shape.kv_dtype = static_cast<mlajit_dtype>(99);
  shape.num_heads = 0;
  mlajit_options options;
  mlajit_options_init(&options);
  options.struct_size = offsetof(mlajit_options, kernel);
  options.kernel = reinterpret_cast<const char*>(0x1);
  CHECK(mlajit_attention_create(&shape, &options, &attention) == MLAJIT_ERROR_INVALID_ARGUMENT);
  CHECK(last_error().find("num_heads=0") != std::string::npos);
  shape.struct_size = offsetof(mlajit_shape, kv_dtype) - 4;
  CHECK(mlajit_attention_create(&shape, nullptr, &attention) == MLAJIT_ERROR_INVALID_ARGUMENT);
  CHECK(last_error().find("from an older mlajit.h") != std::string::npos);
  // The current layout reads them.
  shape = deepseek_shape();
  CHECK(shape.kv_dtype == MLAJIT_KV_DTYPE_SAME);
  shape.kv_dtype = static_cast<mlajit_dtype>(99);
  CHECK(mlajit_attention_create(&shape, nullptr, &attention) == MLAJIT_ERROR_INVALID_ARGUMENT);
  CHECK(last_error().find("shape->kv_dtype=99") != std::string::npos);
  CHECK(attention == nullptr);
}

TEST_CASE("an unknown kernel family or one that cannot serve the shape fails create, saying why") {
  mlajit_attention_t* attention = nullptr;
  mlajit_shape shape = deepseek_shape();
  mlajit_options options;
  mlajit_options_init(&options);
  CHECK(options.kernel == nullptr);  // auto
  options.kernel = "hoppr";
  CHECK(mlajit_attention_create(&shape, &options, &attention) == MLAJIT_ERROR_INVALID_ARGUMENT);
  CHECK(last_error().find("'hoppr'") != std::string::npos);
  CHECK(last_error().find("auto, hopper, portable") != std::string::npos);
  options.kernel = "hopper";
  shape.head_dim_ckv = 256;
  shape.head_dim_kpe = 32;
  CHECK(mlajit_attention_create(&shape, &options, &attention) == MLAJIT_ERROR_UNSUPPORTED);
  CHECK(last_error().find("ckv=512 kpe=64 only") != std::string::npos);
  shape = deepseek_shape();
  options.kernel = "auto";
  shape.head_dim_ckv = 384;
  CHECK(mlajit_attention_create(&shape, &options, &attention) == MLAJIT_ERROR_UNSUPPORTED);
  CHECK(last_error().find("no kernel family computes this shape") != std::string::npos);
  shape = deepseek_shape();
  shape.dtype = MLAJIT_FLOAT8_E4M3;
  CHECK(mlajit_attention_create(&shape, nullptr, &attention) == MLAJIT_ERROR_UNSUPPORTED);
  CHECK(last_error().find("dtype=e4m3") != std::string::npos);
  CHECK(attention == nullptr);
}

TEST_CASE("the kernel families are listed through the C ABI") {
  int count = 0;
  REQUIRE(mlajit_kernel_family_count(&count) == MLAJIT_OK);
  REQUIRE(count == static_cast<int>(mlajit::kernel_families().size()));
  mlajit_kernel_family_info info;
  info.struct_size = sizeof(info);
  REQUIRE(mlajit_kernel_family_get(0, &info) == MLAJIT_OK);
  CHECK(std::string(info.name) == "hopper");
  CHECK(std::string(info.head_dims) == "512/64");
  CHECK(std::string(info.archs) == "sm_90");
  REQUIRE(mlajit_kernel_family_get(1, &info) == MLAJIT_OK);
  CHECK(std::string(info.name) == "portable");
  CHECK(std::string(info.head_dims) == "512/64,256/32");
  CHECK(std::string(info.archs).find("sm_80,") == 0);
  CHECK(std::string(info.summary).size() > 10);
  CHECK(mlajit_kernel_family_get(count, &info) == MLAJIT_ERROR_INVALID_ARGUMENT);
  CHECK(last_error().find("index=" + std::to_string(count)) != std::string::npos);
  CHECK(mlajit_kernel_family_get(-1, &info) == MLAJIT_ERROR_INVALID_ARGUMENT);
  CHECK(mlajit_kernel_family_count(nullptr) == MLAJIT_ERROR_INVALID_ARGUMENT);
}

TEST_CASE("the tile info names the family, and its 0.1 layout is filled without it") {
  mlajit_shape shape = deepseek_shape();
  mlajit_tile_info tile;
  tile.struct_size = sizeof(tile);
  REQUIRE(mlajit_tile_for_arch("sm_90", &shape, &tile) == MLAJIT_OK);
  CHECK(std::string(tile.family) == "hopper");
  shape.num_heads = 8;  // auto leaves fewer than 16 heads to the portable family
  REQUIRE(mlajit_tile_for_arch("sm_90", &shape, &tile) == MLAJIT_OK);
  CHECK(std::string(tile.family) == "portable");
  mlajit_tile_info old;
  std::memset(&old, 0x5a, sizeof(old));
  old.struct_size = offsetof(mlajit_tile_info, family);
  REQUIRE(mlajit_tile_for_arch("sm_90", &shape, &old) == MLAJIT_OK);
  CHECK(std::string(old.spec_text) == tile.spec_text);
  CHECK(old.family[0] == 0x5a);  // untouched
}

TEST_CASE("without a CUDA driver, creating an attention object says why") {
  if (mlajit_driver_available()) {
    WARN("a CUDA driver is present: the no-driver path is not exercised here");
    return;
  }
  const std::string reason = last_error();
  CHECK_FALSE(reason.empty());
  mlajit_attention_t* attention = nullptr;
  const mlajit_shape shape = deepseek_shape();
  CHECK(mlajit_attention_create(&shape, nullptr, &attention) == MLAJIT_ERROR_NO_DRIVER);
  CHECK(attention == nullptr);
  CHECK(last_error().find("libcuda") != std::string::npos);
  int count = -1;
  CHECK(mlajit_device_count(&count) == MLAJIT_ERROR_NO_DRIVER);
  mlajit_device_info info;
  info.struct_size = sizeof(info);
  CHECK(mlajit_device_info_get(0, &info) == MLAJIT_ERROR_NO_DRIVER);
  void* ptr = reinterpret_cast<void*>(0x1);
  CHECK(mlajit_device_alloc(0, 256, &ptr) == MLAJIT_ERROR_NO_DRIVER);
  CHECK(ptr == nullptr);
  CHECK(mlajit_device_free(nullptr) == MLAJIT_OK);
  int host = 0;
  CHECK(mlajit_device_free(&host) == MLAJIT_ERROR_INVALID_ARGUMENT);
  CHECK(last_error().find("not a pointer returned by device_alloc") != std::string::npos);
}

TEST_CASE("a success clears the thread's last error") {
  mlajit_shape shape = deepseek_shape();
  shape.num_heads = -3;
  mlajit_attention_t* attention = nullptr;
  REQUIRE(mlajit_attention_create(&shape, nullptr, &attention) != MLAJIT_OK);
  REQUIRE_FALSE(last_error().empty());
  shape = deepseek_shape();
  mlajit_tile_info tile;
  tile.struct_size = sizeof(tile);
  REQUIRE(mlajit_tile_for_arch("sm_90", &shape, &tile) == MLAJIT_OK);
  CHECK(last_error().empty());
}

TEST_CASE("the tile for an arch matches what the C++ API chooses") {
  mlajit_shape shape = deepseek_shape();
  shape.num_heads = 8;  // a portable-family shape on every arch: its tiers are compared
  mlajit_tile_info tile;
  tile.struct_size = sizeof(tile);
  REQUIRE(mlajit_tile_for_arch("sm_90", &shape, &tile) == MLAJIT_OK);
  mlajit::MlaShape cpp_shape;
  cpp_shape.num_heads = 8;
  const mlajit::TileChoice expected = mlajit::tile_for_arch("sm_90", cpp_shape);
  CHECK(tile.tier == expected.tier);
  CHECK(tile.num_stages == expected.tile.num_stages);
  CHECK(tile.kv_tile == expected.tile.kv_tile);
  CHECK(tile.shared_bytes == expected.shared_bytes);
  CHECK(std::string(tile.spec_text) == expected.spec_text);
  // The spec text round-trips through the parser: it is what precompile accepts.
  CHECK(mlajit::KernelSpec::parse(tile.spec_text).text() == tile.spec_text);
  // sm_80 has less shared memory than sm_90: never a larger tier.
  mlajit_tile_info small;
  small.struct_size = sizeof(small);
  REQUIRE(mlajit_tile_for_arch("sm_80", &shape, &small) == MLAJIT_OK);
  CHECK(small.tier >= tile.tier);
  CHECK(small.shared_bytes <= tile.shared_bytes);

  // A bare number names the profile's arch; the spec text it gives is still one precompile
  // accepts (it once ended in "arch=90", which the spec parser refuses).
  mlajit_tile_info bare;
  bare.struct_size = sizeof(bare);
  REQUIRE(mlajit_tile_for_arch("90", &shape, &bare) == MLAJIT_OK);
  CHECK(std::string(bare.spec_text) == tile.spec_text);
  CHECK(mlajit::KernelSpec::parse(bare.spec_text).arch == "sm_90");
  mlajit_tile_info arch_specific;
  arch_specific.struct_size = sizeof(arch_specific);
  REQUIRE(mlajit_tile_for_arch("sm_90a", &shape, &arch_specific) == MLAJIT_OK);
  CHECK(mlajit::KernelSpec::parse(arch_specific.spec_text).arch == "sm_90a");

  CHECK(mlajit_tile_for_arch("sm_12", &shape, &tile) == MLAJIT_ERROR_INVALID_ARGUMENT);
  CHECK(last_error().find("sm_12") != std::string::npos);
  CHECK(mlajit_tile_for_arch(nullptr, &shape, &tile) == MLAJIT_ERROR_INVALID_ARGUMENT);
}

TEST_CASE("the cache statistics are readable without a GPU, also through the 0.1.0 layout") {
  mlajit_cache_stats stats;
  stats.struct_size = sizeof(stats);
  REQUIRE(mlajit_cache_stats_get(&stats) == MLAJIT_OK);
  const mlajit::CacheSummary summary = mlajit::cache_stats();
  CHECK(std::string(stats.user_dir) == summary.user_dir);
  // A program built against the 0.1.0 header: read_only_dirs is beyond its struct.
  mlajit_cache_stats old;
  std::memset(&old, 0x5a, sizeof(old));
  old.struct_size = offsetof(mlajit_cache_stats, read_only_dirs);
  REQUIRE(mlajit_cache_stats_get(&old) == MLAJIT_OK);
  CHECK(std::string(old.user_dir) == summary.user_dir);
  CHECK(old.read_only_dirs[0] == 0x5a);  // untouched
  old.struct_size = offsetof(mlajit_cache_stats, read_only_dirs) - 1;
  CHECK(mlajit_cache_stats_get(&old) == MLAJIT_ERROR_INVALID_ARGUMENT);
}

TEST_CASE("an invalid spec text fails to precompile with a message naming the field") {
  mlajit_precompile_result result;
  result.struct_size = sizeof(result);
  CHECK(mlajit_precompile("portable;q=bf32", &result) == MLAJIT_ERROR_INVALID_ARGUMENT);
  CHECK_FALSE(last_error().empty());
  CHECK(last_error().find("bf32") != std::string::npos);
  CHECK(mlajit_precompile("not a spec", nullptr) == MLAJIT_ERROR_INVALID_ARGUMENT);
  CHECK_FALSE(last_error().empty());
  CHECK(mlajit_precompile(nullptr, &result) == MLAJIT_ERROR_INVALID_ARGUMENT);
  CHECK(last_error().find("spec_text is NULL") != std::string::npos);
}

TEST_CASE("a valid spec text precompiles into MLAJIT_CACHE_DIR without a GPU, once") {
  if (!mlajit::jit::NvrtcCompiler::instance().available()) {
    WARN("NVRTC is not available, skipping: "
         << mlajit::jit::NvrtcCompiler::instance().unavailable_reason());
    return;
  }
  TempDir cache("mlajit_capi");
  mlajit::MlaShape shape;
  const std::string spec = mlajit::tile_for_arch("sm_90", shape).spec_text;
  const std::string environment = "MLAJIT_CACHE_DIR='" + cache.path() + "'";

  const ProcessResult first = run_worker(environment, spec);
  INFO(first.out);
  REQUIRE(first.exit_code == 0);
  CHECK(field(first.out, "from_cache") == "0");
  CHECK(field(first.out, "builds") == "1");
  CHECK(field(first.out, "misses") == "1");
  CHECK(field(first.out, "disk_hits") == "0");
  CHECK(field(first.out, "memory_hits") == "1");  // the worker's second precompile
  CHECK(field(first.out, "build_seconds_positive") == "1");
  CHECK(field(first.out, "user_dir_writable") == "1");
  CHECK(field(first.out, "no_jit") == "0");
  CHECK(field(first.out, "read_only_dirs").empty());
  CHECK(field(first.out, "user_dir") == cache.path());
  const std::string key = field(first.out, "key");
  REQUIRE(key.size() >= 2);
  CHECK(fs::exists(fs::path(cache.path()) / key.substr(0, 2) / (key + ".cubin")));
  CHECK(std::stoull(field(first.out, "bytes")) > 1000);

  const ProcessResult second = run_worker(environment, spec);
  INFO(second.out);
  REQUIRE(second.exit_code == 0);
  CHECK(field(second.out, "from_cache") == "1");
  CHECK(field(second.out, "builds") == "0");
  CHECK(field(second.out, "misses") == "0");
  CHECK(field(second.out, "disk_hits") == "1");
  CHECK(field(second.out, "build_seconds_positive") == "0");
  CHECK(field(second.out, "key") == key);

  // A miss with JIT off: a miss that builds nothing, and the no-JIT flag.
  mlajit::KernelSpec other = mlajit::KernelSpec::parse(spec);
  other.q_dtype = other.kv_dtype = other.o_dtype = mlajit::DType::kFloat16;
  const ProcessResult refused = run_worker(environment + " MLAJIT_NO_JIT=1", other.text());
  INFO(refused.out);
  CHECK(refused.exit_code == 1);
  CHECK(field(refused.out, "misses") == "1");
  CHECK(field(refused.out, "builds") == "0");
  CHECK(field(refused.out, "no_jit") == "1");

  // The shipped layers, in their search order.
  const ProcessResult layered = run_worker(
      environment + " MLAJIT_CACHE_PATH='" + cache.sub("a") + ":" + cache.sub("b") + "'", spec);
  INFO(layered.out);
  CHECK(field(layered.out, "read_only_dirs") == cache.sub("a") + ":" + cache.sub("b"));

  // A damaged entry: counted as bad, rebuilt.
  const fs::path entry = fs::path(cache.path()) / key.substr(0, 2) / (key + ".cubin");
  fs::resize_file(entry, fs::file_size(entry) / 2);
  const ProcessResult repaired = run_worker(environment, spec);
  INFO(repaired.out);
  CHECK(repaired.exit_code == 0);
  CHECK(field(repaired.out, "bad_entries") == "1");
  CHECK(field(repaired.out, "builds") == "1");
}

TEST_CASE("a spec for an arch NVRTC cannot target fails to precompile with a message") {
  if (!mlajit::jit::NvrtcCompiler::instance().available()) {
    WARN("NVRTC is not available, skipping");
    return;
  }
  TempDir cache("mlajit_capi");
  mlajit::KernelSpec spec;
  spec.arch = "sm_20";
  const ProcessResult result =
      run_worker("MLAJIT_CACHE_DIR='" + cache.path() + "'", spec.text());
  INFO(result.out);
  CHECK(result.exit_code == 1);
  CHECK(field(result.out, "status") != "0");
  CHECK(result.out.find("message=") != std::string::npos);
  CHECK(result.out.find("sm_20") != std::string::npos);
}
