// EXPERIMENT (A/B against mla_hopper.cuh's schedule; the loser goes): the "seesaw" schedule.
// KV tiles are taken in pairs (a = 2k in stage 0, b = 2k + 1 in stage 1). Warpgroup 0 computes
// Q K^T and the softmax of tile a, warpgroup 1 those of tile b, so that each warpgroup's
// exponentials overlap the other's matrix work and Q is read once per tile; warpgroup 0 owns
// output columns 0-255, warpgroup 1 columns 256-511, each accumulating both tiles (own P from
// registers, the other's from shared memory). The running max goes a -> b through shared
// memory; tile a's P is rescaled to b's max before warpgroup 1 reads it.
// A stage is refilled in two halves as soon as each is free: half A (regions 0-3: the left V
// columns and K dims 0-255) by warpgroup 0 after its P V, half B (regions 4-8) by warpgroup 1;
// each Q K^T starts with the half that was refilled first.
#pragma once
#include "hopper/mla_hopper.cuh"

namespace mlajit_kernel {

template <typename C>
struct SeesawLayout {
  static constexpr int kQOffset = 0;
  static constexpr int kKvOffset = C::kTileBytes;
  static constexpr int kPBufferOffset = 3 * C::kTileBytes;  // P of tile b, for warpgroup 0
  static constexpr int kMaxOffset = kPBufferOffset + C::Tile::kRegionBytes;  // [2][kRows]
  static constexpr int kRowSumOffset = kMaxOffset + 2 * C::kRows * 4;        // [2][kRows]
  static constexpr int kBarrierOffset = kRowSumOffset + 2 * C::kRows * 4;    // [2 stages][2 halves]
  static constexpr int kSmemBytes = kBarrierOffset + 4 * 8 + C::kAlignSlack;
};

enum SeesawBarrier : uint32_t {
  kMaxA = 1,     // wg0 -> wg1: tile a's row maxima
  kMaxB = 2,     // wg1 -> wg0: tile b's row maxima
  kPaReady = 3,  // wg0 -> wg1: tile a's P (rescaled to b's max) is in stage 0's kpe region
  kPbReady = 4,  // wg1 -> wg0: tile b's P is in the P buffer
  kPbFree = 5,   // wg0 -> wg1: the P buffer has been read
  kGroup0 = 6,
  kGroup1 = 7,
};

template <typename C>
struct SeesawSmem {
  uint32_t q, kv0, p_buffer, barrier0;
  float* max;      // [2][kRows]
  float* row_sum;  // [2][kRows]

