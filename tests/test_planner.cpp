// The split-KV planner: hand-checked plans, input validation, and invariants over random
// ragged batches checked against an independent model of the causal mask; its division and
// longest-first helpers against plain references.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <limits>
#include <cstdlib>
#include <cstring>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include <fmt/format.h>

#include "mlajit/error.h"
#include "plan/divisor.h"
#include "plan/longest_first.h"
#include "plan/planner.h"

using namespace mlajit;
using namespace mlajit::plan;
using Catch::Matchers::Contains;

namespace {

struct Batch {
  std::vector<int32_t> qo_indptr{0}, kv_indptr{0}, kv_len;
  int num_heads = 16, page_size = 64;
  bool causal = false;

  // Adds a request with `spare_pages` pages beyond those its KV needs.
  Batch& add(int32_t q_len, int32_t kv, int32_t spare_pages = 0) {
    qo_indptr.push_back(qo_indptr.back() + q_len);
    kv_indptr.push_back(kv_indptr.back() + (kv + page_size - 1) / page_size + spare_pages);
    kv_len.push_back(kv);
    return *this;
  }
  int size() const { return static_cast<int>(kv_len.size()); }
  int32_t q_len(int b) const { return qo_indptr[b + 1] - qo_indptr[b]; }
  int64_t packed(int b) const { return int64_t{q_len(b)} * num_heads; }
};

PlanInput input_for(const Batch& batch, int num_ctas, int cluster_size = 0, int kv_tile = 64) {
  PlanInput in;
  in.qo_indptr = batch.qo_indptr.data();
  in.kv_indptr = batch.kv_indptr.data();
  in.kv_len = batch.kv_len.data();
  in.batch_size = batch.size();
  in.num_heads = batch.num_heads;
  in.page_size = batch.page_size;
  in.causal = batch.causal;
  in.num_ctas = num_ctas;
  in.kv_tile = kv_tile;
  in.cluster_size = cluster_size;
  return in;
}

// A fresh seed each run, or MLAJIT_TEST_SEED to replay a failure.
uint32_t test_seed() {
  const char* fixed = std::getenv("MLAJIT_TEST_SEED");
  return fixed ? static_cast<uint32_t>(std::strtoul(fixed, nullptr, 10)) : std::random_device{}();
}

std::string plan_error(const PlanInput& in) {
  try {
    make_plan(in);
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::kInvalidArgument);
    return e.what();
  }
  FAIL("make_plan accepted an invalid input");
  return "";
}

// Tokens packed row r may see: the test's own model of the bottom-right causal mask.
int64_t visible(const Batch& batch, int b, int64_t row) {
  const int64_t kv = batch.kv_len[b];
  if (!batch.causal) return kv;
  return std::clamp<int64_t>(kv - batch.q_len(b) + row / batch.num_heads + 1, 0, kv);
}

// Items of one tile, keyed by (request, first packed row).
using TileKey = std::pair<int, int32_t>;

struct Indexed {
  std::map<int32_t, int> request_of_q_base;
  std::map<TileKey, std::vector<MlaWorkItem>> items_of_tile;  // sorted by kv_start
  std::map<TileKey, std::vector<MlaMergeRecord>> records_of_tile;
};

Indexed index_plan(const Batch& batch, const Plan& plan) {
  Indexed idx;
  for (int b = 0; b < batch.size(); ++b)
    if (batch.q_len(b) > 0) idx.request_of_q_base[batch.qo_indptr[b]] = b;
  for (const MlaWorkItem& item : plan.work_items) {
    REQUIRE(idx.request_of_q_base.count(item.q_token_base) == 1);
    const int b = idx.request_of_q_base[item.q_token_base];
    REQUIRE(item.q_len == batch.q_len(b));
    REQUIRE(item.kv_page_base == batch.kv_indptr[b]);
    REQUIRE(item.kv_len == batch.kv_len[b]);
    REQUIRE(item.packed_q_start % plan.tile_rows == 0);
    REQUIRE(item.packed_q_start >= 0);
    REQUIRE(item.packed_q_start < batch.packed(b));
    idx.items_of_tile[{b, item.packed_q_start}].push_back(item);
  }
  for (auto& entry : idx.items_of_tile)
    std::sort(entry.second.begin(), entry.second.end(),
              [](const MlaWorkItem& a, const MlaWorkItem& b) { return a.kv_start < b.kv_start; });
  for (const MlaMergeRecord& record : plan.merge_records) {
    REQUIRE(idx.request_of_q_base.count(record.q_token_base) == 1);
    const int b = idx.request_of_q_base[record.q_token_base];
    const int32_t tile_start = record.packed_q_start / plan.tile_rows * plan.tile_rows;
    idx.records_of_tile[{b, tile_start}].push_back(record);
  }
  return idx;
}

void check_csr(const std::vector<int32_t>& indptr, size_t bins, size_t entries) {
  REQUIRE(indptr.size() == bins + 1);
  REQUIRE(indptr.front() == 0);
  REQUIRE(static_cast<size_t>(indptr.back()) == entries);
  REQUIRE(std::is_sorted(indptr.begin(), indptr.end()));
}

void check_shape(const PlanInput& in, const Batch& batch, const Plan& plan) {
  if (in.cluster_size != 0) {
    REQUIRE(plan.cluster_size == in.cluster_size);
  } else {
    int64_t packed = 0;
    for (int b = 0; b < batch.size(); ++b) packed += batch.packed(b);
    const bool wide = batch.size() > 0 && in.num_ctas >= 2 && packed > 64 * int64_t{batch.size()};
    REQUIRE(plan.cluster_size == (wide ? 2 : 1));
  }
  REQUIRE(plan.grid_y == in.num_ctas / plan.cluster_size);
  REQUIRE(plan.tile_rows == 64 * plan.cluster_size);
  check_csr(plan.work_indptr, plan.grid_y, plan.work_items.size());
  check_csr(plan.merge_indptr, size_t(plan.grid_y) * plan.cluster_size, plan.merge_records.size());
}

