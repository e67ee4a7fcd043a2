// Checks the e4m3 -> f16 pair conversions of kernels/common/fp8_dequant.cuh and
// fp8_fragments.cuh against an exact host decode, for every pair of codes: converted pair
// times dequant_factor(scale 1) must be the codes' values. Build it twice to cover both paths
// on one Hopper GPU: for sm_90a (cvt.rn.f16x2.e4m3x2) and as compute_80 PTX only, which the
// driver compiles at load with __CUDA_ARCH__ = 800 (Ampere's bit arithmetic):
//   nvcc -std=c++17 -I kernels -gencode arch=compute_90a,code=sm_90a tools/dev/e4m3_pair_check.cu -o check90
//   nvcc -std=c++17 -I kernels -gencode arch=compute_80,code=compute_80 tools/dev/e4m3_pair_check.cu -o check80
// NaN codes (0x7f, 0xff) are skipped: Ampere's path gives them a finite value.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "common/fp8_fragments.cuh"

using namespace mlajit_kernel;

__device__ float f16_bits_to_float(uint32_t bits) { return Dtype16<f16_t>::to_float(bits & 0xffffu); }

// out[4 * w + 0..1]: the pair of codes (w & 0xff, w >> 8) by e4m3x2_to_f16x2 (via k_code_pairs'
// first pair); out[4 * w + 2..3]: the even pair of v_code_pairs over the word placing those
// codes in bytes 0 and 2.
__global__ void convert_all(float* out, int* arch) {
  const uint32_t w = blockIdx.x * blockDim.x + threadIdx.x;
  if (w >= 65536) return;
#ifdef __CUDA_ARCH__
  if (w == 0) *arch = __CUDA_ARCH__;
#endif
  const float factor = dequant_factor(nullptr, 1.0f);
  uint32_t b0, b1;
  k_code_pairs(w, b0, b1);
  out[4 * w + 0] = f16_bits_to_float(b0) * factor;
  out[4 * w + 1] = f16_bits_to_float(b0 >> 16) * factor;
  uint32_t even, odd;
  v_code_pairs((w & 0xffu) | ((w >> 8) << 16), even, odd);
  out[4 * w + 2] = f16_bits_to_float(even) * factor;
  out[4 * w + 3] = f16_bits_to_float(even >> 16) * factor;
}

static double decode_e4m3(uint32_t code) {
  const int sign = (code >> 7) & 1, exponent = (code >> 3) & 15, mantissa = code & 7;
  const double magnitude = exponent == 0 ? std::ldexp(mantissa / 8.0, -6)
                                         : std::ldexp(1.0 + mantissa / 8.0, exponent - 7);
  return sign ? -magnitude : magnitude;
}

int main() {
  float* device_out = nullptr;
  int* device_arch = nullptr;
  if (cudaMalloc(&device_out, 4 * 65536 * sizeof(float)) != cudaSuccess ||
      cudaMalloc(&device_arch, sizeof(int)) != cudaSuccess) {
    std::printf("e4m3 pair check: cudaMalloc failed\n");
    return 2;
  }
  convert_all<<<256, 256>>>(device_out, device_arch);
  std::vector<float> out(4 * 65536);
  int arch = 0;
  const cudaError_t status = cudaMemcpy(out.data(), device_out, out.size() * sizeof(float),
                                        cudaMemcpyDeviceToHost);
  cudaMemcpy(&arch, device_arch, sizeof(int), cudaMemcpyDeviceToHost);
  if (status != cudaSuccess) {
    std::printf("e4m3 pair check: %s\n", cudaGetErrorString(status));
    return 2;
  }
  int wrong = 0, checked = 0;
  for (uint32_t w = 0; w < 65536; ++w) {
    const uint32_t codes[2] = {w & 0xffu, w >> 8};
    for (int k = 0; k < 2; ++k) {
      if ((codes[k] & 0x7fu) == 0x7fu) continue;
      const double expected = decode_e4m3(codes[k]);
      for (int path = 0; path < 2; ++path) {
        ++checked;
        const float got = out[4 * w + 2 * path + k];
        if (got != expected || std::signbit(got) != std::signbit(expected)) {
          if (++wrong <= 5) {
            std::printf("code 0x%02x (%s): %g, expected %g\n", codes[k],
                        path == 0 ? "k_code_pairs" : "v_code_pairs", got, expected);
          }
        }
      }
    }
  }
  std::printf("e4m3 pair check, __CUDA_ARCH__ %d: %d of %d values wrong -> %s\n", arch, wrong,
              checked, wrong == 0 ? "PASS" : "FAIL");
  return wrong == 0 ? 0 : 1;
}