  __device__ __forceinline__ static SeesawSmem make(unsigned char* dynamic_smem) {
    using L = SeesawLayout<C>;
    unsigned char* base = dynamic_smem + ((1024u - (smem_address(dynamic_smem) & 1023u)) & 1023u);
    SeesawSmem s;
    s.q = smem_address(base + L::kQOffset);
    s.kv0 = smem_address(base + L::kKvOffset);
    s.p_buffer = smem_address(base + L::kPBufferOffset);
    s.barrier0 = smem_address(base + L::kBarrierOffset);
    s.max = reinterpret_cast<float*>(base + L::kMaxOffset);
    s.row_sum = reinterpret_cast<float*>(base + L::kRowSumOffset);
    return s;
  }
  __device__ __forceinline__ uint32_t kv(int stage) const { return kv0 + stage * C::kTileBytes; }
  __device__ __forceinline__ uint32_t kpe_region(int stage) const {
    return kv(stage) + C::kKpeRegion * C::Tile::kRegionBytes;
  }
  __device__ __forceinline__ uint32_t full(int stage, int half) const {
    return barrier0 + (2 * stage + half) * 8;
  }
};

// The regions of half h of a stage: A = [0, kOutRegions), B = [kOutRegions, kRegions).
template <typename C>
struct HalfRegions {
  __device__ __forceinline__ static int first(int half) { return half == 0 ? 0 : C::kOutRegions; }
  __device__ __forceinline__ static int end(int half) { return half == 0 ? C::kOutRegions : C::kRegions; }
};

// Half `half` of tile `tile` into `stage`, by the calling warpgroup: TMA boxes from one thread,
// or a gather by all 128 (zero-filled past kv_stop). A tile past the chunk's end only
// completes the barrier's phase (TMA) or arrives as zeros (gather).
template <typename C>
__device__ __forceinline__ void load_half(const MlaParams& p, const HopperTma& tma,
                                          const SeesawSmem<C>& sm, const HopperTile& t,
                                          const HopperRole& role, int tile, int stage, int half) {
  const uint32_t dst = sm.kv(stage), barrier = sm.full(stage, half);
  const int r0 = HalfRegions<C>::first(half), r1 = HalfRegions<C>::end(half);
  if (tma.enabled) {
    if (role.index != 0) return;
    if (tile >= t.num_tiles) {
      mbarrier_arrive(barrier);
      return;
    }
    const int32_t token = t.kv_start + tile * C::kTile;
    const int32_t page = p.kv_indices[t.kv_page_base + token / p.page_size];
    const int32_t slot = token % p.page_size;
    const uint64_t policy = l2_evict_first_policy();
    mbarrier_arrive_expect_tx(barrier, (r1 - r0) * C::Tile::kRegionBytes);
    for (int region = r0; region < r1; ++region) {
      const bool kpe = region == C::kKpeRegion;
      tma_load_3d(dst + region * C::Tile::kRegionBytes, kpe ? &tma.kpe : &tma.ckv,
                  kpe ? 0 : region * 64, slot, page, barrier, policy);
    }
    return;
  }
  using KVType = typename C::KVType;
  const GatherPages<C> pages = GatherPages<C>::fetch(p, t, role, tile);
  const int lane8 = role.index % 8;
#pragma unroll
  for (int pass = 0; pass < GatherPages<C>::kPasses; ++pass) {
    const int row = role.index / 8 + pass * (C::kGroupThreads / 8);
    const bool valid = pages.page[pass] >= 0;
    const int64_t page = valid ? pages.page[pass] : 0;
    const int32_t slot = valid ? (t.kv_start + tile * C::kTile + row) % p.page_size : 0;
    const KVType* ckv = static_cast<const KVType*>(p.ckv) + page * p.ckv_stride_page +
                        slot * p.ckv_stride_token;
    const KVType* kpe = static_cast<const KVType*>(p.kpe) + page * p.kpe_stride_page +
                        slot * p.kpe_stride_token;
    for (int region = r0; region < r1; ++region) {
      const KVType* src = region < C::kKpeRegion ? ckv + region * 64 : kpe;
      cp_async_16(dst + C::Tile::chunk_offset(region, row, lane8), src + lane8 * 8, valid);
    }
  }
  cp_async_mbarrier_arrive(barrier);
}

// Rows of a tile's V (every ckv region) at or past kv_stop, zeroed by the warpgroup that owns
// the tile, right after its Q K^T and before any P V reads them: TMA copies whole pages, whose
// tails may hold NaN, and a tile past the end is all such rows (0 * NaN would reach O).
template <typename C>
__device__ __forceinline__ void clear_v_tail(uint32_t stage_base, const HopperTile& t,
                                             const HopperRole& role, int tile, uint32_t barrier) {
  const int32_t valid = t.kv_stop - (t.kv_start + tile * C::kTile);
  if (valid >= C::kTile) return;
  const int lane8 = role.index % 8;
  for (int row = max(valid, 0) + role.index / 8; row < C::kTile; row += C::kGroupThreads / 8) {
#pragma unroll
    for (int r = 0; r < C::kKpeRegion; ++r) {
      const uint32_t address = stage_base + C::Tile::chunk_offset(r, row, lane8);
      asm volatile("st.shared.v4.u32 [%0], {%1, %1, %1, %1};" ::"r"(address), "r"(0u) : "memory");
    }
  }
  fence_proxy_async_shared();
  named_barrier_sync(barrier, C::kGroupThreads);
}

// Q K^T k-steps [first, last) of the tile at `k_base` into s (step `first` overwrites when
// `overwrite`). Issued and committed, not waited.
template <typename C>
__device__ __forceinline__ void issue_qk_steps(float (&s)[32], uint32_t q, uint32_t k_base,
                                               int first, int last, bool overwrite) {
  wgmma_fence();
#pragma unroll
  for (int step = 0; step < C::kQkSteps; ++step) {
    if (step < first || step >= last) continue;
    wgmma_ss<typename C::QType, 64, 0>(s, k_major_descriptor<C::kRows>(q, 0, step),
                                       k_major_descriptor<C::kRows>(k_base, 0, step),
                                       !(overwrite && step == first));
  }
  wgmma_commit();
}

// Q K^T of the tile in `stage`, half `first_half` first (the one refilled first), waited.
template <typename C>
__device__ __forceinline__ void qk_halves(float (&s)[32], const SeesawSmem<C>& sm, int stage,
                                          int first_half, uint32_t parity) {
  constexpr int kSplit = 4 * C::kOutRegions;  // k-steps of half A
  mbarrier_wait(sm.full(stage, first_half), parity);
  if (first_half == 0) {
    issue_qk_steps<C>(s, sm.q, sm.kv(stage), 0, kSplit, true);
    mbarrier_wait(sm.full(stage, 1), parity);
    issue_qk_steps<C>(s, sm.q, sm.kv(stage), kSplit, C::kQkSteps, false);
  } else {
    issue_qk_steps<C>(s, sm.q, sm.kv(stage), kSplit, C::kQkSteps, true);
    mbarrier_wait(sm.full(stage, 0), parity);
    issue_qk_steps<C>(s, sm.q, sm.kv(stage), 0, kSplit, false);
  }
  wgmma_wait<0>();
  fence_registers(s);
}

// P (64 x 64, four m64k16 fragments) into a K-major tile at `base`: stmatrix lane l addresses
// row l % 8 of 8x8 matrix l / 8.
template <typename C>
__device__ __forceinline__ void store_p(const uint32_t (&p)[4][4], uint32_t base,
                                        const HopperRole& role) {
  const int matrix = role.lane / 8;
  const int row = 16 * role.warp + (matrix & 1) * 8 + role.lane % 8;
#pragma unroll
  for (int k = 0; k < 4; ++k) stmatrix_x4(base + C::Tile::offset(row, 2 * k + (matrix >> 1)), p[k]);
  fence_proxy_async_shared();
}

template <typename C>
__device__ __forceinline__ void pack_p(const float (&s)[32], uint32_t (&p)[4][4]) {
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    p[k][0] = Dtype16<typename C::KVType>::pack(s[8 * k], s[8 * k + 1]);
    p[k][1] = Dtype16<typename C::KVType>::pack(s[8 * k + 2], s[8 * k + 3]);
    p[k][2] = Dtype16<typename C::KVType>::pack(s[8 * k + 4], s[8 * k + 5]);
    p[k][3] = Dtype16<typename C::KVType>::pack(s[8 * k + 6], s[8 * k + 7]);
  }
}

