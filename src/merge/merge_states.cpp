// merge_states of the public API: the utility program "merge_states"
// (kernels/merge/merge_states.cuh), compiled and cached like a kernel family's, one launch.
#include "mlajit/merge_states.h"

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>

#include <fmt/format.h>

#include "driver/cuda_driver.h"
#include "driver/device_choice.h"
#include "jit/kernel_registry.h"
#include "jit/utility_programs.h"
#include "merge/merge_states.cuh"
#include "merge/merge_states_validation.h"
#include "mlajit/error.h"

namespace mlajit {
namespace {

static_assert(kMaxMergeStateParts == mlajit_kernel::kMaxMergeParts,
              "the public bound on parts is the kernel parameter's");

// The loaded kernel per device: a decode step merges once per layer, so the hot path is a
// map lookup rather than the registry's spec text and its lock.
std::shared_ptr<const jit::LoadedKernel> merge_kernel(int device) {
  static std::mutex mutex;
  static std::map<int, std::shared_ptr<const jit::LoadedKernel>> loaded;
  std::lock_guard<std::mutex> lock(mutex);
  auto& kernel = loaded[device];
  if (!kernel) {
    KernelSpec spec;  // a utility program: only the family and the arch matter
    spec.family = jit::kMergeStatesProgram;
    spec.arch = driver::device_info(device).arch();
    kernel = jit::KernelRegistry::instance().load(spec, device);
  }
  return kernel;
}

mlajit_kernel::MergeStatesParams kernel_params(const MergeStatesArgs& args) {
  mlajit_kernel::MergeStatesParams p{};
  for (int c = 0; c < args.num_parts; ++c) {
    const AttentionState& part = args.parts[c];
    p.parts[c] = {part.out, part.lse, part.out_stride_token, part.out_stride_head};
  }
  p.out = args.out;
  p.lse = args.lse;
  p.out_stride_token = args.out_stride_token;
  p.out_stride_head = args.out_stride_head;
  p.num_rows = args.num_tokens * args.num_heads;
  p.num_heads = args.num_heads;
  p.head_dim = args.head_dim;
  p.num_parts = args.num_parts;
  p.is_bf16 = args.dtype == DType::kBFloat16 ? 1 : 0;
  p.lse_base_e = args.lse_base == LseBase::kNatural ? 1 : 0;
  return p;
}

}  // namespace

void merge_states(const MergeStatesArgs& args, void* stream) {
  validate_merge_states_args(args);
  if (args.num_tokens == 0) return;
  const int device = driver::resolve_device(args.device);
  driver::set_current_device(device);
  if (!driver::stream_on_device(static_cast<CUstream>(stream), device)) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("merge_states: stream={} belongs to another context than device {}'s "
                            "primary context: pass a stream created on device {}",
                            stream, device, device));
  }
  const auto kernel = merge_kernel(device);
  mlajit_kernel::MergeStatesParams params = kernel_params(args);
  const int threads = kernel->metadata.geometry.threads_per_block;
  const int64_t rows_per_block = threads / 32;  // one warp per row
  driver::LaunchConfig config;
  config.grid_x = static_cast<unsigned>((params.num_rows + rows_per_block - 1) / rows_per_block);
  config.block_x = static_cast<unsigned>(threads);
  config.stream = static_cast<CUstream>(stream);
  void* kernel_args[] = {&params};
  kernel->function.launch(config, kernel_args);
}

}  // namespace mlajit
