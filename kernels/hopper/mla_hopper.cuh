// The MLA paged-attention kernel of the `hopper` family (sm_90a): wgmma from shared memory.
//
// One CTA of 256 threads = two warpgroups; a CTA owns 64 packed query rows (row = token *
// num_heads + head) by 576 dims, the wgmma M. KV arrives in blocks of 64 tokens, taken in pairs:
// warpgroup g computes the scores of block 2k + g against all of Q (S = Q K^T, 64 x 64, K = 576,
// so Q is read from shared memory once per block), the two exchange row maxima so that both
// share one running max, and each warpgroup then accumulates its half of the 512 output columns
// from both blocks: its own P from registers, the other warpgroup's P from shared memory (stored
// in the kpe region of that block's buffer, free once its scores are done). V is the ckv part of
// the KV block, read transposed (MN-major) from the same bytes.
// The host contract (work items, merge records, phases) is mla_params.cuh, as for the portable
// family: the planner, workspace and merge are shared.
#pragma once
#include "common/grid_barrier.cuh"
#include "common/mla_merge.cuh"
#include "common/mla_params.cuh"
#include "common/ptx_cp_async.cuh"
#include "common/ptx_dtype.cuh"
#include "common/ptx_math.cuh"
#include "common/ptx_mma.cuh"
#include "hopper/wgmma.cuh"

namespace mlajit_kernel {

template <typename QType_, typename KVType_, typename OType_, int HEAD_DIM_CKV, int HEAD_DIM_KPE,
          bool CAUSAL>
struct HopperConfig {
  using QType = QType_;
  using KVType = KVType_;
  using OType = OType_;
  static constexpr int kHeadDimCkv = HEAD_DIM_CKV;
  static constexpr int kHeadDimKpe = HEAD_DIM_KPE;
  static constexpr bool kCausal = CAUSAL;

  static constexpr int kThreads = 256;  // two warpgroups
  static constexpr int kRows = 64;      // packed query rows per CTA: the wgmma M
  static constexpr int kBlock = 64;     // KV tokens per block: N of Q K^T, K of P V
  static constexpr int kDim = HEAD_DIM_CKV + HEAD_DIM_KPE;
  static constexpr int kRegions = kDim / 64;            // 128-byte column regions of a row
  static constexpr int kKpeRegion = HEAD_DIM_CKV / 64;  // holds kpe, then P
  static constexpr int kOutCols = HEAD_DIM_CKV / 2;     // output columns of a warpgroup
  static constexpr int kQkSteps = kDim / 16;
  static constexpr int kPvSteps = kBlock / 16;
  static constexpr int kChunksPerRow = kDim / 8;  // 16-byte chunks

  static_assert(sizeof(QType) == 2 && sizeof(KVType) == 2 && sizeof(OType) == 2,
                "the hopper kernel takes 16-bit Q, KV and O");
  static_assert(sizeof(QType) == sizeof(KVType) && Dtype16<QType>::kIsBf16 == Dtype16<KVType>::kIsBf16,
                "wgmma multiplies Q and KV of one type");
  static_assert(HEAD_DIM_KPE == 64, "the kpe part fills one 128-byte region (64 dims)");
  static_assert(HEAD_DIM_CKV % 128 == 0 && kOutCols <= 256,
                "each warpgroup's output half is whole regions and one wgmma N (<= 256)");

  using Tile = Sw128Tile<kRows>;
  static constexpr int kTileBytes = kRegions * Tile::kRegionBytes;  // Q, or one KV block
  // Q, two KV blocks, then the row exchange (max, sum) of both warpgroups, from a base rounded
  // up to 1 KiB (the swizzle atom: the hardware swizzles by address bits), hence the slack.
  static constexpr int kQOffset = 0;
  static constexpr int kKvOffset = kTileBytes;
  static constexpr int kExchangeOffset = 3 * kTileBytes;
  static constexpr int kAlignSlack = 1024;
  static constexpr int kSmemBytes = kExchangeOffset + 2 * 2 * kRows * 4 + kAlignSlack;
#ifdef MLAJIT_EXPECTED_SMEM_BYTES
  static_assert(kSmemBytes == MLAJIT_EXPECTED_SMEM_BYTES,
                "the host computed a different shared-memory size for this configuration");
#endif
#ifdef MLAJIT_EXPECTED_THREADS
  static_assert(kThreads == MLAJIT_EXPECTED_THREADS, "the host launches another block size");
#endif
};

// Shared-memory addresses (32-bit shared window) of the regions of the storage.
template <typename C>
struct HopperSmem {
  uint32_t q, kv0;
  float* row_max;  // [2][kRows]: each warpgroup's block row maxima
  float* row_sum;  // [2][kRows]

