// Standalone correctness and timing harness for kernels/hopper/mla_hopper.cuh (development tool,
// not part of the library build; a copy of mla_kernel_harness.cu with the hopper kernel swapped in). Builds small plans by hand, runs the kernel cooperatively (and the
// phase 1 + phase 2 two-launch path), compares out and lse against a float64 CPU reference and
// times two decode shapes. Build and run: tools/dev/run_harness.sh.
//
// The prelude below mirrors what src/jit/codegen.cpp generates before the kernel sources:
// fixed-width integer types. MLAJIT_EXPECTED_SMEM_BYTES is left undefined because this file
// instantiates many configurations; each is checked against the host formula instead.
#include <cstdint>

#include "hopper/mla_hopper.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda.h>
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
#include <type_traits>
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
      // Inner chunk boundaries on multiples of the 64-token tile, as the library's planner
      // cuts them (TMA copies whole tiles of one page).
      const int n = std::max(1, std::min(splits, eff / 64));
      std::vector<int> bounds, owners;
      for (int c = 0; c <= n; ++c)
        bounds.push_back(c == n ? eff : static_cast<int>(static_cast<long>(eff) * c / n / 64 * 64));
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

// Tensor maps of a [page][token][column] cache, as the library encodes them; disabled (the
// kernel gathers) when pages do not hold whole 64-token tiles.
static HopperTma make_tma(const void* ckv, const void* kpe, int page_size, int64_t ckv_stride_page,
                          int64_t ckv_stride_token, int64_t kpe_stride_page, int64_t kpe_stride_token,
                          int ckv_cols, int kpe_cols, bool bf16) {
  HopperTma tma{};
  tma.enabled = page_size % 64 == 0 ? 1 : 0;
  if (!tma.enabled) return tma;
  auto encode = [&](TensorMapBytes* map, const void* base, int cols, int64_t stride_page, int64_t stride_token) {
    const cuuint64_t dims[3] = {cuuint64_t(cols), cuuint64_t(page_size), cuuint64_t(1) << 31};
    const cuuint64_t strides[2] = {cuuint64_t(stride_token) * 2, cuuint64_t(stride_page) * 2};
    const cuuint32_t box[3] = {64, 64, 1}, element_strides[3] = {1, 1, 1};
    const CUresult r = cuTensorMapEncodeTiled(
        reinterpret_cast<CUtensorMap*>(map), bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
        3, const_cast<void*>(base), dims, strides, box, element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
        CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r != CUDA_SUCCESS) {
      std::fprintf(stderr, "cuTensorMapEncodeTiled failed: %d\n", int(r));
      std::exit(2);
    }
  };
  encode(&tma.ckv, ckv, ckv_cols, ckv_stride_page, ckv_stride_token);
  encode(&tma.kpe, kpe, kpe_cols, kpe_stride_page, kpe_stride_token);
  return tma;
}

template <typename Config>
static HopperTma make_tma(const MlaParams& p) {
  HopperTma tma = make_tma(p.ckv, p.kpe, p.page_size, p.ckv_stride_page, p.ckv_stride_token,
                           p.kpe_stride_page, p.kpe_stride_token, Config::kHeadDimCkv,
                           Config::kHeadDimKpe, Dtype16<typename Config::KVType>::kIsBf16);
  // As the library (src/family/hopper/hopper_family.cpp): copies split between TMA and
  // cp.async at 16 heads or fewer; HARNESS_SPLIT=0/1 forces either.
  const char* forced = std::getenv("HARNESS_SPLIT");
  tma.split_copies = tma.enabled && (forced ? std::atoi(forced) != 0 : p.num_heads <= 16);
  return tma;
}

// The schedule being measured (the seesaw experiment of run 4-5 was schedule 1; it is gone).
static int g_schedule = 0;

template <typename Config>
static void* kernel_function() {
  return reinterpret_cast<void*>(mla_hopper_kernel<Config>);
}

template <typename Config>
static int kernel_smem() {
  return Config::kSmemBytes;
}

