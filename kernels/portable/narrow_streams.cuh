// NarrowStreams: the row layout of tiles of at most 16 query rows (decode with <= 16 heads)
// over an e4m3 KV cache, on the stages and pipeline of the other layouts.
//
// Such a tile is light on matrix work per byte, and with one pipeline over the CTA its 8
// warps wait on each other at every stage (and re-read all of Q per KV tile). Here the two
// warpgroups are two streams that take alternate KV tiles (stream g: tiles g, g + 2, ...),
// each with its own ring of code stages, its own barrier and its own softmax state, merged
// once at the end: one stream's matrix work overlaps the other's softmax and waits.
// Within a stream warp w computes the scores of tokens [16 w, 16 w + 16) and the output dims
// [w CKV / 4, (w + 1) CKV / 4) of rows 0-15. The codes are read as they are and converted in
// registers (fp8_fragments.cuh): Q is reordered to the K fragments' k order and rounded to f16
// once per item, the products are f16 (P too), and the scales multiply the fp32 scores and O.
#pragma once
#include "common/fp8_fragments.cuh"
#include "portable/pipeline.cuh"

namespace mlajit_kernel {

// The ring of one stream: stream g owns stages 2g and 2g + 1 of four stages of codes, which
// split the memory of the config's two 16-bit stages. The stream's threads copy its tiles and
// meet at named barrier 1 + g. A stage's P tile (16 rows) overlays its kpe codes.
template <typename C>
struct StreamRing {
  static constexpr int kStreams = 2;
  static constexpr int kStages = 2;
  static constexpr int kLoaders = C::kThreads / kStreams;
  static constexpr int kTileStride = kStreams;
  static constexpr bool kOnePageLoads = true;  // 4 passes a tile: per-row addressing is a fifth of the loop
  static constexpr int kQRows = C::kQTile;
  static constexpr int kCkvLanding = 0;
  static constexpr int kKpeLanding = 0;
  static constexpr int kCkvStride = C::kKvTile * C::kHeadDimCkv;
  static constexpr int kKpeStride = C::kKpePStageBytes / 2;
  static_assert(C::kFp8Kv && kStreams == C::kGroups, "a stream is a warpgroup reading e4m3 codes");
  static_assert(kStreams * kStages * kCkvStride <= C::kStages * C::kCkvStageBytes &&
                    kStreams * kStages * kKpeStride <= C::kStages * C::kKpePStageBytes &&
                    C::kKvTile * C::kHeadDimKpe <= kKpeStride &&
                    C::kNarrowRows * C::kKvTile * 2 <= kKpeStride,
                "four stages of codes (and a 16-row P tile on the kpe codes) fit the 16-bit stages");

  __device__ __forceinline__ static int first_tile(const ThreadRole& role) { return role.group; }
  __device__ __forceinline__ static int stage_of(const ThreadRole& role, int tile) {
    return kStages * role.group + (tile / kStreams) % kStages;
  }
  __device__ __forceinline__ static uint32_t ckv(const SmemMap<C>& sm, int stage) {
    return sm.ckv0 + stage * kCkvStride;
  }
  __device__ __forceinline__ static uint32_t kpe_p(const SmemMap<C>& sm, int stage) {
    return sm.kpe_p0 + stage * kKpeStride;
  }
  __device__ __forceinline__ static void sync(const ThreadRole& role) {
    asm volatile("bar.sync %0, %1;" ::"r"(1 + role.group), "n"(kLoaders) : "memory");
  }
};

template <typename C>
struct NarrowStreams {
  using Ring = StreamRing<C>;
  static constexpr int kQkWarps = C::kWarpsPerGroup;
  static constexpr int kQkN = 8;
  static constexpr int kQkBlocks = C::kKvTile / kQkN / kQkWarps;  // n8 blocks of a warp's scores
  static constexpr int kAccs = QkBlock<kQkN>::kAccs;
  static constexpr int kPvChunks = C::kHeadDimCkv / 16 / kQkWarps;  // 16-dim chunks of a warp's dims
  using Scores = float[kQkBlocks][kAccs];
  using State = SoftmaxState<C, kPvChunks>;
  static_assert(kQkBlocks >= 1 && C::kKvTile % (kQkN * kQkWarps) == 0 && kPvChunks % 2 == 0,
                "a warp takes whole n8 blocks of scores and pairs of 16-dim chunks of output");