  __device__ __forceinline__ static HopperSmem make(unsigned char* dynamic_smem) {
    unsigned char* base = dynamic_smem + ((1024u - (smem_address(dynamic_smem) & 1023u)) & 1023u);
    HopperSmem s;
    s.q = smem_address(base + C::kQOffset);
    s.kv0 = smem_address(base + C::kKvOffset);
    s.row_max = reinterpret_cast<float*>(base + C::kExchangeOffset);
    s.row_sum = s.row_max + 2 * C::kRows;
    return s;
  }
  __device__ __forceinline__ uint32_t kv(int buffer) const { return kv0 + buffer * C::kTileBytes; }
  // P of the block in `buffer`, in the block's kpe region (a 64 x 64 K-major tile).
  __device__ __forceinline__ uint32_t p(int buffer) const {
    return kv(buffer) + C::kKpeRegion * C::Tile::kRegionBytes;
  }
};

// This thread's place: warpgroup, and within it warp and lane. Accumulator rows (of S and O)
// are 16 warp + lane / 4 and that + 8.
struct HopperRole {
  int tid, group, warp, lane;

  __device__ __forceinline__ static HopperRole make() {
    HopperRole r;
    r.tid = threadIdx.x;
    r.group = r.tid >> 7;
    r.warp = (r.tid >> 5) & 3;
    r.lane = r.tid & 31;
    return r;
  }
  __device__ __forceinline__ int row(int j) const { return 16 * warp + lane / 4 + 8 * j; }
  __device__ __forceinline__ int col(int n8) const { return 8 * n8 + 2 * (lane % 4); }
};

// What one CTA does for one work item, derived once.
struct HopperTile {
  int32_t q_token_base, q_len, kv_page_base, kv_len;
  int32_t row0;          // packed row of local row 0
  int32_t rows;          // valid local rows
  int32_t kv_start;      // first token of the chunk
  int32_t kv_stop;       // one past the last token any row of the tile sees
  int32_t num_blocks;    // KV blocks in [kv_start, kv_stop)
  int32_t unmasked_end;  // tokens below this are visible to every row
  int32_t partial_row;
  int32_t row_limit[2];  // this thread's accumulator rows see tokens < row_limit[j]
};

template <typename C>
__device__ __forceinline__ HopperTile make_hopper_tile(const MlaParams& p, const MlaWorkItem& item,
                                                       const HopperRole& role) {
  HopperTile t;
  const int32_t heads = p.num_heads;
  t.q_token_base = item.q_token_base;
  t.q_len = item.q_len;
  t.kv_page_base = item.kv_page_base;
  t.kv_len = item.kv_len;
  t.row0 = item.packed_q_start + blockIdx.x * C::kRows;
  t.rows = min(C::kRows, item.q_len * heads - t.row0);
  t.kv_start = item.kv_start;
  t.partial_row = item.partial_row;
  // Causal, bottom-right aligned: query token i sees tokens t <= kv_len - q_len + i.
  const int32_t shift = item.kv_len - item.q_len + 1;
  const int32_t last_token = (t.row0 + max(t.rows, 1) - 1) / heads;
  t.kv_stop = C::kCausal ? min(item.kv_end, shift + last_token) : item.kv_end;
  t.unmasked_end = C::kCausal ? min(item.kv_end, shift + t.row0 / heads) : item.kv_end;
  t.num_blocks = t.kv_stop > t.kv_start ? (t.kv_stop - t.kv_start + C::kBlock - 1) / C::kBlock : 0;
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    const int32_t token = (t.row0 + role.row(j)) / heads;
    t.row_limit[j] = C::kCausal ? min(item.kv_end, shift + token) : item.kv_end;
  }
  return t;
}

