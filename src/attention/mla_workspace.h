#pragma once
// The device workspace of one BatchMlaAttention: the barrier words, the plan arrays, and the
// partial (o, lse) rows of split tiles, in one allocation. Plans reach it through one pinned
// host buffer and one async copy.
//
// Every array sits at an offset fixed by the workspace's capacities, not by the plan at hand:
// a kernel launch captured in a CUDA graph holds these pointers, and a re-plan that fits the
// capacities must leave them where they are. Only growth moves them: logged, and refused when
// the caller both reserved the workspace and pinned the grid (the CUDA-graph setup). Within
// the array of work items the merge records follow the plan's last item: the array's start is
// fixed, and the uploaded merge indexes say where the records are.
#include <cuda.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "driver/cuda_driver.h"
#include "kernels/common/mla_params.cuh"
#include "plan/planner.h"

namespace mlajit {

class MlaWorkspace {
 public:
  // `max_ctas` bounds both CSR index arrays; `head_dim_ckv` and `o_dtype_bytes` size a row.
  MlaWorkspace(int max_ctas, int head_dim_ckv, int o_dtype_bytes);
  MlaWorkspace(const MlaWorkspace&) = delete;
  MlaWorkspace& operator=(const MlaWorkspace&) = delete;

  struct Capacity {
    int64_t work_items = 0, merge_records = 0, partial_rows = 0;
  };
  // The capacities a workspace of about `bytes` holds: a 64th each for work items and merge
  // records (at least 1024 of each), the rest for partial rows, which real plans need most.
  Capacity capacity_for_bytes(uint64_t bytes) const;
  // Exactly what `plan` uses, and the bytes of a workspace with those capacities.
  static Capacity capacity_of(const plan::Plan& plan);
  uint64_t bytes_for(const Capacity& capacity) const { return layout_for(capacity).total; }
  // The smallest reservation (MlaOptions::workspace_bytes), at least bytes_for(need), whose
  // capacities cover `need`. Usually more than bytes_for(need): a reservation is split by fixed
  // shares, not by one plan's needs.
  uint64_t reservation_for(const Capacity& need) const;
  // Whether a workspace with capacity `have` can take `plan` without moving.
  bool holds(const Capacity& have, const plan::Plan& plan) const;

  // Sizes the workspace to about `bytes` up front (graph capture).
  void reserve(uint64_t bytes);
  // What a plan that does not fit may do: grow the workspace (logged at info: the caller
  // asked for growth on demand), grow it with a warning (the caller reserved it or pinned the
  // grid, so captured graphs may hold the old address), or fail (both: the graph setup).
  enum class Growth { kAllowed, kWarned, kRefused };
  // Copies `plan` to the device on `stream` (after the previous upload's copy has finished
  // reading the pinned buffer), first growing the workspace, which moves it, when the plan
  // does not fit and `growth` allows; kRefused throws Error(kInvalidArgument) naming the bytes.
  void upload(const plan::Plan& plan, CUstream stream, Growth growth);
  void fill_params(mlajit_kernel::MlaParams* params) const;
  uint64_t bytes() const { return device_.size(); }

 private:
  struct Layout {
    size_t work_indptr = 0, merge_indptr = 0;
    size_t records = 0;  // the work items, then the merge records (MlaParams points at both)
    size_t plan_end = 0, partial_lse = 0, partial_o = 0, total = 0;
  };
  Layout layout_for(const Capacity& capacity) const;
  // The index arrays are sized by the device's CTAs, not by capacity: no growth helps them.
  bool indexes_fit(const plan::Plan& plan) const;
  void allocate(const Capacity& capacity);
  void grow_for(const plan::Plan& plan, Growth growth);
  // Fills the pinned buffer; returns the bytes from its start the plan uses.
  size_t write_plan(const plan::Plan& plan);

  int max_ctas_;
  int row_bytes_;  // one partial O row
  Capacity capacity_;
  Layout layout_;
  driver::DeviceBuffer device_;
  driver::PinnedBuffer pinned_;
  std::optional<driver::Event> copy_done_;  // recorded after each upload's copy
};

}  // namespace mlajit
