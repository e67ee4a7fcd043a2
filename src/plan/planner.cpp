#include "plan/planner.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <limits>
#include <queue>
#include <utility>

#include <fmt/format.h>

#include "common/logging.h"
#include "mlajit/error.h"

namespace mlajit::plan {
namespace {

constexpr int kMaxHeads = 128;
constexpr int kMaxGridY = 65535;  // CUDA's limit on gridDim.y
constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();
// Query tiles one plan may hold. 2^24 tiles of 64 rows are 2^30 packed rows: q and out alone
// would take over 1 TiB at the smallest head dim, so no batch a device can hold comes near it,
// and a batch claiming more is refused before the planner allocates per-tile memory for it.
constexpr int64_t kMaxTiles = int64_t{1} << 24;

// Chunk lengths tried, as fractions of the mean per-pair share of KV tokens. 1 is about the
// reference's choice; smaller chunks give longest-first smaller pieces to even out the pairs,
// at the price of a fixed cost per item and a merge per split tile; somewhat longer ones
// split fewer tiles. With about one item per pair the busiest pair's load moves in steps of
// whole items, so lengths near the share are tried finely: on the ragged batch of
// perf/baseline.md 17/16 gives busiest/mean 1.05 where 1 gives 1.07 and 3/4 gives 1.19.
// The planner models each and keeps the cheapest (see choose_chunking).
struct Fraction {
  int num, den;
};
constexpr Fraction kShareFractions[] = {{3, 2},  {5, 4}, {9, 8}, {17, 16}, {1, 1},
                                        {15, 16}, {7, 8}, {3, 4}, {1, 2},   {1, 3},
                                        {1, 4},  {1, 6}, {1, 8}, {1, 12},  {1, 16}};

template <typename... Args>
[[noreturn]] void invalid(fmt::format_string<Args...> format, Args&&... args) {
  throw Error(ErrorCode::kInvalidArgument,
              "make_plan: " + fmt::format(format, std::forward<Args>(args)...));
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
int64_t round_up(int64_t a, int64_t b) { return ceil_div(a, b) * b; }

// ---- validation -------------------------------------------------------------------------

void validate_scalars(const PlanInput& in) {
  if (in.batch_size < 0) invalid("batch_size must be >= 0, got {}", in.batch_size);
  if (in.num_heads < 1 || in.num_heads > kMaxHeads)
    invalid("num_heads must be in 1..{}, got {}", kMaxHeads, in.num_heads);
  if (in.page_size < 1) invalid("page_size must be >= 1, got {}", in.page_size);
  if (in.num_ctas < 1) invalid("num_ctas must be >= 1, got {}", in.num_ctas);
  if (in.cta_tile_q != 64)
    invalid("cta_tile_q must be 64 (the kernel's query tile), got {}", in.cta_tile_q);
  if (in.kv_tile != 16 && in.kv_tile != 32 && in.kv_tile != 64)
    invalid("kv_tile must be 16, 32 or 64, got {}", in.kv_tile);
  if (in.cluster_size < 0 || in.cluster_size > 2)
    invalid("cluster_size must be 0 (choose), 1 or 2, got {}", in.cluster_size);
  if (in.cluster_size == 2 && in.num_ctas < 2)
    invalid("cluster_size 2 needs num_ctas >= 2, got num_ctas = {}", in.num_ctas);
}

void validate_pointers(const PlanInput& in) {
  if (in.batch_size == 0) return;  // nothing is read
  if (!in.qo_indptr)
    invalid("qo_indptr is null; it must point to batch_size + 1 = {} entries", in.batch_size + 1);
  if (!in.kv_indptr)
    invalid("kv_indptr is null; it must point to batch_size + 1 = {} entries", in.batch_size + 1);
  if (!in.kv_len) invalid("kv_len is null; it must point to batch_size = {} entries", in.batch_size);
}

void validate_indptr(const int32_t* indptr, const char* name, int batch_size) {
  if (!indptr) return;
  if (indptr[0] < 0) invalid("{}[0] must be >= 0, got {}", name, indptr[0]);
  for (int b = 0; b < batch_size; ++b) {
    if (indptr[b] > indptr[b + 1])
      invalid("{} must be non-decreasing: {}[{}]={} > {}[{}]={}", name, name, b, indptr[b], name,
              b + 1, indptr[b + 1]);
  }
}

void validate_requests(const PlanInput& in) {
  int64_t tiles = 0;  // at the smallest tile (one CTA's rows): an upper bound
  for (int b = 0; b < in.batch_size; ++b) {
    const int64_t pages = int64_t{in.kv_indptr[b + 1]} - in.kv_indptr[b];
    const int64_t capacity = pages * in.page_size;
    if (in.kv_len[b] < 0) invalid("kv_len[{}] must be >= 0, got {}", b, in.kv_len[b]);
    if (in.kv_len[b] > capacity)
      invalid("kv_len[{}]={} exceeds the request's {} pages x page_size {} = {} tokens", b,
              in.kv_len[b], pages, in.page_size, capacity);
    const int64_t packed = (int64_t{in.qo_indptr[b + 1]} - in.qo_indptr[b]) * in.num_heads;
    if (packed > kInt32Max)
      invalid("request {} has q_len x num_heads = {} packed rows; at most {} are supported", b,
              packed, kInt32Max);
    tiles += ceil_div(packed, in.cta_tile_q);
  }
  if (tiles > kMaxTiles)
    throw Error(ErrorCode::kUnsupported,
                fmt::format("make_plan: the batch is too large: qo_indptr[{}]={} query tokens x "
                            "num_heads {} make {} query tiles; at most {} are supported per plan",
                            in.batch_size, in.qo_indptr[in.batch_size], in.num_heads, tiles,
                            kMaxTiles));
}

void validate(const PlanInput& in) {
  validate_scalars(in);
  validate_pointers(in);
  if (in.qo_indptr && in.qo_indptr[0] != 0)
    invalid("qo_indptr[0] must be 0, got {}", in.qo_indptr[0]);
  validate_indptr(in.qo_indptr, "qo_indptr", in.batch_size);
  validate_indptr(in.kv_indptr, "kv_indptr", in.batch_size);
  if (in.batch_size > 0) validate_requests(in);
}

// ---- tiles and chunks -------------------------------------------------------------------

int choose_cluster_size(const PlanInput& in) {
  if (in.cluster_size != 0) return in.cluster_size;
  if (in.batch_size == 0 || in.num_ctas < 2) return 1;
  // Mean packed query length > one CTA tile: two CTAs share a tile, so each reads the KV once
  // for twice the rows.
  const int64_t packed_total = int64_t{in.qo_indptr[in.batch_size]} * in.num_heads;
  return packed_total > int64_t{in.cta_tile_q} * in.batch_size ? 2 : 1;
}

struct Tile {
  int request;
  int32_t packed_start;
  int32_t rows;    // valid packed rows
  int32_t eff_kv;  // KV tokens any of its rows can see
};

// Under the bottom-right causal mask query i sees tokens t <= kv_len - q_len + i, so the tile
// ending at packed row `end` (exclusive) sees up to its last query ceil(end / H) - 1.
int32_t effective_kv(const PlanInput& in, int b, int64_t packed_end) {
  const int64_t q_len = int64_t{in.qo_indptr[b + 1]} - in.qo_indptr[b];
  const int64_t kv_len = in.kv_len[b];
  if (!in.causal) return static_cast<int32_t>(kv_len);
  const int64_t visible = kv_len - q_len + ceil_div(packed_end, in.num_heads);
  return static_cast<int32_t>(std::clamp<int64_t>(visible, 0, kv_len));
}

std::vector<Tile> build_tiles(const PlanInput& in, int tile_rows) {
  std::vector<Tile> tiles;
  for (int b = 0; b < in.batch_size; ++b) {
    const int64_t packed = (int64_t{in.qo_indptr[b + 1]} - in.qo_indptr[b]) * in.num_heads;
    for (int64_t start = 0; start < packed; start += tile_rows) {
      const int64_t end = std::min<int64_t>(start + tile_rows, packed);
      tiles.push_back({b, static_cast<int32_t>(start), static_cast<int32_t>(end - start),
                       effective_kv(in, b, end)});
    }
  }
  return tiles;
}

struct Chunk {
  int tile;
  int index;  // within its tile
  int32_t kv_start, kv_end;
};

// How a tile's KV is cut into n = ceil(length / max_len) chunks. Both give the same number of
// items and the same merge work; they differ in the sizes longest-first gets to work with:
// equal pieces fill n pairs evenly when a few long tiles must cover the grid, while full
// pieces plus a remainder leave small remainders that fill the gaps between the pairs when
// many ragged tiles share it. The planner models both and keeps the better.
enum class CutStyle { kEqual, kRemainder };

// Chunk boundaries of [0, length). Inner boundaries lie on kv_tile multiples (max_len is one).
// Empty input gives one empty chunk, so the kernel still writes out = 0 / lse = -inf for rows
// that see nothing.
std::vector<int32_t> chunk_bounds(int32_t length, int64_t max_len, int kv_tile, CutStyle style) {
  std::vector<int32_t> bounds{0};
  const int64_t n = std::max<int64_t>(1, ceil_div(length, max_len));
  for (int64_t c = 1; c < n; ++c) {
    const int64_t bound = style == CutStyle::kRemainder
                              ? c * max_len
                              : std::min<int64_t>(length, ceil_div(c * length, n * kv_tile) * kv_tile);
    if (bound > bounds.back()) bounds.push_back(static_cast<int32_t>(bound));
  }
  if (length > bounds.back() || bounds.size() == 1) bounds.push_back(length);
  return bounds;
}

struct Chunking {
  int64_t max_len = 0;
  std::vector<Chunk> chunks;          // in (tile, index) order
  std::vector<int> chunks_per_tile;
};

Chunking cut_tiles(const std::vector<Tile>& tiles, int64_t max_len, int kv_tile, CutStyle style) {
  Chunking result;
  result.max_len = max_len;
  result.chunks_per_tile.resize(tiles.size());
  for (size_t t = 0; t < tiles.size(); ++t) {
    const std::vector<int32_t> bounds = chunk_bounds(tiles[t].eff_kv, max_len, kv_tile, style);
    result.chunks_per_tile[t] = static_cast<int>(bounds.size()) - 1;
    for (size_t c = 0; c + 1 < bounds.size(); ++c)
      result.chunks.push_back({static_cast<int>(t), static_cast<int>(c), bounds[c], bounds[c + 1]});
  }
  return result;
}

// ---- longest work first -----------------------------------------------------------------

struct Assignment {
  std::vector<int> bin_of;    // per job
  std::vector<int64_t> load;  // per bin
};

// LPT: jobs by cost descending (ties by index, so the result is deterministic), each to the
// least-loaded bin (ties to the lowest bin). Greedy-to-least-loaded keeps max - min load
// within one job's cost; taking the big jobs first leaves the small ones to fill the gaps.
Assignment assign_longest_first(const std::vector<int64_t>& costs, int bins) {
  std::vector<std::pair<int64_t, int>> order(costs.size());  // (-cost, job): unique keys
  for (size_t job = 0; job < costs.size(); ++job) order[job] = {-costs[job], static_cast<int>(job)};
  std::sort(order.begin(), order.end());
  using Entry = std::pair<int64_t, int>;  // (load, bin)
  std::vector<Entry> heap_storage;
  heap_storage.reserve(bins);
  for (int bin = 0; bin < bins; ++bin) heap_storage.push_back({0, bin});
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> heap(
      std::greater<Entry>(), std::move(heap_storage));
  Assignment result{std::vector<int>(costs.size()), std::vector<int64_t>(bins, 0)};
  for (const auto& [negative_cost, job] : order) {
    const Entry least = heap.top();
    heap.pop();
    const int64_t load = least.first - negative_cost;
    result.bin_of[job] = least.second;
    result.load[least.second] = load;
    heap.push({load, least.second});
  }
  return result;
}

// Groups jobs by bin, each bin's jobs in job order; returns the CSR offsets.
std::vector<int32_t> bucket_by_bin(const std::vector<int>& bin_of, int bins,
                                   std::vector<int>& jobs_out) {
  std::vector<int32_t> indptr(bins + 1, 0);
  for (int bin : bin_of) ++indptr[bin + 1];
  for (int bin = 0; bin < bins; ++bin) indptr[bin + 1] += indptr[bin];
  std::vector<int32_t> next(indptr.begin(), indptr.end() - 1);
  jobs_out.assign(bin_of.size(), 0);
  for (size_t job = 0; job < bin_of.size(); ++job) jobs_out[next[bin_of[job]]++] = static_cast<int>(job);
  return indptr;
}

// ---- choosing the chunk length ----------------------------------------------------------

struct Geometry {
  int cluster_size, grid_y, tile_rows, kv_tile;
};

struct Candidate {
  Chunking chunking;
  Assignment assignment;
  int64_t score = 0;
};

std::vector<int64_t> chunk_costs(const Chunking& chunking, const Geometry& g) {
  std::vector<int64_t> costs;
  costs.reserve(chunking.chunks.size());
  for (const Chunk& chunk : chunking.chunks) {
    MlaWorkItem item{};
    item.kv_start = chunk.kv_start;
    item.kv_end = chunk.kv_end;
    costs.push_back(work_item_cost(item, g.tile_rows));
  }
  return costs;
}

// Modelled merge work: every valid row of a split tile reads one partial row per chunk (a
// partial row of 512 values costs about what one KV token of 576 values does), spread over
// all CTAs of the grid.
int64_t merge_cost_per_cta(const std::vector<Tile>& tiles, const Chunking& chunking,
                           const Geometry& g) {
  // Merge pieces (kMergePieceRows rows of one tile) are not split between CTAs, so the merge
  // takes at least as long as the largest piece, however many CTAs share the rest. Measured on
  // the H200, one 128-head request: at full weight this term picked the faster chunking at
  // L=4096 (28.7 vs 32.2 us) but the slower one at L=16384 (49.6 vs 45.0); at half weight it
  // picks, at L=1024, 4096 and 16384, the chunking that measured faster (128 and 256 tokens).
  int64_t units = 0, largest_piece = 0;
  for (size_t t = 0; t < tiles.size(); ++t) {
    const int64_t chunks = chunking.chunks_per_tile[t];
    if (chunks < 2) continue;
    units += int64_t{tiles[t].rows} * chunks;
    largest_piece = std::max(largest_piece, std::min<int64_t>(tiles[t].rows, kMergePieceRows) * chunks);
  }
  return std::max(ceil_div(units, int64_t{g.cluster_size} * g.grid_y), largest_piece / 2);
}

Candidate evaluate(const std::vector<Tile>& tiles, int64_t max_len, CutStyle style,
                   const Geometry& g) {
  Candidate candidate;
  candidate.chunking = cut_tiles(tiles, max_len, g.kv_tile, style);
  candidate.assignment = assign_longest_first(chunk_costs(candidate.chunking, g), g.grid_y);
  const int64_t busiest =
      *std::max_element(candidate.assignment.load.begin(), candidate.assignment.load.end());
  candidate.score = busiest + merge_cost_per_cta(tiles, candidate.chunking, g);
  return candidate;
}

// Chunk lengths to try, longest first. The shortest allowed is kMinChunkTokens: below that
// the fixed cost of an item and its merge outweigh the KV work it moves between pairs.
std::vector<int64_t> chunk_candidates(const std::vector<Tile>& tiles, const Geometry& g) {
  int64_t total = 0, longest = 0;
  for (const Tile& tile : tiles) {
    total += tile.eff_kv;
    longest = std::max<int64_t>(longest, tile.eff_kv);
  }
  const int64_t shortest = round_up(std::max<int64_t>(g.kv_tile, kMinChunkTokens), g.kv_tile);
  const int64_t no_split = std::max(round_up(longest, g.kv_tile), shortest);
  std::vector<int64_t> lengths{no_split};
  const int64_t share = ceil_div(total, g.grid_y);
  for (Fraction f : kShareFractions) {
    const int64_t length = std::max(round_up(ceil_div(share * f.num, f.den), g.kv_tile), shortest);
    if (length < no_split) lengths.push_back(length);
  }
  std::sort(lengths.begin(), lengths.end(), std::greater<int64_t>());
  lengths.erase(std::unique(lengths.begin(), lengths.end()), lengths.end());
  return lengths;
}

// A floor under the score of any cut with chunks of at most max_len, from counts alone: no
// pair can be below the mean load, nor below the largest item (each tile's largest chunk
// holds at least its mean chunk length). Lets choose_chunking skip hopeless lengths.
int64_t score_floor(const std::vector<Tile>& tiles, int64_t max_len, const Geometry& g) {
  const int64_t per_item = kItemOverheadTokens;
  int64_t total = 0, largest = 0, merge_units = 0;
  for (const Tile& tile : tiles) {
    const int64_t n = std::max<int64_t>(1, ceil_div(tile.eff_kv, max_len));
    total += tile.eff_kv + n * per_item;
    largest = std::max(largest, ceil_div(tile.eff_kv, n) + per_item);
    if (n >= 2) merge_units += n * tile.rows;
  }
  return std::max(ceil_div(total, g.grid_y), largest) +
         ceil_div(merge_units, int64_t{g.cluster_size} * g.grid_y);
}

bool splits_any(const std::vector<Tile>& tiles, int64_t max_len) {
  return std::any_of(tiles.begin(), tiles.end(),
                     [max_len](const Tile& tile) { return tile.eff_kv > max_len; });
}

// Tries each candidate length and cut style and keeps the lowest modelled time (busiest pair
// + merge); on a tie the longer chunks win (fewer items, less partial memory), then equal cuts.
Candidate choose_chunking(const std::vector<Tile>& tiles, const Geometry& g) {
  Candidate best;
  bool have_best = false;
  for (int64_t length : chunk_candidates(tiles, g)) {
    if (have_best && score_floor(tiles, length, g) >= best.score) continue;
    const bool split = splits_any(tiles, length);  // without splits both cuts are the same
    for (CutStyle style : {CutStyle::kEqual, CutStyle::kRemainder}) {
      if (!split && style == CutStyle::kRemainder) continue;
      Candidate candidate = evaluate(tiles, length, style, g);
      if (!have_best || candidate.score < best.score) {
        best = std::move(candidate);
        have_best = true;
      }
    }
  }
  return best;
}

// ---- assembling the plan ----------------------------------------------------------------

MlaWorkItem make_item(const PlanInput& in, const Tile& tile, const Chunk& chunk,
                      int32_t partial_row) {
  const int b = tile.request;
  MlaWorkItem item{};
  item.q_token_base = in.qo_indptr[b];
  item.q_len = in.qo_indptr[b + 1] - in.qo_indptr[b];
  item.kv_page_base = in.kv_indptr[b];
  item.kv_len = in.kv_len[b];
  item.packed_q_start = tile.packed_start;
  item.kv_start = chunk.kv_start;
  item.kv_end = chunk.kv_end;
  item.partial_row = partial_row;
  return item;
}

// First partial row of each split tile (-1 for unsplit ones), allocated in tile order.
std::vector<int64_t> allocate_partial_rows(const Chunking& chunking, int tile_rows,
                                           int64_t& total_rows) {
  std::vector<int64_t> base(chunking.chunks_per_tile.size(), -1);
  total_rows = 0;
  for (size_t t = 0; t < base.size(); ++t) {
    if (chunking.chunks_per_tile[t] < 2) continue;
    base[t] = total_rows;
    total_rows += int64_t{chunking.chunks_per_tile[t]} * tile_rows;
  }
  if (total_rows > kInt32Max)
    throw Error(ErrorCode::kUnsupported,
                fmt::format("make_plan: the plan needs {} partial rows; at most {} are supported "
                            "(use fewer CTAs or a smaller batch)", total_rows, kInt32Max));
  return base;
}

void fill_work(const PlanInput& in, const std::vector<Tile>& tiles, const Candidate& chosen,
               const std::vector<int64_t>& partial_base, const Geometry& g, Plan& plan) {
  const Chunking& chunking = chosen.chunking;
  if (chunking.chunks.size() > static_cast<size_t>(kInt32Max))
    throw Error(ErrorCode::kUnsupported, fmt::format("make_plan: {} work items exceed int32",
                                                     chunking.chunks.size()));
  std::vector<int> order;
  plan.work_indptr = bucket_by_bin(chosen.assignment.bin_of, g.grid_y, order);
  plan.work_items.reserve(order.size());
  for (int c : order) {
    const Chunk& chunk = chunking.chunks[c];
    const int64_t base = partial_base[chunk.tile];
    const int32_t row = base < 0 ? -1 : static_cast<int32_t>(base + int64_t{chunk.index} * g.tile_rows);
    plan.work_items.push_back(make_item(in, tiles[chunk.tile], chunk, row));
  }
  plan.cta_cost = chosen.assignment.load;
}

// Each split tile's valid rows are cut into kMergePieceRows pieces; the pieces go to the
// flat CTAs longest-first by rows x chunks, each CTA's records in tile order.
void fill_merge(const PlanInput& in, const std::vector<Tile>& tiles, const Chunking& chunking,
                const std::vector<int64_t>& partial_base, const Geometry& g, Plan& plan) {
  std::vector<MlaMergeRecord> pieces;
  std::vector<int64_t> costs;
  for (size_t t = 0; t < tiles.size(); ++t) {
    const int chunks = chunking.chunks_per_tile[t];
    if (chunks < 2) continue;
    for (int32_t offset = 0; offset < tiles[t].rows; offset += kMergePieceRows) {
      MlaMergeRecord record{};
      record.q_token_base = in.qo_indptr[tiles[t].request];
      record.packed_q_start = tiles[t].packed_start + offset;
      record.num_rows = std::min(kMergePieceRows, tiles[t].rows - offset);
      record.partial_row_base = static_cast<int32_t>(partial_base[t] + offset);
      record.num_chunks = chunks;
      record.partial_stride = g.tile_rows;
      pieces.push_back(record);
      costs.push_back(int64_t{record.num_rows} * chunks);
    }
  }
  const int ctas = g.cluster_size * g.grid_y;
  const Assignment assignment = assign_longest_first(costs, ctas);
  std::vector<int> order;
  plan.merge_indptr = bucket_by_bin(assignment.bin_of, ctas, order);
  plan.merge_records.reserve(order.size());
  for (int p : order) plan.merge_records.push_back(pieces[p]);
}

void log_plan(const PlanInput& in, const Plan& plan) {
  static const auto log = logger("mlajit.plan");
  if (!log->should_log(spdlog::level::debug)) return;
  const int64_t busiest =
      plan.cta_cost.empty() ? 0 : *std::max_element(plan.cta_cost.begin(), plan.cta_cost.end());
  int64_t total = 0;
  for (int64_t cost : plan.cta_cost) total += cost;
  log->debug("plan: batch {} heads {} causal {} -> cluster {} x {} pairs, chunk {} tokens, "
             "{} items, {} merge records, {} partial rows, busiest pair {} (mean {:.1f})",
             in.batch_size, in.num_heads, in.causal, plan.cluster_size, plan.grid_y,
             plan.kv_chunk, plan.work_items.size(), plan.merge_records.size(), plan.partial_rows,
             busiest, plan.grid_y ? double(total) / plan.grid_y : 0.0);
}

}  // namespace

// An item costs its KV tokens plus a fixed overhead for loading the tile's Q, filling the
// pipeline and writing its output (or partial) rows. Calibrated on the H200: a KV token of a
// 128-row tile costs ~0.07 us per CTA pair, the fixed part ~6 us (Q and O are ~70 KB per
// CTA each). The reference's 2 x tile_rows (256 tokens at 128 heads) made small batches
// refuse to split: 1.7x slower at B=1.
int64_t work_item_cost(const MlaWorkItem& item, int /*tile_rows*/) {
  return int64_t{item.kv_end} - item.kv_start + kItemOverheadTokens;
}

Plan make_plan(const PlanInput& input) {
  validate(input);
  Plan plan;
  plan.cluster_size = choose_cluster_size(input);
  plan.grid_y = input.num_ctas / plan.cluster_size;
  if (plan.grid_y > kMaxGridY)
    invalid("num_ctas / cluster_size = {} / {} = {} CTA pairs exceeds the grid's y limit {}",
            input.num_ctas, plan.cluster_size, plan.grid_y, kMaxGridY);
  plan.tile_rows = input.cta_tile_q * plan.cluster_size;
  const Geometry g{plan.cluster_size, plan.grid_y, plan.tile_rows, input.kv_tile};

  const std::vector<Tile> tiles = build_tiles(input, plan.tile_rows);
  const Candidate chosen = choose_chunking(tiles, g);
  plan.kv_chunk = chosen.chunking.max_len;
  const std::vector<int64_t> partial_base =
      allocate_partial_rows(chosen.chunking, plan.tile_rows, plan.partial_rows);
  fill_work(input, tiles, chosen, partial_base, g, plan);
  fill_merge(input, tiles, chosen.chunking, partial_base, g, plan);
  log_plan(input, plan);
  return plan;
}

}  // namespace mlajit::plan
