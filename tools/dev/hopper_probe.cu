// Development probe for the hopper family's building blocks (not part of the library build):
// wgmma from 128-byte-swizzled shared memory (K-major A and B, MN-major B, A from registers),
// the descriptor offsets, and a TMA box load into the same layout. Each check compares with a
// double-precision CPU product on random data and prints its relative error; the MN-major
// check also tries the leading/stride offsets swapped, so a wrong guess shows which is right.
// Build: tools/dev/build_hopper_probe.sh (nvcc, sm_90a). Run on an H200.
#include <cstdint>

#include "common/ptx_cp_async.cuh"
#include "common/ptx_tma.cuh"
#include "hopper/wgmma.cuh"

#include <cuda.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

using namespace mlajit_kernel;

#define CHECK_CUDA(call)                                                                     \
  do {                                                                                       \
    cudaError_t err_ = (call);                                                               \
    if (err_ != cudaSuccess) {                                                               \
      std::fprintf(stderr, "CUDA error %s at %s:%d: %s\n", cudaGetErrorName(err_), __FILE__, \
                   __LINE__, cudaGetErrorString(err_));                                      \
      std::exit(2);                                                                          \
    }                                                                                        \
  } while (0)

constexpr int kRows = 64, kDim = 576, kCkv = 512;

