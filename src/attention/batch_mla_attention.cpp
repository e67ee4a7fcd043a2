#include "mlajit/attention.h"

#include <cuda.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <numeric>
#include <optional>

#include <fmt/format.h>

#include "attention/kernel_choice.h"
#include "attention/mla_workspace.h"
#include "attention/run_args_validation.h"
#include "common/logging.h"
#include "driver/cuda_driver.h"
#include "driver/device_choice.h"
#include "driver/tensor_map.h"
#include "jit/kernel_registry.h"
#include "plan/planner.h"

namespace mlajit {

struct BatchMlaAttention::Impl {
  MlaShape shape;
  MlaOptions options;
  int device = 0;
  driver::DeviceInfo device_info;
  MlaKernelChoice choice;  // the family and the spec it runs
  std::shared_ptr<const jit::LoadedKernel> kernel;
  // The family's merge program (KernelFamily::merge_spec), or null: the kernel merges itself.
  std::shared_ptr<const jit::LoadedKernel> merge_kernel;
  int max_ctas = 0;          // co-resident CTAs: occupancy x SMs
  bool two_launch = false;   // the non-cooperative fallback
  std::unique_ptr<MlaWorkspace> workspace;
  plan::Plan current_plan;
  bool planned = false;
  int64_t planned_tokens = 0;
  // The kernel's parameters after MlaParams (e.g. TMA tensor maps), encoded for the KV
  // tensors in `run_params_tensors`: rebuilt only when those change (a decode loop over fixed
  // buffers encodes once).
  family::KernelRunParams run_params;
  std::array<int64_t, 6> run_params_tensors{};
  bool run_params_built = false;

  // The bytes of the kernel's second parameter for `args`, or nullptr when it takes one.
  void* extra_kernel_params(const MlaRunArgs& args) {
    const std::array<int64_t, 6> tensors{reinterpret_cast<int64_t>(args.ckv),
                                         reinterpret_cast<int64_t>(args.kpe),
                                         args.ckv_stride_page, args.ckv_stride_token,
                                         args.kpe_stride_page, args.kpe_stride_token};
    if (!run_params_built || tensors != run_params_tensors) {
      run_params = choice.family->run_params(shape, spec(), args);
      for (const family::TensorMapRequest& request : run_params.tensor_maps) {
        const CUtensorMap map = driver::encode_tensor_map(tensor_map_of(request));
        std::memcpy(run_params.bytes.data() + request.offset, &map, sizeof(map));
      }
      run_params_tensors = tensors;
      run_params_built = true;
    }
    return run_params.bytes.empty() ? nullptr : run_params.bytes.data();
  }

  static driver::TiledTensorMap tensor_map_of(const family::TensorMapRequest& request) {
    driver::TiledTensorMap map;
    map.dtype = request.dtype == DType::kBFloat16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
                                                  : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
    map.global_address = reinterpret_cast<CUdeviceptr>(request.global_address);
    map.global_dims = request.dims;
    map.global_strides = request.strides;
    map.box_dims = request.box;
    map.swizzle = CU_TENSOR_MAP_SWIZZLE_128B;
    map.l2_promotion = CU_TENSOR_MAP_L2_PROMOTION_L2_256B;
    return map;
  }