// 2^(m_old c - m_new c), with m_new = -inf (nothing seen) taken as base 0.
__device__ __forceinline__ float rescale_factor(float m_old, float m_new, float c) {
  return fast_exp2(m_old * c - (m_new == neg_inf() ? 0.f : m_new * c));
}

// Row maxima of s (quad-reduced) merged into m.
__device__ __forceinline__ void row_max(const float (&s)[32], const float (&m_in)[2], float (&m)[2]) {
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    float mx = m_in[j];
#pragma unroll
    for (int n8 = 0; n8 < 8; ++n8) mx = fmaxf(mx, fmaxf(s[4 * n8 + 2 * j], s[4 * n8 + 2 * j + 1]));
    m[j] = quad_max(mx);
  }
}

// s -> 2^(s c - m c) in place; returns this thread's share of each row's sum.
__device__ __forceinline__ void exponentiate(float (&s)[32], const float (&m)[2], float c,
                                             float (&sum)[2]) {
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    const float base = m[j] == neg_inf() ? 0.f : m[j] * c;
    sum[j] = 0.f;
#pragma unroll
    for (int n8 = 0; n8 < 8; ++n8) {
      s[4 * n8 + 2 * j] = fast_exp2(s[4 * n8 + 2 * j] * c - base);
      s[4 * n8 + 2 * j + 1] = fast_exp2(s[4 * n8 + 2 * j + 1] * c - base);
      sum[j] += s[4 * n8 + 2 * j] + s[4 * n8 + 2 * j + 1];
    }
  }
}

