#include "attention/mla_workspace.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "common/logging.h"
#include "mlajit/error.h"

namespace mlajit {
namespace {

constexpr size_t kBarrierBytes = 256;  // the grid barrier's word, padded

size_t align_up(size_t value, size_t alignment) {
  return (value + alignment - 1) / alignment * alignment;
}

bool covers(const MlaWorkspace::Capacity& have, const MlaWorkspace::Capacity& need) {
  return need.work_items <= have.work_items && need.merge_records <= have.merge_records &&
         need.partial_rows <= have.partial_rows;
}

template <typename T>
void copy_array(void* base, size_t offset, const std::vector<T>& values) {
  if (!values.empty()) std::memcpy(static_cast<char*>(base) + offset, values.data(), values.size() * sizeof(T));
}

// Work items and merge records are records of one size, so the merge records can follow the
// plan's last work item in one array: one copy carries a plan, whatever its record counts.
constexpr size_t kRecordBytes = sizeof(mlajit_kernel::MlaWorkItem);
static_assert(sizeof(mlajit_kernel::MlaMergeRecord) == kRecordBytes,
              "merge records share the work items' array");

}  // namespace

MlaWorkspace::MlaWorkspace(int max_ctas, int head_dim_ckv, int o_dtype_bytes)
    : max_ctas_(max_ctas), row_bytes_(head_dim_ckv * o_dtype_bytes) {}

MlaWorkspace::Layout MlaWorkspace::layout_for(const Capacity& capacity) const {
  // The plan arrays, relative to the start of the plan region (the pinned buffer mirrors it).
  Layout l;
  const size_t indptr_bytes = (static_cast<size_t>(max_ctas_) + 1) * sizeof(int32_t);
  l.work_indptr = 0;
  l.merge_indptr = align_up(l.work_indptr + indptr_bytes, 256);
  l.records = align_up(l.merge_indptr + indptr_bytes, 256);
  l.plan_end = align_up(l.records + (capacity.work_items + capacity.merge_records) * kRecordBytes, 256);
  // Device-only parts follow the plan region, which itself follows the barrier words.
  l.partial_lse = align_up(kBarrierBytes + l.plan_end, 256);
  l.partial_o = align_up(l.partial_lse + capacity.partial_rows * sizeof(float), 256);
  l.total = l.partial_o + capacity.partial_rows * row_bytes_;
  return l;
}

void MlaWorkspace::allocate(const Capacity& capacity) {
  const Layout layout = layout_for(capacity);
  if (copy_done_) copy_done_->synchronize();  // the old pinned buffer may still be in a copy
  device_ = driver::DeviceBuffer();  // free first: the old and new need not both fit
  device_ = driver::DeviceBuffer(layout.total);
  // The grid barrier relies on zeroed words; it keeps them consistent from then on.
  driver::memset_d8(device_.ptr(), 0, kBarrierBytes);
  pinned_ = driver::PinnedBuffer(layout.plan_end);
  capacity_ = capacity;
  layout_ = layout;
}

MlaWorkspace::Capacity MlaWorkspace::capacity_for_bytes(uint64_t bytes) const {
  Capacity capacity;
  capacity.work_items = std::max<int64_t>(1024, bytes / 64 / sizeof(mlajit_kernel::MlaWorkItem));
  capacity.merge_records =
      std::max<int64_t>(1024, bytes / 64 / sizeof(mlajit_kernel::MlaMergeRecord));
  const uint64_t plan_bytes = layout_for(Capacity{capacity.work_items, capacity.merge_records, 0}).total;
  const uint64_t rest = bytes > plan_bytes ? bytes - plan_bytes : 0;
  capacity.partial_rows = std::max<int64_t>(1024, rest / (row_bytes_ + sizeof(float)));
  return capacity;
}

MlaWorkspace::Capacity MlaWorkspace::capacity_of(const plan::Plan& plan) {
  return Capacity{static_cast<int64_t>(plan.work_items.size()),
                  static_cast<int64_t>(plan.merge_records.size()), plan.partial_rows};
}

bool MlaWorkspace::indexes_fit(const plan::Plan& plan) const {
  return static_cast<int>(plan.work_indptr.size()) <= max_ctas_ + 1 &&
         static_cast<int>(plan.merge_indptr.size()) <= max_ctas_ + 1;
}

bool MlaWorkspace::holds(const Capacity& have, const plan::Plan& plan) const {
  return covers(have, capacity_of(plan)) && indexes_fit(plan);
}

uint64_t MlaWorkspace::reservation_for(const Capacity& need) const {
  const auto enough = [&](uint64_t bytes) { return covers(capacity_for_bytes(bytes), need); };
  // Less than the plan's own size never covers it, except where the capacities' floors do; a
  // reservation that small is not worth naming, so the plan's size is the lower end.
  const uint64_t own = bytes_for(need);
  uint64_t enough_bytes = own;
  while (!enough(enough_bytes)) enough_bytes *= 2;
  // Bisection. capacity_for_bytes grows with the bytes except for dips of a 256-byte alignment
  // step, so the answer always covers `need` and is the smallest to within such a step.
  uint64_t too_few = own - 1;
  while (enough_bytes - too_few > 1) {
    const uint64_t mid = too_few + (enough_bytes - too_few) / 2;
    (enough(mid) ? enough_bytes : too_few) = mid;
  }
  return enough_bytes;
}

void MlaWorkspace::reserve(uint64_t bytes) { allocate(capacity_for_bytes(bytes)); }

size_t MlaWorkspace::write_plan(const plan::Plan& plan) {
  char* base = static_cast<char*>(pinned_.data());
  copy_array(base, layout_.work_indptr, plan.work_indptr);
  copy_array(base, layout_.records, plan.work_items);
  // The merge records' indexes count from the array's start, past the work items.
  const auto items = static_cast<int32_t>(plan.work_items.size());
  auto* merge_indptr = reinterpret_cast<int32_t*>(base + layout_.merge_indptr);
  for (size_t i = 0; i < plan.merge_indptr.size(); ++i) merge_indptr[i] = plan.merge_indptr[i] + items;
  copy_array(base, layout_.records + items * kRecordBytes, plan.merge_records);
  return layout_.records + (plan.work_items.size() + plan.merge_records.size()) * kRecordBytes;
}

void MlaWorkspace::grow_for(const plan::Plan& plan, Growth growth) {
  const Capacity need = capacity_of(plan);
  if (device_.size() > 0 && growth == Growth::kRefused) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("this plan needs a workspace of {} bytes ({} work items, {} merge "
                            "records, {} partial rows) and MlaOptions::workspace_bytes reserved "
                            "{} ({} / {} / {}): growing would move it under CUDA graphs captured "
                            "with the pinned grid; reserve at least {} bytes",
                            bytes_for(need), need.work_items, need.merge_records,
                            need.partial_rows, device_.size(), capacity_.work_items,
                            capacity_.merge_records, capacity_.partial_rows,
                            reservation_for(need)));
  }
  // Headroom, so that a batch growing by a little does not move the workspace each time.
  Capacity grown;
  grown.work_items = std::max<int64_t>(capacity_.work_items, 2 * need.work_items + 64);
  grown.merge_records = std::max<int64_t>(capacity_.merge_records, 2 * need.merge_records + 64);
  grown.partial_rows = std::max<int64_t>(capacity_.partial_rows, 2 * need.partial_rows + 256);
  if (device_.size() > 0) {
    logger("mlajit.attention")
        ->log(growth == Growth::kWarned ? spdlog::level::warn : spdlog::level::info,
              "workspace grows from {} to {} bytes: CUDA graphs captured before now hold the "
              "old address and must be captured again (MlaOptions::workspace_bytes of at least "
              "{} avoids this)",
              device_.size(), bytes_for(grown), reservation_for(need));
  }
  allocate(grown);
}