  __device__ __forceinline__ static int qk_col0(const ThreadRole& role) { return role.warp * kQkN * kQkBlocks; }
  __device__ __forceinline__ static int acc_row(const ThreadRole& role, int j) { return role.lane / 4 + 8 * j; }
  __device__ __forceinline__ static float* exchange(const SmemMap<C>& sm, const ThreadRole& role, int warp, int j) {
    return sm.row_exchange + role.group * C::kQTile + warp * C::kNarrowRows + acc_row(role, j);
  }

  // Stage: order_q (all threads, once per item, after Q has landed). Rows 0-15 of Q to f16 in
  // the K code fragments' k order (order_q_step).
  __device__ __forceinline__ static void order_q(const SmemMap<C>& sm, const ThreadRole& role) {
    order_q_operand<C::kCkvChunks>(sm.q_nope, role);
    order_q_operand<C::kKpeChunks>(sm.q_pe, role);
    __syncthreads();
  }

  // Stage: compute_qk. Scores of this warp's tokens = ckv factor * (q_nope . ckv codes) + kpe
  // factor * (q_pe . kpe codes).
  __device__ __forceinline__ static void compute_qk(Scores& s, const SmemMap<C>& sm, int stage,
                                                    const KvDequant& f, const ThreadRole& role) {
    Scores pe;
#pragma unroll
    for (int b = 0; b < kQkBlocks; ++b)
#pragma unroll
      for (int r = 0; r < kAccs; ++r) s[b][r] = pe[b][r] = 0.f;
    accumulate_qk<C::kKpeChunks, C::kKpeLoadChunks>(pe, sm.q_pe, Ring::kpe_p(sm, stage), role);
    accumulate_qk<C::kCkvChunks, C::kCkvLoadChunks>(s, sm.q_nope, Ring::ckv(sm, stage), role);
    scale_code_scores(s, pe, f);
  }

