// Standalone correctness and timing harness for kernels/portable/mla_fa2.cuh (development tool,
// not part of the library build). Builds small plans by hand, runs the kernel cooperatively (and the
// phase 1 + phase 2 two-launch path), compares out and lse against a float64 CPU reference and
// times two decode shapes. Build and run: tools/dev/run_harness.sh.
//
// The prelude below mirrors what src/jit/codegen.cpp generates before the kernel sources:
// fixed-width integer types. MLAJIT_EXPECTED_SMEM_BYTES is left undefined because this file
// instantiates many configurations; each is checked against the host formula instead.
//
// Development switches (not in the library's kernel: there the config's template parameters
// decide). Set them at build time, e.g.
//   HARNESS_FLAGS=-DMLAJIT_DEV_NO_PAGE_PREFETCH tools/dev/run_harness.sh --build
//  - MLAJIT_DEV_NARROW_ALL_TIERS: every tier has the narrow row layout (production: the large
//    tier only, for head counts that are not a multiple of 32; the harness's cases have it
//    there).
//  - MLAJIT_DEV_NO_PAGE_PREFETCH: page ids are never fetched a tile ahead (production: they are
//    when pages are shorter than the KV tile, the choice the host makes per spec).
#include <cstdint>

#include "portable/mla_fa2.cuh"  // by its path below kernels/, as NVRTC names it

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

using namespace mlajit_kernel;

#ifdef MLAJIT_DEV_NARROW_ALL_TIERS
constexpr bool kNarrowAllTiers = true;
#else
constexpr bool kNarrowAllTiers = false;
#endif
#ifdef MLAJIT_DEV_NO_PAGE_PREFETCH
constexpr bool kPageIdsAheadAllowed = false;
#else
constexpr bool kPageIdsAheadAllowed = true;
#endif

// One dtype for Q, KV and O. The kernel takes the causal mask at run time (MlaParams::causal);
// the harness keeps it in the config, for its cases and the params it fills.
template <typename D, int CKV, int KPE, bool CAUSAL, int STAGES, int KV, bool SHARD, bool AHEAD>
struct Cfg : MlaConfig<D, D, D, CKV, KPE, STAGES, KV, SHARD, 64, AHEAD,
                       kNarrowAllTiers || (KV >= 64 && STAGES >= 2)> {
  static constexpr bool kCausal = CAUSAL;
};

// Both page-id variants of one configuration. A case runs the one the host picks for its page
// size: ids fetched ahead when pages are shorter than the KV tile.
template <typename D, int CKV, int KPE, bool CAUSAL, int STAGES, int KV, bool SHARD>
struct Spec {
  using Inline = Cfg<D, CKV, KPE, CAUSAL, STAGES, KV, SHARD, false>;
  using Ahead = Cfg<D, CKV, KPE, CAUSAL, STAGES, KV, SHARD, true>;
  static bool ahead(int page_size) { return kPageIdsAheadAllowed && page_size < KV; }
};

#define CHECK_CUDA(call)                                                                     \
  do {                                                                                       \
    cudaError_t err_ = (call);                                                               \
    if (err_ != cudaSuccess) {                                                               \
      std::fprintf(stderr, "CUDA error %s at %s:%d: %s\n", cudaGetErrorName(err_), __FILE__, \
                   __LINE__, cudaGetErrorString(err_));                                      \
      std::exit(2);                                                                          \
    }                                                                                        \
  } while (0)