// Per-warpgroup state across a work item.
template <typename C>
struct SeesawState {
  float o[C::kOutCols / 2];
  float m[2];  // the latest running max this warpgroup knows (raw scores)
  float l[2];  // this warpgroup's tiles' row sums, relative to m
  float s[32];  // scores of this warpgroup's tile of the current pair
};

template <typename C>
__device__ __forceinline__ void wait_and_fence_o(SeesawState<C>& st) {
  wgmma_wait<0>();
  fence_registers(st.o);
}

// Warpgroup 0's part of pair `pair` (tiles a = 2 pair, b = a + 1); st.s holds Q K^T of a.
template <typename C>
__device__ __forceinline__ void pair_wg0(const MlaParams& p, const HopperTma& tma,
                                         const SeesawSmem<C>& sm, const HopperTile& t,
                                         SeesawState<C>& st, int pair, uint32_t parity,
                                         const HopperRole& role) {
  const int a = 2 * pair, b = a + 1;
  const bool next = a + 2 < t.num_tiles;
  const float c = p.sm_scale_log2;
  if (t.kv_start + (a + 1) * C::kTile > t.unmasked_end) mask_scores<C>(st.s, t, a, role);
  float m_a[2], sum[2];
  row_max(st.s, st.m, m_a);
  const float alpha_a[2] = {rescale_factor(st.m[0], m_a[0], c), rescale_factor(st.m[1], m_a[1], c)};
  exponentiate(st.s, m_a, c, sum);
  if (role.lane % 4 == 0) {
    sm.max[role.row(0)] = m_a[0];
    sm.max[role.row(1)] = m_a[1];
  }
  named_barrier_arrive(kMaxA, C::kThreads);
#pragma unroll
  for (int j = 0; j < 2; ++j) st.l[j] = st.l[j] * alpha_a[j] + sum[j];
  rescale_o<C>(st.o, alpha_a);
  uint32_t pa[4][4];
  pack_p<C>(st.s, pa);
  if (tma.enabled) clear_v_tail<C>(sm.kv(0), t, role, a, kGroup0);
  wgmma_fence();
#pragma unroll
  for (int k = 0; k < C::kPvSteps; ++k)
    wgmma_rs<typename C::KVType, C::kOutCols, 1>(st.o, pa[k], mn_major_descriptor<C::kRows>(sm.kv(0), 0, k), 1);
  wgmma_commit();
  wait_and_fence_o(st);
#pragma unroll
  for (int k = 0; k < 4; ++k) fence_registers(pa[k]);
  if (next) load_half<C>(p, tma, sm, t, role, a + 2, 0, 0);
  // Tile b's max: rescale P_a to it for warpgroup 1, and O and l to it here.
  named_barrier_sync(kMaxB, C::kThreads);
  const float m_b[2] = {sm.max[C::kRows + role.row(0)], sm.max[C::kRows + role.row(1)]};
  const float alpha_b[2] = {rescale_factor(m_a[0], m_b[0], c), rescale_factor(m_a[1], m_b[1], c)};
#pragma unroll
  for (int n8 = 0; n8 < 8; ++n8)
#pragma unroll
    for (int e = 0; e < 4; ++e) st.s[4 * n8 + e] *= alpha_b[e >> 1];
  pack_p<C>(st.s, pa);
  store_p<C>(pa, sm.kpe_region(0), role);
  named_barrier_arrive(kPaReady, C::kThreads);
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    st.l[j] *= alpha_b[j];
    st.m[j] = m_b[j];
  }
  rescale_o<C>(st.o, alpha_b);
  named_barrier_sync(kPbReady, C::kThreads);
  mbarrier_wait(sm.full(1, 0), parity);
  wgmma_fence();