template <typename Config>
static void launch(const MlaParams& params, const HopperTma& tma, const HostPlan& plan, bool cooperative,
                   cudaStream_t stream = 0) {
  CHECK_CUDA(cudaFuncSetAttribute(kernel_function<Config>(), cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  kernel_smem<Config>()));
  void* args[] = {const_cast<MlaParams*>(&params), const_cast<HopperTma*>(&tma)};
  const dim3 grid(plan.grid_x, plan.grid_y), block(Config::kThreads);
  const size_t smem = kernel_smem<Config>();
  if (cooperative) {
    CHECK_CUDA(cudaLaunchCooperativeKernel(kernel_function<Config>(), grid, block, args, smem, stream));
  } else {
    CHECK_CUDA(cudaLaunchKernel(kernel_function<Config>(), grid, block, args, smem, stream));
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
  using T = typename Config::KVType;
  using HD = HostDtype<T>;
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
  // The slots past kv_len of each request's last page hold NaN, as an engine's cache may: a
  // kernel must never let them reach the output (0 * NaN).
  const uint16_t nan16 = std::is_same<T, bf16_t>::value ? 0x7fc0 : 0x7e00;
  for (size_t b = 0; b < cs.reqs.size(); ++b) {
    const int kv_len = cs.reqs[b].kv_len;
    if (kv_len == 0 || kv_len % P == 0) continue;
    const int64_t page = kv_indices[l.page_base[b] + (kv_len - 1) / P];
    for (int slot = kv_len % P; slot < P; ++slot) {
      for (int d = 0; d < CKV; ++d) ckv[(page * P + slot) * CKV + d] = nan16;
      for (int d = 0; d < KPE; ++d) kpe[(page * P + slot) * KPE + d] = nan16;
    }
  }

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
  const HopperTma tma = make_tma<Config>(p);
  if (cs.two_launch) {
    p.phase = 1;
    launch<Config>(p, tma, plan, false);
    p.phase = 2;
    launch<Config>(p, tma, plan, false);
  } else {
    p.phase = 0;
    launch<Config>(p, tma, plan, true);
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
  std::printf("%-4s %s ckv%d kpe%d %s | %-34s | out_rel %.3e lse_rel %.3e bad %ld items %zu merges %zu\n",
              ok ? "PASS" : "FAIL", HD::name, CKV, KPE, Config::kCausal ? "causal" : "full  ", cs.name.c_str(),
              out_rel, lse_rel, nbad, plan.items.size(), plan.records.size());
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
  c.push_back({"H128 p128 split2 cluster2", 128, 128, {{1, 300}, {2, 129}, {1, 4097}, {1, 0}}, 2, 2, false, false, 8});
  c.push_back({"H32 p64 split4", 32, 64, {{2, 1}, {1, 65}, {3, 5000}}, 4, 1, false, true, 8});
  if (with_prefill) c.push_back({"H8 p64 prefill q1000 kv1500", 8, 64, {{1000, 1500}, {2, 70}}, 2, 1, false, false, 16});
  return c;
}

template <typename Config>
static void report_registers() {
  cudaFuncAttributes a{};
  CHECK_CUDA(cudaFuncGetAttributes(&a, kernel_function<Config>()));
  std::printf("regs schedule %d %s ckv%d %s: %d registers, %zu bytes local, smem %d\n", g_schedule,
              HostDtype<typename Config::KVType>::name, Config::kHeadDimCkv, Config::kCausal ? "causal" : "full",
              a.numRegs, a.localSizeBytes, kernel_smem<Config>());
}

template <typename Config>
static void run_config(bool with_prefill, uint32_t seed) {
  report_registers<Config>();
  for (const Case& c : standard_cases(with_prefill)) run_case<Config>(c, seed++);
}

// ----------------------------------------------------------------------------- timing
// e4m3 codes for timing runs: values in [-1, 1) (exponent field <= 7, so never the NaN code).
__global__ void fill_random_codes(uint8_t* data, size_t n, uint32_t seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    uint32_t h = static_cast<uint32_t>(i) * 2654435761u ^ seed;
    h ^= h >> 15;
    h *= 2246822519u;
    data[i] = static_cast<uint8_t>((h & 0x80u) | ((h >> 8) & 0x3fu));
  }
}

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
  using KvElement = std::conditional_t<Config::kKvCodes, uint8_t, uint16_t>;
  std::vector<Request> reqs(B, Request{1, L});
  const Layout l = make_layout(reqs, page_size);
  const size_t page_bytes = static_cast<size_t>(page_size) * (CKV + KPE) * sizeof(KvElement);
  const int pool_pages = static_cast<int>(std::max<size_t>(l.total_pages, (size_t(1) << 30) * 6 / 5 / page_bytes));
  std::mt19937 rng(123);
  std::vector<int32_t> perm(pool_pages);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  std::vector<int32_t> idx(perm.begin(), perm.begin() + l.total_pages);
  // HARNESS_HOT_KV=1: every request reads the same 64 pages, which stay in L2 (a bound on what
  // hiding memory latency could give; the output is not checked).
  if (const char* hot = std::getenv("HARNESS_HOT_KV"); hot && *hot == '1') {
    for (auto& id : idx) id = perm[id % 64];
  }
  HostPlan plan = even ? plan_even(reqs, l, H, Config::kCausal, cluster, grid_y)
                       : plan_round_robin(reqs, l, H, Config::kCausal, cluster, grid_y, 1);
  DevicePlan dplan(plan);
  DeviceBuffer<uint16_t> qn(static_cast<size_t>(B) * H * CKV), qp(static_cast<size_t>(B) * H * KPE);
  DeviceBuffer<KvElement> ckv(static_cast<size_t>(pool_pages) * page_size * CKV), kpe(static_cast<size_t>(pool_pages) * page_size * KPE);
  const bool bf16 = Dtype16<typename Config::QType>::kIsBf16;
  fill_random<<<1024, 256>>>(qn.ptr, qn.count, 1, bf16);
  fill_random<<<1024, 256>>>(qp.ptr, qp.count, 2, bf16);
  if constexpr (Config::kKvCodes) {
    fill_random_codes<<<4096, 256>>>(ckv.ptr, ckv.count, 3);
    fill_random_codes<<<4096, 256>>>(kpe.ptr, kpe.count, 4);
  } else {
    fill_random<<<4096, 256>>>(ckv.ptr, ckv.count, 3, bf16);
    fill_random<<<4096, 256>>>(kpe.ptr, kpe.count, 4, bf16);
  }
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
  p.kv_scale_ckv = p.kv_scale_kpe = 1.f;
  p.causal = Config::kCausal ? 1 : 0;
  p.phase = 0;
  CHECK_CUDA(cudaDeviceSynchronize());
  // An e4m3 cache is never copied by TMA (the producer dequantizes it through registers).
  HopperTma tma{};
  if constexpr (!Config::kKvCodes) tma = make_tma<Config>(p);
  for (int i = 0; i < 3; ++i) launch<Config>(p, tma, plan, true);
  CHECK_CUDA(cudaDeviceSynchronize());
  cudaEvent_t e0, e1;
  CHECK_CUDA(cudaEventCreate(&e0));
  CHECK_CUDA(cudaEventCreate(&e1));
  std::vector<float> ms;
  for (int i = 0; i < 20; ++i) {
    CHECK_CUDA(cudaEventRecord(e0));
    launch<Config>(p, tma, plan, true);
    CHECK_CUDA(cudaEventRecord(e1));
    CHECK_CUDA(cudaEventSynchronize(e1));
    float t = 0;
    CHECK_CUDA(cudaEventElapsedTime(&t, e0, e1));
    ms.push_back(t);
  }
  std::sort(ms.begin(), ms.end());
  const double us = ms[ms.size() / 2] * 1000.0;
  const double bytes = double(B) * L * (CKV + KPE) * sizeof(KvElement);
  const double flops = 2.0 * B * H * double(L) * (CKV + KPE + CKV);
  std::printf("TIME s%d %-40s %s plan=%s items %zu merges %zu: median %.1f us (min %.1f), %.2f TB/s, %.1f TFLOP/s\n",
              g_schedule, name, Config::kKvCodes ? "e4m3" : HostDtype<typename Config::QType>::name, even ? "even" : "1-chunk", plan.items.size(), plan.records.size(),
              us, ms.front() * 1000.0, bytes / us / 1e6, flops / us / 1e6);
  std::fflush(stdout);
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
}