  void require_stream_on_device(void* stream) const {
    if (!driver::stream_on_device(static_cast<CUstream>(stream), device)) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("stream={} belongs to another context than device {}'s primary "
                              "context: pass a stream created on device {}",
                              stream, device, device));
    }
  }

  const KernelSpec& spec() const { return choice.spec; }
  const jit::LaunchGeometry& geometry() const { return kernel->metadata.geometry; }

  // The attention launch (phase 1) and, when tiles split, the merge launch: the kernel again
  // (phase 2), or the family's merge program on the same grid. From sm_90 the merge is a
  // programmatic dependent of the attention launch: it is scheduled as the attention's CTAs
  // leave their SMs and waits in the kernel (griddepcontrol.wait) for the attention's end, so
  // the second launch's latency hides behind the first one's tail.
  void launch_two(driver::LaunchConfig config, mlajit_kernel::MlaParams& params,
                  void** kernel_args, bool merge) const {
    params.phase = 1;
    kernel->function.launch(config, kernel_args);
    if (!merge) return;
    params.phase = 2;
    config.programmatic_stream_serialization = device_info.cc_major >= 9;
    if (!merge_kernel) {
      kernel->function.launch(config, kernel_args);
      return;
    }
    const jit::LaunchGeometry& merge_geometry = merge_kernel->metadata.geometry;
    config.block_x = static_cast<unsigned>(merge_geometry.threads_per_block);
    config.dynamic_smem_bytes = static_cast<unsigned>(merge_geometry.dynamic_smem_bytes);
    void* merge_args[] = {&params};
    merge_kernel->function.launch(config, merge_args);
  }

  void choose_launch_path() {
    const int per_sm = kernel->function.max_active_blocks_per_sm(geometry().threads_per_block,
                                                                 geometry().dynamic_smem_bytes);
    if (per_sm < 1) {
      throw Error(ErrorCode::kUnsupported,
                  fmt::format("{} cannot run on device {} ({}): not one CTA fits an SM with {} B "
                              "of shared memory; force a smaller tier (MlaOptions::force_tier)",
                              spec().text(), device, device_info.name,
                              geometry().dynamic_smem_bytes));
    }
    max_ctas = per_sm * device_info.sm_count;
    // A kernel without a grid barrier merges in a second launch (of itself or of the family's
    // merge program).
    two_launch = options.force_two_launch || !geometry().cooperative;
    if (!two_launch && !device_info.cooperative_launch) {
      logger("mlajit.attention")
          ->warn("device {} does not support cooperative launches: using the two-launch path "
                 "(attention, then merge)", device);
      two_launch = true;
    }
  }
};

namespace {

// A moved-from object has no state left: say so instead of dereferencing null.
template <typename ImplPtr>
auto& live(ImplPtr& impl) {
  if (!impl) {
    throw Error(ErrorCode::kInvalidArgument,
                "this BatchMlaAttention was moved from: use the object it was moved to");
  }
  return *impl;
}

}  // namespace

BatchMlaAttention::BatchMlaAttention(const MlaShape& shape, const MlaOptions& options)
    : impl_(std::make_unique<Impl>()) {
  validate_shape_and_options(shape, options);
  Impl& s = *impl_;
  s.shape = shape;
  s.options = options;
  s.device = driver::resolve_device(options.device);
  driver::set_current_device(s.device);
  s.device_info = driver::device_info(s.device);
  s.choice = choose_kernel(shape, device_target(s.device_info), options);
  s.kernel = jit::KernelRegistry::instance().load(s.spec(), s.device, options.compile_mode);
  if (const std::optional<KernelSpec> merge = s.choice.family->merge_spec(s.spec())) {
    s.merge_kernel = jit::KernelRegistry::instance().load(*merge, s.device, options.compile_mode);
  }
  s.choose_launch_path();
  // Partial rows hold the output's type.
  s.workspace = std::make_unique<MlaWorkspace>(s.max_ctas, shape.head_dim_ckv, dtype_size(shape.dtype));
  if (options.workspace_bytes > 0) s.workspace->reserve(options.workspace_bytes);
  logger("mlajit.attention")
      ->debug("BatchMlaAttention on device {} ({}): {} , {} co-resident CTAs, {}", s.device,
              s.device_info.name, s.spec().text(), s.max_ctas,
              s.two_launch ? "two-launch" : "cooperative");
}

BatchMlaAttention::~BatchMlaAttention() = default;
BatchMlaAttention::BatchMlaAttention(BatchMlaAttention&&) noexcept = default;
BatchMlaAttention& BatchMlaAttention::operator=(BatchMlaAttention&&) noexcept = default;

