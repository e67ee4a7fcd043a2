// How the device workspace is sized, on the CPU: what a reservation buys and what real plans
// need (the allocation itself needs a GPU and is tested there).
#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include "attention/mla_workspace.h"
#include "plan/planner.h"

using mlajit::MlaWorkspace;
using namespace mlajit::plan;

namespace {

constexpr int kH200Ctas = 132;  // one 221 KB CTA per SM

// B uniform decode requests of `kv_len` tokens, 128 heads, page 64, on the H200's grid.
Plan decode_plan(int batch, int kv_len, int cluster_size) {
  std::vector<int32_t> qo{0}, kv{0}, len;
  for (int b = 0; b < batch; ++b) {
    qo.push_back(qo.back() + 1);
    kv.push_back(kv.back() + (kv_len + 63) / 64);
    len.push_back(kv_len);
  }
  PlanInput in;
  in.qo_indptr = qo.data();
  in.kv_indptr = kv.data();
  in.kv_len = len.data();
  in.batch_size = batch;
  in.num_heads = 128;
  in.page_size = 64;
  in.num_ctas = kH200Ctas;
  in.cluster_size = cluster_size;
  return make_plan(in);
}

}  // namespace

TEST_CASE("a reservation goes almost all to partial rows, which real plans need most") {
  const MlaWorkspace workspace(kH200Ctas, 512, 2);
  for (uint64_t bytes : {uint64_t{16} << 20, uint64_t{64} << 20, uint64_t{1} << 30}) {
    INFO(bytes << " bytes reserved");
    const MlaWorkspace::Capacity capacity = workspace.capacity_for_bytes(bytes);
    const uint64_t laid_out = workspace.bytes_for(capacity);
    CHECK(laid_out <= bytes);
    CHECK(laid_out >= bytes - bytes / 100);
    const uint64_t partial_bytes = static_cast<uint64_t>(capacity.partial_rows) * (512 * 2 + 4);
    CHECK(partial_bytes >= bytes / 32 * 30);  // at least ~94% (once 75%)
  }
}

TEST_CASE("64 MiB reserved holds every baseline decode batch with the grid pinned") {
  // The largest is B=128 at L=16384 with 128 heads. Cutting every tile in three, the planner
  // once needed 49,152 partial rows for it (and a split giving partial rows three quarters of
  // the reservation held 48,960, so a re-plan moved the workspace under a captured graph).
  // Filling the pairs in order cuts a tile only where a pair ends: 16,640 rows, ~16 MiB.
  const MlaWorkspace workspace(kH200Ctas, 512, 2);
  const auto reserved = workspace.capacity_for_bytes(uint64_t{64} << 20);
  for (int batch : {1, 16, 64, 128}) {
    for (int kv_len : {1024, 4096, 16384}) {
      const Plan plan = decode_plan(batch, kv_len, 2);
      const auto need = MlaWorkspace::capacity_of(plan);
      INFO("B=" << batch << " L=" << kv_len << ": " << need.work_items << " work items, "
                << need.merge_records << " merge records, " << need.partial_rows << " partial rows");
      CHECK(workspace.holds(reserved, plan));
    }
  }
  const Plan largest = decode_plan(128, 16384, 2);
  CHECK(MlaWorkspace::capacity_of(largest).partial_rows == 16640);
  const uint64_t needed = workspace.bytes_for(MlaWorkspace::capacity_of(largest));
  CHECK(needed > (uint64_t{15} << 20));  // the header's "~16 MiB"
  CHECK(needed < (uint64_t{18} << 20));
  CHECK_FALSE(workspace.holds(workspace.capacity_for_bytes(uint64_t{8} << 20), largest));
}

TEST_CASE("a plan with more CTAs than the device holds does not fit any capacity") {
  const Plan plan = decode_plan(4, 1024, 1);
  const MlaWorkspace small_device(8, 512, 2);  // the plan was made for 132 CTAs
  CHECK_FALSE(small_device.holds(small_device.capacity_for_bytes(uint64_t{1} << 30), plan));
  const MlaWorkspace h200(kH200Ctas, 512, 2);
  CHECK(h200.holds(h200.capacity_for_bytes(uint64_t{1} << 30), plan));
}

TEST_CASE("the reservation named for a plan holds it, and is the smallest that does") {
  const MlaWorkspace workspace(kH200Ctas, 512, 2);
  struct Batch {
    int requests, kv_len, cluster_size;
  };
  for (const Batch& b : {Batch{128, 16384, 2}, Batch{16, 4096, 2}, Batch{1, 16384, 1},
                         Batch{64, 1024, 2}}) {
    const Plan plan = decode_plan(b.requests, b.kv_len, b.cluster_size);
    const auto need = MlaWorkspace::capacity_of(plan);
    INFO("B=" << b.requests << " L=" << b.kv_len << ": " << need.work_items << " work items, "
              << need.merge_records << " merge records, " << need.partial_rows << " rows");
    const uint64_t reservation = workspace.reservation_for(need);
    CHECK(workspace.holds(workspace.capacity_for_bytes(reservation), plan));
    CHECK(reservation >= workspace.bytes_for(need));
    if (need.partial_rows > 1024) {  // below the floors any reservation holds it
      CHECK_FALSE(workspace.holds(workspace.capacity_for_bytes(reservation - 512), plan));
    }
  }
}

TEST_CASE("the plan's own size is not enough to reserve for it") {
  // The growth and refusal messages once told callers to reserve bytes_for(need): the
  // reservation's fixed shares then left too few partial rows, and the plan was refused again.
  const MlaWorkspace workspace(kH200Ctas, 512, 2);
  const Plan plan = decode_plan(128, 16384, 2);
  const auto need = MlaWorkspace::capacity_of(plan);
  CHECK_FALSE(workspace.holds(workspace.capacity_for_bytes(workspace.bytes_for(need)), plan));
  CHECK(workspace.holds(workspace.capacity_for_bytes(workspace.reservation_for(need)), plan));
}
