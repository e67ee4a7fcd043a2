// Probes of the driver's launch attributes (tests/gpu/test_driver_launch_gpu.cpp):
//   cluster_probe: every block records its place in its thread block cluster (%cluster_ctarank,
//     %clusterid.x, %cluster_nctarank) and the block index that the next CTA of its cluster
//     stored in its own shared memory, read through distributed shared memory. Without the
//     cluster attribute each block is a cluster of one and reads itself. 1-D grids only.
//   pdl_probe: a primary/secondary pair for programmatic dependent launch. The primary lets
//     dependents start at once, holds on for spin_ns and only then writes data[i] = 3i + 1; the
//     secondary notes whether it started before the primary finished, waits for the primary
//     grid (griddepcontrol.wait) unless it is the control, and writes result[i] = 2 data[i].
// Launch either with any block size, no dynamic shared memory; sm_90 or newer.
//
// The host may include this file (after <cstdint>) for the records and parameters: the device
// code is compiled only by NVRTC / nvcc.
#pragma once

namespace mlajit_kernel {

struct ClusterProbeRecord {
  uint32_t block;           // blockIdx.x
  uint32_t cta_rank;        // %cluster_ctarank
  uint32_t cluster_id;      // %clusterid.x
  uint32_t cluster_blocks;  // %cluster_nctarank
  uint32_t peer_block;      // blockIdx.x of CTA rank (cta_rank + 1) % cluster_blocks, via DSMEM
};

enum PdlProbeRole : int32_t {
  kPdlPrimary = 0,
  kPdlSecondary = 1,               // waits for the primary grid before reading data
  kPdlSecondaryWithoutWait = 2,    // the control: reads data without waiting
};

struct PdlProbeParams {
  uint32_t* data;          // [n], written by the primary after its spin
  uint32_t* result;        // [n], written by the secondary
  uint32_t* primary_done;  // blocks of the primary that finished writing (zeroed before)
  uint32_t* overlapped;    // the secondary's block 0 writes 1 if the primary had not finished
  uint64_t spin_ns;        // how long the primary holds on before writing data
  uint32_t n;
  uint32_t primary_blocks;
  int32_t role;            // a PdlProbeRole
  int32_t reserved;
};

}  // namespace mlajit_kernel

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#include "common/dependent_launch.cuh"
#include "common/ptx_cp_async.cuh"  // smem_address
#include "utility/spin.cuh"          // global_timer_ns

namespace mlajit_kernel {

__device__ __forceinline__ uint32_t cluster_cta_rank() {
  uint32_t rank;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
  return rank;
}

__device__ __forceinline__ uint32_t cluster_num_ctas() {
  uint32_t count;
  asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(count));
  return count;
}

__device__ __forceinline__ uint32_t cluster_id_x() {
  uint32_t id;
  asm volatile("mov.u32 %0, %%clusterid.x;" : "=r"(id));
  return id;
}

// Every thread of every CTA in the cluster; orders shared-memory writes before it with reads
// after it across the cluster.
__device__ __forceinline__ void cluster_sync() {
  asm volatile(
      "barrier.cluster.arrive.release.aligned;\n"
      "barrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}

// The 32-bit word at `local_address` in the shared memory of CTA `rank` of this cluster.
__device__ __forceinline__ uint32_t load_cluster_shared(uint32_t local_address, uint32_t rank) {
  uint32_t remote, value;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(local_address), "r"(rank));
  asm volatile("ld.shared::cluster.u32 %0, [%1];" : "=r"(value) : "r"(remote) : "memory");
  return value;
}

__global__ void cluster_probe(ClusterProbeRecord* records) {
  __shared__ uint32_t own_block;
  const uint32_t rank = cluster_cta_rank();
  const uint32_t ctas = cluster_num_ctas();
  if (threadIdx.x == 0) own_block = blockIdx.x;
  cluster_sync();  // every CTA of the cluster has stored its index
  if (threadIdx.x == 0) {
    ClusterProbeRecord record;
    record.block = blockIdx.x;
    record.cta_rank = rank;
    record.cluster_id = cluster_id_x();
    record.cluster_blocks = ctas;
    record.peer_block = load_cluster_shared(smem_address(&own_block), (rank + 1) % ctas);
    records[blockIdx.x] = record;
  }
  cluster_sync();  // no CTA exits, releasing its shared memory, while a peer may still read it
}

__device__ __forceinline__ void pdl_primary(const PdlProbeParams& p) {
  launch_dependents();  // at once: the secondary should run while this grid still spins
  const uint64_t start = global_timer_ns();
  while (global_timer_ns() - start < p.spin_ns) {
  }
  for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < p.n; i += gridDim.x * blockDim.x) {
    p.data[i] = 3 * i + 1;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    atomicAdd(p.primary_done, 1u);
  }
}

__device__ __forceinline__ void pdl_secondary(const PdlProbeParams& p) {
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    const uint32_t done = *static_cast<volatile const uint32_t*>(p.primary_done);
    *p.overlapped = done < p.primary_blocks ? 1u : 0u;
  }
  if (p.role == kPdlSecondary) wait_for_previous_grid();
  for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < p.n; i += gridDim.x * blockDim.x) {
    p.result[i] = 2 * p.data[i];
  }
}

__global__ void pdl_probe(const __grid_constant__ PdlProbeParams p) {
  if (p.role == kPdlPrimary) {
    pdl_primary(p);
  } else {
    pdl_secondary(p);
  }
}

}  // namespace mlajit_kernel
#endif
