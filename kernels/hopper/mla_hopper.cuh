// The MLA paged-attention kernel of the `hopper` family (sm_90a): wgmma from shared memory,
// KV tiles brought in by TMA (or a cp.async gather for pages that do not hold whole tiles),
// four warpgroups with different roles.
//
// A CTA owns 64 packed query rows (row = token * num_heads + head) by 576 dims: the wgmma M.
// KV arrives in tiles of 64 tokens through a ring of two stages. Per tile:
//  - the scores warpgroup (0) computes S = Q K^T over all 576 dims (Q is read from shared
//    memory), the online softmax, and publishes P (in its own tile, free once the output
//    warpgroups are done with the tile before) in two halves of 32 tokens, the rows' rescale
//    factors before either: the output warpgroups rescale O while it exponentiates and start
//    P V on the first half while it computes the second. It does no P V: its chain per tile,
//    the kernel's critical path, is Q K^T, the exponentials and the publication;
//  - the output warpgroups (1: columns 0-255, 2: columns 256-511) accumulate P V from the
//    published P, each holding half of O;
//  - the producer warpgroup (3) refills a stage as soon as both output warpgroups are done
//    with it (an item's last stage, once they have also written O through it): one TMA thread
//    with the page ids read a tile ahead (joined, in launches bound by memory, by the other
//    threads' cp.async for the last regions); or 128 gathering threads, or over an e4m3 cache
//    128 threads that load the codes into registers and store their values in f16
//    (StageTypeOf: the scales apply to Q, the scores and O instead), which refill each token
//    half of a stage (rows 0-31 and 32-63 of every region) as soon as it is free: with two
//    stages a tile's refill can only start once the tile two before is multiplied, so the
//    first half's starts under the second half's P V.
// While the output warpgroups work on tile i, the scores warpgroup is already on tile i + 1.
// Per stage, mbarriers say the copy is full, the rescale factors and each half of P are
// published, and both output warpgroups are done with each token half of it. The host contract
// (work items, merge records) is mla_params.cuh, as for the portable family: the planner,
// workspace and merge are shared; the merge runs in a launch of its own (the phase is not read).
#pragma once
#include "hopper/hopper_config.cuh"
#include "common/dependent_launch.cuh"
#include "hopper/load_kv_codes.cuh"
#include "hopper/load_kv_copies.cuh"
#include "hopper/load_q.cuh"
#include "hopper/output_stages.cuh"
#include "hopper/scores_stages.cuh"
#include "hopper/write_output.cuh"