// ----------------------------------------------------------------------------- host dtypes
static uint16_t float_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}
static float bf16_to_float(uint16_t b) {
  uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
static uint16_t float_to_f16(float f) {
  __half h = __float2half_rn(f);
  uint16_t b;
  std::memcpy(&b, &h, 2);
  return b;
}
static float f16_to_float(uint16_t b) {
  __half h;
  std::memcpy(&h, &b, 2);
  return __half2float(h);
}
template <typename T>
struct HostDtype;
template <>
struct HostDtype<bf16_t> {
  static uint16_t from(float f) { return float_to_bf16(f); }
  static float to(uint16_t b) { return bf16_to_float(b); }
  static constexpr const char* name = "bf16";
  static constexpr double tolerance = 1e-2;
};
template <>
struct HostDtype<f16_t> {
  static uint16_t from(float f) { return float_to_f16(f); }
  static float to(uint16_t b) { return f16_to_float(b); }
  static constexpr const char* name = "f16";
  static constexpr double tolerance = 2e-3;
};

// ----------------------------------------------------------------------------- plans
struct Request {
  int q_len, kv_len;
};

struct HostPlan {
  int grid_x = 1, grid_y = 1;
  std::vector<int32_t> work_indptr;
  std::vector<MlaWorkItem> items;
  std::vector<int32_t> merge_indptr;
  std::vector<MlaMergeRecord> records;
  int partial_rows = 0;
};

struct Layout {
  std::vector<int> q_base, page_base;  // per request
  int total_q = 0, total_pages = 0;
};

static Layout make_layout(const std::vector<Request>& reqs, int page_size) {
  Layout l;
  for (const Request& r : reqs) {
    l.q_base.push_back(l.total_q);
    l.page_base.push_back(l.total_pages);
    l.total_q += r.q_len;
    l.total_pages += (r.kv_len + page_size - 1) / page_size;
  }
  return l;
}

// Splits tile KV ranges into pieces: `chunks_of(tile_index, eff)` gives the chunk boundaries,
// `owner_of(item)` the CTA pair. Items are grouped per CTA pair afterwards (CSR).
struct PieceSink {
  std::vector<std::vector<MlaWorkItem>> per_y;
  std::vector<MlaMergeRecord> records;
  int partial_rows = 0;
};

static void add_tile(PieceSink& sink, const Request& r, int q_base, int page_base, int start,
                     int num_rows, int tile_rows, const std::vector<int>& bounds,
                     const std::vector<int>& owners) {
  const int nchunks = static_cast<int>(bounds.size()) - 1;
  int partial_base = -1;
  if (nchunks > 1) {
    partial_base = sink.partial_rows;
    sink.partial_rows += nchunks * tile_rows;
    MlaMergeRecord rec{};
    rec.q_token_base = q_base;
    rec.packed_q_start = start;
    rec.num_rows = num_rows;
    rec.partial_row_base = partial_base;
    rec.num_chunks = nchunks;
    rec.partial_stride = tile_rows;
    sink.records.push_back(rec);
  }
  for (int c = 0; c < nchunks; ++c) {
    MlaWorkItem it{};
    it.q_token_base = q_base;
    it.q_len = r.q_len;
    it.kv_page_base = page_base;
    it.kv_len = r.kv_len;
    it.packed_q_start = start;
    it.kv_start = bounds[c];
    it.kv_end = bounds[c + 1];
    it.partial_row = nchunks > 1 ? partial_base + c * tile_rows : -1;
    sink.per_y[owners[c]].push_back(it);
  }
}

static int effective_kv(const Request& r, int H, bool causal, int start, int num_rows) {
  if (!causal) return r.kv_len;
  const int last_token = (start + num_rows - 1) / H;
  return std::clamp(r.kv_len - r.q_len + last_token + 1, 0, r.kv_len);
}

static HostPlan finish_plan(PieceSink& sink, int cluster, int grid_y) {
  HostPlan p;
  p.grid_x = cluster;
  p.grid_y = grid_y;
  p.work_indptr.push_back(0);
  for (auto& v : sink.per_y) {
    for (auto& it : v) p.items.push_back(it);
    p.work_indptr.push_back(static_cast<int32_t>(p.items.size()));
  }
  // Merge records round-robin over flat CTAs.
  const int ctas = cluster * grid_y;
  std::vector<std::vector<MlaMergeRecord>> per_cta(ctas);
  for (size_t i = 0; i < sink.records.size(); ++i) per_cta[i % ctas].push_back(sink.records[i]);
  p.merge_indptr.push_back(0);
  for (auto& v : per_cta) {
    for (auto& r : v) p.records.push_back(r);
    p.merge_indptr.push_back(static_cast<int32_t>(p.records.size()));
  }
  p.partial_rows = sink.partial_rows;
  return p;
}

// Every tile cut into `splits` equal chunks (when it has that many tokens), round-robin owners.
static HostPlan plan_round_robin(const std::vector<Request>& reqs, const Layout& l, int H,
                                 bool causal, int cluster, int grid_y, int splits) {
  PieceSink sink;
  sink.per_y.resize(grid_y);
  const int tile_rows = 64 * cluster;
  int next = 0;
  for (size_t b = 0; b < reqs.size(); ++b) {
    const int rows = reqs[b].q_len * H;
    for (int start = 0; start < rows; start += tile_rows) {
      const int num_rows = std::min(tile_rows, rows - start);
      const int eff = effective_kv(reqs[b], H, causal, start, num_rows);
      const int n = (splits > 1 && eff >= splits) ? splits : 1;
      std::vector<int> bounds, owners;
      for (int c = 0; c <= n; ++c) bounds.push_back(static_cast<int>(static_cast<long>(eff) * c / n));
      for (int c = 0; c < n; ++c) owners.push_back(next++ % grid_y);
      add_tile(sink, reqs[b], l.q_base[b], l.page_base[b], start, num_rows, tile_rows, bounds, owners);
    }
  }
  return finish_plan(sink, cluster, grid_y);
}

// Even plan: the concatenated (tile, kv) work is cut into grid_y equal shares.
static HostPlan plan_even(const std::vector<Request>& reqs, const Layout& l, int H, bool causal,
                          int cluster, int grid_y) {
  PieceSink sink;
  sink.per_y.resize(grid_y);
  const int tile_rows = 64 * cluster;
  long total = 0;
  for (const Request& r : reqs) {
    const int rows = r.q_len * H;
    for (int start = 0; start < rows; start += tile_rows)
      total += std::max(1, effective_kv(r, H, causal, start, std::min(tile_rows, rows - start)));
  }
  const long share = ((total + grid_y - 1) / grid_y + 63) / 64 * 64;
  int y = 0;
  long used = 0;
  for (size_t b = 0; b < reqs.size(); ++b) {
    const int rows = reqs[b].q_len * H;
    for (int start = 0; start < rows; start += tile_rows) {
      const int num_rows = std::min(tile_rows, rows - start);
      const int eff = effective_kv(reqs[b], H, causal, start, num_rows);
      std::vector<int> bounds{0}, owners;
      if (eff == 0) {
        bounds.push_back(0);
        owners.push_back(y);
        used += 1;
      }
      for (int pos = 0; pos < eff;) {
        if (used >= share && y < grid_y - 1) {
          ++y;
          used = 0;
        }
        long take = std::min<long>(eff - pos, share - used);
        if (take <= 0) take = eff - pos;  // the last CTA pair takes the rest
        pos += static_cast<int>(take);
        used += take;
        bounds.push_back(pos);
        owners.push_back(y);
      }
      add_tile(sink, reqs[b], l.q_base[b], l.page_base[b], start, num_rows, tile_rows, bounds, owners);
    }
  }
  return finish_plan(sink, cluster, grid_y);
}

// ----------------------------------------------------------------------------- device buffers
template <typename T>
struct DeviceBuffer {
  T* ptr = nullptr;
  size_t count = 0;
  explicit DeviceBuffer(size_t n) : count(n) {
    CHECK_CUDA(cudaMalloc(&ptr, std::max<size_t>(n, 1) * sizeof(T)));
  }
  DeviceBuffer(const std::vector<T>& host) : DeviceBuffer(host.size()) {
    if (!host.empty()) CHECK_CUDA(cudaMemcpy(ptr, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
  }
  ~DeviceBuffer() { cudaFree(ptr); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  std::vector<T> download() const {
    std::vector<T> h(count);
    if (count) CHECK_CUDA(cudaMemcpy(h.data(), ptr, count * sizeof(T), cudaMemcpyDeviceToHost));
    return h;
  }
};

struct DevicePlan {
  DeviceBuffer<int32_t> work_indptr, merge_indptr;
  DeviceBuffer<MlaWorkItem> items;
  DeviceBuffer<MlaMergeRecord> records;
  explicit DevicePlan(const HostPlan& p)
      : work_indptr(p.work_indptr), merge_indptr(p.merge_indptr), items(p.items), records(p.records) {}
};

template <typename Config>
static void prepare_kernel() {
  static bool done = false;
  if (done) return;
  done = true;
  CHECK_CUDA(cudaFuncSetAttribute(mla_fa2_kernel<Config>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  static_cast<int>(sizeof(typename Config::SharedStorage))));
}

template <typename Config>
static void launch(const MlaParams& params, const HostPlan& plan, bool cooperative, cudaStream_t stream = 0) {
  prepare_kernel<Config>();
  void* args[] = {const_cast<MlaParams*>(&params)};
  const dim3 grid(plan.grid_x, plan.grid_y), block(Config::kThreads);
  const size_t smem = sizeof(typename Config::SharedStorage);
  if (cooperative) {
    CHECK_CUDA(cudaLaunchCooperativeKernel(reinterpret_cast<void*>(mla_fa2_kernel<Config>), grid, block, args, smem, stream));
  } else {
    CHECK_CUDA(cudaLaunchKernel(reinterpret_cast<void*>(mla_fa2_kernel<Config>), grid, block, args, smem, stream));
  }
}

// ----------------------------------------------------------------------------- correctness
struct Case {
  std::string name;
  int H;
  int page_size;
  std::vector<Request> reqs;
  int splits;
  int cluster;
  bool two_launch;
  bool lse_base_e;
  int grid_y;
};

static int g_failures = 0;

template <typename Config>
static void run_case(const Case& cs, uint32_t seed) {
  using HD = HostDtype<typename Config::QType>;
  constexpr int CKV = Config::kHeadDimCkv, KPE = Config::kHeadDimKpe;
  const int H = cs.H, P = cs.page_size;
  const Layout l = make_layout(cs.reqs, P);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  auto rnd16 = [&]() {
    float f;
    do f = dist(rng); while (std::fabs(f) < 1e-3f);  // never zero
    return HD::from(f);
  };
  // Q with padded head stride (exercises the strides); out with a padded token stride.
  const int64_t qn_sh = CKV + 8, qn_st = H * qn_sh, qp_sh = KPE + 8, qp_st = H * qp_sh;
  const int64_t o_sh = CKV, o_st = H * CKV + 16;
  const int total_q = l.total_q;
  std::vector<uint16_t> q_nope(total_q * qn_st), q_pe(total_q * qp_st);
  for (auto& v : q_nope) v = rnd16();
  for (auto& v : q_pe) v = rnd16();
  // A pool with spare pages, pages handed out in shuffled order.
  const int pool_pages = l.total_pages + 7;
  std::vector<uint16_t> ckv(static_cast<size_t>(pool_pages) * P * CKV), kpe(static_cast<size_t>(pool_pages) * P * KPE);
  for (auto& v : ckv) v = rnd16();
  for (auto& v : kpe) v = rnd16();
  std::vector<int32_t> perm(pool_pages);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  std::vector<int32_t> kv_indices(perm.begin(), perm.begin() + std::max(l.total_pages, 1));

  auto to_float = [](const std::vector<uint16_t>& v) {
    std::vector<float> f(v.size());
    for (size_t i = 0; i < v.size(); ++i) f[i] = HD::to(v[i]);
    return f;
  };
  const std::vector<float> qnf = to_float(q_nope), qpf = to_float(q_pe), ckvf = to_float(ckv), kpef = to_float(kpe);
  const float sm_scale = 1.f / std::sqrt(192.f);
  HostPlan plan = cs.splits > 0 ? plan_round_robin(cs.reqs, l, H, Config::kCausal, cs.cluster, cs.grid_y, cs.splits)
                                : plan_even(cs.reqs, l, H, Config::kCausal, cs.cluster, cs.grid_y);
  DevicePlan dplan(plan);
  DeviceBuffer<uint16_t> d_qn(q_nope), d_qp(q_pe), d_ckv(ckv), d_kpe(kpe);
  DeviceBuffer<int32_t> d_idx(kv_indices);
  DeviceBuffer<uint16_t> d_out(total_q * o_st);
  DeviceBuffer<float> d_lse(static_cast<size_t>(total_q) * H);
  DeviceBuffer<uint16_t> d_po(static_cast<size_t>(std::max(plan.partial_rows, 1)) * CKV);
  DeviceBuffer<float> d_pl(std::max(plan.partial_rows, 1));
  DeviceBuffer<uint32_t> d_bar(2);
  CHECK_CUDA(cudaMemset(d_out.ptr, 0xff, d_out.count * 2));  // NaN in both dtypes
  CHECK_CUDA(cudaMemset(d_lse.ptr, 0xff, d_lse.count * 4));
  CHECK_CUDA(cudaMemset(d_po.ptr, 0xff, d_po.count * 2));
  CHECK_CUDA(cudaMemset(d_pl.ptr, 0xff, d_pl.count * 4));
  CHECK_CUDA(cudaMemset(d_bar.ptr, 0, 8));

  MlaParams p{};
  p.q_nope = d_qn.ptr;
  p.q_pe = d_qp.ptr;
  p.ckv = d_ckv.ptr;
  p.kpe = d_kpe.ptr;
  p.kv_indices = d_idx.ptr;
  p.out = d_out.ptr;
  p.lse = d_lse.ptr;
  p.partial_o = d_po.ptr;
  p.partial_lse = d_pl.ptr;
  p.work_indptr = dplan.work_indptr.ptr;
  p.work_items = dplan.items.ptr;
  p.merge_indptr = dplan.merge_indptr.ptr;
  p.merge_records = dplan.records.ptr;
  p.barrier = d_bar.ptr;
  p.q_nope_stride_token = qn_st;
  p.q_nope_stride_head = qn_sh;
  p.q_pe_stride_token = qp_st;
  p.q_pe_stride_head = qp_sh;
  p.ckv_stride_page = static_cast<int64_t>(P) * CKV;
  p.ckv_stride_token = CKV;
  p.kpe_stride_page = static_cast<int64_t>(P) * KPE;
  p.kpe_stride_token = KPE;
  p.out_stride_token = o_st;
  p.out_stride_head = o_sh;
  p.num_heads = H;
  p.page_size = P;
  p.sm_scale_log2 = sm_scale * 1.4426950408889634f;
  p.lse_base_e = cs.lse_base_e ? 1 : 0;
  p.causal = Config::kCausal ? 1 : 0;
  if (cs.two_launch) {
    p.phase = 1;
    launch<Config>(p, plan, false);
    p.phase = 2;
    launch<Config>(p, plan, false);
  } else {
    p.phase = 0;
    launch<Config>(p, plan, true);
  }
  CHECK_CUDA(cudaDeviceSynchronize());
  const std::vector<uint16_t> out = d_out.download();
  const std::vector<float> lse = d_lse.download();

  // float64 reference, rows spread over threads.
  struct RowRef {
    int b, i, h;
  };
  std::vector<RowRef> rows;
  for (size_t b = 0; b < cs.reqs.size(); ++b)
    for (int i = 0; i < cs.reqs[b].q_len; ++i)
      for (int h = 0; h < H; ++h) rows.push_back({static_cast<int>(b), i, h});
  std::vector<double> err2(rows.size()), ref2(rows.size()), lerr(rows.size()), lref(rows.size());
  std::vector<int> bad(rows.size());
  auto work = [&](size_t lo, size_t hi) {
    std::vector<double> s, o(CKV);
    for (size_t ri = lo; ri < hi; ++ri) {
      const RowRef rr = rows[ri];
      const Request& r = cs.reqs[rr.b];
      const int token = l.q_base[rr.b] + rr.i;
      const float* qn = &qnf[token * qn_st + rr.h * qn_sh];
      const float* qp = &qpf[token * qp_st + rr.h * qp_sh];
      int visible = r.kv_len;
      if (Config::kCausal) visible = std::clamp(r.kv_len - r.q_len + rr.i + 1, 0, r.kv_len);
      s.assign(visible, 0.0);
      double mx = -INFINITY;
      for (int t = 0; t < visible; ++t) {
        const int64_t page = kv_indices[l.page_base[rr.b] + t / P];
        const float* kc = &ckvf[(page * P + t % P) * CKV];
        const float* kp = &kpef[(page * P + t % P) * KPE];
        double acc = 0;
        for (int d = 0; d < CKV; ++d) acc += double(qn[d]) * kc[d];
        for (int d = 0; d < KPE; ++d) acc += double(qp[d]) * kp[d];
        s[t] = acc * sm_scale;
        mx = std::max(mx, s[t]);
      }
      std::fill(o.begin(), o.end(), 0.0);
      double sum = 0;
      for (int t = 0; t < visible; ++t) {
        const double w = std::exp(s[t] - mx);
        sum += w;
        const int64_t page = kv_indices[l.page_base[rr.b] + t / P];
        const float* kc = &ckvf[(page * P + t % P) * CKV];
        for (int d = 0; d < CKV; ++d) o[d] += w * kc[d];
      }
      const double ref_lse2 = visible ? (mx + std::log(sum)) / std::log(2.0) : -INFINITY;
      const double want_lse = cs.lse_base_e ? ref_lse2 * std::log(2.0) : ref_lse2;
      double e2 = 0, r2 = 0;
      int nbad = 0;
      for (int d = 0; d < CKV; ++d) {
        const double ref = visible ? o[d] / sum : 0.0;
        const double got = HD::to(out[token * o_st + rr.h * o_sh + d]);
        if (!std::isfinite(got)) ++nbad;
        if (visible == 0 && got != 0.0) ++nbad;
        e2 += (got - ref) * (got - ref);
        r2 += ref * ref;
      }
      const double got_lse = lse[static_cast<size_t>(token) * H + rr.h];
      if (visible == 0) {
        if (!(std::isinf(got_lse) && got_lse < 0)) ++nbad;
        lerr[ri] = 0;
        lref[ri] = 0;
      } else {
        if (!std::isfinite(got_lse)) ++nbad;
        lerr[ri] = (got_lse - want_lse) * (got_lse - want_lse);
        lref[ri] = want_lse * want_lse;
      }
      err2[ri] = e2;
      ref2[ri] = r2;
      bad[ri] = nbad;
    }
  };
  const unsigned nt = std::max(1u, std::min(32u, std::thread::hardware_concurrency()));
  std::vector<std::thread> threads;
  for (unsigned k = 0; k < nt; ++k)
    threads.emplace_back(work, rows.size() * k / nt, rows.size() * (k + 1) / nt);
  for (auto& th : threads) th.join();
  double e2 = 0, r2 = 0, le = 0, lr = 0;
  long nbad = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    e2 += err2[i];
    r2 += ref2[i];
    le += lerr[i];
    lr += lref[i];
    nbad += bad[i];
  }
  const double out_rel = r2 > 0 ? std::sqrt(e2 / r2) : std::sqrt(e2);
  const double lse_rel = lr > 0 ? std::sqrt(le / lr) : std::sqrt(le);
  const bool ok = nbad == 0 && out_rel < HD::tolerance && lse_rel < HD::tolerance && std::isfinite(out_rel);
  if (!ok) ++g_failures;
  std::printf("%-4s %s ckv%d kpe%d %s st%d kv%d %s%s%s | %-34s | out_rel %.3e lse_rel %.3e bad %ld items %zu merges %zu\n",
              ok ? "PASS" : "FAIL", HD::name, CKV, KPE, Config::kCausal ? "causal" : "full  ", Config::kStages,
              Config::kKvTile, Config::kQkShard ? "shard" : "dup  ", Config::kPageIdsAhead ? " ahead" : "",
              Config::kNarrowTiles ? " narrow" : "", cs.name.c_str(), out_rel, lse_rel, nbad,
              plan.items.size(), plan.records.size());
  std::fflush(stdout);
}

static std::vector<Case> standard_cases(bool with_prefill) {
  std::vector<Case> c;
  c.push_back({"H16 p16 mixed kv, no split", 16, 16, {{1, 1}, {1, 63}, {4, 64}, {1, 0}, {4, 4097}}, 1, 1, false, false, 8});
  c.push_back({"H128 p64 split3 cluster2", 128, 64, {{1, 4097}, {4, 63}, {1, 0}, {4, 64}}, 3, 2, false, false, 8});
  c.push_back({"H1 p1 split2", 1, 1, {{4, 64}, {1, 4097}, {4, 1}, {1, 0}, {4, 63}}, 2, 1, false, false, 8});
  c.push_back({"H16 p64 two-launch split3 lse_e", 16, 64, {{4, 1000}, {1, 4097}, {1, 0}, {4, 63}}, 3, 1, true, true, 8});
  c.push_back({"H128 p16 two-launch cluster2", 128, 16, {{4, 4097}, {1, 1}}, 2, 2, true, false, 8});
  c.push_back({"H7 p5 even plan", 7, 5, {{3, 333}, {9, 77}, {1, 2000}}, 0, 1, false, false, 8});
  c.push_back({"H16 p1 decode split2", 16, 1, {{1, 700}, {1, 64}, {1, 1}, {1, 0}}, 2, 1, false, false, 8});
  c.push_back({"H128 p64 q2-3 cluster2 split2", 128, 64, {{2, 700}, {3, 130}, {2, 1}}, 2, 2, false, false, 8});
  c.push_back({"H16 p1 q2-3 two-launch split2", 16, 1, {{2, 300}, {3, 77}}, 2, 1, true, false, 8});
  if (with_prefill) c.push_back({"H8 p64 prefill q1000 kv1500", 8, 64, {{1000, 1500}, {2, 70}}, 2, 1, false, false, 16});
  return c;
}

template <typename Config>
static void report_registers() {
  cudaFuncAttributes a{};
  CHECK_CUDA(cudaFuncGetAttributes(&a, mla_fa2_kernel<Config>));
  std::printf("regs %s ckv%d st%d kv%d %s %s%s%s: %d registers, %zu bytes local, smem %zu\n",
              HostDtype<typename Config::QType>::name, Config::kHeadDimCkv, Config::kStages, Config::kKvTile,
              Config::kQkShard ? "shard" : "dup", Config::kCausal ? "causal" : "full",
              Config::kPageIdsAhead ? " ahead" : "", Config::kNarrowTiles ? " narrow" : "", a.numRegs,
              a.localSizeBytes, sizeof(typename Config::SharedStorage));
}

template <typename S>
static void run_config(bool with_prefill, uint32_t seed) {
  report_registers<typename S::Inline>();
  if (kPageIdsAheadAllowed) report_registers<typename S::Ahead>();
  for (const Case& c : standard_cases(with_prefill)) {
    if (S::ahead(c.page_size)) {
      run_case<typename S::Ahead>(c, seed++);
    } else {
      run_case<typename S::Inline>(c, seed++);
    }
  }
}

// ----------------------------------------------------------------------------- timing
__global__ void fill_random(uint16_t* data, size_t n, uint32_t seed, bool bf16) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    uint32_t h = static_cast<uint32_t>(i) * 2654435761u ^ seed ^ static_cast<uint32_t>(i >> 32) * 40503u;
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    const float f = (static_cast<float>(h & 0xffff) / 65535.f) * 2.f - 1.f;
    data[i] = bf16 ? __bfloat16_as_ushort(__float2bfloat16(f)) : __half_as_ushort(__float2half(f));
  }
}

template <typename Config>
static void time_decode(const char* name, int H, int B, int L, int page_size, int cluster, int grid_y, bool even) {
  constexpr int CKV = Config::kHeadDimCkv, KPE = Config::kHeadDimKpe;
  std::vector<Request> reqs(B, Request{1, L});
  const Layout l = make_layout(reqs, page_size);
  const size_t page_bytes = static_cast<size_t>(page_size) * (CKV + KPE) * 2;
  const int pool_pages = static_cast<int>(std::max<size_t>(l.total_pages, (size_t(1) << 30) * 6 / 5 / page_bytes));
  std::mt19937 rng(123);
  std::vector<int32_t> perm(pool_pages);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  std::vector<int32_t> idx(perm.begin(), perm.begin() + l.total_pages);
  HostPlan plan = even ? plan_even(reqs, l, H, Config::kCausal, cluster, grid_y)
                       : plan_round_robin(reqs, l, H, Config::kCausal, cluster, grid_y, 1);
  DevicePlan dplan(plan);
  DeviceBuffer<uint16_t> qn(static_cast<size_t>(B) * H * CKV), qp(static_cast<size_t>(B) * H * KPE);
  DeviceBuffer<uint16_t> ckv(static_cast<size_t>(pool_pages) * page_size * CKV), kpe(static_cast<size_t>(pool_pages) * page_size * KPE);
  const bool bf16 = Dtype16<typename Config::QType>::kIsBf16;
  fill_random<<<1024, 256>>>(qn.ptr, qn.count, 1, bf16);
  fill_random<<<1024, 256>>>(qp.ptr, qp.count, 2, bf16);
  fill_random<<<4096, 256>>>(ckv.ptr, ckv.count, 3, bf16);
  fill_random<<<4096, 256>>>(kpe.ptr, kpe.count, 4, bf16);
  DeviceBuffer<int32_t> d_idx(idx);
  DeviceBuffer<uint16_t> out(static_cast<size_t>(B) * H * CKV);
  DeviceBuffer<float> lse(static_cast<size_t>(B) * H);
  DeviceBuffer<uint16_t> po(static_cast<size_t>(std::max(plan.partial_rows, 1)) * CKV);
  DeviceBuffer<float> pl(std::max(plan.partial_rows, 1));
  DeviceBuffer<uint32_t> bar(2);
  CHECK_CUDA(cudaMemset(bar.ptr, 0, 8));
  MlaParams p{};
  p.q_nope = qn.ptr;
  p.q_pe = qp.ptr;
  p.ckv = ckv.ptr;
  p.kpe = kpe.ptr;
  p.kv_indices = d_idx.ptr;
  p.out = out.ptr;
  p.lse = lse.ptr;
  p.partial_o = po.ptr;
  p.partial_lse = pl.ptr;
  p.work_indptr = dplan.work_indptr.ptr;
  p.work_items = dplan.items.ptr;
  p.merge_indptr = dplan.merge_indptr.ptr;
  p.merge_records = dplan.records.ptr;
  p.barrier = bar.ptr;
  p.q_nope_stride_token = H * CKV;
  p.q_nope_stride_head = CKV;
  p.q_pe_stride_token = H * KPE;
  p.q_pe_stride_head = KPE;
  p.ckv_stride_page = static_cast<int64_t>(page_size) * CKV;
  p.ckv_stride_token = CKV;
  p.kpe_stride_page = static_cast<int64_t>(page_size) * KPE;
  p.kpe_stride_token = KPE;
  p.out_stride_token = H * CKV;
  p.out_stride_head = CKV;
  p.num_heads = H;
  p.page_size = page_size;
  p.sm_scale_log2 = 1.f / std::sqrt(192.f) * 1.4426950408889634f;
  p.causal = Config::kCausal ? 1 : 0;
  p.phase = 0;
  CHECK_CUDA(cudaDeviceSynchronize());
  for (int i = 0; i < 3; ++i) launch<Config>(p, plan, true);
  CHECK_CUDA(cudaDeviceSynchronize());
  cudaEvent_t e0, e1;
  CHECK_CUDA(cudaEventCreate(&e0));
  CHECK_CUDA(cudaEventCreate(&e1));
  std::vector<float> ms;
  for (int i = 0; i < 20; ++i) {
    CHECK_CUDA(cudaEventRecord(e0));
    launch<Config>(p, plan, true);
    CHECK_CUDA(cudaEventRecord(e1));
    CHECK_CUDA(cudaEventSynchronize(e1));
    float t = 0;
    CHECK_CUDA(cudaEventElapsedTime(&t, e0, e1));
    ms.push_back(t);
  }
  std::sort(ms.begin(), ms.end());
  const double us = ms[ms.size() / 2] * 1000.0;
  const double bytes = double(B) * L * (CKV + KPE) * 2;
  const double flops = 2.0 * B * H * double(L) * (CKV + KPE + CKV);
  std::printf("TIME %-40s %s plan=%s items %zu merges %zu: median %.1f us (min %.1f), %.2f TB/s, %.1f TFLOP/s\n", name,
              HostDtype<typename Config::QType>::name, even ? "even" : "1-chunk", plan.items.size(), plan.records.size(),
              us, ms.front() * 1000.0, bytes / us / 1e6, flops / us / 1e6);
  std::fflush(stdout);
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
}

// The page-id variant the host picks for this page size.
template <typename S>
static void time_shape(const char* name, int H, int B, int L, int page_size, int cluster, int grid_y, bool even) {
  if (S::ahead(page_size)) {
    time_decode<typename S::Ahead>(name, H, B, L, page_size, cluster, grid_y, even);
  } else {
    time_decode<typename S::Inline>(name, H, B, L, page_size, cluster, grid_y, even);
  }
}

// ----------------------------------------------------------------------------- main
constexpr int host_smem_formula(int ckv, int kpe, int stages, int kv) {
  return 64 * (ckv + kpe) * 2 + stages * kv * ckv * 2 + stages * kv * (kpe > 64 ? kpe : 64) * 2 + 2 * 64 * 4;
}
static_assert(sizeof(Cfg<bf16_t, 512, 64, false, 2, 64, true, false>::SharedStorage) == 221696, "tier 1 size");
static_assert(sizeof(Cfg<bf16_t, 512, 64, false, 2, 32, true, false>::SharedStorage) == 147968, "tier 2 size");
static_assert(sizeof(Cfg<bf16_t, 512, 64, false, 1, 16, false, false>::SharedStorage) == 92672, "tier 3 size");
static_assert(sizeof(Cfg<f16_t, 256, 32, true, 2, 64, true, false>::SharedStorage) == host_smem_formula(256, 32, 2, 64), "");
static_assert(sizeof(Cfg<f16_t, 256, 32, true, 1, 16, false, false>::SharedStorage) == host_smem_formula(256, 32, 1, 16), "");

int main(int argc, char** argv) {
  const bool timing_only = argc > 1 && std::strcmp(argv[1], "--timing") == 0;
  const bool correctness_only = argc > 1 && std::strcmp(argv[1], "--correctness") == 0;
  int dev = 0;
  cudaDeviceProp prop{};
  CHECK_CUDA(cudaGetDeviceProperties(&prop, dev));
  std::printf("device %s, %d SMs, %zu B smem/SM\n", prop.name, prop.multiProcessorCount, prop.sharedMemPerMultiprocessor);
  const uint32_t seed = 20261129;
  std::printf("seed %u\n", seed);
  if (argc > 5 && std::strcmp(argv[1], "--one") == 0) {  // --one H B L page: one timed shape (tier 1)
    const int H = std::atoi(argv[2]), B = std::atoi(argv[3]), L = std::atoi(argv[4]), page = std::atoi(argv[5]);
    const int sms = prop.multiProcessorCount;
    time_shape<Spec<bf16_t, 512, 64, false, 2, 64, true>>("one", H, B, L, page, H > 64 ? 2 : 1,
                                                           H > 64 ? sms / 2 : sms, true);
#ifdef HARNESS_TRACE
    // Needs a kernels/ copy made by tools/dev/trace/portable_trace.py. The last launch's stamps
    // of CTA (0,0), in cycles from its entry; every CTA's %globaltimer spread.
    static long long tile[512][5], item[8][7], kern[4];
    static unsigned long long cta[1024][3];
    CHECK_CUDA(cudaMemcpyFromSymbol(tile, g_ptrace_tile, sizeof(tile)));
    CHECK_CUDA(cudaMemcpyFromSymbol(item, g_ptrace_item, sizeof(item)));
    CHECK_CUDA(cudaMemcpyFromSymbol(kern, g_ptrace_kernel, sizeof(kern)));
    CHECK_CUDA(cudaMemcpyFromSymbol(cta, g_ptrace_cta, sizeof(cta)));
    const long long t0 = kern[0];
    std::printf("TRACE H%d B%d L%d page%d, cycles from CTA 0's entry\n", H, B, L, page);
    std::printf("kernel  items done %lld, after grid barrier %lld, end %lld\n", kern[1] - t0,
                kern[2] - t0, kern[3] - t0);
    const char* item_names[7] = {"start", "barrier", "issued", "loop done", "normalized", "staged", "stored"};
    for (int it = 0; it < 3; ++it) {
      std::printf("item%d  ", it);
      for (int k = 0; k < 7; ++k) std::printf(" %s=%lld", item_names[k], item[it][k] ? item[it][k] - t0 : -1);
      std::printf("\n");
    }
    const int tiles = std::min(3 * ((L + 63) / 64), 48);
    for (int tl = 0; tl < tiles; ++tl) {
      std::printf("tile%02d  top=%lld landed=%lld qk=%lld softmax=%lld pv=%lld\n", tl,
                  tile[tl][0] - t0, tile[tl][1] - t0, tile[tl][2] - t0, tile[tl][3] - t0, tile[tl][4] - t0);
    }
    unsigned long long g0 = ~0ull;
    const int n = std::min(1024, sms);
    for (int c = 0; c < n; ++c) g0 = std::min(g0, cta[c][0]);
    std::vector<double> span[3];
    for (int c = 0; c < n; ++c)
      for (int k = 0; k < 3; ++k) span[k].push_back(double(cta[c][k] - g0) / 1000.0);
    const char* cta_names[3] = {"entry", "items done", "end"};
    for (int k = 0; k < 3; ++k) {
      std::sort(span[k].begin(), span[k].end());
      std::printf("CTAS %-10s us min %.2f median %.2f max %.2f\n", cta_names[k], span[k].front(),
                  span[k][span[k].size() / 2], span[k].back());
    }
#endif
    return 0;
  }
  if (!timing_only) {
    run_config<Spec<bf16_t, 512, 64, true, 2, 64, true>>(true, seed);
    run_config<Spec<bf16_t, 512, 64, false, 2, 64, true>>(true, seed + 100);
    run_config<Spec<bf16_t, 512, 64, true, 2, 32, true>>(false, seed + 200);
    run_config<Spec<bf16_t, 512, 64, false, 2, 32, true>>(false, seed + 300);
    run_config<Spec<bf16_t, 512, 64, true, 1, 16, false>>(true, seed + 400);
    run_config<Spec<bf16_t, 512, 64, false, 1, 16, false>>(false, seed + 500);
    run_config<Spec<f16_t, 512, 64, true, 2, 64, true>>(false, seed + 600);
    run_config<Spec<f16_t, 512, 64, true, 2, 32, true>>(false, seed + 700);
    run_config<Spec<f16_t, 512, 64, false, 1, 16, false>>(false, seed + 800);
    run_config<Spec<bf16_t, 256, 32, true, 2, 64, true>>(true, seed + 900);
    run_config<Spec<bf16_t, 256, 32, false, 2, 32, true>>(false, seed + 1000);
    run_config<Spec<bf16_t, 256, 32, true, 1, 16, false>>(false, seed + 1100);
    run_config<Spec<f16_t, 256, 32, false, 2, 64, true>>(false, seed + 1200);
    run_config<Spec<f16_t, 256, 32, true, 2, 32, true>>(false, seed + 1300);
    run_config<Spec<f16_t, 256, 32, false, 1, 16, false>>(false, seed + 1400);
    std::printf("correctness: %d failing case(s)\n", g_failures);
  }
  if (!correctness_only) {
    // The shapes of /work/shared/perf/baseline.md, with a plan like the library's: KV cut
    // into chunks so that every CTA pair (128 heads: 2 CTAs per 128-row tile) is busy.
    using T1 = Spec<bf16_t, 512, 64, false, 2, 64, true>;
    using T2 = Spec<bf16_t, 512, 64, false, 2, 32, true>;
    using T3 = Spec<bf16_t, 512, 64, false, 1, 16, false>;
    const int sms = prop.multiProcessorCount;
    time_shape<T1>("H128 B64 L4096 page64", 128, 64, 4096, 64, 2, sms / 2, true);
    time_shape<T1>("H128 B1 L1024 page64", 128, 1, 1024, 64, 2, sms / 2, true);
    time_shape<T1>("H128 B64 L16384 page64", 128, 64, 16384, 64, 2, sms / 2, true);
    time_shape<T1>("H128 B64 L4096 page1", 128, 64, 4096, 1, 2, sms / 2, true);
    time_shape<T1>("H16 B128 L16384 page64", 16, 128, 16384, 64, 1, sms, true);
    time_shape<T1>("H16 B64 L4096 page64", 16, 64, 4096, 64, 1, sms, true);
    time_shape<T1>("H16 B128 L4096 page64", 16, 128, 4096, 64, 1, sms, true);
    time_shape<T1>("H16 B16 L16384 page64", 16, 16, 16384, 64, 1, sms, true);
    time_shape<T1>("H16 B128 L4096 page1", 16, 128, 4096, 1, 1, sms, true);
    time_shape<T2>("tier2 H128 B64 L4096 page64", 128, 64, 4096, 64, 2, sms / 2, true);
    time_shape<T2>("tier2 H16 B128 L16384 page64", 16, 128, 16384, 64, 1, sms, true);
    time_shape<T3>("tier3 H128 B64 L4096 page64", 128, 64, 4096, 64, 2, sms / 2, true);
    time_shape<T3>("tier3 H16 B128 L16384 page64", 16, 128, 16384, 64, 1, sms, true);
  }
  return g_failures == 0 ? 0 : 1;
}
