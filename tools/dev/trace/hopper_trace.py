#!/usr/bin/env python3
"""Writes a copy of kernels/ with clock64 stamps in the hopper kernel (kernels/hopper/), for
tools/dev/hopper_harness.cu built with -DHARNESS_TRACE and run as `--one H B L page` (or
`--one8` over an e4m3 cache). Replaces hopper-trace.patch, a diff against the one-file kernel
of 7b9f0fa that no longer applies.

  tools/dev/trace/hopper_trace.py OUT_DIR   (then nvcc ... -I OUT_DIR/kernels -DHARNESS_TRACE)

Stamps, thread 0 of each warpgroup of CTA (0,0) (g_trace[role][tile of the CTA's sequence][k]):
- producer (role 3), 16-bit cache: 0 loop top, 1 past the whole stage's `empty` (TMA; the
  gather waits per half later), 2 copies issued and arrived on, 3 next page ids read; e4m3
  cache (per-tensor scales): 0 loop top, 1 past the first half's `empty`, 2 the first half's
  codes stored, 3 `full` arrived on.
- scores (role 0): 0 loop top, 1 past `full`, 2 Q K^T issued, 3 done, 4 rescale factors
  published, 5 first half of P published, 6 second half exponentiated, 7 published.
- output (roles 1, 2): 0 loop top, 1 past `scaled`, 2 O rescaled, 3 past the first `ready`,
  4 first P V issued, 5 second issued, 6 both done, 7 stage and P released.
Per item (g_item[role][item][k]): scores 0 start, 2 Q issued, 3 Q landed, 4 KV loop done,
1 past `sums_read`, 5 row sums published; output 0 start, 4 KV loop done, 5 past `sums`,
6 output written; producer 1 and 4 around its loop (item 0 only). Per kernel
(g_kernel[role][k]): 0 entry, 1 barriers initialised, 2 past the role barrier, 3 the role's
loop done (4, the merge, is gone: it is a launch of its own); and every CTA's %globaltimer at
entry, roles done and end (g_cta; the last two one moment, after all roles have met).
Each anchor must match once in the hopper files together (the role barrier's four times, in
mla_hopper.cuh): when the kernel changes, fix the anchor here, not the output.
"""
import sys

from anchored_copy import write_edited_copy

HELPERS = r'''
// Development trace (tools/dev/trace/hopper_trace.py).
__device__ long long g_trace[4][512][8];
__device__ long long g_item[4][8][8];
__device__ long long g_kernel[4][8];
__device__ unsigned long long g_cta[1024][4];
__device__ __forceinline__ long long clock_now() {
  long long t;
  asm volatile("mov.u64 %0, %%clock64;" : "=l"(t));
  return t;
}
__device__ __forceinline__ bool trace_thread() {
  return blockIdx.x == 0 && blockIdx.y == 0 && (threadIdx.x & 127) == 0;
}
__device__ __forceinline__ void stamp(int role, uint32_t seq, int k) {
  if (trace_thread() && seq < 512) g_trace[role][seq][k] = clock_now();
}
__device__ __forceinline__ void stamp_item(int role, uint32_t item, int k) {
  if (trace_thread() && item < 8) g_item[role][item][k] = clock_now();
}
__device__ __forceinline__ void stamp_kernel(int k) {
  if (trace_thread()) g_kernel[threadIdx.x >> 7][k] = clock_now();
}
__device__ __forceinline__ void stamp_cta(int k) {
  if (threadIdx.x == 0) {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    const unsigned cta = blockIdx.y * gridDim.x + blockIdx.x;
    if (cta < 1024) g_cta[cta][k] = t;
  }
}
'''