static uint16_t to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}
static float from_bf16(uint16_t b) {
  uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Row-major [rows][cols] bf16 global -> Sw128Tile<ROWS> at smem byte offset `base`.
template <int ROWS>
__device__ void fill_tile(uint8_t* smem, uint32_t base, const uint16_t* src, int cols) {
  for (int i = threadIdx.x; i < ROWS * cols / 8; i += blockDim.x) {
    const int row = i / (cols / 8), chunk = i % (cols / 8);
    const uint4 v = *reinterpret_cast<const uint4*>(src + row * cols + chunk * 8);
    *reinterpret_cast<uint4*>(smem + base + Sw128Tile<ROWS>::offset(row, chunk)) = v;
  }
}

// Writes accumulator d (m64 x N) of this thread to row-major out[64][ld] at column col0.
template <int N>
__device__ void store_acc(const float (&d)[N / 2], float* out, int ld, int col0) {
  const int t = threadIdx.x % 128, w = t / 32, l = t % 32;
#pragma unroll
  for (int j = 0; j < N / 8; ++j) {
    const int r = 16 * w + l / 4, c = col0 + 8 * j + 2 * (l % 4);
    out[r * ld + c] = d[4 * j];
    out[r * ld + c + 1] = d[4 * j + 1];
    out[(r + 8) * ld + c] = d[4 * j + 2];
    out[(r + 8) * ld + c + 1] = d[4 * j + 3];
  }
}

// One warpgroup. Q, K: [64][576]; P: [64][64]. Outputs: s64 [64][64] (N = 64), s32 [64][64]
// (two N = 32 halves), o_ss / o_ss_swapped / o_rs [64][512] (two N = 256 halves).
__global__ void __launch_bounds__(128, 1)
    probe_wgmma(const uint16_t* q, const uint16_t* k, const uint16_t* p, float* s64, float* s32,
                float* o_ss, float* o_ss_swapped, float* o_rs) {
  extern __shared__ __align__(1024) uint8_t smem[];
  const uint32_t base = smem_address(smem);
  const uint32_t q_base = base, k_base = base + kRows * kDim * 2,
                 p_base = k_base + kRows * kDim * 2;
  fill_tile<kRows>(smem, 0, q, kDim);
  fill_tile<kRows>(smem, kRows * kDim * 2, k, kDim);
  fill_tile<kRows>(smem, 2 * kRows * kDim * 2, p, 64);
  fence_proxy_async_shared();
  __syncthreads();

  {  // S = Q K^T, N = 64
    float d[32];
    wgmma_fence();
    for (int s = 0; s < kDim / 16; ++s)
      wgmma_ss<bf16_t, 64, 0>(d, k_major_descriptor<kRows>(q_base, 0, s),
                              k_major_descriptor<kRows>(k_base, 0, s), s > 0);
    wgmma_commit();
    wgmma_wait<0>();
    fence_registers(d);
    store_acc<64>(d, s64, 64, 0);
  }
  for (int half = 0; half < 2; ++half) {  // S halves, N = 32, B rows 32 half ..
    float d[16];
    wgmma_fence();
    for (int s = 0; s < kDim / 16; ++s)
      wgmma_ss<bf16_t, 32, 0>(d, k_major_descriptor<kRows>(q_base, 0, s),
                              k_major_descriptor<kRows>(k_base, 32 * half, s), s > 0);
    wgmma_commit();
    wgmma_wait<0>();
    fence_registers(d);
    store_acc<32>(d, s32, 64, 32 * half);
  }
  for (int half = 0; half < 2; ++half) {  // O = P V, V MN-major from the K tile
    float d[128];
    wgmma_fence();
    for (int s = 0; s < 4; ++s)
      wgmma_ss<bf16_t, 256, 1>(d, k_major_descriptor<kRows>(p_base, 0, s),
                               mn_major_descriptor<kRows>(k_base, 4 * half, s), s > 0);
    wgmma_commit();
    wgmma_wait<0>();
    fence_registers(d);
    store_acc<256>(d, o_ss, kCkv, 256 * half);
  }
  for (int half = 0; half < 2; ++half) {  // the same with leading and stride offsets swapped
    float d[128];
    wgmma_fence();
    for (int s = 0; s < 4; ++s) {
      const uint32_t start = k_base + 4 * half * Sw128Tile<kRows>::kRegionBytes + s * 16 * 128;
      wgmma_ss<bf16_t, 256, 1>(d, k_major_descriptor<kRows>(p_base, 0, s),
                               sw128_descriptor(start, 1024, Sw128Tile<kRows>::kRegionBytes),
                               s > 0);
    }
    wgmma_commit();
    wgmma_wait<0>();
    fence_registers(d);
    store_acc<256>(d, o_ss_swapped, kCkv, 256 * half);
  }
  for (int half = 0; half < 2; ++half) {  // O = P V with P from registers
    const int t = threadIdx.x, w = t / 32, l = t % 32;
    const int r = 16 * w + l / 4;
    float d[128];
    uint32_t a[4][4];
    for (int s = 0; s < 4; ++s) {
      const int c = 16 * s + 2 * (l % 4);
      a[s][0] = p[r * 64 + c] | (uint32_t(p[r * 64 + c + 1]) << 16);
      a[s][1] = p[(r + 8) * 64 + c] | (uint32_t(p[(r + 8) * 64 + c + 1]) << 16);
      a[s][2] = p[r * 64 + c + 8] | (uint32_t(p[r * 64 + c + 9]) << 16);
      a[s][3] = p[(r + 8) * 64 + c + 8] | (uint32_t(p[(r + 8) * 64 + c + 9]) << 16);
    }
    wgmma_fence();
    for (int s = 0; s < 4; ++s)
      wgmma_rs<bf16_t, 256, 1>(d, a[s], mn_major_descriptor<kRows>(k_base, 4 * half, s), s > 0);
    wgmma_commit();
    wgmma_wait<0>();
    fence_registers(d);
    store_acc<256>(d, o_rs, kCkv, 256 * half);
  }
}

struct alignas(64) TensorMap {
  CUtensorMap map;
};

// TMA: page `page` (64 rows x 576) of the pool into 9 swizzled regions, then every chunk is
// compared with the pool; mismatches counted. A second load at `oob_row` (past the end) must
// arrive as zeros.
__global__ void __launch_bounds__(128, 1)
    probe_tma(const __grid_constant__ TensorMap tmap, const uint16_t* pool, int page, int oob_row,
              int* mismatches, int* oob_nonzero) {
  extern __shared__ __align__(1024) uint8_t smem[];
  __shared__ __align__(8) uint64_t barrier;
  const uint32_t base = smem_address(smem), bar = smem_address(&barrier);
  if (threadIdx.x == 0) {
    mbarrier_init(bar, 1);
    fence_barrier_init();
  }
  __syncthreads();
  const uint64_t policy = l2_evict_first_policy();
  if (threadIdx.x == 0) {
    mbarrier_arrive_expect_tx(bar, 2 * 9 * 64 * 128);
    for (int r = 0; r < 9; ++r) {
      tma_load_2d(base + r * 8192, &tmap.map, 64 * r, 64 * page, bar, policy);
      tma_load_2d(base + (9 + r) * 8192, &tmap.map, 64 * r, oob_row, bar, policy);
    }
  }
  mbarrier_wait(bar, 0);
  for (int i = threadIdx.x; i < 64 * 72; i += blockDim.x) {
    const int row = i / 72, chunk = i % 72;
    const uint4 got = *reinterpret_cast<const uint4*>(smem + Sw128Tile<64>::offset(row, chunk));
    const uint4 want =
        *reinterpret_cast<const uint4*>(pool + (64ll * page + row) * kDim + chunk * 8);
    if (got.x != want.x || got.y != want.y || got.z != want.z || got.w != want.w)
      atomicAdd(mismatches, 1);
    const uint4 oob = *reinterpret_cast<const uint4*>(smem + 9 * 8192 +
                                                      Sw128Tile<64>::offset(row, chunk));
    if (oob.x | oob.y | oob.z | oob.w) atomicAdd(oob_nonzero, 1);
  }
}

// Tensor-pipe throughput: each participating warpgroup issues `reps` chains of 36
// m64n64k16 (Q.K^T of one tile: A and B from shared memory, one accumulator) or 4
// m64n256k16 (P.V). Cycles per chain from clock64, to compare one warpgroup alone with two.
template <int N, int STEPS>
__global__ void __launch_bounds__(256, 1) probe_throughput(int groups, int reps, long long* cycles) {
  extern __shared__ __align__(1024) uint8_t smem[];
  const uint32_t base = smem_address(smem);
  for (int i = threadIdx.x; i < 3 * 73728 / 16; i += blockDim.x)
    reinterpret_cast<uint4*>(smem)[i] = make_uint4(0x3c003c00u, 0x3c003c00u, 0x3c003c00u, 0x3c003c00u);
  fence_proxy_async_shared();
  __syncthreads();
  const int group = threadIdx.x / 128;
  if (group >= groups) return;
  const uint32_t a_base = base, b_base = base + 73728 * (1 + group);
  float d[N / 2];
  for (int i = 0; i < N / 2; ++i) d[i] = 0.f;
  const long long start = clock64();
  for (int r = 0; r < reps; ++r) {
    wgmma_fence();
#pragma unroll
    for (int s = 0; s < STEPS; ++s) {
      if (N == 64) {
        wgmma_ss<bf16_t, N, 0>(d, k_major_descriptor<64>(a_base, 0, s), k_major_descriptor<64>(b_base, 0, s), 1);
      } else {
        wgmma_ss<bf16_t, N, 1>(d, k_major_descriptor<64>(a_base, 0, s), mn_major_descriptor<64>(b_base, 0, s), 1);
      }
    }
    wgmma_commit();
    wgmma_wait<0>();
    fence_registers(d);
  }
  const long long stop = clock64();
  float sum = 0.f;
  for (int i = 0; i < N / 2; ++i) sum += d[i];
  if (threadIdx.x % 128 == 0) cycles[blockIdx.x * 2 + group] = (stop - start) + (sum == 12345.f ? 1 : 0);
}

template <int N, int STEPS>
static void run_throughput(const char* what, int groups) {
  long long* dcycles;
  CHECK_CUDA(cudaMalloc(&dcycles, 132 * 2 * sizeof(long long)));
  const int smem = 3 * 73728;
  CHECK_CUDA(cudaFuncSetAttribute(probe_throughput<N, STEPS>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  const int reps = 200;
  probe_throughput<N, STEPS><<<132, 256, smem>>>(groups, reps, dcycles);
  CHECK_CUDA(cudaGetLastError());
  CHECK_CUDA(cudaDeviceSynchronize());
  long long c[2];
  CHECK_CUDA(cudaMemcpy(c, dcycles, sizeof(c), cudaMemcpyDeviceToHost));
  const double flop = 2.0 * 64 * N * 16 * STEPS;  // per chain per warpgroup
  const double per_chain = double(c[0]) / reps;
  std::printf("throughput %-28s %d warpgroup(s): %.0f cycles per chain per warpgroup, %.0f FLOP/cycle/SM\n",
              what, groups, per_chain, flop * groups / per_chain);
  cudaFree(dcycles);
}

static double rel_l2(const std::vector<float>& got, const std::vector<double>& want) {
  double num = 0, den = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    num += (got[i] - want[i]) * (got[i] - want[i]);
    den += want[i] * want[i];
  }
  return std::sqrt(num / den);
}

int main() {
  std::mt19937 rng(20261201);
  std::normal_distribution<float> normal(0.f, 1.f);
  auto random_bf16 = [&](size_t n) {
    std::vector<uint16_t> v(n);
    for (auto& x : v) x = to_bf16(normal(rng));
    return v;
  };
  const auto q = random_bf16(kRows * kDim), k = random_bf16(kRows * kDim),
             p = random_bf16(kRows * 64);
  std::vector<double> s_ref(64 * 64), o_ref(64 * kCkv);
  for (int i = 0; i < 64; ++i)
    for (int j = 0; j < 64; ++j) {
      double acc = 0;
      for (int c = 0; c < kDim; ++c) acc += double(from_bf16(q[i * kDim + c])) * from_bf16(k[j * kDim + c]);
      s_ref[i * 64 + j] = acc;
    }
  for (int i = 0; i < 64; ++i)
    for (int n = 0; n < kCkv; ++n) {
      double acc = 0;
      for (int t = 0; t < 64; ++t) acc += double(from_bf16(p[i * 64 + t])) * from_bf16(k[t * kDim + n]);
      o_ref[i * kCkv + n] = acc;
    }

  uint16_t *dq, *dk, *dp;
  float *ds64, *ds32, *dss, *dsw, *drs;
  CHECK_CUDA(cudaMalloc(&dq, q.size() * 2));
  CHECK_CUDA(cudaMalloc(&dk, k.size() * 2));
  CHECK_CUDA(cudaMalloc(&dp, p.size() * 2));
  for (float** ptr : {&ds64, &ds32, &dss, &dsw, &drs}) {
    CHECK_CUDA(cudaMalloc(ptr, 64 * kCkv * 4));
    CHECK_CUDA(cudaMemset(*ptr, 0xff, 64 * kCkv * 4));  // NaN until written
  }
  CHECK_CUDA(cudaMemcpy(dq, q.data(), q.size() * 2, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(dk, k.data(), k.size() * 2, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(dp, p.data(), p.size() * 2, cudaMemcpyHostToDevice));
  const int smem_bytes = 2 * kRows * kDim * 2 + kRows * 64 * 2;
  CHECK_CUDA(cudaFuncSetAttribute(probe_wgmma, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes));
  probe_wgmma<<<1, 128, smem_bytes>>>(dq, dk, dp, ds64, ds32, dss, dsw, drs);
  CHECK_CUDA(cudaGetLastError());
  CHECK_CUDA(cudaDeviceSynchronize());
  auto fetch = [](float* ptr, size_t n) {
    std::vector<float> v(n);
    CHECK_CUDA(cudaMemcpy(v.data(), ptr, n * 4, cudaMemcpyDeviceToHost));
    return v;
  };
  const double e_s64 = rel_l2(fetch(ds64, 64 * 64), s_ref);
  const double e_s32 = rel_l2(fetch(ds32, 64 * 64), s_ref);
  const double e_ss = rel_l2(fetch(dss, 64 * kCkv), o_ref);
  const double e_sw = rel_l2(fetch(dsw, 64 * kCkv), o_ref);
  const double e_rs = rel_l2(fetch(drs, 64 * kCkv), o_ref);
  std::printf("wgmma QK  ss n64  rel_l2 %.3e %s\n", e_s64, e_s64 < 1e-5 ? "PASS" : "FAIL");
  std::printf("wgmma QK  ss n32  rel_l2 %.3e %s\n", e_s32, e_s32 < 1e-5 ? "PASS" : "FAIL");
  std::printf("wgmma PV  ss n256 mn-major (lbo=region, sbo=1K)  rel_l2 %.3e %s\n", e_ss, e_ss < 1e-5 ? "PASS" : "FAIL");
  std::printf("wgmma PV  ss n256 mn-major (lbo=1K, sbo=region)  rel_l2 %.3e %s\n", e_sw, e_sw < 1e-5 ? "PASS" : "FAIL");
  std::printf("wgmma PV  rs n256 mn-major  rel_l2 %.3e %s\n", e_rs, e_rs < 1e-5 ? "PASS" : "FAIL");

  // TMA over a small pool: 4 pages of 64 x 576.
  const int pages = 4;
  const auto pool = random_bf16(size_t(pages) * 64 * kDim);
  uint16_t* dpool;
  CHECK_CUDA(cudaMalloc(&dpool, pool.size() * 2));
  CHECK_CUDA(cudaMemcpy(dpool, pool.data(), pool.size() * 2, cudaMemcpyHostToDevice));
  TensorMap tmap;
  const cuuint64_t dims[2] = {kDim, cuuint64_t(pages) * 64};
  const cuuint64_t strides[1] = {kDim * 2};
  const cuuint32_t box[2] = {64, 64}, element_strides[2] = {1, 1};
  const CUresult encoded = cuTensorMapEncodeTiled(
      &tmap.map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, dpool, dims, strides, box, element_strides,
      CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
      CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (encoded != CUDA_SUCCESS) {
    std::printf("cuTensorMapEncodeTiled failed: %d\nFAIL\n", int(encoded));
    return 1;
  }
  int *dmis, *doob;
  CHECK_CUDA(cudaMalloc(&dmis, 4));
  CHECK_CUDA(cudaMalloc(&doob, 4));
  CHECK_CUDA(cudaMemset(dmis, 0, 4));
  CHECK_CUDA(cudaMemset(doob, 0, 4));
  const int tma_smem = 18 * 8192;
  CHECK_CUDA(cudaFuncSetAttribute(probe_tma, cudaFuncAttributeMaxDynamicSharedMemorySize, tma_smem));
  probe_tma<<<1, 128, tma_smem>>>(tmap, dpool, 2, pages * 64, dmis, doob);
  CHECK_CUDA(cudaGetLastError());
  CHECK_CUDA(cudaDeviceSynchronize());
  int mis = -1, oob = -1;
  CHECK_CUDA(cudaMemcpy(&mis, dmis, 4, cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemcpy(&oob, doob, 4, cudaMemcpyDeviceToHost));
  std::printf("tma 9 boxes 64x64 sw128: %d mismatched chunks %s; out-of-range box: %d non-zero chunks %s\n",
              mis, mis == 0 ? "PASS" : "FAIL", oob, oob == 0 ? "PASS" : "FAIL");
  run_throughput<64, 36>("QK m64n64k16 x36 (SS)", 1);
  run_throughput<64, 36>("QK m64n64k16 x36 (SS)", 2);
  run_throughput<256, 4>("PV m64n256k16 x4 (SS)", 1);
  run_throughput<256, 4>("PV m64n256k16 x4 (SS)", 2);
  return 0;
}