// ---------------------------------------------------------------------------------------
// Stage: load_q. The tile's 64 packed rows of q_nope and q_pe into the Q tile; rows past the
// request's end are zero-filled. Eight threads cover one row's 128-byte region slice.
template <typename C>
__device__ __forceinline__ void load_q(const MlaParams& p, const HopperSmem<C>& sm,
                                       const HopperTile& t, const HopperRole& role) {
  using QType = typename C::QType;
  const int lane8 = role.tid % 8;
#pragma unroll 1
  for (int row = role.tid / 8; row < C::kRows; row += C::kThreads / 8) {
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
      cp_async_16(sm.q + C::Tile::chunk_offset(region, row, lane8), src + lane8 * 8, valid);
    }
  }
}

// Stage: load_kv. KV block `block` of the chunk (tokens kv_start + 64 block ..) into `buffer`:
// token t of the request is slot t % page_size of page kv_indices[kv_page_base + t / page_size].
// Tokens at or past kv_stop are zero-filled, so that masked scores meet zero values, never
// stale ones that could make 0 * x a NaN.
template <typename C>
__device__ __forceinline__ void load_kv(const MlaParams& p, const HopperSmem<C>& sm,
                                        const HopperTile& t, const HopperRole& role, int block,
                                        int buffer) {
  using KVType = typename C::KVType;
  const int lane8 = role.tid % 8;
  const uint32_t dst = sm.kv(buffer);
#pragma unroll
  for (int pass = 0; pass < C::kBlock / (C::kThreads / 8); ++pass) {
    const int row = role.tid / 8 + pass * (C::kThreads / 8);
    const int32_t token = t.kv_start + block * C::kBlock + row;
    const bool valid = token < t.kv_stop;
    int64_t page = 0;
    int32_t slot = 0;
    if (valid) {
      page = p.kv_indices[t.kv_page_base + token / p.page_size];
      slot = token % p.page_size;
    }
    const KVType* ckv = static_cast<const KVType*>(p.ckv) + page * p.ckv_stride_page +
                        slot * p.ckv_stride_token;
    const KVType* kpe = static_cast<const KVType*>(p.kpe) + page * p.kpe_stride_page +
                        slot * p.kpe_stride_token;
#pragma unroll
    for (int region = 0; region < C::kRegions; ++region) {
      const KVType* src = region < C::kKpeRegion ? ckv + region * 64 : kpe;
      cp_async_16(dst + C::Tile::chunk_offset(region, row, lane8), src + lane8 * 8, valid);
    }
  }
}

// Loads the pair of blocks starting at `first` into buffers 0 and 1. A block past the chunk's
// end arrives as zeros (every token is at or past kv_stop), so the pair's stages run the same
// for both warpgroups: wgmma behind a data-dependent branch is serialized by ptxas.
template <typename C>
__device__ __forceinline__ void load_pair(const MlaParams& p, const HopperSmem<C>& sm,
                                          const HopperTile& t, const HopperRole& role, int first) {
  load_kv<C>(p, sm, t, role, first, 0);
  load_kv<C>(p, sm, t, role, first + 1, 1);
  cp_async_commit();
}

// ---------------------------------------------------------------------------------------
// Online-softmax state of this thread: its accumulator rows' running max (raw scores) and
// partial row sums, and its share of the warpgroup's 64 x kOutCols output.
template <typename C>
struct HopperState {
  float o[C::kOutCols / 2];
  float m[2];
  float l[2];

  __device__ __forceinline__ void init() {
#pragma unroll
    for (int i = 0; i < C::kOutCols / 2; ++i) o[i] = 0.f;
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      m[j] = neg_inf();
      l[j] = 0.f;
    }
  }
};