S = "sequence + tile"
EDITS = [
    # helpers, in hopper_config.cuh (which every other file includes)
    ("struct StageTypeOf<Q, e4m3_token128_t> {\n  using type = Q;\n};\n",
     "struct StageTypeOf<Q, e4m3_token128_t> {\n  using type = Q;\n};\n" + HELPERS),
    # producer, e4m3 codes (per-tensor scales)
    ("""    pages = CodePages<C>::fetch(p, t, role, tile + 2);
#pragma unroll
    for (int half = 0; half < CodeRows<C>::kHalves; ++half) {
      wait_half_free<C>(sm, sequence + tile, half);
#pragma unroll
      for (int region = 0; region < C::kRegions; ++region) {
        store_code_chunk<C>(codes[half][region], sm, role, slot.stage, half, region);
        // The next tile's chunk (zeros past the item's tiles: never stored).
        load_code_chunk<C>(codes[half][region], next, half, region, policy);
      }
    }
    // The stores are the generic proxy's; wgmma reads through the async proxy.
    fence_proxy_async_shared();
    mbarrier_arrive(sm.full(slot.stage));
""", f"""    pages = CodePages<C>::fetch(p, t, role, tile + 2);
    stamp(3, {S}, 0);
#pragma unroll
    for (int half = 0; half < CodeRows<C>::kHalves; ++half) {{
      wait_half_free<C>(sm, sequence + tile, half);
      if (half == 0) stamp(3, {S}, 1);
#pragma unroll
      for (int region = 0; region < C::kRegions; ++region) {{
        store_code_chunk<C>(codes[half][region], sm, role, slot.stage, half, region);
        // The next tile's chunk (zeros past the item's tiles: never stored).
        load_code_chunk<C>(codes[half][region], next, half, region, policy);
      }}
      if (half == 0) stamp(3, {S}, 2);
    }}
    // The stores are the generic proxy's; wgmma reads through the async proxy.
    fence_proxy_async_shared();
    mbarrier_arrive(sm.full(slot.stage));
    stamp(3, {S}, 3);
"""),
    # producer, 16-bit cache
    ("    if (tma.enabled) wait_stage_free<C>(sm, sequence + tile);\n",
     f"    stamp(3, {S}, 0);\n    if (tma.enabled) wait_stage_free<C>(sm, sequence + tile);\n    stamp(3, {S}, 1);\n"),
    ("""    if (!tma.enabled || tma.split_copies) cp_async_mbarrier_arrive(sm.full(slot.stage));
    pages = NextPages<C>::fetch(p, tma, t, role.index, tile + 1);
""", f"""    if (!tma.enabled || tma.split_copies) cp_async_mbarrier_arrive(sm.full(slot.stage));
    stamp(3, {S}, 2);
    pages = NextPages<C>::fetch(p, tma, t, role.index, tile + 1);
    stamp(3, {S}, 3);
"""),
    # scores
    ("""    mbarrier_wait(sm.full(slot.stage), slot.parity);
    float s[32];
    issue_qk<C>(s, sm, slot.stage);
    wgmma_wait<0>();
""", f"""    stamp(0, {S}, 0);
    mbarrier_wait(sm.full(slot.stage), slot.parity);
    stamp(0, {S}, 1);
    float s[32];
    issue_qk<C>(s, sm, slot.stage);
    stamp(0, {S}, 2);
    wgmma_wait<0>();
    stamp(0, {S}, 3);
"""),
    ("""    publish_alpha<C>(alpha, sm, slot.stage, role);
    exponentiate_half<C, 0>(s, pa, bases, st, scale_log2);
    // P's tile is free once both output warpgroups are done with the CTA's tile before.
    if (sequence + tile > 0) mbarrier_wait(sm.p_read(), (sequence + tile - 1) & 1u);
    publish_p<C, 0>(pa, sm, slot.stage, role);
    exponentiate_half<C, 1>(s, pa, bases, st, scale_log2);
    publish_p<C, 1>(pa, sm, slot.stage, role);
""", f"""    publish_alpha<C>(alpha, sm, slot.stage, role);
    stamp(0, {S}, 4);
    exponentiate_half<C, 0>(s, pa, bases, st, scale_log2);
    // P's tile is free once both output warpgroups are done with the CTA's tile before.
    if (sequence + tile > 0) mbarrier_wait(sm.p_read(), (sequence + tile - 1) & 1u);
    publish_p<C, 0>(pa, sm, slot.stage, role);
    stamp(0, {S}, 5);
    exponentiate_half<C, 1>(s, pa, bases, st, scale_log2);
    stamp(0, {S}, 6);
    publish_p<C, 1>(pa, sm, slot.stage, role);
    stamp(0, {S}, 7);
"""),
    # output
    ("""    mbarrier_wait(sm.scaled(slot.stage), slot.parity);
    mbarrier_wait(sm.full(slot.stage), slot.parity);  // the copy's bytes, seen by this proxy too
""", f"""    stamp(role.group, {S}, 0);
    mbarrier_wait(sm.scaled(slot.stage), slot.parity);
    stamp(role.group, {S}, 1);
    mbarrier_wait(sm.full(slot.stage), slot.parity);  // the copy's bytes, seen by this proxy too
"""),
    ("""    rescale_o<C>(o, alpha);
    mbarrier_wait(sm.ready(slot.stage, 0), slot.parity);
    issue_pv<C, 0>(o, sm, slot.stage, role);
    mbarrier_wait(sm.ready(slot.stage, 1), slot.parity);
    issue_pv<C, 1>(o, sm, slot.stage, role);
""", f"""    rescale_o<C>(o, alpha);
    stamp(role.group, {S}, 2);
    mbarrier_wait(sm.ready(slot.stage, 0), slot.parity);
    stamp(role.group, {S}, 3);
    issue_pv<C, 0>(o, sm, slot.stage, role);
    stamp(role.group, {S}, 4);
    mbarrier_wait(sm.ready(slot.stage, 1), slot.parity);
    issue_pv<C, 1>(o, sm, slot.stage, role);
    stamp(role.group, {S}, 5);
"""),
    ("""    wgmma_wait<0>();
    fence_registers(o);
    mbarrier_arrive(sm.p_read());
    if (!last) mbarrier_arrive(sm.empty(slot.stage, 1));
""", f"""    wgmma_wait<0>();
    stamp(role.group, {S}, 6);
    fence_registers(o);
    mbarrier_arrive(sm.p_read());
    if (!last) mbarrier_arrive(sm.empty(slot.stage, 1));
    stamp(role.group, {S}, 7);
"""),
    # scores, per item
    ("""  const float scale_log2 = p.sm_scale_log2 * scales.ckv;
  SoftmaxRows st;
  st.init();
  if (t.num_tiles > 0) {
    if (!q_loaded) load_q<C>(p, sm, t, role);
""", """  const float scale_log2 = p.sm_scale_log2 * scales.ckv;
  stamp_item(0, items, 0);
  SoftmaxRows st;
  st.init();
  if (t.num_tiles > 0) {
    if (!q_loaded) load_q<C>(p, sm, t, role);
    stamp_item(0, items, 2);
"""),
    ("""  scores_loop<C>(sm, t, sequence, scale_log2, st, role);
""", """  stamp_item(0, items, 3);
  scores_loop<C>(sm, t, sequence, scale_log2, st, role);
  stamp_item(0, items, 4);
"""),
    ("""  if (items > 0) mbarrier_wait(sm.sums_read(), (items - 1) & 1u);
""", """  if (items > 0) mbarrier_wait(sm.sums_read(), (items - 1) & 1u);
  stamp_item(0, items, 1);
"""),
    ("""  mbarrier_arrive(sm.sums());
  sequence += t.num_tiles;
  ++items;
  return next;
""", """  mbarrier_arrive(sm.sums());
  stamp_item(0, items, 5);
  sequence += t.num_tiles;
  ++items;
  return next;
"""),
    # output, per item
    ("""  const HopperTile t = make_hopper_tile<C>(p, item, role);
  if (t.rows <= 0) return;
  float o[C::kOutCols / 2];
""", """  const HopperTile t = make_hopper_tile<C>(p, item, role);
  stamp_item(role.group, items, 0);
  if (t.rows <= 0) return;
  float o[C::kOutCols / 2];
"""),
    ("""  output_loop<C>(tma, sm, t, sequence, o, role);
""", """  output_loop<C>(tma, sm, t, sequence, o, role);
  stamp_item(role.group, items, 4);
"""),
    ("""  mbarrier_wait(sm.sums(), items & 1u);
  ++items;
""", """  mbarrier_wait(sm.sums(), items & 1u);
  stamp_item(role.group, items, 5);
  ++items;
"""),
    ("""  write_output<C>(p, o, l, t, sm, last_stage, role);
}
""", """  write_output<C>(p, o, l, t, sm, last_stage, role);
  stamp_item(role.group, items - 1, 6);
}
"""),
    # producer, per item
    ("""  producer_loop<C>(p, tma, sm, t, sequence, role);
  sequence += t.num_tiles;
""", """  stamp_item(3, 0, 1);
  producer_loop<C>(p, tma, sm, t, sequence, role);
  stamp_item(3, 0, 4);
  sequence += t.num_tiles;
"""),
    # kernel
    ("""  extern __shared__ __align__(128) unsigned char hopper_smem[];
""", """  extern __shared__ __align__(128) unsigned char hopper_smem[];
  stamp_kernel(0);
  stamp_cta(0);
"""),
    ("""    fence_barrier_init();
  }
  __syncthreads();
""", """    fence_barrier_init();
  }
  __syncthreads();
  stamp_kernel(1);
"""),
    # after the roles' if/else chain: each role's end, then (all roles met) the CTA's. The
    # merge is a launch of its own since 6de6009: no stamp 4, and the CTA's stamps 1 and 2 are
    # one moment. Inside a branch thread 0 (the scores warpgroup's) would never stamp the CTA.
    ("(params, tma, sm, role);\n  }\n}\n",
     "(params, tma, sm, role);\n  }\n  stamp_kernel(3);\n  __syncthreads();\n  stamp_cta(1);\n"
     "  stamp_cta(2);\n}\n"),
    # past the role barrier, in each of the four role branches
    ("    block_barrier_across_roles();\n    for_each_item<Config, HopperRoleKind::",
     "    block_barrier_across_roles();\n    stamp_kernel(2);\n    for_each_item<Config, HopperRoleKind::", 4),
]


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    return write_edited_copy(__file__, sys.argv[1], "hopper", EDITS)


if __name__ == "__main__":
    sys.exit(main())