// Each tile's chunks tile [0, effective length) exactly once, or are one empty item when no
// row of the tile sees anything; the effective length is the most any row of the tile sees,
// rounded up to a whole kernel tile within kv_len (the kernel masks the rest row by row).
void check_chunks(const Batch& batch, const Plan& plan, const Indexed& idx, int kv_tile) {
  size_t tiles = 0;
  for (int b = 0; b < batch.size(); ++b) {
    for (int64_t start = 0; start < batch.packed(b); start += plan.tile_rows) {
      ++tiles;
      const int64_t end = std::min<int64_t>(start + plan.tile_rows, batch.packed(b));
      const int64_t seen = visible(batch, b, end - 1);  // the last row sees the most
      const int64_t eff = std::min<int64_t>((seen + kv_tile - 1) / kv_tile * kv_tile, batch.kv_len[b]);
      const auto it = idx.items_of_tile.find({b, static_cast<int32_t>(start)});
      REQUIRE(it != idx.items_of_tile.end());
      const std::vector<MlaWorkItem>& items = it->second;
      if (eff == 0) {
        REQUIRE(items.size() == 1);
        REQUIRE(items[0].kv_start == 0);
        REQUIRE(items[0].kv_end == 0);
        continue;
      }
      int64_t covered = 0;
      for (const MlaWorkItem& item : items) {
        REQUIRE(item.kv_start == covered);
        REQUIRE(item.kv_end > item.kv_start);
        covered = item.kv_end;
      }
      REQUIRE(covered == eff);
      for (size_t c = 1; c < items.size(); ++c) REQUIRE(items[c].kv_start % kv_tile == 0);
    }
  }
  REQUIRE(idx.items_of_tile.size() == tiles);
}

// Split tiles: chunk c writes rows base + c * tile_rows, disjoint from every other chunk's;
// their valid rows are merged exactly once with matching chunk count and stride. Unsplit
// tiles write the output directly and have no merge record.
void check_partials(const Batch& batch, const Plan& plan, const Indexed& idx) {
  std::vector<int> owner(static_cast<size_t>(plan.partial_rows), 0);
  for (const auto& [key, items] : idx.items_of_tile) {
    const auto records = idx.records_of_tile.find(key);
    if (items.size() == 1) {
      REQUIRE(items[0].partial_row == -1);
      REQUIRE(records == idx.records_of_tile.end());
      continue;
    }
    const int32_t base = items[0].partial_row;
    REQUIRE(base >= 0);
    for (size_t c = 0; c < items.size(); ++c) {
      REQUIRE(items[c].partial_row == base + int32_t(c) * plan.tile_rows);
      REQUIRE(int64_t{items[c].partial_row} + plan.tile_rows <= plan.partial_rows);
      for (int r = 0; r < plan.tile_rows; ++r) REQUIRE(owner[items[c].partial_row + r]++ == 0);
    }
    REQUIRE(records != idx.records_of_tile.end());
    const int64_t valid = std::min<int64_t>(plan.tile_rows, batch.packed(key.first) - key.second);
    std::vector<int> merged(static_cast<size_t>(valid), 0);
    for (const MlaMergeRecord& record : records->second) {
      const int32_t offset = record.packed_q_start - key.second;
      REQUIRE(record.num_rows >= 1);
      REQUIRE(offset >= 0);
      REQUIRE(offset + record.num_rows <= valid);
      REQUIRE(record.num_chunks == static_cast<int32_t>(items.size()));
      REQUIRE(record.partial_stride == plan.tile_rows);
      REQUIRE(record.partial_row_base == base + offset);
      for (int r = 0; r < record.num_rows; ++r) ++merged[offset + r];
    }
    for (int count : merged) REQUIRE(count == 1);
  }
  for (const auto& entry : idx.records_of_tile) REQUIRE(idx.items_of_tile.count(entry.first) == 1);
}

// Every (packed row, KV token) pair the mask allows is computed exactly once, counted cell
// by cell. Only for small batches.
void check_coverage_cells(const Batch& batch, const Plan& plan) {
  std::map<int32_t, int> request_of;
  for (int b = 0; b < batch.size(); ++b)
    if (batch.q_len(b) > 0) request_of[batch.qo_indptr[b]] = b;
  std::vector<std::vector<uint8_t>> seen(batch.size());
  for (int b = 0; b < batch.size(); ++b)
    seen[b].assign(static_cast<size_t>(batch.packed(b) * batch.kv_len[b]), 0);
  for (const MlaWorkItem& item : plan.work_items) {
    const int b = request_of.at(item.q_token_base);
    const int64_t row_end = std::min<int64_t>(item.packed_q_start + plan.tile_rows, batch.packed(b));
    for (int64_t r = item.packed_q_start; r < row_end; ++r) {
      const int64_t last = std::min<int64_t>(item.kv_end, visible(batch, b, r));
      for (int64_t t = item.kv_start; t < last; ++t) ++seen[b][r * batch.kv_len[b] + t];
    }
  }
  for (int b = 0; b < batch.size(); ++b)
    for (int64_t r = 0; r < batch.packed(b); ++r)
      for (int64_t t = 0; t < batch.kv_len[b]; ++t)
        REQUIRE(int(seen[b][r * batch.kv_len[b] + t]) == (t < visible(batch, b, r) ? 1 : 0));
}