// Stage: compute_qk. s = Q . K^T of the block in `buffer`: 64 rows x 64 tokens over all dims.
template <typename C>
__device__ __forceinline__ void compute_qk(float (&s)[32], const HopperSmem<C>& sm, int buffer) {
  const uint32_t k = sm.kv(buffer);
  wgmma_fence();
#pragma unroll
  for (int step = 0; step < C::kQkSteps; ++step) {
    wgmma_ss<typename C::QType, 64, 0>(s, k_major_descriptor<C::kRows>(sm.q, 0, step),
                                       k_major_descriptor<C::kRows>(k, 0, step), step > 0);
  }
  wgmma_commit();
  wgmma_wait<0>();
  fence_registers(s);
}

// Scores of tokens a row may not see (past the chunk, or in its causal future) become -inf.
template <typename C>
__device__ __forceinline__ void mask_scores(float (&s)[32], const HopperTile& t, int block,
                                            const HopperRole& role) {
  const int32_t block_start = t.kv_start + block * C::kBlock;
#pragma unroll
  for (int n8 = 0; n8 < 8; ++n8)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int32_t token = block_start + role.col(n8) + (e & 1);
      if (token >= t.row_limit[e >> 1]) s[4 * n8 + e] = neg_inf();
    }
}

// Stage: share_row_max. Each warpgroup publishes its block's row maxima; both then take the
// new running max over the old one and both blocks, so that one scale serves both halves of O.
template <typename C>
__device__ __forceinline__ void share_row_max(const float (&s)[32], float (&m_new)[2],
                                              const HopperState<C>& st, const HopperSmem<C>& sm,
                                              const HopperRole& role) {
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    float mx = neg_inf();
#pragma unroll
    for (int n8 = 0; n8 < 8; ++n8) mx = fmaxf(mx, fmaxf(s[4 * n8 + 2 * j], s[4 * n8 + 2 * j + 1]));
    mx = quad_max(mx);
    if (role.lane % 4 == 0) sm.row_max[role.group * C::kRows + role.row(j)] = mx;
  }
  __syncthreads();
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    const int row = role.row(j);
    m_new[j] = fmaxf(st.m[j], fmaxf(sm.row_max[row], sm.row_max[C::kRows + row]));
  }
}

// Stage: update_softmax_state. s becomes the unnormalised probabilities 2^(s c - m c) packed
// as the A operand of P V (one m64k16 fragment per 16 tokens); O and the row sums are
// rescaled to the new max.
template <typename C>
__device__ __forceinline__ void update_softmax_state(float (&s)[32], uint32_t (&p)[4][4],
                                                     HopperState<C>& st, const float (&m_new)[2],
                                                     float scale_log2) {
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    // A row that has seen nothing keeps m = -inf: base 0 makes 2^(-inf - 0) = 0, not NaN.
    const float base = m_new[j] == neg_inf() ? 0.f : m_new[j] * scale_log2;
    const float rescale = fast_exp2(st.m[j] * scale_log2 - base);
    st.m[j] = m_new[j];
    st.l[j] *= rescale;
#pragma unroll
    for (int n8 = 0; n8 < C::kOutCols / 8; ++n8) {
      st.o[4 * n8 + 2 * j] *= rescale;
      st.o[4 * n8 + 2 * j + 1] *= rescale;
    }
#pragma unroll
    for (int n8 = 0; n8 < 8; ++n8) {
      s[4 * n8 + 2 * j] = fast_exp2(s[4 * n8 + 2 * j] * scale_log2 - base);
      s[4 * n8 + 2 * j + 1] = fast_exp2(s[4 * n8 + 2 * j + 1] * scale_log2 - base);
      st.l[j] += s[4 * n8 + 2 * j] + s[4 * n8 + 2 * j + 1];
    }
  }
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    // Tokens 16k..16k+15: n8 blocks 2k (cols 0-7) and 2k+1 (cols 8-15), rows r and r + 8.
    p[k][0] = Dtype16<typename C::KVType>::pack(s[8 * k], s[8 * k + 1]);
    p[k][1] = Dtype16<typename C::KVType>::pack(s[8 * k + 2], s[8 * k + 3]);
    p[k][2] = Dtype16<typename C::KVType>::pack(s[8 * k + 4], s[8 * k + 5]);
    p[k][3] = Dtype16<typename C::KVType>::pack(s[8 * k + 6], s[8 * k + 7]);
  }
}