  // Stage: update_softmax_state. Row maxima over the stream's warps, rescale of O and the row
  // sums, and this warp's probabilities (f16) into the stage's P tile.
  __device__ __forceinline__ static void update_softmax_state(Scores& s, State& st, const SmemMap<C>& sm,
                                                              int stage, float scale_log2,
                                                              const ThreadRole& role) {
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const float mx = quad_row_max(s, j);
      if (role.lane % 4 == 0) *exchange(sm, role, role.warp, j) = mx;
    }
    Ring::sync(role);
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      float m_tile = st.m[j];
#pragma unroll
      for (int w = 0; w < kQkWarps; ++w) m_tile = fmaxf(m_tile, *exchange(sm, role, w, j));
      const float base = exp2_base(m_tile, scale_log2);
      const float rescale = fast_exp2(st.m[j] * scale_log2 - base);
      st.m[j] = m_tile;
      st.d[j] *= rescale;
      scale_row<kPvChunks>(st.o, 0, j, rescale);
#pragma unroll
      for (int b = 0; b < kQkBlocks; ++b) {
        s[b][2 * j] = fast_exp2(s[b][2 * j] * scale_log2 - base);
        s[b][2 * j + 1] = fast_exp2(s[b][2 * j + 1] * scale_log2 - base);
        st.d[j] += s[b][2 * j] + s[b][2 * j + 1];
      }
    }
    const uint32_t p_base = Ring::kpe_p(sm, stage);
#pragma unroll
    for (int b = 0; b < kQkBlocks; ++b) {
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const uint32_t addr = p_base + PSwizzle<C>::byte_offset(acc_row(role, j), role.warp * kQkBlocks + b) +
                              4 * (role.lane % 4);
        const uint32_t v = Dtype16<f16_t>::pack(s[b][2 * j], s[b][2 * j + 1]);
        asm volatile("st.shared.b32 [%0], %1;" ::"r"(addr), "r"(v) : "memory");
      }
    }
  }

  // Stage: compute_pv. o(16 rows x this warp's dims) += P . V codes, each 16-dim chunk an
  // even-dim block (o[b][0..3]) and an odd-dim block (o[b][4..7]) (fp8_fragments.cuh).
  __device__ __forceinline__ static void compute_pv(State& st, const SmemMap<C>& sm, int stage,
                                                    const ThreadRole& role) {
    Ring::sync(role);  // the stream's P is in shared memory
    const FragmentAddress<C::kCkvLoadChunks> v_addr(role.lane % 16, role.warp * kPvChunks + role.lane / 16);
    const uint32_t p_base = Ring::kpe_p(sm, stage);
#pragma unroll
    for (int kk = 0; kk < C::kKvTile / 16; ++kk) {
      uint32_t p[4];
      ldmatrix_x4(p, p_base + PSwizzle<C>::byte_offset(role.lane % 16, 2 * kk + role.lane / 16));
      const uint32_t rows = Ring::ckv(sm, stage) + kk * 16 * C::kCkvLoadChunks * 16;
#pragma unroll
      for (int h = 0; h < kPvChunks / 2; ++h) {
        uint32_t v[4];  // tokens 0-7 and 8-15 of chunk 2h, then of chunk 2h + 1
        ldmatrix_x4_trans(v, rows + v_addr.step(h));
#pragma unroll
        for (int c = 0; c < 2; ++c) {
          uint32_t even0, odd0, even1, odd1;
          v_code_pairs(v[2 * c], even0, odd0);
          v_code_pairs(v[2 * c + 1], even1, odd1);
          mma_16x8x16<f16_t>(st.o[2 * h + c], p, even0, even1);
          mma_16x8x16<f16_t>(st.o[2 * h + c] + 4, p, odd0, odd1);
        }
      }
    }
  }

  // Stage: merge_and_write. The streams' row sums, stream 1's state handed to stream 0 through
  // the (drained) code ring, the merged O scaled by 1/d and the ckv factor into the output
  // staging tile, the LSE, then the rows out.
  __device__ __forceinline__ static void merge_and_write(const MlaParams& p, State& st, const SmemMap<C>& sm,
                                                         const TileContext& t, const ThreadRole& role) {
    float d[2];
    complete_row_sums(st, sm, d, role);
    __syncthreads();  // both streams are past their last tile: the ring is free
    const int u = role.tid % Ring::kLoaders;  // the partner threads of the two streams
    const uint32_t stats = sm.ckv0 + 16 * u;
    const uint32_t o_base = sm.ckv0 + 16 * Ring::kLoaders;
    if (role.group == 1) {
      store_shared_16(stats, __float_as_uint(st.m[0]), __float_as_uint(st.m[1]), __float_as_uint(d[0]),
                      __float_as_uint(d[1]));
#pragma unroll
      for (int b = 0; b < kPvChunks; ++b)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const float* o = &st.o[b][4 * h];
          store_shared_16(o_base + 16 * ((2 * b + h) * Ring::kLoaders + u), __float_as_uint(o[0]),
                          __float_as_uint(o[1]), __float_as_uint(o[2]), __float_as_uint(o[3]));
        }
    }
    __syncthreads();
    if (role.group == 0) {
      float lse[2];
      merge_stream(st, d, stats, o_base, u, p.sm_scale_log2, lse);
      stage_output(st, sm, KvDequant::make(p).ckv, role);
      if (role.warp == 0 && role.lane % 4 == 0) write_lse(p, t, lse, role);
    }
    __syncthreads();
    store_output_rows<C>(p, sm, t, role);
  }

 private:
  // Q_CHUNKS 16-bit chunks a row of one Q operand, rows 0-15, two chunks (a k-step) a unit.
  template <int Q_CHUNKS>
  __device__ __forceinline__ static void order_q_operand(uint32_t q_base, const ThreadRole& role) {
    constexpr int kSteps = Q_CHUNKS / 2;
    constexpr int kUnits = C::kNarrowRows * kSteps;
#pragma unroll
    for (int i = 0; i < (kUnits + C::kThreads - 1) / C::kThreads; ++i) {
      const int unit = role.tid + i * C::kThreads;
      if (kUnits % C::kThreads != 0 && unit >= kUnits) break;
      const int row = unit / kSteps, step = unit % kSteps;
      const uint32_t lo_addr = q_base + Swizzle<Q_CHUNKS>::byte_offset(row, 2 * step);
      const uint32_t hi_addr = q_base + Swizzle<Q_CHUNKS>::byte_offset(row, 2 * step + 1);
      uint32_t lo[4], hi[4];
      load_shared_16(lo_addr, lo);
      load_shared_16(hi_addr, hi);
      order_q_step<typename C::QType>(lo, hi);
      store_shared_16(lo_addr, lo[0], lo[1], lo[2], lo[3]);
      store_shared_16(hi_addr, hi[0], hi[1], hi[2], hi[3]);
    }
  }

  // s += Q (ordered, f16) . K codes^T over one operand pair, CODE_CHUNKS 16-code chunks a row:
  // one ldmatrix of K codes serves up to four k-steps of one n8 block.
  template <int Q_CHUNKS, int CODE_CHUNKS>
  __device__ __forceinline__ static void accumulate_qk(Scores& s, uint32_t q_base, uint32_t k_base,
                                                       const ThreadRole& role) {
    constexpr int kPerLoad = CODE_CHUNKS >= 4 ? 4 : CODE_CHUNKS;
    static_assert(Q_CHUNKS == 2 * CODE_CHUNKS && CODE_CHUNKS % kPerLoad == 0 && kPerLoad >= 2,
                  "a code chunk is one k-step of two 16-bit Q chunks");
    const FragmentAddress<Q_CHUNKS> q_addr(role.lane % 16, role.lane / 16);
    const FragmentAddress<CODE_CHUNKS, kPerLoad> k_addr(qk_col0(role) + role.lane % 8, (role.lane / 8) % kPerLoad);
#pragma unroll
    for (int load = 0; load < CODE_CHUNKS / kPerLoad; ++load) {
      uint32_t k[kQkBlocks][4];
#pragma unroll
      for (int b = 0; b < kQkBlocks; ++b) {
        const uint32_t addr = k_base + k_addr.step(load) + b * kQkN * CODE_CHUNKS * 16;
        if constexpr (kPerLoad == 4) {
          ldmatrix_x4(k[b], addr);
        } else {
          uint32_t two[2];
          ldmatrix_x2(two, addr);
          k[b][0] = two[0];
          k[b][1] = two[1];
        }
      }
#pragma unroll
      for (int i = 0; i < kPerLoad; ++i) {
        uint32_t a[4];
        ldmatrix_x4(a, q_base + q_addr.step(load * kPerLoad + i));
#pragma unroll
        for (int b = 0; b < kQkBlocks; ++b) {
          uint32_t b0, b1;
          k_code_pairs(k[b][i], b0, b1);
          mma_16x8x16<f16_t>(s[b], a, b0, b1);
        }
      }
    }
  }

  // Each thread's share of its rows' sums, summed over the stream's warps.
  __device__ __forceinline__ static void complete_row_sums(const State& st, const SmemMap<C>& sm, float (&d)[2],
                                                           const ThreadRole& role) {
    // The last reads of the max exchange are separated from these writes by the P barrier.
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const float sum = quad_sum(st.d[j]);
      if (role.lane % 4 == 0) *exchange(sm, role, role.warp, j) = sum;
    }
    Ring::sync(role);
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      d[j] = 0.f;
#pragma unroll
      for (int w = 0; w < kQkWarps; ++w) d[j] += *exchange(sm, role, w, j);
    }
  }

  // Stream 0's O and sums joined with its partner's (m, d and O from shared memory): both
  // rescaled to the larger max, O times 1/d, and the base-2 LSE.
  __device__ __forceinline__ static void merge_stream(State& st, float (&d)[2], uint32_t stats, uint32_t o_base,
                                                      int u, float scale_log2, float (&lse)[2]) {
    uint32_t other[4];
    load_shared_16(stats, other);
    float mine[2], theirs[2];
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const float m_other = __uint_as_float(other[j]);
      const float m = fmaxf(st.m[j], m_other);
      const float base = exp2_base(m, scale_log2);
      mine[j] = fast_exp2(st.m[j] * scale_log2 - base);
      theirs[j] = fast_exp2(m_other * scale_log2 - base);
      const float sum = d[j] * mine[j] + __uint_as_float(other[2 + j]) * theirs[j];
      const float inverse = finish_row(m, sum, scale_log2, lse[j]);
      mine[j] *= inverse;
      theirs[j] *= inverse;
    }
