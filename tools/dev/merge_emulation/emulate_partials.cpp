// Host emulation of kernels/common/mla_merge.cuh (see run_partials.sh).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <thread>
#include <vector>
struct Dim { unsigned x = 0, y = 0, z = 0; };
static thread_local Dim blockIdx, threadIdx, gridDim;
#define __device__
#define __forceinline__ inline
#include "common/ptx_dtype.cuh"
#include "mla_merge_host.cuh"
using namespace mlajit_kernel;

namespace {

constexpr int kDim = 512;

template <typename T>
uint16_t to_bits(float v) { return Dtype16<T>::pack(v, 0) & 0xffffu; }
template <typename T>
float from_bits(uint16_t b) { return Dtype16<T>::to_float(b); }

// Runs every CTA in turn, its THREADS threads at once (they meet at the merge's block
// barriers), each through merge_partials<T, kDim, THREADS> with NaN-poisoned scratch.
template <typename T, int THREADS>
void run_merge(const MlaParams& p, int ctas) {
  host_block_barrier().threads = THREADS;
  for (int cta = 0; cta < ctas; ++cta) {
    std::vector<float> scratch(kMergeScratchBytes<THREADS> / sizeof(float), NAN);
    std::vector<std::thread> threads;
    for (int t = 0; t < THREADS; ++t)
      threads.emplace_back([&, t] {
        gridDim.x = ctas;
        blockIdx.x = cta;
        blockIdx.y = 0;
        threadIdx.x = t;
        merge_partials<T, kDim, THREADS>(p, scratch.data());
      });
    for (auto& thread : threads) thread.join();
  }
}

template <typename T, int THREADS>
int trial(std::mt19937_64& rng, int index) {
  const bool natural = index % 2;
  const int heads = 16, tokens = 3, rows = heads * tokens;
  std::uniform_int_distribution<int> chunk_count(2, 70);
  std::uniform_real_distribution<float> u(-1, 1), l(-30, 30);
  // Records of one tile each (pieces of up to 8 rows), laid out as the planner does: chunk c,
  // row i of a tile at partial_row_base + c * partial_stride + i.
  std::vector<MlaMergeRecord> records;
  std::vector<int32_t> indptr{0};
  int64_t partial_rows = 0;
  const int ctas = 5;
  for (int row0 = 0; row0 < rows;) {
    MlaMergeRecord r{};
    r.q_token_base = 0;
    r.packed_q_start = row0;
    r.num_rows = std::min(1 + static_cast<int>(rng() % 8), rows - row0);
    r.num_chunks = index == 0 ? 8 : chunk_count(rng);  // trial 0: one whole batch
    r.partial_stride = r.num_rows + static_cast<int>(rng() % 3);
    r.partial_row_base = static_cast<int32_t>(partial_rows);
    partial_rows += static_cast<int64_t>(r.num_chunks) * r.partial_stride;
    records.push_back(r);
    row0 += r.num_rows;
  }
  // Records spread over the CTAs in turn, each CTA's in order.
  std::vector<MlaMergeRecord> by_cta;
  for (int cta = 0; cta < ctas; ++cta) {
    for (size_t k = cta; k < records.size(); k += ctas) by_cta.push_back(records[k]);
    indptr.push_back(static_cast<int32_t>(by_cta.size()));
  }
  std::vector<uint16_t> partial_o(partial_rows * kDim, 0xFFFF);  // unwritten rows: NaN
  std::vector<float> partial_lse(partial_rows, NAN);
  for (const MlaMergeRecord& r : records)
    for (int c = 0; c < r.num_chunks; ++c)
      for (int i = 0; i < r.num_rows; ++i) {
        const int64_t prow = r.partial_row_base + int64_t{c} * r.partial_stride + i;
        const int row = r.packed_q_start + i;
        const bool empty = row == 5 || (c + i) % 5 == 0;  // row 5 saw no KV in any chunk
        partial_lse[prow] = empty ? -INFINITY : l(rng);
        for (int d = 0; d < kDim; ++d) partial_o[prow * kDim + d] = to_bits<T>(empty ? 0.f : u(rng));
      }
  const int64_t out_stride_head = kDim + 8, out_stride_token = heads * out_stride_head + 24;
  std::vector<uint16_t> out(tokens * out_stride_token, 0xFFFF);
  std::vector<float> lse(rows, NAN);
  MlaParams p{};
  p.out = out.data();
  p.lse = lse.data();
  p.partial_o = partial_o.data();
  p.partial_lse = partial_lse.data();
  p.merge_indptr = indptr.data();
  p.merge_records = by_cta.data();
  p.out_stride_token = out_stride_token;
  p.out_stride_head = out_stride_head;
  p.num_heads = heads;
  p.lse_base_e = natural;
  run_merge<T, THREADS>(p, ctas);

  double err = 0, norm = 0, lse_err = 0;
  bool bad = false;
  for (const MlaMergeRecord& r : records)
    for (int i = 0; i < r.num_rows; ++i) {
      const int row = r.packed_q_start + i;
      double m = -INFINITY;
      for (int c = 0; c < r.num_chunks; ++c)
        m = std::max(m, double{partial_lse[r.partial_row_base + int64_t{c} * r.partial_stride + i]});
      double sum = 0;
      std::vector<double> ref(kDim, 0.0);
      if (m != -INFINITY)
        for (int c = 0; c < r.num_chunks; ++c) {
          const int64_t prow = r.partial_row_base + int64_t{c} * r.partial_stride + i;
          const double w = std::exp2(partial_lse[prow] - m);
          sum += w;
          for (int d = 0; d < kDim; ++d) ref[d] += w * from_bits<T>(partial_o[prow * kDim + d]);
        }
      const uint16_t* got = out.data() + (row / heads) * out_stride_token + (row % heads) * out_stride_head;
      for (int d = 0; d < kDim; ++d) {
        const double want = sum > 0 ? ref[d] / sum : 0.0, g = from_bits<T>(got[d]);
        if (std::isnan(g)) bad = true;
        err += (g - want) * (g - want);
        norm += want * want;
      }
      const double want_lse = m == -INFINITY ? -INFINITY : (m + std::log2(sum)) * (natural ? kLn2 : 1.0);
      const double got_lse = lse[(row / heads) * heads + row % heads];
      if (std::isnan(got_lse) || std::isinf(got_lse) != std::isinf(want_lse)) bad = true;
      else if (!std::isinf(want_lse)) lse_err = std::max(lse_err, std::abs(got_lse - want_lse));
    }
  const double rel = std::sqrt(err / norm);
  const bool bf16 = std::is_same<T, bf16_t>::value;
  const bool ok = !bad && rel < (bf16 ? 1e-2 : 2e-3) && lse_err < 1e-4;
  std::printf("trial %2d %s %3d threads lse %s, %zu records, chunks %d..%d: rel %.2e lse %.2e %s\n",
              index, bf16 ? "bf16" : "f16 ", THREADS, natural ? "e" : "2", records.size(),
              std::min_element(records.begin(), records.end(), [](auto& a, auto& b) { return a.num_chunks < b.num_chunks; })->num_chunks,
              std::max_element(records.begin(), records.end(), [](auto& a, auto& b) { return a.num_chunks < b.num_chunks; })->num_chunks,
              rel, lse_err, ok ? "ok" : "FAIL");
  return ok ? 0 : 1;
}

}  // namespace

int main() {
  std::mt19937_64 rng(20261204);
  int failures = 0;
  for (int i = 0; i < 6; ++i) {
    failures += trial<bf16_t, 512>(rng, i);
    failures += trial<f16_t, 256>(rng, i);
  }
  std::printf("%s\n", failures ? "FAILED" : "all trials ok");
  return failures;
}