// Stage: share_p. This warpgroup's P into its block's kpe region (K-major, for the other
// warpgroup's wgmma): stmatrix lane l addresses row l % 8 of 8x8 matrix l / 8.
template <typename C>
__device__ __forceinline__ void share_p(const uint32_t (&p)[4][4], uint32_t p_base,
                                        const HopperRole& role) {
  const int matrix = role.lane / 8;
  const int row = 16 * role.warp + (matrix & 1) * 8 + role.lane % 8;
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    stmatrix_x4(p_base + C::Tile::offset(row, 2 * k + (matrix >> 1)), p[k]);
  }
  fence_proxy_async_shared();
}

// Stage: compute_pv. O (this warpgroup's output half) += P . V over the pair's blocks: the
// own block's P from registers, the other block's from shared memory.
template <typename C>
__device__ __forceinline__ void compute_pv(HopperState<C>& st, uint32_t (&p)[4][4],
                                           const HopperSmem<C>& sm, const HopperRole& role) {
  using T = typename C::KVType;
  const int own = role.group, other = 1 - role.group;
  const int region0 = role.group * (C::kOutCols / 64);
  wgmma_fence();
#pragma unroll
  for (int k = 0; k < C::kPvSteps; ++k)
    wgmma_rs<T, C::kOutCols, 1>(st.o, p[k], mn_major_descriptor<C::kRows>(sm.kv(own), region0, k), 1);
#pragma unroll
  for (int k = 0; k < C::kPvSteps; ++k)
    wgmma_ss<T, C::kOutCols, 1>(st.o, k_major_descriptor<C::kRows>(sm.p(other), 0, k),
                                mn_major_descriptor<C::kRows>(sm.kv(other), region0, k), 1);
  wgmma_commit();
  wgmma_wait<0>();
  fence_registers(st.o);
#pragma unroll
  for (int k = 0; k < 4; ++k) fence_registers(p[k]);
}

// One pair of KV blocks (2 pair, 2 pair + 1), already in the buffers; a block past the chunk's
// end is all zeros and fully masked, so it adds nothing.
template <typename C>
__device__ __forceinline__ void attend_pair(const MlaParams& p, const HopperSmem<C>& sm,
                                            const HopperTile& t, HopperState<C>& st, int pair,
                                            const HopperRole& role) {
  const int block = 2 * pair + role.group;
  float s[32];
  compute_qk<C>(s, sm, role.group);
  if (t.kv_start + (block + 1) * C::kBlock > t.unmasked_end) mask_scores<C>(s, t, block, role);
  float m_new[2];
  share_row_max<C>(s, m_new, st, sm, role);
  uint32_t pa[4][4];
  update_softmax_state<C>(s, pa, st, m_new, p.sm_scale_log2);
  share_p<C>(pa, sm.p(role.group), role);
  __syncthreads();  // both P tiles are in shared memory
  compute_pv<C>(st, pa, sm, role);
}

// Stage: normalize. Completes the row sums (quad, then both warpgroups' blocks), scales O by
// 1 / sum and returns the base-2 LSE of each accumulator row (-inf for rows that saw nothing).
template <typename C>
__device__ __forceinline__ void normalize(HopperState<C>& st, const HopperSmem<C>& sm,
                                          float scale_log2, float (&lse)[2],
                                          const HopperRole& role) {
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    const float l = quad_sum(st.l[j]);
    if (role.lane % 4 == 0) sm.row_sum[role.group * C::kRows + role.row(j)] = l;
  }
  __syncthreads();
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    const int row = role.row(j);
    const float l = sm.row_sum[row] + sm.row_sum[C::kRows + row];
    const float inv = l > 0.f ? 1.f / l : 0.f;