namespace mlajit_kernel {

template <typename C>
__device__ __forceinline__ void producer_loop(const MlaParams& p, const HopperTma& tma,
                                              const HopperSmem<C>& sm, const HopperTile& t,
                                              uint32_t sequence, const HopperRole& role) {
  if constexpr (C::kTokenScales) {
    producer_loop_token_codes<C>(p, sm, t, sequence, role);
  } else if constexpr (C::kKvCodes) {
    producer_loop_codes<C>(p, sm, t, sequence, role);
  } else {
    producer_loop_copies<C>(p, tma, sm, t, sequence, role);
  }
}

// The CTA's first item after `w` with rows here (items without rows are skipped by every
// role), and its tile; w == last when there is none.
struct ItemCursor {
  int32_t w;
  HopperTile t;
};

template <typename C>
__device__ __forceinline__ ItemCursor next_item(const MlaParams& p, int32_t w, int32_t last,
                                                const HopperRole& role) {
  ItemCursor c;
  for (c.w = w + 1; c.w < last; ++c.w) {
    c.t = make_hopper_tile<C>(p, p.work_items[c.w], role);
    if (c.t.rows > 0) break;
  }
  return c;
}

// One work item, in each role (scores_item, output_item, producer_item): this CTA's 64 rows
// of a query tile against one KV chunk. `sequence` counts the tiles the CTA has run so far
// (the stage ring and its barrier phases), `items` the work items (the row sums' barrier
// phases).
// The scores warpgroup's item, which returns the next one (`last`: the CTA's end; its tile is
// then unset). Its Q was issued at the end of the previous item when `q_loaded`: this
// warpgroup loads the next item's Q as soon as its last Q K^T of this one is done (only it
// reads Q; a wgmma is one operation of the whole warpgroup, so a warp past its wait knows all
// four warps' reads of Q done), so that the copies go out before the output warpgroups'
// stores of this item's output.
template <typename C>
__device__ __forceinline__ ItemCursor scores_item(const MlaParams& p, const HopperSmem<C>& sm,
                                                  const ItemCursor& item, int32_t last,
                                                  uint32_t& sequence, uint32_t& items,
                                                  bool& q_loaded, const HopperRole& role) {
  const HopperTile& t = item.t;
  const CacheScales<C> scales = CacheScales<C>::of(p);
  const float scale_log2 = p.sm_scale_log2 * scales.ckv;
  SoftmaxRows st;
  st.init();
  if (t.num_tiles > 0) {
    if (!q_loaded) load_q<C>(p, sm, t, role);
    cp_async_wait<0>();
    if (C::kKvCodes && !C::kTokenScales) {
      named_barrier_sync(kScoresOnly, C::kGroupThreads);  // every thread's chunks have landed
      convert_q_to_stage_type<C>(sm, scales.kpe_over_ckv, role);
    }
    fence_proxy_async_shared();
    named_barrier_sync(kScoresOnly, C::kGroupThreads);
  }
  scores_loop<C>(sm, t, sequence, scale_log2, st, role);
  const ItemCursor next = next_item<C>(p, item.w, last, role);
  q_loaded = next.w < last && next.t.num_tiles > 0;
  if (q_loaded) load_q<C>(p, sm, next.t, role);
  const bool partial = t.partial_row >= 0;
  const int32_t partial_row0 = t.partial_row + blockIdx.x * C::kRows;
  // The output warpgroups have read the previous item's row sums.
  if (items > 0) mbarrier_wait(sm.sums_read(), (items - 1) & 1u);
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    const int row = role.row(j);
    const float l = quad_sum(st.l[j]);
    if (role.lane % 4 == 0) sm.row_sum[row] = l;
    const float lse = st.m[j] == neg_inf() || l <= 0.f ? neg_inf()
                                                       : st.m[j] * scale_log2 + fast_log2(l);
    if (role.lane % 4 == 0 && row < t.rows) {
      if (partial) {
        p.partial_lse[partial_row0 + row] = lse;
      } else {
        write_final_lse(p, t.q_token_base, t.row0 + row, lse);
      }
    }
  }
  // The output warpgroups read the row sums after this phase, and say so on sums_read: with
  // both barriers each side is at most one item ahead of the other.
  mbarrier_arrive(sm.sums());
  sequence += t.num_tiles;
  ++items;
  return next;
}

template <typename C>
__device__ __forceinline__ void output_item(const MlaParams& p, const HopperTma& tma,
                                            const HopperSmem<C>& sm, const MlaWorkItem& item,
                                            uint32_t& sequence, uint32_t& items,
                                            const HopperRole& role) {
  const HopperTile t = make_hopper_tile<C>(p, item, role);
  if (t.rows <= 0) return;
  float o[C::kOutCols / 2];
#pragma unroll
  for (int i = 0; i < C::kOutCols / 2; ++i) o[i] = 0.f;
  output_loop<C>(tma, sm, t, sequence, o, role);
  const int last_stage = t.num_tiles > 0 ? StageSlot::of(sequence + t.num_tiles - 1).stage : -1;
  sequence += t.num_tiles;
  mbarrier_wait(sm.sums(), items & 1u);
  ++items;
  const float l[2] = {sm.row_sum[role.row(0)], sm.row_sum[role.row(1)]};
  mbarrier_arrive(sm.sums_read());
  write_output<C>(p, o, l, t, sm, last_stage, role);
}

// No role waits for another at an item's start: the producer goes on to the next item's tiles
// as soon as their stages are free, the scores warpgroup as soon as they land.
template <typename C>
__device__ __forceinline__ void producer_item(const MlaParams& p, const HopperTma& tma,
                                              const HopperSmem<C>& sm, const MlaWorkItem& item,
                                              uint32_t& sequence, const HopperRole& role) {
  const HopperTile t = make_hopper_tile<C>(p, item, role);
  if (t.rows <= 0) return;
  producer_loop<C>(p, tma, sm, t, sequence, role);
  sequence += t.num_tiles;
}