#pragma unroll
  for (int k = 0; k < C::kPvSteps; ++k) {
    wgmma_ss<typename C::KVType, C::kOutCols, 1>(st.o, k_major_descriptor<C::kRows>(sm.p_buffer, 0, k),
                                                 mn_major_descriptor<C::kRows>(sm.kv(1), 0, k), 1);
  }
  wgmma_commit();
  if (!next) {
    wait_and_fence_o(st);
    return;
  }
  // Q K^T of the next tile a, half A first (refilled first).
  mbarrier_wait(sm.full(0, 0), parity ^ 1u);
  issue_qk_steps<C>(st.s, sm.q, sm.kv(0), 0, 4 * C::kOutRegions, true);
  wgmma_wait<1>();
  fence_registers(st.o);
  load_half<C>(p, tma, sm, t, role, b + 2, 1, 0);
  named_barrier_arrive(kPbFree, C::kThreads);
  mbarrier_wait(sm.full(0, 1), parity ^ 1u);
  issue_qk_steps<C>(st.s, sm.q, sm.kv(0), 4 * C::kOutRegions, C::kQkSteps, false);
  wgmma_wait<0>();
  fence_registers(st.s);
}

// Warpgroup 1's part of pair `pair`; st.s holds Q K^T of b.
template <typename C>
__device__ __forceinline__ void pair_wg1(const MlaParams& p, const HopperTma& tma,
                                         const SeesawSmem<C>& sm, const HopperTile& t,
                                         SeesawState<C>& st, int pair, uint32_t parity,
                                         const HopperRole& role) {
  const int a = 2 * pair, b = a + 1;
  const bool next = a + 2 < t.num_tiles;
  const float c = p.sm_scale_log2;
  if (t.kv_start + (b + 1) * C::kTile > t.unmasked_end) mask_scores<C>(st.s, t, b, role);
  named_barrier_sync(kMaxA, C::kThreads);
  const float m_a[2] = {sm.max[role.row(0)], sm.max[role.row(1)]};
  float m_b[2], sum[2];
  row_max(st.s, m_a, m_b);
  if (role.lane % 4 == 0) {
    sm.max[C::kRows + role.row(0)] = m_b[0];
    sm.max[C::kRows + role.row(1)] = m_b[1];
  }
  named_barrier_arrive(kMaxB, C::kThreads);
  float alpha[2];
#pragma unroll
  for (int j = 0; j < 2; ++j) alpha[j] = rescale_factor(st.m[j], m_a[j], c) * rescale_factor(m_a[j], m_b[j], c);
  exponentiate(st.s, m_b, c, sum);
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    st.l[j] = st.l[j] * alpha[j] + sum[j];
    st.m[j] = m_b[j];
  }
  rescale_o<C>(st.o, alpha);
  uint32_t pb[4][4];
  pack_p<C>(st.s, pb);
  if (tma.enabled) clear_v_tail<C>(sm.kv(1), t, role, b, kGroup1);
  wgmma_fence();
#pragma unroll
  for (int k = 0; k < C::kPvSteps; ++k) {
    wgmma_rs<typename C::KVType, C::kOutCols, 1>(
        st.o, pb[k], mn_major_descriptor<C::kRows>(sm.kv(1), C::kOutRegions, k), 1);
  }
  wgmma_commit();
  named_barrier_sync(kPbFree, C::kThreads);
  store_p<C>(pb, sm.p_buffer, role);
  named_barrier_arrive(kPbReady, C::kThreads);
  named_barrier_sync(kPaReady, C::kThreads);
  mbarrier_wait(sm.full(0, 1), parity);
  wgmma_fence();