void check_costs(const Plan& plan) {
  REQUIRE(plan.cta_cost.size() == static_cast<size_t>(plan.grid_y));
  int64_t largest_item = 0;
  for (int y = 0; y < plan.grid_y; ++y) {
    int64_t sum = 0;
    for (int i = plan.work_indptr[y]; i < plan.work_indptr[y + 1]; ++i) {
      const int64_t cost = work_item_cost(plan.work_items[i], plan.item_overhead_tokens);
      sum += cost;
      largest_item = std::max(largest_item, cost);
    }
    REQUIRE(plan.cta_cost[y] == sum);
  }
  // The busiest pair is at most one item (with an item's fixed cost and shortest chunk of
  // slack) above the mean: longest-first puts each item on the least loaded pair, which is at
  // or below the mean, and a pour at its smallest capacity fills every pair but the last one
  // above the mean. The least loaded pair can be further below: a pour may leave the last
  // pair a single item (seed 4281473746, trial 2479: 7 pairs of 502-582 tokens and one of 187).
  const int64_t pairs = static_cast<int64_t>(plan.cta_cost.size());
  const int64_t total = std::accumulate(plan.cta_cost.begin(), plan.cta_cost.end(), int64_t{0});
  const int64_t busiest = *std::max_element(plan.cta_cost.begin(), plan.cta_cost.end());
  const int64_t slack = largest_item + kItemOverheadTokens + kMinChunkTokens;
  REQUIRE(busiest * pairs <= total + pairs * slack);
}

bool same_items(const std::vector<MlaWorkItem>& a, const std::vector<MlaWorkItem>& b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(a[0])) == 0);
}

bool same_records(const std::vector<MlaMergeRecord>& a, const std::vector<MlaMergeRecord>& b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(a[0])) == 0);
}

void check_plan(const PlanInput& in, const Batch& batch, const Plan& plan, bool cell_check) {
  check_shape(in, batch, plan);
  const Indexed idx = index_plan(batch, plan);
  check_chunks(batch, plan, idx, in.kv_tile);
  check_partials(batch, plan, idx);
  if (cell_check) check_coverage_cells(batch, plan);
  check_costs(plan);
}

