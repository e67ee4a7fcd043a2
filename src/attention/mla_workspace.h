#pragma once
// The device workspace of one BatchMlaAttention: the barrier words, the plan arrays, and the
// partial (o, lse) rows of split tiles, in one allocation. Plans reach it through one pinned
// host buffer and one async copy; the allocation only grows, so pointers baked into a
// captured CUDA graph stay valid as long as a re-plan fits.
#include <cuda.h>

#include <cstdint>
#include <optional>

#include "driver/cuda_driver.h"
#include "kernels/mla_params.cuh"
#include "plan/planner.h"

namespace mlajit {

class MlaWorkspace {
 public:
  MlaWorkspace() = default;
  MlaWorkspace(const MlaWorkspace&) = delete;
  MlaWorkspace& operator=(const MlaWorkspace&) = delete;

  void reserve(uint64_t bytes);  // allocate up front (graph capture)
  // Copies `plan` to the device on `stream` (after the previous upload's copy has finished
  // reading the pinned buffer) and lays out the partial rows behind it.
  void upload(const plan::Plan& plan, int head_dim_ckv, int o_dtype_bytes, CUstream stream);
  void fill_params(mlajit_kernel::MlaParams* params) const;

 private:
  static constexpr size_t kBarrierBytes = 256;  // the barrier's 2 words, padded
  void ensure_device_bytes(size_t bytes);

  driver::DeviceBuffer device_;
  driver::PinnedBuffer pinned_;
  std::optional<driver::Event> copy_done_;  // recorded after each upload's copy
  plan::WorkspaceLayout layout_;
  size_t plan_offset_ = kBarrierBytes;
  size_t partial_lse_offset_ = 0;
  size_t partial_o_offset_ = 0;
};

}  // namespace mlajit
