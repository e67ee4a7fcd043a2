// libFuzzer target: planner input validation and planning (plan::make_plan), fed the ragged
// batch descriptions a caller passes to BatchMlaAttention::plan.
// make_plan must throw mlajit::Error or return a plan that satisfies the invariants the
// kernel relies on (checked below); never crash, hang or allocate without bound.
//
// Input bytes (a missing byte reads as 0):
//   u8  flags: bit0 causal, bit1 raw (arrays and scalars as raw int32: mostly invalid),
//       bits2-3 cluster_size 0..3, bits4-5 kv_tile {64, 32, 16, 48}, bit6 cta_tile_q 32,
//       bit7 one array null (which one: the next byte % 3)
//   u8  batch_size (structured: % 65; raw: as int8, so it can be negative)
//   u8  num_heads, u16 page_size (structured: % 256), u16 num_ctas (% 265: up to an H200 at 2 CTAs per SM)
//   per request, structured: u16 q_len % 2048, u8 pages, u32 kv_len % (pages * page_size + 2)
//                raw:        u32 qo_indptr[b+1], u32 kv_indptr[b+1], u32 kv_len[b]
//   raw also takes qo_indptr[0] and kv_indptr[0] from the input first.
//   then u8 fixed_chunk_tokens (batch-invariant plans): % 6 picks 0 (off), 64, 1024, 2048, 96
//       (not a kv_tile multiple: refused) or -64 (refused); inputs without it plan balanced.
//   then u8 item_overhead_tokens: % 6 picks the default, 0, 192, the largest accepted, or one
//       below and one above the accepted range (refused); inputs without it take the default.
//
// The harness cap: the planner's work grows with the query tiles (up to 2^24, which it refuses
// beyond) and with the KV tokens over the shortest chunk (64), so inputs with more than
// kMaxHarnessTiles tiles or kMaxHarnessKvTokens KV tokens are skipped to keep each run fast
// (thousands of runs a second) and within -rss_limit_mb; make_plan's own cap is tested in tests/test_bad_input.cpp.
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <utility>
#include <vector>

#include "mlajit/error.h"
#include "plan/planner.h"