#pragma unroll
    for (int b = 0; b < kPvChunks; ++b)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        uint32_t o[4];
        load_shared_16(o_base + 16 * ((2 * b + h) * Ring::kLoaders + u), o);
#pragma unroll
        for (int r = 0; r < 4; ++r) {
          const int j = r / 2;  // accumulator r of an n8 block: row lane / 4 + 8 (r / 2)
          st.o[b][4 * h + r] = st.o[b][4 * h + r] * mine[j] + __uint_as_float(o[r]) * theirs[j];
        }
      }
  }

  // O (16 rows x this warp's dims; a lane holds dims 4c..4c+3 of each chunk) times `factor`
  // into the output staging tile.
  __device__ __forceinline__ static void stage_output(const State& st, const SmemMap<C>& sm, float factor,
                                                      const ThreadRole& role) {
    using OType = typename C::OType;
#pragma unroll
    for (int b = 0; b < kPvChunks; ++b) {
      const int dim = 16 * (role.warp * kPvChunks + b) + 4 * (role.lane % 4);
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const uint32_t lo = Dtype16<OType>::pack(st.o[b][2 * j] * factor, st.o[b][4 + 2 * j] * factor);
        const uint32_t hi = Dtype16<OType>::pack(st.o[b][1 + 2 * j] * factor, st.o[b][5 + 2 * j] * factor);
        const uint32_t addr = sm.o + Swizzle<C::kOChunks>::byte_offset(acc_row(role, j), dim / C::kOChunkElems) +
                              (dim % C::kOChunkElems) * 2;
        asm volatile("st.shared.v2.b32 [%0], {%1, %2};" ::"r"(addr), "r"(lo), "r"(hi) : "memory");
      }
    }
  }

  __device__ __forceinline__ static void write_lse(const MlaParams& p, const TileContext& t, const float (&lse)[2],
                                                   const ThreadRole& role) {
    const int32_t partial_row0 = t.partial_row + blockIdx.x * C::kQTile;
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const int row = acc_row(role, j);
      if (row >= t.rows) continue;
      if (t.partial_row >= 0) {
        p.partial_lse[partial_row0 + row] = lse[j];
      } else {
        write_final_lse(p, t.q_token_base, t.row0 + row, lse[j]);
      }
    }
  }
};