void MlaWorkspace::upload(const plan::Plan& plan, CUstream stream, Growth growth) {
  if (!indexes_fit(plan)) {
    throw Error(ErrorCode::kInternal,
                fmt::format("plan has {} work and {} merge index entries, more than the {} CTAs "
                            "(+1) the device holds",
                            plan.work_indptr.size(), plan.merge_indptr.size(), max_ctas_));
  }
  if (device_.size() == 0 || !holds(capacity_, plan)) grow_for(plan, growth);
  // The previous copy may still be reading the pinned buffer.
  if (copy_done_) copy_done_->synchronize();
  else copy_done_.emplace();
  // Only what the plan uses (capacity beyond it is stale and never read), in one copy.
  const size_t bytes = write_plan(plan);
  driver::memcpy_htod_async(device_.ptr() + kBarrierBytes, pinned_.data(), bytes, stream);
  copy_done_->record(stream);
}

void MlaWorkspace::fill_params(mlajit_kernel::MlaParams* params) const {
  const CUdeviceptr base = device_.ptr();
  const CUdeviceptr plan = base + kBarrierBytes;
  params->barrier = reinterpret_cast<uint32_t*>(base);
  params->work_indptr = reinterpret_cast<const int32_t*>(plan + layout_.work_indptr);
  params->work_items = reinterpret_cast<const mlajit_kernel::MlaWorkItem*>(plan + layout_.records);
  params->merge_indptr = reinterpret_cast<const int32_t*>(plan + layout_.merge_indptr);
  params->merge_records =
      reinterpret_cast<const mlajit_kernel::MlaMergeRecord*>(plan + layout_.records);
  params->partial_lse = reinterpret_cast<float*>(base + layout_.partial_lse);
  params->partial_o = reinterpret_cast<void*>(base + layout_.partial_o);
}

}  // namespace mlajit