void BatchMlaAttention::plan(const MlaBatch& batch, void* stream) {
  Impl& s = live(impl_);
  // Whatever fails below (a bad batch, a stream of another device, the upload), the previous
  // plan is gone: run() refuses until a plan() succeeds, rather than run the old work lists
  // over the new tensors.
  s.planned = false;
  if (batch.batch_size < 0) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("batch_size={} is negative", batch.batch_size));
  }
  plan::PlanInput input;
  input.qo_indptr = batch.qo_indptr;
  input.kv_indptr = batch.kv_indptr;
  input.kv_len = batch.kv_len;
  input.batch_size = batch.batch_size;
  input.num_heads = s.shape.num_heads;
  input.page_size = s.shape.page_size;
  input.causal = s.shape.causal;
  input.num_ctas = s.max_ctas;
  input.cta_tile_q = s.spec().tile.q_tile;
  input.kv_tile = s.spec().tile.kv_tile;
  input.cluster_size = s.options.cluster_size;
  input.item_overhead_tokens = s.choice.family->plan_item_overhead_tokens(s.shape);
  if (s.options.batch_invariant) {
    // Whether two CTAs share a tile must not follow the batch's mean query length.
    if (input.cluster_size == 0) input.cluster_size = 1;
    input.fixed_chunk_tokens = s.options.invariant_chunk_tokens != 0
                                   ? s.options.invariant_chunk_tokens
                                   : kDefaultInvariantChunkTokens;
  }
  plan::Plan new_plan = plan::make_plan(input);  // validates the indptrs and lengths
  if (s.options.validate_kv_indices) validate_kv_indices(batch);

  driver::set_current_device(s.device);
  s.require_stream_on_device(stream);
  const bool reserved = s.options.workspace_bytes > 0, pinned = s.options.cluster_size != 0;
  const auto growth = reserved && pinned ? MlaWorkspace::Growth::kRefused
                      : reserved || pinned ? MlaWorkspace::Growth::kWarned
                                           : MlaWorkspace::Growth::kAllowed;
  s.workspace->upload(new_plan, static_cast<CUstream>(stream), growth);
  s.current_plan = std::move(new_plan);
  s.planned_tokens = batch.batch_size > 0 ? batch.qo_indptr[batch.batch_size] : 0;
  s.planned = true;
}

namespace {

mlajit_kernel::MlaParams make_kernel_params(const MlaShape& shape, const MlaOptions& options,
                                            const MlaWorkspace& workspace,
                                            const MlaRunArgs& args) {
  mlajit_kernel::MlaParams p{};
  p.q_nope = args.q_nope;
  p.q_pe = args.q_pe;
  p.ckv = args.ckv;
  p.kpe = args.kpe;
  p.kv_indices = args.kv_indices;
  p.out = args.out;
  p.lse = args.lse;
  workspace.fill_params(&p);
  p.q_nope_stride_token = args.q_nope_stride_token;
  p.q_nope_stride_head = args.q_nope_stride_head;
  p.q_pe_stride_token = args.q_pe_stride_token;
  p.q_pe_stride_head = args.q_pe_stride_head;
  p.ckv_stride_page = args.ckv_stride_page;
  p.ckv_stride_token = args.ckv_stride_token;
  p.kpe_stride_page = args.kpe_stride_page;
  p.kpe_stride_token = args.kpe_stride_token;
  p.out_stride_token = args.out_stride_token;
  p.out_stride_head = args.out_stride_head;
  p.num_heads = shape.num_heads;
  p.page_size = shape.page_size;
  p.sm_scale_log2 = static_cast<float>(args.sm_scale * M_LOG2E);
  p.lse_base_e = options.lse_base == LseBase::kNatural ? 1 : 0;
  p.causal = shape.causal ? 1 : 0;
  p.kv_scale_ckv_device = args.kv_scale_ckv_device;
  p.kv_scale_kpe_device = args.kv_scale_kpe_device;
  p.kv_scale_ckv = args.kv_scale_ckv;
  p.kv_scale_kpe = args.kv_scale_kpe;
  p.ckv_scales = args.ckv_scales;
  p.ckv_scales_stride_page = args.ckv_scales_stride_page;
  p.ckv_scales_stride_token = args.ckv_scales_stride_token;
  return p;
}

// The program's geometry over the plan's grid. Thread-block clusters need the driver's
// cuLaunchKernelEx, which LaunchConfig does not reach yet: refused rather than launched wrong.
driver::LaunchConfig launch_config(const jit::LaunchGeometry& geometry, const plan::Plan& plan,
                                   CUstream stream) {
  if (geometry.cluster != jit::ClusterDims{}) {
    throw Error(ErrorCode::kUnsupported,
                fmt::format("the kernel asks for {}x{}x{} thread-block clusters, which this "
                            "library's launch path does not set yet",
                            geometry.cluster.x, geometry.cluster.y, geometry.cluster.z));
  }
  driver::LaunchConfig config;
  config.grid_x = static_cast<unsigned>(plan.cluster_size);
  config.grid_y = static_cast<unsigned>(plan.grid_y);
  config.block_x = static_cast<unsigned>(geometry.threads_per_block);
  config.dynamic_smem_bytes = static_cast<unsigned>(geometry.dynamic_smem_bytes);
  config.stream = stream;
  return config;
}

}  // namespace