// ----------------------------------------------------------------------------- main
// The kernel takes the causal mask at run time (MlaParams::causal); the harness keeps it in
// the config, for its cases and the params it fills.
template <typename Base, bool CAUSAL>
struct WithMask : Base {
  static constexpr bool kCausal = CAUSAL;
};
template <typename D, bool CAUSAL>
using Cfg = WithMask<HopperConfig<D, D, D, 512, 64>, CAUSAL>;

int main(int argc, char** argv) {
  const bool timing_only = argc > 1 && std::strcmp(argv[1], "--timing") == 0;
  const bool correctness_only = argc > 1 && std::strcmp(argv[1], "--correctness") == 0;
  int dev = 0;
  cudaDeviceProp prop{};
  CHECK_CUDA(cudaGetDeviceProperties(&prop, dev));
  std::printf("device %s, %d SMs, %zu B smem/SM\n", prop.name, prop.multiProcessorCount, prop.sharedMemPerMultiprocessor);
  const uint32_t seed = 20261201;
  std::printf("seed %u\n", seed);
  // --one H B L page: one timed shape (for ncu and the trace); --one8: the same over an e4m3
  // cache (bf16 queries, scales 1; timing only, not checked).
  const bool one8 = argc > 5 && std::strcmp(argv[1], "--one8") == 0;
  if (argc > 5 && (std::strcmp(argv[1], "--one") == 0 || one8)) {
    const int H = std::atoi(argv[2]), B = std::atoi(argv[3]), L = std::atoi(argv[4]), page = std::atoi(argv[5]);
    const int sms = prop.multiProcessorCount;
    if (one8) {
      time_decode<WithMask<HopperConfig<bf16_t, e4m3_t, bf16_t, 512, 64>, false>>("one", H, B, L, page, H > 64 ? 2 : 1, H > 64 ? sms / 2 : sms, true);
    } else {
      time_decode<Cfg<bf16_t, false>>("one", H, B, L, page, H > 64 ? 2 : 1, H > 64 ? sms / 2 : sms, true);
    }
#ifdef HARNESS_TRACE
    // Needs the kernel's stamps: -I the copy tools/dev/trace/hopper_trace.py writes. Stamps of CTA
    // (0,0), thread 0 of each warpgroup, in cycles from its entry: per kernel phase, per work
    // item and per tile of the CTA's sequence; every CTA's %globaltimer spread. A stamp right
    // after a CTA barrier reads the clock before the barrier releases the warp
    // (BAR.SYNC.DEFER_BLOCKING): take the next stamp that follows a memory access instead.
    {
      static long long trace[4][512][8], item[4][8][8], kern[4][8];
      static unsigned long long cta[1024][4];
      CHECK_CUDA(cudaMemcpyFromSymbol(trace, g_trace, sizeof(trace)));
      CHECK_CUDA(cudaMemcpyFromSymbol(item, g_item, sizeof(item)));
      CHECK_CUDA(cudaMemcpyFromSymbol(kern, g_kernel, sizeof(kern)));
      CHECK_CUDA(cudaMemcpyFromSymbol(cta, g_cta, sizeof(cta)));
      const long long t0 = kern[0][0];
      const char* names[4] = {"scores", "out-left", "out-right", "producer"};
      std::printf("TRACE H%d B%d L%d page%d (cycles from CTA 0's entry)\n", H, B, L, page);
      for (int r = 0; r < 4; ++r) {
        std::printf("kernel %-9s", names[r]);
        for (int k = 0; k < 5; ++k) std::printf(" k%d=%7lld", k, kern[r][k] - t0);
        std::printf("\n");
      }
      const int tiles_per_item = (L + 63) / 64;
      for (int it = 0; it < 3; ++it) {
        for (int r = 0; r < 4; ++r) {
          std::printf("item%d %-9s", it, names[r]);
          for (int k = 0; k < 7; ++k) std::printf(" i%d=%7lld", k, item[r][it][k] == 0 ? -1 : item[r][it][k] - t0);
          std::printf("\n");
        }
      }
      const int show = std::min(3 * tiles_per_item, 40);
      for (int tl = 0; tl < show; ++tl) {
        for (int r = 0; r < 4; ++r) {
          std::printf("tile%02d %-9s", tl, names[r]);
          for (int k = 0; k < 8; ++k) std::printf(" s%d=%7lld", k, trace[r][tl][k] == 0 ? -1 : trace[r][tl][k] - t0);
          std::printf("\n");
        }
      }
      const int n = std::min(1024, sms);
      std::vector<double> st, mid, en;
      unsigned long long g0 = ~0ull;
      for (int c = 0; c < n; ++c) g0 = std::min(g0, cta[c][0]);
      for (int c = 0; c < n; ++c) {
        st.push_back(double(cta[c][0] - g0) / 1000.0);
        mid.push_back(double(cta[c][1] - g0) / 1000.0);
        en.push_back(double(cta[c][2] - g0) / 1000.0);
      }
      auto q = [](std::vector<double> v, double f) { std::sort(v.begin(), v.end()); return v[size_t(f * (v.size() - 1))]; };
      std::printf("CTAS (us from the first CTA's entry, globaltimer): entry min %.2f med %.2f max %.2f | "
                  "attention done min %.2f med %.2f max %.2f | end min %.2f med %.2f max %.2f\n",
                  q(st, 0), q(st, .5), q(st, 1), q(mid, 0), q(mid, .5), q(mid, 1), q(en, 0), q(en, .5), q(en, 1));
      if (tiles_per_item >= 48) {  // the steady state: tiles 8..47 averaged, per role
        const char* names4[4] = {"scores", "out-left", "out-right", "producer"};
        for (int role = 0; role < 4; ++role) {
          std::printf("mean %-9s", names4[role]);
          for (int k = 0; k < 8; ++k) {
            double a = 0;
            for (int t = 8; t < 48; ++t) a += trace[role][t][k] - trace[0][t][0];
            std::printf(" s%d=%6.0f", k, a / 40);
          }
          std::printf("\n");
        }
        double per = 0, copy = 0;
        for (int t = 8; t < 48; ++t) {
          per += trace[0][t + 1][0] - trace[0][t][0];
          copy += trace[0][t][1] - trace[3][t][2];
        }
        std::printf("per tile %6.0f cycles; copy issued -> scores warpgroup past its full wait %6.0f\n",
                    per / 40, copy / 40);
      }
    }
#endif
    return 0;
  }
  if (argc > 1 && std::strcmp(argv[1], "--sanitize") == 0) {  // few small cases, for compute-sanitizer
    const std::vector<Case> cases = standard_cases(false);
    for (int i : {0, 1, 3}) run_case<Cfg<bf16_t, true>>(cases[i], seed + i);
    return g_failures == 0 ? 0 : 1;
  }
  const int only = argc > 2 ? std::atoi(argv[2]) : -1;  // schedule to run (-1: both)
  for (g_schedule = 0; g_schedule < 1; ++g_schedule) {
    if (only >= 0 && only != g_schedule) continue;
    if (!timing_only) {
      run_config<Cfg<bf16_t, true>>(true, seed);
      run_config<Cfg<bf16_t, false>>(true, seed + 100);
      run_config<Cfg<f16_t, true>>(false, seed + 600);
      run_config<Cfg<f16_t, false>>(false, seed + 700);
      std::printf("schedule %d correctness: %d failing case(s) so far\n", g_schedule, g_failures);
    }
    if (!correctness_only) {
      using T1 = Cfg<bf16_t, false>;
      const int sms = prop.multiProcessorCount;
      time_decode<T1>("H128 B64 L4096 page64", 128, 64, 4096, 64, 2, sms / 2, true);
      time_decode<T1>("H128 B64 L16384 page64", 128, 64, 16384, 64, 2, sms / 2, true);
      time_decode<T1>("H128 B64 L4096 page1", 128, 64, 4096, 1, 2, sms / 2, true);
      time_decode<T1>("H16 B128 L16384 page64", 16, 128, 16384, 64, 1, sms, true);
      time_decode<T1>("H16 B64 L4096 page64", 16, 64, 4096, 64, 1, sms, true);
      time_decode<T1>("H16 B128 L4096 page1", 16, 128, 4096, 1, 1, sms, true);
    }
  }
  return g_failures == 0 ? 0 : 1;
}