// The KV loop of a narrow tile over an e4m3 cache: Q and each stream's first tile, Q
// reordered, then each stream through its tiles, then the merge and the output.
template <typename C>
__device__ __forceinline__ void attend_streams(const MlaParams& p, const SmemMap<C>& sm, const TileContext& t) {
  using S = NarrowStreams<C>;
  using Ring = typename S::Ring;
  const ThreadRole role = ThreadRole::make_fresh();
  typename S::State st;
  st.init();
  KvPageIds<C> ids{0};
  if (t.num_tiles > 0) {
    start_pipeline<C, Ring>(p, sm, t, role);
    ids = first_page_ids<C, Ring>(p, t, role);
    cp_async_wait<0>();
    __syncthreads();  // all of Q has landed
    S::order_q(sm, role);
  }
#pragma unroll 1
  for (int tile = Ring::first_tile(role); tile < t.num_tiles; tile += Ring::kTileStride) {
    advance_pipeline<C, Ring>(p, sm, t, role, tile, ids);
    const int stage = Ring::stage_of(role, tile);
    typename S::Scores s;
    S::compute_qk(s, sm, stage, KvDequant::make(p), role);
    if (tile_needs_mask<C>(t, tile)) mask_scores<C, S>(s, t, tile, role);
    S::update_softmax_state(s, st, sm, stage, p.sm_scale_log2, role);
    S::compute_pv(st, sm, stage, role);
  }
  cp_async_wait<0>();
  S::merge_and_write(p, st, sm, t, role);
}

}  // namespace mlajit_kernel