namespace {

constexpr int64_t kMaxHarnessTiles = int64_t{1} << 10;
constexpr int64_t kMaxHarnessKvTokens = int64_t{1} << 18;

class Bytes {
 public:
  Bytes(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  uint8_t u8() { return pos_ < size_ ? data_[pos_++] : 0; }
  uint16_t u16() { return static_cast<uint16_t>(u8() | (u8() << 8)); }
  uint32_t u32() { return u16() | (uint32_t{u16()} << 16); }

 private:
  const uint8_t* data_;
  size_t size_, pos_ = 0;
};

[[noreturn]] void violated(const char* what) {
  std::fprintf(stderr, "fuzz_planner: invariant violated: %s\n", what);
  std::abort();
}
void check(bool ok, const char* what) {
  if (!ok) violated(what);
}

struct Batch {
  std::vector<int32_t> qo_indptr, kv_indptr, kv_len;
  mlajit::plan::PlanInput input;
};

void read_requests(Bytes& in, bool raw, Batch& b) {
  const int n = std::max(b.input.batch_size, 0);
  if (raw) {
    b.qo_indptr.push_back(static_cast<int32_t>(in.u32()));
    b.kv_indptr.push_back(static_cast<int32_t>(in.u32()));
    for (int r = 0; r < n; ++r) {
      b.qo_indptr.push_back(static_cast<int32_t>(in.u32()));
      b.kv_indptr.push_back(static_cast<int32_t>(in.u32()));
      b.kv_len.push_back(static_cast<int32_t>(in.u32()));
    }
    return;
  }
  b.qo_indptr.push_back(0);
  b.kv_indptr.push_back(0);
  for (int r = 0; r < n; ++r) {
    const int32_t q_len = in.u16() % 2048;
    const int32_t pages = in.u8();
    const int64_t capacity = int64_t{pages} * b.input.page_size;
    b.qo_indptr.push_back(b.qo_indptr.back() + q_len);
    b.kv_indptr.push_back(b.kv_indptr.back() + pages);
    b.kv_len.push_back(static_cast<int32_t>(in.u32() % static_cast<uint64_t>(capacity + 2)));
  }
}

Batch decode(const uint8_t* data, size_t size) {
  Bytes in(data, size);
  Batch b;
  const uint8_t flags = in.u8();
  const bool raw = flags & 2;
  auto& p = b.input;
  p.causal = flags & 1;
  p.cluster_size = (flags >> 2) & 3;
  p.kv_tile = std::array<int, 4>{64, 32, 16, 48}[(flags >> 4) & 3];
  p.cta_tile_q = (flags & 64) ? 32 : 64;
  const uint8_t batch = in.u8();
  p.batch_size = raw ? static_cast<int8_t>(batch) : batch % 65;
  p.num_heads = in.u8();
  p.page_size = raw ? in.u16() : in.u16() % 256;
  p.num_ctas = in.u16() % 265;
  const uint8_t null_choice = in.u8();
  read_requests(in, raw, b);
  p.qo_indptr = b.qo_indptr.data();
  p.kv_indptr = b.kv_indptr.data();
  p.kv_len = b.kv_len.empty() ? nullptr : b.kv_len.data();
  if (flags & 128) {
    const int which = null_choice % 3;
    if (which == 0) p.qo_indptr = nullptr;
    if (which == 1) p.kv_indptr = nullptr;
    if (which == 2) p.kv_len = nullptr;
  }
  p.fixed_chunk_tokens = std::array<int64_t, 6>{0, 64, 1024, 2048, 96, -64}[in.u8() % 6];
  constexpr int64_t kMax = mlajit::plan::kMaxItemOverheadTokens;
  p.item_overhead_tokens = std::array<int64_t, 6>{mlajit::plan::kItemOverheadTokens, 0, 192, kMax,
                                                  -1, kMax + 1}[in.u8() % 6];
  return b;
}

// Query tiles at the smallest tile size, counting only well-formed requests (the planner
// refuses the rest before it allocates anything per tile).
int64_t tile_bound(const Batch& b) {
  int64_t tiles = 0;
  for (int r = 0; r < b.input.batch_size && r + 1 < static_cast<int>(b.qo_indptr.size()); ++r) {
    const int64_t q_len = int64_t{b.qo_indptr[r + 1]} - b.qo_indptr[r];
    if (q_len > 0) tiles += (q_len * std::max(b.input.num_heads, 1) + 63) / 64;
  }
  return tiles;
}

int64_t kv_tokens(const Batch& b) {
  int64_t tokens = 0;
  for (int32_t len : b.kv_len) tokens += std::max(len, 0);
  return tokens;
}

void check_indptr(const std::vector<int32_t>& indptr, size_t entries, size_t total,
                  const char* what) {
  check(indptr.size() == entries + 1, what);
  check(indptr.front() == 0 && static_cast<size_t>(indptr.back()) == total, what);
  check(std::is_sorted(indptr.begin(), indptr.end()), what);
}

// The invariants the kernel relies on.
void check_plan(const Batch& b, const mlajit::plan::Plan& plan) {
  const auto& in = b.input;
  check(plan.cluster_size == 1 || plan.cluster_size == 2, "cluster_size is 1 or 2");
  check(plan.grid_y >= 1 && plan.grid_y <= 65535 && plan.grid_y * plan.cluster_size <= in.num_ctas,
        "the grid fits the device and gridDim.y");
  check(plan.tile_rows == in.cta_tile_q * plan.cluster_size, "tile_rows");
  check(in.item_overhead_tokens >= 0 && in.item_overhead_tokens <= mlajit::plan::kMaxItemOverheadTokens,
        "an item overhead outside 0..kMaxItemOverheadTokens is refused");
  check(plan.item_overhead_tokens == in.item_overhead_tokens, "the plan carries the item overhead");
  check_indptr(plan.work_indptr, plan.grid_y, plan.work_items.size(), "work_indptr is a CSR");
  check_indptr(plan.merge_indptr, size_t(plan.grid_y) * plan.cluster_size,
               plan.merge_records.size(), "merge_indptr is a CSR");

  // Each tile of each request: chunks that start at 0, touch end to end, stay in kv_len.
  std::map<std::pair<int32_t, int32_t>, std::vector<const mlajit::plan::MlaWorkItem*>> tiles;
  for (const auto& item : plan.work_items) {
    const auto request = std::upper_bound(b.qo_indptr.begin(), b.qo_indptr.end() - 1,
                                          item.q_token_base) - b.qo_indptr.begin() - 1;
    check(request >= 0 && request < in.batch_size, "an item belongs to a request");
    check(item.q_len == b.qo_indptr[request + 1] - b.qo_indptr[request], "q_len");
    check(item.kv_len == b.kv_len[request] && item.kv_page_base == b.kv_indptr[request], "kv fields");
    check(item.packed_q_start >= 0 && item.packed_q_start % plan.tile_rows == 0 &&
              int64_t{item.packed_q_start} < int64_t{item.q_len} * in.num_heads,
          "packed_q_start is a tile start inside the request");
    check(0 <= item.kv_start && item.kv_start <= item.kv_end && item.kv_end <= item.kv_len,
          "the chunk lies in the request's KV");
    check(item.partial_row == -1 ||
              (item.partial_row >= 0 && item.partial_row + int64_t{plan.tile_rows} <= plan.partial_rows),
          "partial rows stay in the partial buffer");
    tiles[{item.q_token_base, item.packed_q_start}].push_back(&item);
  }
  int64_t expected_tiles = 0, split_pieces = 0;
  for (int r = 0; r < in.batch_size; ++r) {
    const int64_t packed = int64_t{b.qo_indptr[r + 1] - b.qo_indptr[r]} * in.num_heads;
    expected_tiles += (packed + plan.tile_rows - 1) / plan.tile_rows;
  }
  check(static_cast<int64_t>(tiles.size()) == expected_tiles, "every query tile has work");
  for (auto& [tile, items] : tiles) {
    std::sort(items.begin(), items.end(),
              [](auto* x, auto* y) { return x->kv_start < y->kv_start; });
    check(items.front()->kv_start == 0, "a tile's chunks start at KV 0");
    for (size_t i = 1; i < items.size(); ++i)
      check(items[i]->kv_start == items[i - 1]->kv_end, "a tile's chunks are contiguous");
    if (!in.causal) check(items.back()->kv_end == items.back()->kv_len, "non-causal tiles see all KV");
    const bool split = items.size() > 1;
    for (auto* item : items) check((item->partial_row >= 0) == split, "partials iff split");
    if (split) {
      const int64_t packed = int64_t{items[0]->q_len} * in.num_heads;
      const int64_t rows = std::min<int64_t>(plan.tile_rows, packed - tile.second);
      split_pieces += (rows + plan.merge_piece_rows - 1) / plan.merge_piece_rows;
    }
  }
  check(plan.merge_piece_rows >= 1 && plan.merge_piece_rows <= mlajit::plan::kMergePieceRows,
        "merge piece rows in 1..kMergePieceRows");
  check(in.fixed_chunk_tokens == 0 || plan.merge_piece_rows == mlajit::plan::kMergePieceRows,
        "batch-invariant plans cut merge pieces of kMergePieceRows rows");
  check(static_cast<int64_t>(plan.merge_records.size()) == split_pieces,
        "one merge record per piece of a split tile");
  for (const auto& record : plan.merge_records) {
    check(record.num_chunks >= 2 && record.num_rows >= 1 &&
              record.num_rows <= plan.merge_piece_rows,
          "merge record sizes");
    check(record.partial_row_base >= 0 &&
              record.partial_row_base + int64_t{record.num_chunks - 1} * record.partial_stride +
                      record.num_rows <= plan.partial_rows,
          "merge records read inside the partial buffer");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const Batch b = decode(data, size);
  if (tile_bound(b) > kMaxHarnessTiles || kv_tokens(b) > kMaxHarnessKvTokens) return 0;  // the cap above
  mlajit::plan::Plan plan;
  try {
    plan = mlajit::plan::make_plan(b.input);
  } catch (const mlajit::Error& e) {
    const auto code = e.code();
    check(code == mlajit::ErrorCode::kInvalidArgument || code == mlajit::ErrorCode::kUnsupported,
          "make_plan throws kInvalidArgument or kUnsupported");
    return 0;
  }
  check_plan(b, plan);
  return 0;
}