Batch random_batch(std::mt19937& rng, bool small) {
  auto pick = [&rng](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  Batch batch;
  const int heads[] = {1, 2, 3, 8, 16, 16, 32, 64, 128, 128};
  batch.num_heads = pick(0, 4) == 0 ? pick(1, 128) : heads[pick(0, 9)];
  const int pages[] = {1, 1, 16, 64, 64, 7};
  batch.page_size = pages[pick(0, 5)];
  batch.causal = pick(0, 1) == 1;
  const int requests = pick(0, small ? 6 : 40);
  const int max_kv = small ? 200 : (pick(0, 1) ? 20000 : 3000);
  const int max_q = small ? (batch.num_heads >= 64 ? 3 : 8) : (batch.num_heads >= 32 ? 6 : 40);
  for (int b = 0; b < requests; ++b) {
    const int q = pick(0, 3) == 0 ? pick(0, max_q) : 1;
    const int kv = pick(0, 9) == 0 ? pick(0, 3) : pick(0, max_kv);
    batch.add(q, kv, pick(0, 3) == 0 ? pick(0, 2) : 0);
  }
  return batch;
}

PlanInput random_input(std::mt19937& rng, const Batch& batch) {
  auto pick = [&rng](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  const int ctas = pick(0, 3) == 0 ? pick(1, 8) : pick(1, 264);
  int cluster = pick(0, 2);
  if (cluster == 2 && ctas < 2) cluster = 1;
  const int kv_tiles[] = {16, 32, 64};
  return input_for(batch, ctas, cluster, kv_tiles[pick(0, 2)]);
}

}  // namespace

// ---- hand-checked plans -----------------------------------------------------------------

TEST_CASE("one decode request with 16 heads on one CTA is one unsplit tile") {
  Batch batch;
  batch.num_heads = 16;
  batch.add(1, 1000);
  const Plan plan = make_plan(input_for(batch, 1));
  CHECK(plan.cluster_size == 1);
  CHECK(plan.grid_y == 1);
  CHECK(plan.tile_rows == 64);
  REQUIRE(plan.work_items.size() == 1);
  const MlaWorkItem& item = plan.work_items[0];
  CHECK(item.q_token_base == 0);
  CHECK(item.q_len == 1);
  CHECK(item.kv_page_base == 0);
  CHECK(item.kv_len == 1000);
  CHECK(item.packed_q_start == 0);
  CHECK(item.kv_start == 0);
  CHECK(item.kv_end == 1000);
  CHECK(item.partial_row == -1);
  CHECK(plan.merge_records.empty());
  CHECK(plan.partial_rows == 0);
  CHECK(plan.work_indptr == std::vector<int32_t>{0, 1});
  CHECK(plan.merge_indptr == std::vector<int32_t>{0, 0});
  CHECK(plan.cta_cost == std::vector<int64_t>{1000 + plan::kItemOverheadTokens});
}

TEST_CASE("decode with 16 heads uses one CTA per tile, with 128 heads two") {
  Batch narrow;
  narrow.num_heads = 16;
  narrow.add(1, 500).add(1, 700);
  const Plan one = make_plan(input_for(narrow, 132));
  CHECK(one.cluster_size == 1);
  CHECK(one.grid_y == 132);
  CHECK(one.tile_rows == 64);

  Batch wide;
  wide.num_heads = 128;
  wide.add(1, 500);
  const Plan two = make_plan(input_for(wide, 132));
  CHECK(two.cluster_size == 2);
  CHECK(two.grid_y == 66);
  CHECK(two.tile_rows == 128);
  CHECK(two.merge_indptr.size() == 133);
  for (const MlaWorkItem& item : two.work_items) CHECK(item.packed_q_start == 0);  // one tile
}

// The chunk lengths the H200 measured fastest for one 128-head decode request (A/B of plans in
// one sitting, PERF.md): a change of the cost model that moves these wants a new measurement.
TEST_CASE("one long 128-head request is cut into the chunk lengths measured fastest") {
  const auto chunk_for = [](int32_t kv_len) {
    Batch one;
    one.num_heads = 128;
    one.add(1, kv_len);
    return make_plan(input_for(one, 132)).kv_chunk;
  };
  CHECK(chunk_for(1024) == 64);
  CHECK(chunk_for(4096) == 128);
  CHECK(chunk_for(16384) == 256);
}

TEST_CASE("a pinned cluster size is kept whatever the batch") {
  Batch wide;
  wide.num_heads = 128;
  wide.add(1, 500);
  CHECK(make_plan(input_for(wide, 132, 1)).cluster_size == 1);
  Batch narrow;
  narrow.add(1, 500);
  const Plan plan = make_plan(input_for(narrow, 131, 2));
  CHECK(plan.cluster_size == 2);
  CHECK(plan.grid_y == 65);  // the odd CTA is left idle
}

TEST_CASE("a tile split in two chunks gets two partial row blocks and merge records") {
  Batch batch;
  batch.num_heads = 16;
  batch.add(1, 1024);
  const Plan plan = make_plan(input_for(batch, 2, 1));
  REQUIRE(plan.grid_y == 2);
  REQUIRE(plan.work_items.size() == 2);
  CHECK(plan.work_indptr == std::vector<int32_t>{0, 1, 2});
  // Longest first: equal chunks, the first (by index) to pair 0.
  CHECK(plan.work_items[0].kv_start == 0);
  CHECK(plan.work_items[0].kv_end == 512);
  CHECK(plan.work_items[0].partial_row == 0);
  CHECK(plan.work_items[1].kv_start == 512);
  CHECK(plan.work_items[1].kv_end == 1024);
  CHECK(plan.work_items[1].partial_row == 64);
  CHECK(plan.partial_rows == 128);
  CHECK(plan.cta_cost == std::vector<int64_t>{512 + plan::kItemOverheadTokens, 512 + plan::kItemOverheadTokens});
  // 16 valid rows -> two 8-row pieces, one per CTA.
  REQUIRE(plan.merge_records.size() == 2);
  CHECK(plan.merge_indptr == std::vector<int32_t>{0, 1, 2});
  for (int p = 0; p < 2; ++p) {
    const MlaMergeRecord& record = plan.merge_records[p];
    CHECK(record.q_token_base == 0);
    CHECK(record.packed_q_start == 8 * p);
    CHECK(record.num_rows == 8);
    CHECK(record.partial_row_base == 8 * p);
    CHECK(record.num_chunks == 2);
    CHECK(record.partial_stride == 64);
  }
}

TEST_CASE("a lone request's merge spreads over the grid in one-row pieces") {
  Batch batch;
  batch.num_heads = 128;
  batch.add(1, 16384);  // 128 packed rows, two 64-row tiles
  PlanInput in = input_for(batch, 132, 1);
  const Plan plan = make_plan(in);
  REQUIRE(plan.partial_rows > 0);  // it splits
  CHECK(plan.merge_piece_rows == 1);
  REQUIRE(plan.merge_records.size() == 128);
  std::vector<int> rows_seen(128, 0);
  int busy_ctas = 0;
  for (size_t cta = 0; cta + 1 < plan.merge_indptr.size(); ++cta) {
    const int records = plan.merge_indptr[cta + 1] - plan.merge_indptr[cta];
    CHECK(records <= 1);  // one piece per CTA while there are more CTAs than rows
    busy_ctas += records;
  }
  CHECK(busy_ctas == 128);
  for (const MlaMergeRecord& record : plan.merge_records) {
    CHECK(record.num_rows == 1);
    CHECK(record.num_chunks > 32);  // the kernel shares such rows between its row groups
    ++rows_seen[record.packed_q_start];
  }
  CHECK(std::count(rows_seen.begin(), rows_seen.end(), 1) == 128);

  // Many split rows: full pieces, as before.
  Batch big;
  big.num_heads = 128;
  for (int r = 0; r < 16; ++r) big.add(1, 16384);
  CHECK(make_plan(input_for(big, 132, 1)).merge_piece_rows == plan::kMergePieceRows);

  // Batch-invariant: a row's summation order follows its piece, so pieces stay full.
  in.fixed_chunk_tokens = 1024;
  const Plan invariant = make_plan(in);
  CHECK(invariant.merge_piece_rows == plan::kMergePieceRows);
  for (const MlaMergeRecord& record : invariant.merge_records) CHECK(record.num_rows == plan::kMergePieceRows);
}

TEST_CASE("causal tiles of a multi-token request see only up to their last query") {
  Batch batch;
  batch.num_heads = 16;
  batch.causal = true;
  // 128 packed rows a request: tile 0 = tokens 0..3, tile 1 = tokens 4..7. Tile 0 sees
  // kv_len - 8 + 4 tokens, rounded up to the kernel's 64-token tiles within kv_len (the kernel
  // masks the rest): 1086 -> 1088 at kv_len 1090, 1096 -> 1152, past kv_len 1100, -> 1100.
  batch.add(8, 1090);
  batch.add(8, 1100);
  const Plan plan = make_plan(input_for(batch, 1, 1));
  REQUIRE(plan.work_items.size() == 4);
  std::map<std::pair<int32_t, int32_t>, int32_t> eff;  // (first query token, packed row) -> end
  for (const MlaWorkItem& item : plan.work_items)
    eff[{item.q_token_base, item.packed_q_start}] = item.kv_end;
  CHECK(eff[{0, 0}] == 1088);
  CHECK(eff[{0, 64}] == 1090);
  CHECK(eff[{8, 0}] == 1100);
  CHECK(eff[{8, 64}] == 1100);

  batch.causal = false;
  for (const MlaWorkItem& item : make_plan(input_for(batch, 1, 1)).work_items)
    CHECK(item.kv_end == batch.kv_len[item.q_token_base / 8]);
}

TEST_CASE("causal rows that see nothing still get an empty item") {
  Batch batch;
  batch.num_heads = 16;
  batch.causal = true;
  batch.add(8, 2);  // query i sees tokens t <= i - 6: queries 0..3 (tile 0) see nothing
  const Plan plan = make_plan(input_for(batch, 4, 1));
  std::map<int32_t, std::pair<int32_t, int32_t>> range;
  for (const MlaWorkItem& item : plan.work_items) range[item.packed_q_start] = {item.kv_start, item.kv_end};
  REQUIRE(range.size() == 2);
  CHECK(range[0] == std::make_pair(0, 0));
  CHECK(range[64] == std::make_pair(0, 2));
}

TEST_CASE("a request with no KV gets one empty item and no partials") {
  Batch batch;
  batch.num_heads = 128;
  batch.add(1, 0).add(1, 300);
  const Plan plan = make_plan(input_for(batch, 132));
  int empty = 0;
  for (const MlaWorkItem& item : plan.work_items) {
    if (item.kv_len == 0) {
      ++empty;
      CHECK(item.kv_start == 0);
      CHECK(item.kv_end == 0);
      CHECK(item.partial_row == -1);
    }
  }
  CHECK(empty == 1);
}

TEST_CASE("an empty batch gives an empty plan") {
  PlanInput in;
  in.num_heads = 16;
  in.page_size = 64;
  in.num_ctas = 8;
  const Plan plan = make_plan(in);
  CHECK(plan.cluster_size == 1);
  CHECK(plan.grid_y == 8);
  CHECK(plan.work_items.empty());
  CHECK(plan.merge_records.empty());
  CHECK(plan.work_indptr == std::vector<int32_t>(9, 0));
  CHECK(plan.merge_indptr == std::vector<int32_t>(9, 0));
  CHECK(plan.cta_cost == std::vector<int64_t>(8, 0));
}

TEST_CASE("requests without query tokens get no work") {
  Batch batch;
  batch.add(0, 500).add(1, 64).add(0, 0);
  const Plan plan = make_plan(input_for(batch, 4));
  REQUIRE(plan.work_items.size() == 1);
  CHECK(plan.work_items[0].q_token_base == 0);
  CHECK(plan.work_items[0].kv_len == 64);
}

// ---- validation -------------------------------------------------------------------------

TEST_CASE("invalid scalar inputs are rejected naming the field and value") {
  Batch batch;
  batch.add(1, 10);
  auto with = [&](auto change) {
    PlanInput in = input_for(batch, 4);
    change(in);
    return plan_error(in);
  };
  CHECK_THAT(with([](PlanInput& in) { in.batch_size = -1; }), Contains("batch_size must be >= 0, got -1"));
  CHECK_THAT(with([](PlanInput& in) { in.num_heads = 0; }), Contains("num_heads must be in 1..128, got 0"));
  CHECK_THAT(with([](PlanInput& in) { in.num_heads = 129; }), Contains("got 129"));
  CHECK_THAT(with([](PlanInput& in) { in.page_size = 0; }), Contains("page_size must be >= 1, got 0"));
  CHECK_THAT(with([](PlanInput& in) { in.num_ctas = 0; }), Contains("num_ctas must be >= 1, got 0"));
  CHECK_THAT(with([](PlanInput& in) { in.cta_tile_q = 128; }), Contains("cta_tile_q must be 64"));
  CHECK_THAT(with([](PlanInput& in) { in.kv_tile = 48; }), Contains("kv_tile must be 16, 32 or 64, got 48"));
  CHECK_THAT(with([](PlanInput& in) { in.cluster_size = 3; }), Contains("cluster_size must be 0 (choose), 1 or 2, got 3"));
  CHECK_THAT(with([](PlanInput& in) { in.cluster_size = 2; in.num_ctas = 1; }), Contains("cluster_size 2 needs num_ctas >= 2"));
  CHECK_THAT(with([](PlanInput& in) { in.num_ctas = 70000; in.cluster_size = 1; }), Contains("65535"));
  CHECK_THAT(with([](PlanInput& in) { in.item_overhead_tokens = -1; }),
             Contains("item_overhead_tokens must be 0 to 65536, got -1"));
  CHECK_THAT(with([](PlanInput& in) { in.item_overhead_tokens = 1 << 17; }), Contains("got 131072"));
}

TEST_CASE("a larger item overhead keeps short remainders off a few CTAs") {
  // 64 requests of 16,384 tokens at 16 heads on 132 CTAs: at the default overhead the plan
  // cuts 8,000-token chunks and pours the 64 remainders of 384 tokens onto 4 CTAs (16 items
  // each); at twice the overhead (e4m3 streams) no CTA gets more than 2 items.
  Batch batch;
  for (int b = 0; b < 64; ++b) batch.add(1, 16384);
  const auto most_items = [&](int64_t overhead) {
    PlanInput in = input_for(batch, 132);
    in.num_heads = 16;
    in.item_overhead_tokens = overhead;
    const Plan plan = make_plan(in);
    CHECK(plan.item_overhead_tokens == overhead);
    int most = 0;
    for (int y = 0; y < plan.grid_y; ++y) most = std::max(most, plan.work_indptr[y + 1] - plan.work_indptr[y]);
    for (size_t i = 0; i < plan.work_items.size(); ++i) {
      CHECK(work_item_cost(plan.work_items[i], overhead) ==
            plan.work_items[i].kv_end - plan.work_items[i].kv_start + overhead);
    }
    return most;
  };
  CHECK(most_items(kItemOverheadTokens) == 16);
  CHECK(most_items(2 * kItemOverheadTokens) <= 2);
}

TEST_CASE("null arrays are rejected") {
  Batch batch;
  batch.add(1, 10);
  PlanInput in = input_for(batch, 4);
  in.qo_indptr = nullptr;
  CHECK_THAT(plan_error(in), Contains("qo_indptr is null"));
  in = input_for(batch, 4);
  in.kv_indptr = nullptr;
  CHECK_THAT(plan_error(in), Contains("kv_indptr is null"));
  in = input_for(batch, 4);
  in.kv_len = nullptr;
  CHECK_THAT(plan_error(in), Contains("kv_len is null"));
}

TEST_CASE("malformed indptrs and lengths are rejected naming index and values") {
  Batch batch;
  batch.page_size = 4;
  batch.add(1, 4).add(2, 8).add(1, 4).add(1, 4);
  {
    Batch bad = batch;
    bad.qo_indptr[0] = 1;
    CHECK_THAT(plan_error(input_for(bad, 4)), Contains("qo_indptr[0] must be 0, got 1"));
  }
  {
    Batch bad = batch;
    bad.qo_indptr[2] = 9;
    CHECK_THAT(plan_error(input_for(bad, 4)),
               Contains("qo_indptr must be non-decreasing: qo_indptr[2]=9 > qo_indptr[3]=4"));
  }
  {
    Batch bad = batch;
    bad.kv_indptr[3] = 17;
    bad.kv_indptr[4] = 12;
    CHECK_THAT(plan_error(input_for(bad, 4)),
               Contains("kv_indptr must be non-decreasing: kv_indptr[3]=17 > kv_indptr[4]=12"));
  }
  {
    Batch bad = batch;
    bad.kv_indptr[0] = -1;
    CHECK_THAT(plan_error(input_for(bad, 4)), Contains("kv_indptr[0] must be >= 0, got -1"));
  }
  {
    Batch bad = batch;
    bad.kv_len[1] = -3;
    CHECK_THAT(plan_error(input_for(bad, 4)), Contains("kv_len[1] must be >= 0, got -3"));
  }
  {
    Batch bad = batch;
    bad.kv_len[1] = 9;  // 2 pages of 4 tokens
    CHECK_THAT(plan_error(input_for(bad, 4)),
               Contains("kv_len[1]=9 exceeds the request's 2 pages x page_size 4 = 8 tokens"));
  }
}

// ---- properties over random batches -----------------------------------------------------

TEST_CASE("random batches: every visible (row, token) pair is computed exactly once") {
  const uint32_t seed = test_seed();
  INFO("seed " << seed << " (replay with MLAJIT_TEST_SEED)");
  std::printf("planner property test (small batches) seed %u\n", seed);
  std::mt19937 rng(seed);
  int with_splits = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    const Batch batch = random_batch(rng, true);
    const PlanInput in = random_input(rng, batch);
    INFO("trial " << trial << " B=" << batch.size() << " H=" << batch.num_heads
                  << " causal=" << batch.causal << " ctas=" << in.num_ctas
                  << " cluster=" << in.cluster_size << " kv_tile=" << in.kv_tile);
    const Plan plan = make_plan(in);
    check_plan(in, batch, plan, true);
    with_splits += plan.merge_records.empty() ? 0 : 1;
  }
  CHECK(with_splits > 300);  // the invariants of split tiles were exercised
}