#pragma unroll
  for (int k = 0; k < C::kPvSteps; ++k) {
    wgmma_ss<typename C::KVType, C::kOutCols, 1>(
        st.o, k_major_descriptor<C::kRows>(sm.kpe_region(0), 0, k),
        mn_major_descriptor<C::kRows>(sm.kv(0), C::kOutRegions, k), 1);
  }
  wgmma_commit();
  wait_and_fence_o(st);
#pragma unroll
  for (int k = 0; k < 4; ++k) fence_registers(pb[k]);
  if (!next) return;
  load_half<C>(p, tma, sm, t, role, b + 2, 1, 1);
  load_half<C>(p, tma, sm, t, role, a + 2, 0, 1);
  // Q K^T of the next tile b, half B first (refilled first).
  mbarrier_wait(sm.full(1, 1), parity ^ 1u);
  issue_qk_steps<C>(st.s, sm.q, sm.kv(1), 4 * C::kOutRegions, C::kQkSteps, true);
  mbarrier_wait(sm.full(1, 0), parity ^ 1u);
  issue_qk_steps<C>(st.s, sm.q, sm.kv(1), 0, 4 * C::kOutRegions, false);
  wgmma_wait<0>();
  fence_registers(st.s);
}

// Q into the Q tile by all 256 threads (both warpgroups read it).
template <typename C>
__device__ __forceinline__ void load_q_all(const MlaParams& p, uint32_t q_base, const HopperTile& t) {
  using QType = typename C::QType;
  const int lane8 = threadIdx.x % 8;
#pragma unroll 1
  for (int row = threadIdx.x / 8; row < C::kRows; row += C::kThreads / 8) {
    const bool valid = row < t.rows;
    const int32_t packed = t.row0 + (valid ? row : 0);
    const int64_t token = t.q_token_base + packed / p.num_heads;
    const int32_t head = packed % p.num_heads;
    const QType* nope = static_cast<const QType*>(p.q_nope) + token * p.q_nope_stride_token +
                        head * p.q_nope_stride_head;
    const QType* pe =
        static_cast<const QType*>(p.q_pe) + token * p.q_pe_stride_token + head * p.q_pe_stride_head;
#pragma unroll
    for (int region = 0; region < C::kRegions; ++region) {
      const QType* src = region < C::kKpeRegion ? nope + region * 64 : pe;
      cp_async_16(q_base + C::Tile::chunk_offset(region, row, lane8), src + lane8 * 8, valid);
    }
  }
  cp_async_commit();
}

template <typename C>
__device__ __forceinline__ void attend_tile_seesaw(const MlaParams& p, const HopperTma& tma,
                                                   const SeesawSmem<C>& sm, const MlaWorkItem& item,
                                                   uint32_t& pair_sequence, const HopperRole& role) {
  const HopperTile t = make_hopper_tile<C>(p, item, role);
  if (t.rows <= 0) return;
  __syncthreads();  // the previous item is done with every buffer
  SeesawState<C> st;
#pragma unroll
  for (int i = 0; i < C::kOutCols / 2; ++i) st.o[i] = 0.f;
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    st.m[j] = neg_inf();
    st.l[j] = 0.f;
  }
  const int pairs = (t.num_tiles + 1) / 2;
  if (pairs > 0) {
    load_q_all<C>(p, sm.q, t);
    // Each warpgroup copies the halves it will later refill: 0 the A halves, 1 the B halves.
    load_half<C>(p, tma, sm, t, role, 0, 0, role.group);
    load_half<C>(p, tma, sm, t, role, 1, 1, role.group);
    cp_async_wait<0>();
    fence_proxy_async_shared();
    __syncthreads();
    const uint32_t parity = pair_sequence & 1u;
    // Warpgroup g's first tile is g, in stage g; each starts with the half it copied itself.
    if (role.group == 0) {
      qk_halves<C>(st.s, sm, 0, 0, parity);
      named_barrier_arrive(kPbFree, C::kThreads);
    } else {
      qk_halves<C>(st.s, sm, 1, 1, parity);
    }
  }