void BatchMlaAttention::run(const MlaRunArgs& args, void* stream) {
  Impl& s = live(impl_);
  if (!s.planned) {
    throw Error(ErrorCode::kInvalidArgument,
                "run() called before plan() succeeded: plan() was not called yet, or its last "
                "call failed; plan the batch first");
  }
  validate_run_args(s.shape, args, s.planned_tokens);
  const auto cu_stream = static_cast<CUstream>(stream);
  driver::set_current_device(s.device);
  s.require_stream_on_device(stream);
  mlajit_kernel::MlaParams params = make_kernel_params(s.shape, s.options, *s.workspace, args);
  const plan::Plan& plan = s.current_plan;
  // Nothing to compute (no query tokens); a pinned grid launches anyway, so that a graph
  // captured on an empty batch still runs after a re-plan.
  if (plan.work_items.empty() && s.options.cluster_size == 0) return;

  driver::LaunchConfig config = launch_config(s.geometry(), plan, cu_stream);
  void* kernel_args[] = {&params, s.extra_kernel_params(args)};

  // Without split tiles there is nothing to merge: one plain launch, no barrier. A pinned
  // grid (the CUDA-graph mode) always launches the same way, so a captured graph stays
  // right for plans that do split.
  const bool needs_merge = !plan.merge_records.empty() || s.options.cluster_size != 0;
  if (!needs_merge || s.two_launch) {
    s.launch_two(config, params, kernel_args, needs_merge);
    return;
  }
  params.phase = 0;
  config.cooperative = true;
  try {
    s.kernel->function.launch(config, kernel_args);
  } catch (const Error& e) {
    // The grid fits by occupancy x SMs but the device will not hold it (MPS, green contexts,
    // SMs taken by other work): nothing was launched, so take the two-launch path from now on.
    if (e.code() != ErrorCode::kUnsupported) throw;
    logger("mlajit.attention")
        ->warn("cooperative launch refused on device {} ({}); using the two-launch path "
               "(attention, then merge) from now on",
               s.device, e.what());
    s.two_launch = true;
    config.cooperative = false;
    s.launch_two(config, params, kernel_args, true);
  }
}

MlaPlanInfo BatchMlaAttention::plan_info() const {
  const Impl& s = live(impl_);
  MlaPlanInfo info;
  info.tier = s.choice.family->tier_of(s.spec());
  info.two_launch = s.two_launch;
  if (!s.planned) return info;
  const plan::Plan& plan = s.current_plan;
  info.cluster_size = plan.cluster_size;
  info.grid_ctas = plan.cluster_size * plan.grid_y;
  info.work_items = static_cast<int>(plan.work_items.size());
  info.split_tiles_rows = static_cast<int>(plan.partial_rows);
  info.workspace_bytes = s.workspace->bytes();
  info.workspace_bytes_needed = s.workspace->reservation_for(MlaWorkspace::capacity_of(plan));
  if (!plan.cta_cost.empty()) {
    const double total = std::accumulate(plan.cta_cost.begin(), plan.cta_cost.end(), 0.0);
    const double busiest = *std::max_element(plan.cta_cost.begin(), plan.cta_cost.end());
    const double mean = total / plan.cta_cost.size();
    info.busiest_to_mean = mean > 0 ? busiest / mean : 1.0;
  }
  return info;
}

const MlaShape& BatchMlaAttention::shape() const { return live(impl_).shape; }
std::string BatchMlaAttention::spec_text() const { return live(impl_).spec().text(); }

}  // namespace mlajit
