// The portable kernel's pipeline over one work item, the same for either row layout: Q and
// the first KV tiles on their way, the KV loop (`attend`), the normalisation and the output
// through shared memory.
#pragma once
#include "common/mla_merge.cuh"
#include "portable/dequantize_kv.cuh"
#include "portable/fragments.cuh"
#include "portable/load_kv.cuh"
#include "portable/load_q.cuh"
#include "portable/portable_config.cuh"
#include "portable/score_stages.cuh"

namespace mlajit_kernel {

// The staged O rows from shared memory to the output or the partial buffer, 128 bytes a row.
template <typename C>
__device__ __forceinline__ void store_output_rows(const MlaParams& p, const SmemMap<C>& sm,
                                                  const TileContext& t, const ThreadRole& role) {
  using OType = typename C::OType;
  using OSwizzle = Swizzle<C::kOChunks>;
  const bool partial = t.partial_row >= 0;
  const int32_t partial_row0 = t.partial_row + blockIdx.x * C::kQTile;
  const int lane8 = role.tid % C::kLanesPerRow;
#pragma unroll
  for (int pass = 0; pass < C::kQPasses; ++pass) {
    const int row = role.tid / C::kLanesPerRow + pass * C::kRowsPerPass;
    if (row < t.rows) {
      OType* dst = partial ? static_cast<OType*>(p.partial_o) +
                                 static_cast<int64_t>(partial_row0 + row) * C::kHeadDimCkv
                           : static_cast<OType*>(p.out) + final_row_offset(p, t.q_token_base, t.row0 + row);
#pragma unroll
      for (int k = 0; k < C::kOChunksPerLane; ++k) {
        const int chunk = lane8 + k * C::kLanesPerRow;
        Chunk16 v;
        asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];"
                     : "=r"(v.w[0]), "=r"(v.w[1]), "=r"(v.w[2]), "=r"(v.w[3])
                     : "r"(sm.o + OSwizzle::byte_offset(row, chunk)));
        *reinterpret_cast<Chunk16*>(dst + chunk * C::kOChunkElems) = v;
      }
    }
  }
}

// Stage: write_output. O goes through shared memory so that global stores are whole 128-byte
// rows; the final output or the partial buffer, and the LSE.
template <typename C, typename Rows>
__device__ __forceinline__ void write_output(const MlaParams& p, typename Rows::State& st,
                                             const float (&lse)[Rows::kLseRows], const SmemMap<C>& sm,
                                             const TileContext& t, const ThreadRole& role) {
  using OSwizzle = Swizzle<C::kOChunks>;
  __syncthreads();  // everyone is done with Q / KV, which the staging area overlays
  // The staging addresses are derived from a fresh read of the thread index: derived from
  // `role`, the compiler hoists all of them to the kernel's start and, at 255 registers in the
  // wide tier-1 loop, keeps them in local memory.
  const ThreadRole fresh = ThreadRole::make_fresh();
  const int ochunk0 = Rows::out_chunk0(fresh);
#pragma unroll
  for (int i = 0; i < Rows::kOutMTiles; ++i) {
    const int orow = Rows::out_row(fresh, i);
#pragma unroll
    for (int b = 0; b < Rows::kOutDimBlocks; ++b) {
      uint32_t packed[4];
      pack_fragment<typename C::OType>(packed, st.o[i * Rows::kOutDimBlocks + b]);
      stmatrix_x4(sm.o + OSwizzle::byte_offset(orow, ochunk0 + 2 * b + role.lane / 16), packed);
    }
  }
  const bool partial = t.partial_row >= 0;
  const int32_t partial_row0 = t.partial_row + blockIdx.x * C::kQTile;
  if (Rows::writes_lse(role) && role.lane % 4 == 0) {
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const int row = Rows::acc_row(role, j);
      if (row < t.rows) {
        if (partial) {
          p.partial_lse[partial_row0 + row] = lse[j];
        } else {
          write_final_lse(p, t.q_token_base, t.row0 + row, lse[j]);
        }
      }
    }
  }
  __syncthreads();
  store_output_rows<C>(p, sm, t, role);
}

// Q and the ring's first kStages - 1 KV tiles on their way (Q joins the first tile's group).
template <typename C, typename Ring>
__device__ __forceinline__ void start_pipeline(const MlaParams& p, const SmemMap<C>& sm, const TileContext& t,
                                               const ThreadRole& role) {
  load_q<C, Ring::kQRows>(p, sm, t, role);
#pragma unroll
  for (int i = 0; i < Ring::kStages - 1; ++i) {
    const int tile = Ring::first_tile(role) + i * Ring::kTileStride;
    if (tile < t.num_tiles) load_kv<C, Ring>(p, sm, t, role, tile, Ring::stage_of(role, tile));
    cp_async_commit();
  }
}

// The KV loop of one tile in row layout Rows, normalisation and output.
template <typename C, typename Rows>
__device__ __forceinline__ void attend(const MlaParams& p, const SmemMap<C>& sm, const TileContext& t) {
  // Addresses derived from the thread index are recomputed per work item: derived from the
  // kernel's ThreadRole they are hoisted to its start, stay live across every KV loop copy and
  // spill at 255 registers (and the wide loop ran 5% slower with them).
  using Ring = typename Rows::Ring;
  const ThreadRole role = ThreadRole::make_fresh();
  if (t.num_tiles > 0) start_pipeline<C, Ring>(p, sm, t, role);
  typename Rows::State st;
  st.init();
  KvPageIds<C> ids = first_page_ids<C, Ring>(p, t, role);
#pragma unroll 1
  for (int tile = 0; tile < t.num_tiles; ++tile) {
    advance_pipeline<C, Ring>(p, sm, t, role, tile, ids);
    const int stage = Ring::stage_of(role, tile);
    if constexpr (C::kFp8Kv) dequantize_kv<C, Ring>(sm, stage, KvDequant::make(p), role);
    typename Rows::Scores s;
    if (Rows::computes_scores(role)) {
      compute_qk<C, Rows>(s, sm, stage, role);
      if (tile_needs_mask<C>(t, tile)) mask_scores<C, Rows>(s, t, tile, role);
    }
    Rows::update_softmax_state(s, st, sm, stage, p.sm_scale_log2, role);
    Rows::compute_pv(s, st, sm, stage, role);
  }
  cp_async_wait<0>();
  float lse[Rows::kLseRows];
  Rows::normalize(st, sm, p.sm_scale_log2, lse, role);
  write_output<C, Rows>(p, st, lse, sm, t, role);
}

}  // namespace mlajit_kernel
