#!/usr/bin/env python3
"""Writes a copy of kernels/ with clock64 stamps in the portable kernel (kernels/portable/), for
tools/dev/mla_kernel_harness.cu built with -DHARNESS_TRACE and run as `--one H B L page`.

  tools/dev/trace/portable_trace.py OUT_DIR      (then nvcc ... -I OUT_DIR/kernels -DHARNESS_TRACE)

Stamps (thread 0 of CTA (0,0), which is warp 0 of the first warpgroup): per kernel
(entry, items done, after the grid barrier, end), per work item of the CTA (start, after its
first block barrier, pipeline issued, KV loop done, normalized, staging done, stores issued) and
per tile of the CTA's sequence (loop top, tile landed, Q K^T, softmax, P V), plus %globaltimer
at every CTA's entry, items done and end. A stamp right after a block barrier is taken only
once a shared-memory read after the barrier has returned: BAR.SYNC.DEFER_BLOCKING lets a plain
clock read issue before the barrier releases the warp (tools/dev/barrier_probe.cu).
Each anchor must match once: when the kernel changes, fix the anchor here, not the output.
"""
import sys

from anchored_copy import write_edited_copy

HELPERS = r'''
// ---- development trace (tools/dev/trace/portable_trace.py) ----
__device__ long long g_ptrace_tile[512][5];
__device__ long long g_ptrace_item[8][7];
__device__ long long g_ptrace_kernel[4];
__device__ unsigned long long g_ptrace_cta[1024][3];
__device__ unsigned g_ptrace_sink;
__device__ __forceinline__ bool ptrace_thread() {
  return blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0;
}
__device__ __forceinline__ long long ptrace_clock() {
  long long t;
  asm volatile("mov.u64 %0, %%clock64;" : "=l"(t));
  return t;
}
// The clock once a shared-memory read issued after a barrier has returned: the loop's exit
// depends on the value read, and a warp issues in order.
__device__ __forceinline__ long long ptrace_clock_after_barrier(uint32_t smem_address) {
  unsigned v;
  do {
    asm volatile("ld.volatile.shared.u32 %0, [%1];" : "=r"(v) : "r"(smem_address));
  } while (v == 0x7fc0dead);
  return ptrace_clock();
}
__device__ __forceinline__ void ptrace_cta(int k) {
  if (threadIdx.x == 0) {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    const unsigned cta = blockIdx.y * gridDim.x + blockIdx.x;
    if (cta < 1024) g_ptrace_cta[cta][k] = t;
  }
}
__device__ unsigned g_ptrace_tiles_done;  // the CTA's sequence number of the next tile
'''

