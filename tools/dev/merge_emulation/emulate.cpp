// Host emulation of kernels/merge/merge_states.cuh: the kernel's own source, PTX helpers replaced.
#include <cstdint>
#include <cstdio>
#include <cmath>
#include <random>
#include <vector>
#include <limits>
struct Dim { unsigned x = 0, y = 0, z = 0; };
static Dim blockIdx, threadIdx;
#define __CUDACC__ 1
#define __device__
#define __forceinline__ inline
#define __global__
#define __launch_bounds__(x)
#define __grid_constant__
#define MLAJIT_EXPECTED_THREADS 128
inline void __syncwarp() {}
// The kernel file is included from a copy (run.sh) whose one asm statement, the 16-byte store,
// is replaced by a memcpy; common/ holds host versions of the two PTX helper headers.
#include "merge_states_host.cuh"
using namespace mlajit_kernel;

uint16_t to_bits(bool bf16, float v) { uint32_t p = bf16 ? Dtype16<bf16_t>::pack(v, 0) : Dtype16<f16_t>::pack(v, 0); return p & 0xffff; }
float from_bits(bool bf16, uint16_t b) { return bf16 ? Dtype16<bf16_t>::to_float(b) : Dtype16<f16_t>::to_float(b); }

int main() {
  std::mt19937_64 rng(1);
  int failures = 0;
  for (int trial = 0; trial < 24; ++trial) {
    const bool bf16 = trial % 2, natural = (trial / 2) % 2;
    const int parts = 1 + trial % 5 * 2, tokens = 3, heads = 5, dim = (trial % 3 == 0) ? 264 : 512;
    const int64_t pst = heads * (dim + 8) + 16, psh = dim + 8;  // padded strides
    std::vector<std::vector<uint16_t>> outs(parts, std::vector<uint16_t>(tokens * pst, 0xFFFF));
    std::vector<std::vector<float>> lses(parts, std::vector<float>(tokens * heads));
    std::uniform_real_distribution<float> u(-1, 1), l(-20, 20);
    for (int c = 0; c < parts; ++c) {
      for (int t = 0; t < tokens; ++t) for (int h = 0; h < heads; ++h) {
        float lse = l(rng);
        if ((c + t + h) % 4 == 0 && parts > 1) lse = -INFINITY;  // empty: out stays NaN poison
        if (t == 2 && h == 1) lse = -INFINITY;                    // a row empty everywhere
        lses[c][t * heads + h] = lse;
        if (lse != -INFINITY) for (int d = 0; d < dim; ++d) outs[c][t * pst + h * psh + d] = to_bits(bf16, u(rng));
      }
    }
    std::vector<uint16_t> out(tokens * heads * dim, 0xFFFF);
    std::vector<float> lse(tokens * heads, NAN);
    MergeStatesParams p{};
    for (int c = 0; c < parts; ++c) p.parts[c] = {outs[c].data(), lses[c].data(), pst, psh};
    p.out = out.data(); p.lse = lse.data(); p.out_stride_token = heads * dim; p.out_stride_head = dim;
    p.num_rows = tokens * heads; p.num_heads = heads; p.head_dim = dim; p.num_parts = parts;
    p.is_bf16 = bf16; p.lse_base_e = natural;
    std::vector<float> lse_in_base(0);
    if (natural) for (auto& v : lses) for (auto& x : v) x = x * 0.6931471805599453f;  // inputs in base e
    const unsigned blocks = (p.num_rows + 3) / 4;
    for (unsigned b = 0; b < blocks; ++b) for (int t = 127; t >= 0; --t) {  // lane 0 last: after __syncwarp
      blockIdx.x = b; threadIdx.x = t; merge_states<128>(p);
    }
    double err = 0, norm = 0, lerr = 0; bool inf_ok = true, nan = false;
    for (int t = 0; t < tokens; ++t) for (int h = 0; h < heads; ++h) {
      double m = -INFINITY;
      for (int c = 0; c < parts; ++c) m = std::max(m, (double)lses[c][t*heads+h] / (natural ? 0.6931471805599453 : 1.0));
      double sum = 0; std::vector<double> ref(dim, 0.0);
      if (m != -INFINITY) for (int c = 0; c < parts; ++c) {
        double lc = lses[c][t*heads+h] / (natural ? 0.6931471805599453 : 1.0);
        if (lc == -INFINITY) continue;
        double w = std::exp2(lc - m); sum += w;
        for (int d = 0; d < dim; ++d) ref[d] += w * from_bits(bf16, outs[c][t*pst+h*psh+d]);
      }
      for (int d = 0; d < dim; ++d) {
        double r = sum > 0 ? ref[d] / sum : 0; double g = from_bits(bf16, out[(t*heads+h)*dim+d]);
        if (std::isnan(g)) nan = true;
        err += (g - r) * (g - r); norm += r * r;
      }
      double rl = m == -INFINITY ? -INFINITY : (m + std::log2(sum)) * (natural ? 0.6931471805599453 : 1.0);
      double gl = lse[t*heads+h];
      if (std::isinf(rl) != std::isinf(gl) || std::isnan(gl)) inf_ok = false;
      else if (!std::isinf(rl)) lerr = std::max(lerr, std::abs(gl - rl));
    }
    const double rel = std::sqrt(err / norm);
    const bool ok = !nan && inf_ok && rel < (bf16 ? 1e-2 : 3e-3) && lerr < 1e-4;
    failures += !ok;
    std::printf("trial %2d %s %s parts %d dim %d: rel %.2e lse %.2e %s\n", trial, bf16 ? "bf16" : "f16 ", natural ? "e" : "2", parts, dim, rel, lerr, ok ? "ok" : "FAIL");
  }
  return failures;
}