#pragma unroll 1
  for (int pair = 0; pair < pairs; ++pair) {
    const uint32_t parity = (pair_sequence + pair) & 1u;
    if (role.group == 0) {
      pair_wg0<C>(p, tma, sm, t, st, pair, parity, role);
    } else {
      pair_wg1<C>(p, tma, sm, t, st, pair, parity, role);
    }
  }
  pair_sequence += pairs;
  float lse[2];
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    const float l = quad_sum(st.l[j]);
    if (role.lane % 4 == 0) sm.row_sum[role.group * C::kRows + role.row(j)] = l;
  }
  __syncthreads();
  using OType = typename C::OType;
  const bool partial = t.partial_row >= 0;
  const int32_t partial_row0 = t.partial_row + blockIdx.x * C::kRows;
  const int col0 = role.group * C::kOutCols;
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    const int row = role.row(j);
    const float l = sm.row_sum[row] + sm.row_sum[C::kRows + row];
    const float inv = l > 0.f ? 1.f / l : 0.f;
    lse[j] = st.m[j] == neg_inf() || l <= 0.f ? neg_inf() : st.m[j] * p.sm_scale_log2 + fast_log2(l);
    if (row >= t.rows) continue;
    OType* dst = partial ? static_cast<OType*>(p.partial_o) +
                               static_cast<int64_t>(partial_row0 + row) * C::kHeadDimCkv
                         : static_cast<OType*>(p.out) + final_row_offset(p, t.q_token_base, t.row0 + row);
#pragma unroll
    for (int n8 = 0; n8 < C::kOutCols / 8; ++n8) {
      *reinterpret_cast<uint32_t*>(dst + col0 + role.col(n8)) =
          Dtype16<OType>::pack(st.o[4 * n8 + 2 * j] * inv, st.o[4 * n8 + 2 * j + 1] * inv);
    }
    if (role.group == 1 && role.lane % 4 == 0) {
      if (partial) {
        p.partial_lse[partial_row0 + row] = lse[j];
      } else {
        write_final_lse(p, t.q_token_base, t.row0 + row, lse[j]);
      }
    }
  }
}

template <typename Config>
__global__ void __launch_bounds__(256, 1)
    mla_hopper_seesaw_kernel(const __grid_constant__ MlaParams params, const __grid_constant__ HopperTma tma) {
  extern __shared__ __align__(128) unsigned char seesaw_smem[];
  const HopperRole role = HopperRole::make();
  if (params.phase != 2) {
    const SeesawSmem<Config> sm = SeesawSmem<Config>::make(seesaw_smem);
    if (threadIdx.x == 0) {
      for (int i = 0; i < 4; ++i) mbarrier_init(sm.full(i / 2, i % 2), tma.enabled ? 1 : Config::kGroupThreads);
      fence_barrier_init();
    }
    __syncthreads();
    uint32_t pair_sequence = 0;
    const int32_t first = params.work_indptr[blockIdx.y];
    const int32_t last = params.work_indptr[blockIdx.y + 1];
#pragma unroll 1
    for (int32_t w = first; w < last; ++w) {
      attend_tile_seesaw<Config>(params, tma, sm, params.work_items[w], pair_sequence, role);
    }
  }
  if (params.phase == 0) grid_barrier(params.barrier, params.barrier + 1, gridDim.x * gridDim.y);
  if (params.phase != 1) {
    merge_partials<typename Config::OType, Config::kHeadDimCkv, Config::kThreads>(params);
  }
}

}  // namespace mlajit_kernel