#pragma unroll
    for (int n8 = 0; n8 < C::kOutCols / 8; ++n8) {
      st.o[4 * n8 + 2 * j] *= inv;
      st.o[4 * n8 + 2 * j + 1] *= inv;
    }
    lse[j] = st.m[j] == neg_inf() || l <= 0.f ? neg_inf() : st.m[j] * scale_log2 + fast_log2(l);
  }
}

// Stage: write_output. This warpgroup's half of each valid row into the final output or the
// partial buffer; the LSE from warpgroup 0.
template <typename C>
__device__ __forceinline__ void write_output(const MlaParams& p, const HopperState<C>& st,
                                             const float (&lse)[2], const HopperTile& t,
                                             const HopperRole& role) {
  using OType = typename C::OType;
  const bool partial = t.partial_row >= 0;
  const int32_t partial_row0 = t.partial_row + blockIdx.x * C::kRows;
  const int col0 = role.group * C::kOutCols;
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    const int row = role.row(j);
    if (row >= t.rows) continue;
    OType* dst = partial ? static_cast<OType*>(p.partial_o) +
                               static_cast<int64_t>(partial_row0 + row) * C::kHeadDimCkv
                         : static_cast<OType*>(p.out) + final_row_offset(p, t.q_token_base, t.row0 + row);
#pragma unroll
    for (int n8 = 0; n8 < C::kOutCols / 8; ++n8) {
      *reinterpret_cast<uint32_t*>(dst + col0 + role.col(n8)) =
          Dtype16<OType>::pack(st.o[4 * n8 + 2 * j], st.o[4 * n8 + 2 * j + 1]);
    }
    if (role.group == 0 && role.lane % 4 == 0) {
      if (partial) {
        p.partial_lse[partial_row0 + row] = lse[j];
      } else {
        write_final_lse(p, t.q_token_base, t.row0 + row, lse[j]);
      }
    }
  }
}

// One work item: this CTA's 64 rows of a query tile against one KV chunk.
template <typename C>
__device__ __forceinline__ void attend_tile(const MlaParams& p, const HopperSmem<C>& sm,
                                            const MlaWorkItem& item, const HopperRole& role) {
  const HopperTile t = make_hopper_tile<C>(p, item, role);
  if (t.rows <= 0) return;  // the second CTA of a pair whose tile is short
  __syncthreads();          // the previous item is done with the buffers and the exchange
  HopperState<C> st;
  st.init();
  if (t.num_blocks > 0) {
    load_q<C>(p, sm, t, role);  // joins the first pair's cp.async group
    load_pair<C>(p, sm, t, role, 0);
  }
  const int pairs = (t.num_blocks + 1) / 2;
#pragma unroll 1
  for (int pair = 0; pair < pairs; ++pair) {
    cp_async_wait<0>();
    fence_proxy_async_shared();  // cp.async wrote through the generic proxy; wgmma reads async
    __syncthreads();
    attend_pair<C>(p, sm, t, st, pair, role);
    __syncthreads();  // both warpgroups are done with both buffers
    if (pair + 1 < pairs) load_pair<C>(p, sm, t, role, 2 * pair + 2);
  }
  float lse[2];
  normalize<C>(st, sm, p.sm_scale_log2, lse, role);
  write_output<C>(p, st, lse, t, role);
}

template <typename Config>
__global__ void __launch_bounds__(256, 1) mla_hopper_kernel(const __grid_constant__ MlaParams params) {
  extern __shared__ __align__(128) unsigned char hopper_smem[];
  const HopperRole role = HopperRole::make();
  if (params.phase != 2) {
    const HopperSmem<Config> sm = HopperSmem<Config>::make(hopper_smem);
    const int32_t first = params.work_indptr[blockIdx.y];
    const int32_t last = params.work_indptr[blockIdx.y + 1];
#pragma unroll 1
    for (int32_t w = first; w < last; ++w) attend_tile<Config>(params, sm, params.work_items[w], role);
  }
  if (params.phase == 0) grid_barrier(params.barrier, params.barrier + 1, gridDim.x * gridDim.y);
  if (params.phase != 1) {
    merge_partials<typename Config::OType, Config::kHeadDimCkv, Config::kThreads>(params);
  }
}

}  // namespace mlajit_kernel
