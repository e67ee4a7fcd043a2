#include "attention/mla_workspace.h"

#include <cstring>

#include "common/logging.h"

namespace mlajit {
namespace {

size_t align_up(size_t value, size_t alignment) {
  return (value + alignment - 1) / alignment * alignment;
}

}  // namespace

void MlaWorkspace::reserve(uint64_t bytes) { ensure_device_bytes(static_cast<size_t>(bytes)); }

void MlaWorkspace::ensure_device_bytes(size_t bytes) {
  if (device_.size() >= bytes) return;
  if (device_.size() > 0) {
    logger("mlajit.attention")
        ->info("workspace grows from {} to {} bytes: CUDA graphs captured before now hold the "
               "old address and must be captured again (reserve MlaOptions::workspace_bytes)",
               device_.size(), bytes);
  }
  device_ = driver::DeviceBuffer();  // free first: the old and new need not both fit
  device_ = driver::DeviceBuffer(bytes);
  // The grid barrier relies on zeroed words; it keeps them consistent from then on.
  driver::memset_d8(device_.ptr(), 0, kBarrierBytes);
}

void MlaWorkspace::upload(const plan::Plan& plan, int head_dim_ckv, int o_dtype_bytes,
                          CUstream stream) {
  layout_ = plan.layout;
  partial_lse_offset_ = align_up(plan_offset_ + layout_.plan_bytes, 256);
  const size_t partial_rows = static_cast<size_t>(plan.partial_rows);
  partial_o_offset_ = align_up(partial_lse_offset_ + partial_rows * sizeof(float), 256);
  const size_t total = partial_o_offset_ + partial_rows * head_dim_ckv * o_dtype_bytes;
  // The previous copy may still be reading the pinned buffer.
  if (copy_done_) copy_done_->synchronize();
  else copy_done_.emplace();
  if (pinned_.size() < layout_.plan_bytes) pinned_ = driver::PinnedBuffer(layout_.plan_bytes * 2);
  ensure_device_bytes(total);
  plan.serialize(pinned_.data());
  driver::memcpy_htod_async(device_.ptr() + plan_offset_, pinned_.data(), layout_.plan_bytes,
                            stream);
  copy_done_->record(stream);
}

void MlaWorkspace::fill_params(mlajit_kernel::MlaParams* params) const {
  const CUdeviceptr base = device_.ptr();
  const CUdeviceptr plan = base + plan_offset_;
  params->barrier = reinterpret_cast<uint32_t*>(base);
  params->work_indptr = reinterpret_cast<const int32_t*>(plan + layout_.work_indptr);
  params->work_items =
      reinterpret_cast<const mlajit_kernel::MlaWorkItem*>(plan + layout_.work_items);
  params->merge_indptr = reinterpret_cast<const int32_t*>(plan + layout_.merge_indptr);
  params->merge_records =
      reinterpret_cast<const mlajit_kernel::MlaMergeRecord*>(plan + layout_.merge_records);
  params->partial_lse = reinterpret_cast<float*>(base + partial_lse_offset_);
  params->partial_o = reinterpret_cast<void*>(base + partial_o_offset_);
}

}  // namespace mlajit
