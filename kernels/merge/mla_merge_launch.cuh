// The merge of split tiles in a launch of its own, behind a family's attention launch (the
// hopper family's: its kernel then holds no merge, a fifth of its compile). Launched
// with programmatic stream serialization on the attention launch's grid, it is scheduled as the
// attention's CTAs leave their SMs and waits here for that launch's end and writes; CTA c
// merges the plan's records of CTA c (merge_indptr), with the arithmetic of the in-launch merge
// at NUM_THREADS threads, so the bits are those of a cooperative launch of that block size.
#pragma once
#include "common/dependent_launch.cuh"
#include "common/mla_merge.cuh"

namespace mlajit_kernel {

template <typename OType, int HEAD_DIM, int NUM_THREADS, int BATCH>
__global__ void __launch_bounds__(NUM_THREADS, 1)
    mla_merge_kernel(const __grid_constant__ MlaParams params) {
  extern __shared__ __align__(16) float merge_scratch[];
  wait_for_previous_grid();
  merge_partials<OType, HEAD_DIM, NUM_THREADS, BATCH>(params, merge_scratch);
}

}  // namespace mlajit_kernel