TEST_CASE("random large batches keep every planner invariant") {
  const uint32_t seed = test_seed();
  INFO("seed " << seed << " (replay with MLAJIT_TEST_SEED)");
  std::printf("planner property test (large batches) seed %u\n", seed);
  std::mt19937 rng(seed);
  int with_splits = 0;
  for (int trial = 0; trial < 500; ++trial) {
    const Batch batch = random_batch(rng, false);
    const PlanInput in = random_input(rng, batch);
    INFO("trial " << trial << " B=" << batch.size() << " H=" << batch.num_heads
                  << " causal=" << batch.causal << " ctas=" << in.num_ctas
                  << " cluster=" << in.cluster_size << " kv_tile=" << in.kv_tile);
    const Plan plan = make_plan(in);
    check_plan(in, batch, plan, false);
    with_splits += plan.merge_records.empty() ? 0 : 1;
  }
  CHECK(with_splits > 100);
}

TEST_CASE("the same input always gives the same plan") {
  const uint32_t seed = 1234567u;
  INFO("seed " << seed);
  std::mt19937 rng(seed);
  for (int trial = 0; trial < 200; ++trial) {
    const Batch batch = random_batch(rng, false);
    const PlanInput in = random_input(rng, batch);
    const Plan a = make_plan(in);
    const Plan b = make_plan(in);
    REQUIRE(a.work_indptr == b.work_indptr);
    REQUIRE(same_items(a.work_items, b.work_items));
    REQUIRE(a.merge_indptr == b.merge_indptr);
    REQUIRE(same_records(a.merge_records, b.merge_records));
    REQUIRE(a.cta_cost == b.cta_cost);
    REQUIRE(a.partial_rows == b.partial_rows);
  }
}