// Every role runs its own loop over the CTA's work items.
enum class HopperRoleKind { kScores, kOutput, kProducer };

template <typename C, HopperRoleKind ROLE>
__device__ __forceinline__ void for_each_item(const MlaParams& p, const HopperTma& tma,
                                              const HopperSmem<C>& sm, const HopperRole& role) {
  uint32_t sequence = 0, items = 0;
  const int32_t first = p.work_indptr[blockIdx.y];
  const int32_t last = p.work_indptr[blockIdx.y + 1];
  if constexpr (ROLE == HopperRoleKind::kScores) {
    bool q_loaded = false;
    ItemCursor item = next_item<C>(p, first - 1, last, role);
#pragma unroll 1
    while (item.w < last) item = scores_item<C>(p, sm, item, last, sequence, items, q_loaded, role);
  } else {
#pragma unroll 1
    for (int32_t w = first; w < last; ++w) {
      if constexpr (ROLE == HopperRoleKind::kOutput) {
        output_item<C>(p, tma, sm, p.work_items[w], sequence, items, role);
      } else {
        producer_item<C>(p, tma, sm, p.work_items[w], sequence, role);
      }
    }
  }
}

// Each role is one branch of one if/else chain, whole, with its setmaxnreg first: the form in
// which ptxas honours setmaxnreg (otherwise it keeps the entry cap of 168 registers and spills).
// The roles meet once each holds its registers (as when an in-launch merge followed them, the
// form every schedule was measured in). Split tiles are merged by a launch of their own
// (merge/mla_merge_launch.cuh), scheduled as this grid's CTAs leave their SMs.
template <typename Config>
__global__ void __launch_bounds__(Config::kThreads, 1)
    mla_hopper_kernel(const __grid_constant__ MlaParams params, const __grid_constant__ HopperTma tma) {
  extern __shared__ __align__(128) unsigned char hopper_smem[];
  const HopperRole role = HopperRole::make();
  launch_dependents();  // the merge launch behind this one may be scheduled as SMs free up
  const HopperSmem<Config> sm = HopperSmem<Config>::make(hopper_smem);
  if (threadIdx.x == 0) {
    for (int stage = 0; stage < Config::kStages; ++stage) {
      // Arrivals: the TMA thread's, and each producer thread's cp.async.
      mbarrier_init(sm.full(stage), !tma_copies<Config>(tma) ? Config::kProducerThreads
                                    : tma.split_copies ? 1 + Config::kProducerThreads
                                                       : 1);
      mbarrier_init(sm.empty(stage, 0), Config::kOutputThreads);
      mbarrier_init(sm.empty(stage, 1), Config::kOutputThreads);
      mbarrier_init(sm.scaled(stage), Config::kGroupThreads);
      mbarrier_init(sm.ready(stage, 0), Config::kGroupThreads);
      mbarrier_init(sm.ready(stage, 1), Config::kGroupThreads);
    }
    mbarrier_init(sm.sums(), Config::kGroupThreads);
    mbarrier_init(sm.sums_read(), Config::kOutputThreads);
    mbarrier_init(sm.p_read(), Config::kOutputThreads);
    fence_barrier_init();
  }
  __syncthreads();
  // The tensor maps into the descriptor cache before the producer's first copy.
  if (tma_copies<Config>(tma) && threadIdx.x == 3 * Config::kGroupThreads) {
    prefetch_tensor_map(&tma.ckv);
    prefetch_tensor_map(&tma.kpe);
  }
  if (role.group == 0) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(Config::kScoresRegisters));
    block_barrier_across_roles();
    for_each_item<Config, HopperRoleKind::kScores>(params, tma, sm, role);
  } else if (role.group == 1) {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(Config::kOutputRegisters));
    block_barrier_across_roles();
    for_each_item<Config, HopperRoleKind::kOutput>(params, tma, sm, role);
  } else if (role.group == 2) {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(Config::kOutputRegisters));
    block_barrier_across_roles();
    for_each_item<Config, HopperRoleKind::kOutput>(params, tma, sm, role);
  } else {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(Config::kProducerRegisters));
    block_barrier_across_roles();
    for_each_item<Config, HopperRoleKind::kProducer>(params, tma, sm, role);
  }
}

}  // namespace mlajit_kernel