EDITS = [
    # helpers after the namespace opens (the first one in the file)
    ("namespace mlajit_kernel {\n\ntemplate <typename A, typename B>\nstruct SameType {",
     "namespace mlajit_kernel {\n" + HELPERS + "\ntemplate <typename A, typename B>\nstruct SameType {"),
    # per tile
    ("""  for (int tile = 0; tile < t.num_tiles; ++tile) {
    advance_pipeline<C, Ring>(p, sm, t, role, tile, ids);
    const int stage = tile % C::kStages;
    if constexpr (C::kFp8Kv) dequantize_kv<C>(sm, stage, KvDequant::make(p), role);
    typename Rows::Scores s;
    if (Rows::computes_scores(role)) {
      compute_qk<C, Rows>(s, sm, stage, role);
      if (tile_needs_mask<C>(t, tile)) mask_scores<C, Rows>(s, t, tile, role);
    }
    Rows::update_softmax_state(s, st, sm, stage, p.sm_scale_log2, role);
    Rows::compute_pv(s, st, sm, stage, role);
  }""",
     """  for (int tile = 0; tile < t.num_tiles; ++tile) {
    const unsigned seq = ptrace_thread() ? g_ptrace_tiles_done + tile : 0;
    if (ptrace_thread() && seq < 512) g_ptrace_tile[seq][0] = ptrace_clock();
    advance_pipeline<C, Ring>(p, sm, t, role, tile, ids);
    if (ptrace_thread() && seq < 512) g_ptrace_tile[seq][1] = ptrace_clock_after_barrier(sm.q_nope);
    const int stage = tile % C::kStages;
    if constexpr (C::kFp8Kv) dequantize_kv<C>(sm, stage, KvDequant::make(p), role);
    typename Rows::Scores s;
    if (Rows::computes_scores(role)) {
      compute_qk<C, Rows>(s, sm, stage, role);
      if (tile_needs_mask<C>(t, tile)) mask_scores<C, Rows>(s, t, tile, role);
    }
    if (ptrace_thread() && seq < 512) g_ptrace_tile[seq][2] = ptrace_clock();
    Rows::update_softmax_state(s, st, sm, stage, p.sm_scale_log2, role);
    if (ptrace_thread() && seq < 512) g_ptrace_tile[seq][3] = ptrace_clock();
    Rows::compute_pv(s, st, sm, stage, role);
    if (ptrace_thread() && seq < 512) g_ptrace_tile[seq][4] = ptrace_clock();
  }
  if (ptrace_thread()) g_ptrace_tiles_done += t.num_tiles;"""),
]
# The item stamps and the kernel stamps come in a second table: they need the item index.
ITEM_EDITS = [
    ("""  const TileContext t = make_context<C>(p, item, role);
  if (t.rows <= 0) return;  // the second CTA of a pair whose tile is short
  __syncthreads();  // the previous item's output staging has been read""",
     """  const TileContext t = make_context<C>(p, item, role);
  const unsigned it = ptrace_thread() ? g_ptrace_sink : 0;
  if (ptrace_thread() && it < 8) g_ptrace_item[it][0] = ptrace_clock();
  if (t.rows <= 0) return;  // the second CTA of a pair whose tile is short
  __syncthreads();  // the previous item's output staging has been read
  if (ptrace_thread() && it < 8) g_ptrace_item[it][1] = ptrace_clock_after_barrier(sm.q_nope);"""),
    ("""  } else {
    attend<C, WideRows<C>>(p, sm, t);
  }
}""",
     """  } else {
    attend<C, WideRows<C>>(p, sm, t);
  }
  if (ptrace_thread()) {
    if (it < 8) g_ptrace_item[it][6] = ptrace_clock();
    g_ptrace_sink = it + 1;
  }
}"""),
    ("""  if (t.num_tiles > 0) start_pipeline<C, Ring>(p, sm, t, role);
  typename Rows::State st;""",
     """  if (t.num_tiles > 0) start_pipeline<C, Ring>(p, sm, t, role);
  if (ptrace_thread() && g_ptrace_sink < 8) g_ptrace_item[g_ptrace_sink][2] = ptrace_clock();
  typename Rows::State st;"""),
    ("""  cp_async_wait<0>();
  float lse[Rows::kLseRows];
  Rows::normalize(st, sm, p.sm_scale_log2, lse, role);
  write_output<C, Rows>(p, st, lse, sm, t, role);""",
     """  cp_async_wait<0>();
  if (ptrace_thread() && g_ptrace_sink < 8) g_ptrace_item[g_ptrace_sink][3] = ptrace_clock();
  float lse[Rows::kLseRows];
  Rows::normalize(st, sm, p.sm_scale_log2, lse, role);
  if (ptrace_thread() && g_ptrace_sink < 8) g_ptrace_item[g_ptrace_sink][4] = ptrace_clock_after_barrier(sm.q_nope);
  write_output<C, Rows>(p, st, lse, sm, t, role);"""),
    ("""  __syncthreads();
  store_output_rows<C>(p, sm, t, role);
}""",
     """  __syncthreads();
  if (ptrace_thread() && g_ptrace_sink < 8) g_ptrace_item[g_ptrace_sink][5] = ptrace_clock_after_barrier(sm.q_nope);
  store_output_rows<C>(p, sm, t, role);
}"""),
    ("""  const ThreadRole role = ThreadRole::make();
  if (params.phase != 2) {
    const SmemMap<Config> sm = SmemMap<Config>::make(storage);""",
     """  const ThreadRole role = ThreadRole::make();
  if (ptrace_thread()) {
    g_ptrace_kernel[0] = ptrace_clock();
    g_ptrace_sink = 0;
    g_ptrace_tiles_done = 0;
  }
  ptrace_cta(0);
  if (params.phase != 2) {
    const SmemMap<Config> sm = SmemMap<Config>::make(storage);"""),
    ("""  if (params.phase == 0) grid_barrier(params.barrier, gridDim.x * gridDim.y);
  if (params.phase != 1) {  // after the grid barrier's block barrier: the tiles are done""",
     """  if (ptrace_thread()) g_ptrace_kernel[1] = ptrace_clock();
  ptrace_cta(1);
  if (params.phase == 0) grid_barrier(params.barrier, gridDim.x * gridDim.y);
  if (ptrace_thread()) g_ptrace_kernel[2] = ptrace_clock_after_barrier(static_cast<uint32_t>(__cvta_generic_to_shared(mla_smem)));
  if (params.phase != 1) {  // after the grid barrier's block barrier: the tiles are done"""),
    ("""        params, reinterpret_cast<float*>(mla_smem));
  }
}""",
     """        params, reinterpret_cast<float*>(mla_smem));
  }
  if (ptrace_thread()) g_ptrace_kernel[3] = ptrace_clock();
  ptrace_cta(2);
}"""),
]


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    # The helpers' anchor is in portable_config.cuh, which every other file of the kernel includes.
    return write_edited_copy(__file__, sys.argv[1], "portable", EDITS + ITEM_EDITS)


if __name__ == "__main__":
    sys.exit(main())