TEST_CASE("the ragged batch of the baseline is balanced within 1.1 of the mean") {
  // perf/baseline.md: H = 128, B = 64, kv_len ~ U[1, 8192], 132 CTAs (66 pairs).
  const uint32_t seed = 20260601u;
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> length(1, 8192);
  Batch batch;
  batch.num_heads = 128;
  for (int b = 0; b < 64; ++b) batch.add(1, length(rng));
  const PlanInput in = input_for(batch, 132);
  const Plan plan = make_plan(in);
  check_plan(in, batch, plan, false);
  REQUIRE(plan.grid_y == 66);
  const double total = std::accumulate(plan.cta_cost.begin(), plan.cta_cost.end(), 0.0);
  const double busiest = *std::max_element(plan.cta_cost.begin(), plan.cta_cost.end());
  CHECK(busiest / (total / plan.grid_y) <= 1.1);
}

// ---- balance over random ragged decode batches ------------------------------------------

namespace {

enum class Lengths { kUniform, kGeometric, kGiantAmongTiny };

const char* lengths_name(Lengths kind) {
  switch (kind) {
    case Lengths::kUniform: return "uniform";
    case Lengths::kGeometric: return "geometric";
    case Lengths::kGiantAmongTiny: return "one giant among tiny";
  }
  return "?";
}

// A decode batch (q_len 1) of the kind an engine sees: lengths uniform up to a random cap,
// geometric around a random mean, or one request of 32k-128k tokens among requests of a few
// dozen.
Batch ragged_decode_batch(std::mt19937& rng, Lengths kind, int num_heads) {
  auto pick = [&rng](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  Batch batch;
  batch.num_heads = num_heads;
  batch.page_size = pick(0, 1) ? 64 : 1;
  const int requests = pick(16, 256);
  const int cap = pick(1024, 32768);
  std::geometric_distribution<int> geometric(1.0 / pick(256, 8192));
  for (int b = 0; b < requests; ++b) {
    int32_t kv = 1;
    if (kind == Lengths::kUniform) kv = pick(1, cap);
    if (kind == Lengths::kGeometric) kv = 1 + std::min(geometric(rng), 131071);
    if (kind == Lengths::kGiantAmongTiny) kv = b == 0 ? pick(32768, 131072) : pick(1, 64);
    batch.add(1, kv);
  }
  return batch;
}

}  // namespace

TEST_CASE("random ragged decode batches: the busiest CTA pair near the mean") {
  // 1,000 batches on an H200's 132 CTAs. The bar is on batches whose mean load is at least
  // 2048 tokens a pair (32 KV tiles): below that an item's fixed cost (96) and the shortest
  // chunk (64) are a large part of a pair's load and whole items cannot even it out. There the
  // worst seen is 1.13, not 1.05: at 128 heads with two or three short requests a pair,
  // evening out the last tenth means splitting tiles whose merge (and the merge phase) the
  // model prices higher than the imbalance it removes (measured so on the H200), so the plan
  // keeps whole tiles. The reference's batch-order walk is at 1.56 on the baseline's batch.
  const uint32_t seed = test_seed();
  INFO("seed " << seed << " (replay with MLAJIT_TEST_SEED)");
  std::mt19937 rng(seed);
  double sum = 0;
  int count = 0;
  for (Lengths kind : {Lengths::kUniform, Lengths::kGeometric, Lengths::kGiantAmongTiny}) {
    double worst = 0, worst_loaded = 0;
    std::string worst_batch;
    for (int trial = 0; trial < 334; ++trial) {
      const int heads = rng() % 2 ? 128 : 16;
      const Batch batch = ragged_decode_batch(rng, kind, heads);
      const PlanInput in = input_for(batch, 132);
      const Plan plan = make_plan(in);
      const double total = std::accumulate(plan.cta_cost.begin(), plan.cta_cost.end(), 0.0);
      const double busiest = *std::max_element(plan.cta_cost.begin(), plan.cta_cost.end());
      const double mean = total / plan.grid_y, ratio = busiest / mean;
      sum += ratio;
      ++count;
      worst = std::max(worst, ratio);
      if (mean >= 2048 && ratio > worst_loaded) {
        worst_loaded = ratio;
        worst_batch = fmt::format("B={} H={} page={} mean {:.0f} busiest {:.0f} chunk {}",
                                  batch.size(), heads, batch.page_size, mean, busiest,
                                  plan.kv_chunk);
      }
    }
    WARN(lengths_name(kind) << " lengths: busiest/mean worst " << worst << ", worst at mean >= 2048 "
                            << worst_loaded << " (" << worst_batch << ")");
    CHECK(worst_loaded <= 1.2);
  }
  WARN("mean busiest/mean over " << count << " batches: " << sum / count);
  CHECK(sum / count <= 1.05);
}

namespace {

// The pieces a plan gives request `b`: (packed start, kv start, kv end, split) per item, and
// the chunk count of each merge record over its rows, sorted (where they run is free).
struct RequestPieces {
  std::vector<std::tuple<int32_t, int32_t, int32_t, bool>> items;
  std::vector<std::pair<int32_t, int32_t>> merges;  // (packed start, chunks)
  bool operator==(const RequestPieces& other) const {
    return items == other.items && merges == other.merges;
  }
};

RequestPieces pieces_of(const Plan& plan, int32_t q_token_base) {
  RequestPieces pieces;
  for (const MlaWorkItem& item : plan.work_items) {
    if (item.q_token_base != q_token_base) continue;
    pieces.items.emplace_back(item.packed_q_start, item.kv_start, item.kv_end, item.partial_row >= 0);
  }
  for (const MlaMergeRecord& record : plan.merge_records) {
    if (record.q_token_base == q_token_base) {
      pieces.merges.emplace_back(record.packed_q_start, record.num_chunks);
    }
  }
  std::sort(pieces.items.begin(), pieces.items.end());
  std::sort(pieces.merges.begin(), pieces.merges.end());
  return pieces;
}

}  // namespace

TEST_CASE("a batch-invariant plan cuts a request the same way alone and in any batch") {
  const uint32_t seed = test_seed();
  INFO("seed " << seed << " (MLAJIT_TEST_SEED replays it)");
  std::mt19937 rng(seed);
  auto draw = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  for (int trial = 0; trial < 200; ++trial) {
    const int heads = draw(0, 1) ? 128 : 16;
    const bool causal = draw(0, 1) == 1;
    const int32_t q_len = draw(1, 4), kv = draw(0, 40000);
    const int64_t chunk = 64 * draw(1, 64);
    INFO("trial " << trial << ": H" << heads << " causal " << causal << " q_len " << q_len
                  << " kv " << kv << " chunk " << chunk);
    Batch alone;
    alone.num_heads = heads;
    alone.causal = causal;
    alone.add(q_len, kv);
    PlanInput in = input_for(alone, 132, 1);
    in.fixed_chunk_tokens = chunk;
    const Plan own = make_plan(in);
    const RequestPieces expected = pieces_of(own, 0);
    // Every piece but the last of a tile is exactly `chunk` long, from the request's start.
    for (const auto& [start, kv_start, kv_end, split] : expected.items) {
      CHECK(kv_start % chunk == 0);
      CHECK((kv_end - kv_start == chunk || kv_end == kv || causal));
    }
    Batch mixed;
    mixed.num_heads = heads;
    mixed.causal = causal;
    const int before = draw(0, 30), after = draw(0, 30);
    for (int i = 0; i < before; ++i) mixed.add(draw(1, 4), draw(0, 20000));
    const int32_t base = mixed.qo_indptr.back();
    mixed.add(q_len, kv);
    for (int i = 0; i < after; ++i) mixed.add(draw(1, 4), draw(0, 20000));
    PlanInput in_batch = input_for(mixed, draw(1, 264), 1);
    in_batch.fixed_chunk_tokens = chunk;
    CHECK(pieces_of(make_plan(in_batch), base) == expected);
  }
}

TEST_CASE("a batch-invariant chunk length must be a multiple of the KV tile") {
  Batch batch;
  batch.add(1, 1000);
  PlanInput in = input_for(batch, 8, 1, 64);
  in.fixed_chunk_tokens = 96;
  CHECK_THAT(plan_error(in), Contains("fixed_chunk_tokens") && Contains("96"));
  in.fixed_chunk_tokens = -64;
  CHECK_THAT(plan_error(in), Contains("fixed_chunk_tokens"));
}

// ---- the planner's arithmetic and placement helpers ---------------------------------------

TEST_CASE("a Divisor's quotients equal the hardware division's for any 32-bit numbers") {
  const uint32_t seed = test_seed();
  INFO("seed " << seed << " (MLAJIT_TEST_SEED replays it)");
  std::mt19937 rng(seed);
  std::vector<uint32_t> divisors{1, 2, 3, 7, 64, 96, 4095, 65537, 0x7fffffffu, 0x80000000u,
                                 0xfffffffeu, 0xffffffffu};
  for (int i = 0; i < 200; ++i) divisors.push_back(std::max<uint32_t>(1, rng() >> (rng() % 32)));
  for (uint32_t d : divisors) {
    std::vector<uint32_t> numerators{0, 1, d - 1, d, d + 1, 2 * d - 1, 2 * d, 0xffffffffu};
    for (int i = 0; i < 200; ++i) numerators.push_back(rng() >> (rng() % 32));
    const Divisor divisor(d), from_table = divisor_for(d);
    for (uint32_t n : numerators) {
      INFO(n << " / " << d);
      REQUIRE(divisor.quotient(n) == n / d);
      REQUIRE(from_table.quotient(n) == n / d);
      if (uint64_t{n} + d - 1 <= 0xffffffffu) REQUIRE(divisor.ceil_quotient(n) == (uint64_t{n} + d - 1) / d);
    }
  }
}

namespace {

// Longest-first as the planner first wrote it: a comparison sort and a binary heap.
Assignment reference_longest_first(const std::vector<int64_t>& costs, int bins) {
  std::vector<std::pair<int64_t, int>> order;
  for (size_t job = 0; job < costs.size(); ++job) order.push_back({-costs[job], static_cast<int>(job)});
  std::sort(order.begin(), order.end());
  Assignment result{std::vector<int>(costs.size()), std::vector<int64_t>(bins, 0)};
  using Entry = std::pair<int64_t, int>;  // (load, bin): a min-heap, ties to the lowest bin
  std::vector<Entry> heap;
  for (size_t k = 0; k < order.size(); ++k) {
    const int bin = k < static_cast<size_t>(bins) ? static_cast<int>(k) : heap.front().second;
    if (k >= static_cast<size_t>(bins)) std::pop_heap(heap.begin(), heap.end(), std::greater<Entry>()), heap.pop_back();
    result.bin_of[order[k].second] = bin;
    result.load[bin] -= order[k].first;
    heap.push_back({result.load[bin], bin});
    std::push_heap(heap.begin(), heap.end(), std::greater<Entry>());
  }
  return result;
}

}  // namespace

TEST_CASE("longest-first placement and its busiest bin match a plain sort and heap") {
  const uint32_t seed = test_seed();
  INFO("seed " << seed << " (MLAJIT_TEST_SEED replays it)");
  std::mt19937 rng(seed);
  auto draw = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  LongestFirstScratch scratch;  // reused across trials, as the planner reuses it
  for (int trial = 0; trial < 600; ++trial) {
    const int bins = static_cast<int>(draw(1, 300));
    const size_t jobs = static_cast<size_t>(draw(0, 3)) * bins / 2 + draw(0, 40);
    // Few distinct costs (merge pieces, equal tiles), KV chunk costs, or widely spread ones.
    const int64_t spread = std::vector<int64_t>{0, 40, 9000, int64_t{1} << 40}[trial % 4];
    const int64_t base = draw(0, 5000);
    std::vector<int64_t> costs(jobs);
    for (int64_t& cost : costs) cost = base + draw(0, spread);
    // Some jobs cost nothing: the least-loaded bin that takes one stays the least loaded.
    if (trial % 5 == 0) {
      for (int64_t& cost : costs) cost = draw(0, 3) == 0 ? 0 : cost;
    }
    INFO("trial " << trial << ": " << jobs << " jobs on " << bins << " bins, spread " << spread);
    const Assignment expected = reference_longest_first(costs, bins);
    Assignment got;
    assign_longest_first(costs, bins, got, scratch);
    REQUIRE(got.bin_of == expected.bin_of);
    REQUIRE(got.load == expected.load);
    const int64_t busiest = *std::max_element(expected.load.begin(), expected.load.end());
    for (int64_t room : {busiest, busiest - 1, busiest + draw(0, 100), std::numeric_limits<int64_t>::max() - 1}) {
      std::vector<int64_t> shuffled = costs;
      std::shuffle(shuffled.begin(), shuffled.end(), rng);
      CHECK(busiest_longest_first(shuffled, bins, room, scratch) == (busiest <= room ? busiest : kBeyond));
    }
  }
}
