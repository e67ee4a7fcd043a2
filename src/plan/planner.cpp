#include "plan/planner.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <limits>
#include <utility>

#include <fmt/format.h>

#include "common/logging.h"
#include "mlajit/error.h"
#include "plan/divisor.h"
#include "plan/longest_first.h"

namespace mlajit::plan {
namespace {

constexpr int kMaxHeads = 128;
constexpr int kCtaTileQ = 64;  // the kernel's query tile: the only cta_tile_q accepted
constexpr int kMaxGridY = 65535;  // CUDA's limit on gridDim.y
constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();
// Query tiles one plan may hold. 2^24 tiles of 64 rows are 2^30 packed rows: q and out alone
// would take over 1 TiB at the smallest head dim, so no batch a device can hold comes near it,
// and a batch claiming more is refused before the planner allocates per-tile memory for it.
constexpr int64_t kMaxTiles = int64_t{1} << 24;

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
  if (in.cta_tile_q != kCtaTileQ)
    invalid("cta_tile_q must be {} (the kernel's query tile), got {}", kCtaTileQ, in.cta_tile_q);
  if (in.kv_tile != 16 && in.kv_tile != 32 && in.kv_tile != 64)
    invalid("kv_tile must be 16, 32 or 64, got {}", in.kv_tile);
  if (in.cluster_size < 0 || in.cluster_size > 2)
    invalid("cluster_size must be 0 (choose), 1 or 2, got {}", in.cluster_size);
  if (in.cluster_size == 2 && in.num_ctas < 2)
    invalid("cluster_size 2 needs num_ctas >= 2, got num_ctas = {}", in.num_ctas);
  if (in.fixed_chunk_tokens < 0 || in.fixed_chunk_tokens % in.kv_tile != 0)
    invalid("fixed_chunk_tokens must be 0 or a positive multiple of kv_tile {}, got {}",
            in.kv_tile, in.fixed_chunk_tokens);
  if (in.item_overhead_tokens < 0 || in.item_overhead_tokens > kMaxItemOverheadTokens)
    invalid("item_overhead_tokens must be 0 to {}, got {}", kMaxItemOverheadTokens,
            in.item_overhead_tokens);
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
    tiles += ceil_div(packed, kCtaTileQ);  // a constant divisor: a shift, once a request
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
// ending at packed row `end` (exclusive) sees up to its last query ceil(end / H) - 1. That end
// is rounded up to a whole kernel tile (within kv_len; the kernel masks the rest itself):
// the kernel pays for the whole last tile anyway, and the tiles of one request then cost the
// same, so longest-first places them side by side and they read its KV from L2 together.
// Ordered by their exact ends (4095 before 4096 at q_len 2), they ran in different waves and
// read the KV twice from DRAM: 4-5% slower at 128 heads (H100, 2026-12-07).
int32_t effective_kv(const PlanInput& in, int b, int64_t packed_end) {
  const int64_t q_len = int64_t{in.qo_indptr[b + 1]} - in.qo_indptr[b];
  const int64_t kv_len = in.kv_len[b];
  if (!in.causal) return static_cast<int32_t>(kv_len);
  const int64_t visible = kv_len - q_len + ceil_div(packed_end, in.num_heads);
  return static_cast<int32_t>(std::clamp<int64_t>(round_up(visible, in.kv_tile), 0, kv_len));
}

void build_tiles(const PlanInput& in, int tile_rows, std::vector<Tile>& tiles) {
  tiles.clear();
  if (in.batch_size == 0) return;  // the arrays may be null
  // At most one partial tile a request beyond the full ones.
  tiles.reserve(in.batch_size + int64_t{in.qo_indptr[in.batch_size]} * in.num_heads / tile_rows);
  for (int b = 0; b < in.batch_size; ++b) {
    const int64_t packed = (int64_t{in.qo_indptr[b + 1]} - in.qo_indptr[b]) * in.num_heads;
    for (int64_t start = 0; start < packed; start += tile_rows) {
      const int64_t end = std::min<int64_t>(start + tile_rows, packed);
      tiles.push_back({b, static_cast<int32_t>(start), static_cast<int32_t>(end - start),
                       effective_kv(in, b, end)});
    }
  }
}

struct Chunk {
  int tile;
  int index;  // within its tile
  int32_t kv_start, kv_end;
};

struct Chunking {
  int64_t max_len = 0;
  std::vector<Chunk> chunks;          // in (tile, index) order
  std::vector<int> chunks_per_tile;
};

// How a tile's KV is cut into n = ceil(length / max_len) chunks. Both give the same number of
// items and the same merge work; they differ in the sizes longest-first gets to work with:
// equal pieces fill n pairs evenly when a few long tiles must cover the grid, while full
// pieces plus a remainder leave small remainders that fill the gaps between the pairs when
// many ragged tiles share it.
enum class CutStyle { kEqual, kRemainder };

// How tiles are cut: the chunk length limit (a kv_tile multiple) and style, with the divisor
// every tile's chunk count needs made once.
struct CutRule {
  CutRule(int64_t max_len, int kv_tile, CutStyle style)
      : max_len(max_len), kv_tile(kv_tile), style(style),
        // Only tiles longer than max_len divide (they are < 2^31), so a longer max_len is
        // never divided by.
        by_max_len(static_cast<uint32_t>(std::min<int64_t>(max_len, kInt32Max))) {}
  int64_t max_len;
  int kv_tile;
  CutStyle style;
  Divisor by_max_len;
};

// Calls on_chunk(start, end) for the chunks of [0, length). Inner boundaries lie on kv_tile
// multiples (max_len is one). Empty input gives one empty chunk, so the kernel still writes
// out = 0 / lse = -inf for rows that see nothing. Returns the number of chunks.
template <typename OnChunk>
int64_t cut(int32_t length, const CutRule& rule, OnChunk&& on_chunk) {
  if (length <= rule.max_len) {  // the common case when many short tiles share the grid
    on_chunk(0, length);
    return 1;
  }
  const int64_t n = rule.by_max_len.ceil_quotient(static_cast<uint32_t>(length));
  // Equal pieces end at ceil(c * length / (n * kv_tile)) * kv_tile: the quotient and remainder
  // of c * length are stepped from c - 1's, one division a tile rather than one a chunk, and
  // kv_tile is a power of two: floor(length / (n * kv_tile)) = floor(floor(length / kv_tile) / n).
  const int64_t step = n * rule.kv_tile;
  int64_t step_quotient = 0, step_remainder = 0;
  if (rule.style == CutStyle::kEqual) {
    step_quotient = divisor_for(static_cast<uint32_t>(n)).quotient(static_cast<uint32_t>(length) / rule.kv_tile);
    step_remainder = length - step_quotient * step;
  }
  int64_t quotient = 0, remainder = 0;
  int64_t start = 0, count = 0;
  for (int64_t c = 1; c <= n; ++c) {
    quotient += step_quotient, remainder += step_remainder;
    if (remainder >= step) remainder -= step, ++quotient;
    const int64_t bound =
        c == n ? length
        : rule.style == CutStyle::kRemainder
            ? c * rule.max_len
            : std::min<int64_t>(length, (quotient + (remainder > 0)) * rule.kv_tile);
    if (bound > start || (c == n && count == 0)) {
      on_chunk(static_cast<int32_t>(start), static_cast<int32_t>(bound));
      start = bound;
      ++count;
    }
  }
  return count;
}

// ---- longest work first -----------------------------------------------------------------

// Groups jobs by bin, each bin's jobs in job order, into jobs_out; returns the CSR offsets.
// Bins that take their jobs in job order already (a pour fills the pairs one after another)
// leave the jobs in place.
std::vector<int32_t> bucket_by_bin(const std::vector<int>& bin_of, int bins,
                                   std::vector<int>& jobs_out) {
  std::vector<int32_t> indptr(bins + 1, 0);
  bool in_order = true;
  int previous = 0;
  for (int bin : bin_of) {
    ++indptr[bin + 1];
    in_order &= bin >= previous;
    previous = bin;
  }
  for (int bin = 0; bin < bins; ++bin) indptr[bin + 1] += indptr[bin];
  jobs_out.resize(bin_of.size());
  if (in_order) {
    for (size_t job = 0; job < bin_of.size(); ++job) jobs_out[job] = static_cast<int>(job);
    return indptr;
  }
  // indptr[bin] is the next free slot of bin - 1's jobs while they are placed, and then its
  // end, which is bin's start: shifted back by one, the offsets come out right.
  for (size_t job = 0; job < bin_of.size(); ++job) jobs_out[indptr[bin_of[job]]++] = static_cast<int>(job);
  for (int bin = bins; bin > 0; --bin) indptr[bin] = indptr[bin - 1];
  indptr[0] = 0;
  return indptr;
}

// ---- the cost model ---------------------------------------------------------------------

struct Geometry {
  int cluster_size, grid_y, tile_rows, kv_tile;
  int64_t item_overhead;  // PlanInput::item_overhead_tokens
};

// The smallest chunk a tile's KV is cut into: below it the fixed cost of an item and its
// merge outweigh the KV work it moves between pairs.
int64_t shortest_chunk(const Geometry& g) {
  return round_up(std::max<int64_t>(g.kv_tile, kMinChunkTokens), g.kv_tile);
}

// Modelled merge work, added up tile by tile: every valid row of a split tile writes one
// partial row per chunk, which the merge reads back, spread over all CTAs of the grid.
// A partial row weighs kMergeRowTokens KV tokens. By bytes it would be about two (written and
// read, 1 KiB each, against a KV token's 1,152 B); measured, more: on the H200 (2026-12-01, A/B
// of the same build, hopper family) weight 1 planned the baseline's ragged batch with 14,080
// partial rows at 166.4 us where weight 4 plans 8,576 at 155.2-156.2, and 128 heads x 64 x 4
// causal queries at L=4096 split (560 us) where weight 4 keeps whole tiles (530-547); the price
// is B=64 L=16384 at 128 heads, which weight 4 leaves unsplit at 527-529 us against 517.
constexpr int64_t kMergeRowTokens = 4;
struct MergeWork {
  int64_t units = 0, largest_piece = 0;
  bool any = false;

  void add_tile(const Tile& tile, int64_t chunks) {
    if (chunks < 2) return;
    any = true;
    units += int64_t{tile.rows} * chunks;
    largest_piece = std::max(largest_piece, std::min<int64_t>(tile.rows, kMergePieceRows) * chunks);
  }
  // Merge pieces (kMergePieceRows rows of one tile) are not split between CTAs, so the merge
  // takes at least as long as the largest piece, however many CTAs share the rest. Measured on
  // the H200, one 128-head request: at full weight this term picked the faster chunking at
  // L=4096 (28.7 vs 32.2 us) but the slower one at L=16384 (49.6 vs 45.0); at half weight it
  // picks, at L=1024, 4096 and 16384, the chunking that measured faster (128 and 256 tokens).
  // The spread-out part weighs four tokens a row (kMergeRowTokens). A plan with any merge
  // also pays the merge phase itself (the grid barrier, the partial writes' latency), about one
  // item's fixed cost: a split must win more than that.
  int64_t cost(const Geometry& g) const {
    if (!any) return 0;
    return std::max(ceil_div(kMergeRowTokens * units, int64_t{g.cluster_size} * g.grid_y),
                    largest_piece / 2) +
           g.item_overhead;
  }
};

// ---- no split: whole tiles, longest first -----------------------------------------------

struct Candidate {
  Chunking chunking;
  Assignment assignment;
  int64_t score = 0;
};

// The tiles longest first, made once a plan for whole tiles and every cut: a cut of length L
// splits exactly the tiles before the first of length <= L and leaves the rest whole, so a
// cut is scored from its split tiles' chunks merged into the rest, already in order.
struct ByLength {
  std::vector<int64_t> costs;       // whole tile t's cost (KV + an item's fixed cost), by tile
  std::vector<int> order;           // tiles by length descending, ties by index
  std::vector<int64_t> sorted;      // costs in that order
  std::vector<int64_t> sorted_sum;  // [tiles + 1]: sorted_sum[k] = sum of sorted[0, k)
};

// Buffers the scores and placements reuse, so that trying a candidate allocates nothing.
struct Scratch {
  std::vector<Tile> tiles;
  ByLength by_length;
  std::vector<int64_t> costs, chunk_costs, capacities, lengths;
  std::vector<int64_t> partial_base;    // first partial row of each tile
  LongestFirstScratch longest_first;
  std::vector<int> order;               // jobs by bin (work items, then merge records)
  std::vector<MlaMergeRecord> pieces;   // merge records in tile order
  Assignment pieces_assignment;
  Candidate chosen;                     // the plan's chunks and their pairs
};

// This thread's buffers, kept from one plan to the next: a warm make_plan allocates little
// beyond the plan it returns (plan() runs every decode step).
Scratch& thread_scratch() {
  thread_local Scratch scratch;
  return scratch;
}

// The tiles' KV in all and the longest tile's: what the floors, the capacities and the cut
// lengths start from, summed once.
struct TileTotals {
  int64_t tiles = 0, kv = 0, longest = 0;
};

TileTotals tile_totals(const std::vector<Tile>& tiles) {
  TileTotals totals;
  totals.tiles = static_cast<int64_t>(tiles.size());
  for (const Tile& tile : tiles) {
    totals.kv += tile.eff_kv;
    totals.longest = std::max<int64_t>(totals.longest, tile.eff_kv);
  }
  return totals;
}

// The load of the tiles taken whole (each with an item's fixed cost): in all, and the largest.
struct WholeLoad {
  int64_t total = 0, largest = 0;
};

WholeLoad whole_load(const TileTotals& totals, const Geometry& g) {
  if (totals.tiles == 0) return {};
  return {totals.kv + totals.tiles * g.item_overhead, totals.longest + g.item_overhead};
}

// A floor under whole tiles' score: no pair is below the mean load, nor below the largest tile.
int64_t whole_floor(const TileTotals& totals, const Geometry& g) {
  const WholeLoad load = whole_load(totals, g);
  return std::max(ceil_div(load.total, g.grid_y), load.largest);
}

void sort_by_length(const std::vector<Tile>& tiles, const Geometry& g, ByLength& by_length) {
  LongestFirstScratch& longest_first = thread_scratch().longest_first;
  by_length.costs.resize(tiles.size());
  for (size_t t = 0; t < tiles.size(); ++t) by_length.costs[t] = tiles[t].eff_kv + g.item_overhead;
  order_longest_first(by_length.costs, longest_first);
  by_length.order.swap(longest_first.order);
  by_length.sorted.resize(tiles.size());
  by_length.sorted_sum.resize(tiles.size() + 1);
  by_length.sorted_sum[0] = 0;
  for (size_t k = 0; k < tiles.size(); ++k) {
    by_length.sorted[k] = by_length.costs[by_length.order[k]];
    by_length.sorted_sum[k + 1] = by_length.sorted_sum[k] + by_length.sorted[k];
  }
}

void whole_tiles(const std::vector<Tile>& tiles, const Geometry& g, const ByLength& by_length,
                 Candidate& candidate) {
  Chunking& chunking = candidate.chunking;
  chunking.chunks_per_tile.assign(tiles.size(), 1);
  chunking.chunks.resize(tiles.size());
  for (size_t t = 0; t < tiles.size(); ++t) chunking.chunks[t] = {static_cast<int>(t), 0, 0, tiles[t].eff_kv};
  const int64_t longest = tiles.empty() ? 0 : tiles[by_length.order[0]].eff_kv;
  chunking.max_len = std::max(round_up(longest, g.kv_tile), shortest_chunk(g));
  assign_in_order(by_length.costs, by_length.order, g.grid_y, candidate.assignment,
                  thread_scratch().longest_first);
  candidate.score = *std::max_element(candidate.assignment.load.begin(),
                                      candidate.assignment.load.end());
}

// ---- splitting: tiles cut into chunks, longest first ---------------------------------------

// How many tiles a cut at max_len splits: those longer than it, the first of by_length.
size_t split_tiles(const ByLength& by_length, int64_t max_len, const Geometry& g) {
  const int64_t longest_whole = max_len + g.item_overhead;
  return static_cast<size_t>(
      std::partition_point(by_length.sorted.begin(), by_length.sorted.end(),
                           [longest_whole](int64_t cost) { return cost > longest_whole; }) -
      by_length.sorted.begin());
}

// busiest_longest_first over scratch.chunk_costs and the whole tiles from by_length.sorted[split]
// on: what it answers without sorting is answered before the chunks are sorted.
int64_t busiest_of_cut(const ByLength& by_length, size_t split, int bins, int64_t room,
                       Scratch& scratch) {
  std::vector<int64_t>& chunk_costs = scratch.chunk_costs;
  const auto whole_begin = by_length.sorted.begin() + split, whole_end = by_length.sorted.end();
  int64_t largest = whole_begin < whole_end ? *whole_begin : 0;
  size_t over_half = 0;  // jobs above half the room: more than `bins` of them and two share one
  for (const int64_t cost : chunk_costs) {
    largest = std::max(largest, cost);
    over_half += cost > room / 2;
  }
  const size_t jobs = chunk_costs.size() + static_cast<size_t>(whole_end - whole_begin);
  if (jobs == 0) return room >= 0 ? 0 : kBeyond;
  if (largest > room) return kBeyond;
  if (jobs <= static_cast<size_t>(bins)) return largest;  // one job a bin
  over_half += std::partition_point(whole_begin, whole_end,
                                    [room](int64_t cost) { return cost > room / 2; }) - whole_begin;
  if (over_half > static_cast<size_t>(bins)) return kBeyond;
  sort_descending(chunk_costs, scratch.longest_first);
  std::vector<int64_t>& costs = scratch.costs;
  costs.resize(jobs);
  std::merge(chunk_costs.begin(), chunk_costs.end(), whole_begin, whole_end, costs.begin(),
             std::greater<int64_t>());
  return busiest_of_descending(costs, bins, room, scratch.longest_first);
}

// The modelled time of cutting every tile into chunks of at most max_len and placing them
// longest first, or kBeyond when it exceeds `bound`; builds nothing. Only the split tiles
// are cut: their chunks, sorted, merge into the whole tiles' costs, sorted already.
int64_t cut_score(const std::vector<Tile>& tiles, const ByLength& by_length, int64_t max_len,
                  CutStyle style, const Geometry& g, int64_t bound, Scratch& scratch) {
  const CutRule rule(max_len, g.kv_tile, style);
  const size_t split = split_tiles(by_length, max_len, g);
  // Sized up front and stored by index: a push_back a chunk was a call a chunk (not inlined),
  // a tenth of a small plan. A tile of n chunks is longer than (n - 1) * max_len.
  const int64_t split_kv = by_length.sorted_sum[split] - int64_t(split) * g.item_overhead;
  std::vector<int64_t>& chunk_costs = scratch.chunk_costs;
  chunk_costs.resize(static_cast<size_t>(split_kv / max_len) + split);
  size_t count = 0;
  MergeWork merge;
  for (size_t k = 0; k < split; ++k) {
    const Tile& tile = tiles[by_length.order[k]];
    const int64_t chunks = cut(tile.eff_kv, rule, [&](int32_t start, int32_t end) {
      chunk_costs[count++] = int64_t{end} - start + g.item_overhead;
    });
    merge.add_tile(tile, chunks);
  }
  chunk_costs.resize(count);
  const int64_t merge_cost = merge.cost(g);
  if (merge_cost > bound) return kBeyond;
  const int64_t busiest = busiest_of_cut(by_length, split, g.grid_y, bound - merge_cost, scratch);
  return busiest == kBeyond ? kBeyond : busiest + merge_cost;
}

// A floor under cut_score from counts alone: no pair is below the mean load, nor below the
// largest item (each tile's largest chunk holds at least its mean chunk length). The whole
// tiles count from by_length's sums; only the split ones are divided.
int64_t cut_floor(const std::vector<Tile>& tiles, const ByLength& by_length, int64_t max_len,
                  const Geometry& g) {
  const size_t split = split_tiles(by_length, max_len, g);
  int64_t total = by_length.sorted_sum.back() - by_length.sorted_sum[split];
  int64_t largest = split < by_length.sorted.size() ? by_length.sorted[split] : 0;
  MergeWork merge;
  const Divisor by_max_len(static_cast<uint32_t>(std::min<int64_t>(max_len, kInt32Max)));
  for (size_t k = 0; k < split; ++k) {
    const Tile& tile = tiles[by_length.order[k]];
    const int64_t n = by_max_len.ceil_quotient(static_cast<uint32_t>(tile.eff_kv));
    total += tile.eff_kv + n * g.item_overhead;
    // ceil(eff_kv / n) > largest - overhead exactly when eff_kv > (largest - overhead) * n:
    // the division only when the largest grows.
    if (tile.eff_kv > (largest - g.item_overhead) * n)
      largest = ceil_div(tile.eff_kv, n) + g.item_overhead;
    merge.add_tile(tile, n);
  }
  return std::max(ceil_div(total, g.grid_y), largest) + merge.cost(g);
}

void cut_tiles(const std::vector<Tile>& tiles, int64_t max_len, CutStyle style,
               const Geometry& g, Candidate& candidate) {
  Chunking& chunking = candidate.chunking;
  chunking.max_len = max_len;
  chunking.chunks.clear();
  chunking.chunks_per_tile.resize(tiles.size());
  const CutRule rule(max_len, g.kv_tile, style);
  std::vector<int64_t>& costs = thread_scratch().costs;
  costs.clear();
  MergeWork merge;
  for (size_t t = 0; t < tiles.size(); ++t) {
    int index = 0;
    chunking.chunks_per_tile[t] = static_cast<int>(
        cut(tiles[t].eff_kv, rule, [&](int32_t start, int32_t end) {
          chunking.chunks.push_back({static_cast<int>(t), index++, start, end});
          costs.push_back(int64_t{end} - start + g.item_overhead);
        }));
    merge.add_tile(tiles[t], chunking.chunks_per_tile[t]);
  }
  assign_longest_first(costs, g.grid_y, candidate.assignment, thread_scratch().longest_first);
  candidate.score = *std::max_element(candidate.assignment.load.begin(),
                                      candidate.assignment.load.end()) + merge.cost(g);
}

// Chunk lengths to cut at: the mean share of a pair and somewhat above it. With about one item
// per pair the busiest pair's load moves in steps of whole items, so lengths near the share are
// tried finely (on the ragged batch of perf/baseline.md 17/16 of the share gives busiest/mean
// 1.05 where 1 gives 1.07); longer ones cut only the longest tiles, which wins where a few long
// requests stand among many short ones. Shorter chunks are the filled pairs' domain.
const std::vector<int64_t>& cut_lengths(const TileTotals& totals, const Geometry& g) {
  const int64_t longest = totals.longest;
  const int64_t share = ceil_div(totals.kv, g.grid_y);
  std::vector<int64_t>& lengths = thread_scratch().lengths;
  lengths.clear();
  for (int sixteenths : {24, 20, 18, 17, 16}) {
    const int64_t length = std::max(round_up(ceil_div(share * sixteenths, 16), g.kv_tile), shortest_chunk(g));
    if (length < longest && (lengths.empty() || length < lengths.back())) lengths.push_back(length);
  }
  return lengths;
}

// ---- splitting: the pairs filled in order -----------------------------------------------

// Pours the tiles' KV, in tile order, into the pairs one after another, each pair up to
// `capacity` cost units; a tile that does not fit the pair's room is cut at the last kv_tile
// boundary that does and goes on in the next pair. Every pair but the last ends within one KV
// tile and one item's fixed cost of the capacity, where longest-first over equal cuts leaves
// the busiest pair up to a whole chunk above the mean. Calls on_chunk(tile, start, end, pair)
// for each chunk in (tile, index) order; false when the tiles need more than grid_y pairs.
template <typename OnChunk>
bool pour(const std::vector<Tile>& tiles, int64_t capacity, const Geometry& g,
          OnChunk&& on_chunk) {
  const int64_t shortest = shortest_chunk(g);
  int pair = 0;
  int64_t load = 0;
  for (size_t t = 0; t < tiles.size(); ++t) {
    for (int32_t start = 0;;) {
      const int64_t rest = tiles[t].eff_kv - start;
      int64_t length = rest;
      if (rest + g.item_overhead > capacity - load) {
        // Down to a kv_tile multiple (a power of two): a mask, not a division. Below zero it
        // rounds down rather than toward zero, and either way the piece is too short.
        length = (capacity - load - g.item_overhead) & -int64_t{g.kv_tile};
        if (length < shortest) {  // no useful piece fits: the next pair
          if (load == 0 || ++pair == g.grid_y) return false;
          load = 0;
          continue;
        }
      }
      const int32_t end = static_cast<int32_t>(start + length);
      on_chunk(t, start, end, pair);
      load += length + g.item_overhead;
      start = end;
      if (start == tiles[t].eff_kv) break;
    }
  }
  return true;
}

// The modelled time of pouring at `capacity` (the busiest pair plus the merge), or -1 when the
// tiles do not fit; builds nothing. pour_fits() with the loads and the merge counted.
int64_t pour_score(const std::vector<Tile>& tiles, int64_t capacity, const Geometry& g) {
  const int64_t shortest = shortest_chunk(g), tile_mask = -int64_t{g.kv_tile};
  int pairs_left = g.grid_y - 1;
  int64_t room = capacity, busiest = 0;
  MergeWork merge;
  for (const Tile& tile : tiles) {
    int64_t rest = tile.eff_kv, chunks = 1;
    while (rest + g.item_overhead > room) {
      const int64_t length = (room - g.item_overhead) & tile_mask;
      if (length >= shortest) {
        rest -= length;
        room -= length + g.item_overhead;
        ++chunks;
      } else {
        if (room == capacity || pairs_left-- == 0) return -1;
        busiest = std::max(busiest, capacity - room);
        room = capacity;
      }
    }
    room -= rest + g.item_overhead;
    merge.add_tile(tile, chunks);
  }
  return std::max(busiest, capacity - room) + merge.cost(g);
}

// A floor under pour_score at `capacity`, from the total alone: tiles that fit one pair stay
// whole in it; otherwise the first pair is closed only when no useful piece fits its room
// (room - g.item_overhead < shortest_chunk), so it, and the busiest, holds more than that.
int64_t pour_floor(int64_t total, int64_t capacity, const Geometry& g) {
  if (total <= capacity) return total;
  return capacity - g.item_overhead - shortest_chunk(g) + 1;
}

void poured(const std::vector<Tile>& tiles, int64_t capacity, const Geometry& g,
            Candidate& candidate) {
  Chunking& chunking = candidate.chunking;
  chunking.max_len = 0;
  chunking.chunks.clear();
  chunking.chunks_per_tile.assign(tiles.size(), 0);
  Assignment& assignment = candidate.assignment;
  assignment.load.assign(g.grid_y, 0);
  // A tile is cut only where a pair closes: at most one chunk a pair beyond one a tile.
  chunking.chunks.reserve(tiles.size() + g.grid_y);
  assignment.bin_of.clear();
  assignment.bin_of.reserve(tiles.size() + g.grid_y);
  pour(tiles, capacity, g, [&](size_t t, int32_t start, int32_t end, int pair) {
    chunking.chunks.push_back({static_cast<int>(t), chunking.chunks_per_tile[t]++, start, end});
    chunking.max_len = std::max<int64_t>(chunking.max_len, end - start);
    assignment.bin_of.push_back(pair);
    assignment.load[pair] += end - start + g.item_overhead;
  });
  MergeWork merge;
  for (size_t t = 0; t < tiles.size(); ++t) merge.add_tile(tiles[t], chunking.chunks_per_tile[t]);
  candidate.score = *std::max_element(assignment.load.begin(), assignment.load.end()) + merge.cost(g);
}

// Whether pour() at `capacity` fits the tiles in the grid: pour() without its chunks, the
// loop the bisection below runs a dozen times.
bool pour_fits(const std::vector<Tile>& tiles, int64_t capacity, const Geometry& g) {
  const int64_t shortest = shortest_chunk(g), tile_mask = -int64_t{g.kv_tile};
  int pairs_left = g.grid_y - 1;
  int64_t room = capacity;
  for (const Tile& tile : tiles) {
    int64_t rest = tile.eff_kv;
    while (rest + g.item_overhead > room) {
      const int64_t length = (room - g.item_overhead) & tile_mask;
      if (length >= shortest) {  // a piece fits, then the rest goes on in the next pair
        rest -= length;
        room -= length + g.item_overhead;
      } else {
        if (room == capacity || pairs_left-- == 0) return false;
        room = capacity;
      }
    }
    room -= rest + g.item_overhead;
  }
  return true;
}

// The smallest capacity the tiles fit in, by bisection between the mean load (no capacity
// below it can hold them) and one that surely holds them.
int64_t smallest_capacity(const std::vector<Tile>& tiles, const TileTotals& totals,
                          const Geometry& g) {
  const auto [total, largest] = whole_load(totals, g);
  const int64_t smallest_item = g.item_overhead + shortest_chunk(g);
  // Every capacity from here on fits, so the probes there need no pour. Pouring fails only
  // when all grid_y pairs are closed, and a pair is closed only when no useful piece fits its
  // room: it holds more than capacity - g.item_overhead - shortest_chunk. The pairs then
  // hold more than total plus one item's fixed cost for each cut (a cut closes its pair, so
  // there are at most grid_y of them) could make.
  const int64_t surely_fits =
      std::max(ceil_div(total, g.grid_y) + 2 * g.item_overhead + shortest_chunk(g), smallest_item);
  const auto fits = [&](int64_t capacity) {
    return capacity >= surely_fits || pour_fits(tiles, capacity, g);
  };
  int64_t low = std::max(ceil_div(total, g.grid_y), smallest_item) - 1;  // does not fit
  int64_t high = std::max(largest, smallest_item) * ceil_div(int64_t(tiles.size()), g.grid_y) +
                 smallest_item;  // each pair holds its share of whole tiles, as a rule
  while (!fits(high)) low = high, high *= 2;  // one pair holds the total
  // The smallest usually lies within an eighth above the mean: try that bracket first.
  const int64_t near = (low + 1) + (low + 1) / 8 + smallest_item;
  if (near < high && fits(near)) high = near;
  // A capacity finer than an eighth of a KV tile moves no cut (cuts lie on kv_tile multiples).
  const int64_t precision = std::max(1, g.kv_tile / 8);
  while (high - low > precision) {
    const int64_t middle = low + (high - low) / 2;
    (fits(middle) ? high : low) = middle;
  }
  return high;
}

// Capacities to try: the smallest, a little above it (fewer tiles cut at the pair boundaries),
// and room for one chunk of 2^k KV tiles (for a few long tiles over many pairs these are the
// chunk lengths measured fastest: 64, 128 and 256 tokens at one 128-head request of 1k, 4k
// and 16k tokens).
const std::vector<int64_t>& capacities_to_try(const std::vector<Tile>& tiles,
                                              const TileTotals& totals, const Geometry& g) {
  const int64_t smallest = smallest_capacity(tiles, totals, g);
  std::vector<int64_t>& capacities = thread_scratch().capacities;
  capacities.assign(1, smallest);
  for (int sixteenths : {17, 18, 20, 24}) capacities.push_back(ceil_div(smallest * sixteenths, 16));
  for (int64_t chunk = shortest_chunk(g); chunk < totals.longest; chunk *= 2) {
    if (chunk + g.item_overhead > smallest) capacities.push_back(chunk + g.item_overhead);
  }
  return capacities;
}

// Whole tiles longest first, tiles cut into chunks longest first, or the pairs filled in
// order: the lowest modelled time (busiest pair + merge) wins; on a tie the earlier kind, and
// within a kind the longer chunks or larger capacity (fewer items, less partial memory).
// The pours are scored first: their best bounds the other kinds, whose scores stop as soon as
// they are sure to lose (a cut must reach the best pour to win, whole tiles likewise).
// Builds the winner in `chosen`.
void choose_chunking(const std::vector<Tile>& tiles, const Geometry& g, Candidate& chosen) {
  int64_t pour_best = kBeyond, best_capacity = -1;
  const TileTotals totals = tile_totals(tiles);
  const int64_t total = whole_load(totals, g).total;
  for (int64_t capacity : capacities_to_try(tiles, totals, g)) {
    if (pour_floor(total, capacity, g) > pour_best) continue;
    const int64_t score = pour_score(tiles, capacity, g);
    if (score < 0 || score > pour_best) continue;
    if (score == pour_best && capacity < best_capacity) continue;
    pour_best = score;
    best_capacity = capacity;
  }
  // Whole tiles win a tie with the best pour; below the floor they cannot reach it. They are
  // built in `chosen` where a cut or a pour that wins replaces them.
  Scratch& scratch = thread_scratch();
  const std::vector<int64_t>& lengths = cut_lengths(totals, g);
  int64_t whole = kBeyond;
  const bool whole_may_win = whole_floor(totals, g) <= pour_best;
  if (whole_may_win || !lengths.empty()) sort_by_length(tiles, g, scratch.by_length);
  if (whole_may_win) {
    whole_tiles(tiles, g, scratch.by_length, chosen);
    whole = chosen.score;
  }
  // A cut wins below both the best pour (a tie goes to the cut) and whole tiles (a tie goes to
  // whole tiles), and each later cut must beat the best so far.
  int64_t bound = std::min(pour_best, whole - 1), best_length = -1;
  CutStyle best_style = CutStyle::kEqual;
  for (int64_t length : lengths) {
    if (cut_floor(tiles, scratch.by_length, length, g) > bound) continue;
    for (CutStyle style : {CutStyle::kEqual, CutStyle::kRemainder}) {
      const int64_t score = cut_score(tiles, scratch.by_length, length, style, g, bound, scratch);
      if (score <= bound) bound = score - 1, best_length = length, best_style = style;
    }
  }
  if (best_length >= 0) {
    cut_tiles(tiles, best_length, best_style, g, chosen);
  } else if (whole > pour_best) {
    poured(tiles, best_capacity, g, chosen);
  }
}

// ---- assembling the plan ----------------------------------------------------------------

// Fills a zeroed item where it lies: built on the stack and copied, the record's field-wise
// stores would be read back as wide loads, which store forwarding cannot serve (~15 cycles an
// item).
void fill_item(const PlanInput& in, const Tile& tile, const Chunk& chunk, int32_t partial_row,
               MlaWorkItem& item) {
  const int b = tile.request;
  item.q_token_base = in.qo_indptr[b];
  item.q_len = in.qo_indptr[b + 1] - in.qo_indptr[b];
  item.kv_page_base = in.kv_indptr[b];
  item.kv_len = in.kv_len[b];
  item.packed_q_start = tile.packed_start;
  item.kv_start = chunk.kv_start;
  item.kv_end = chunk.kv_end;
  item.partial_row = partial_row;
}

// First partial row of each split tile (-1 for unsplit ones), allocated in tile order.
void allocate_partial_rows(const Chunking& chunking, int tile_rows, std::vector<int64_t>& base,
                           int64_t& total_rows) {
  base.assign(chunking.chunks_per_tile.size(), -1);
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
}

void fill_work(const PlanInput& in, const std::vector<Tile>& tiles, const Candidate& chosen,
               const std::vector<int64_t>& partial_base, const Geometry& g, Plan& plan) {
  const Chunking& chunking = chosen.chunking;
  if (chunking.chunks.size() > static_cast<size_t>(kInt32Max))
    throw Error(ErrorCode::kUnsupported, fmt::format("make_plan: {} work items exceed int32",
                                                     chunking.chunks.size()));
  std::vector<int>& order = thread_scratch().order;
  plan.work_indptr = bucket_by_bin(chosen.assignment.bin_of, g.grid_y, order);
  plan.work_items.resize(order.size());
  for (size_t k = 0; k < order.size(); ++k) {
    const Chunk& chunk = chunking.chunks[order[k]];
    const int64_t base = partial_base[chunk.tile];
    const int32_t row = base < 0 ? -1 : static_cast<int32_t>(base + int64_t{chunk.index} * g.tile_rows);
    fill_item(in, tiles[chunk.tile], chunk, row, plan.work_items[k]);
  }
  plan.cta_cost = chosen.assignment.load;
}

// Rows per merge piece: as few as make about one piece per CTA, at most kMergePieceRows, so
// that a lone request's merge (128 heads: 128 rows of 64 chunks at L=16384) spreads over the
// grid instead of 16 CTAs each reading 512 KiB from L2. A batch-invariant plan keeps
// kMergePieceRows: the kernel's summation order within a row follows its piece's rows, which
// must not depend on the rest of the batch.
int merge_piece_rows(const PlanInput& in, const std::vector<Tile>& tiles, const Chunking& chunking,
                     int ctas) {
  if (in.fixed_chunk_tokens > 0) return kMergePieceRows;
  int64_t split_rows = 0;
  for (size_t t = 0; t < tiles.size(); ++t) {
    if (chunking.chunks_per_tile[t] >= 2) split_rows += tiles[t].rows;
  }
  return static_cast<int>(std::clamp<int64_t>(ceil_div(split_rows, int64_t{ctas}), 1, kMergePieceRows));
}

// Each split tile's valid rows are cut into pieces of Plan::merge_piece_rows; the pieces go
// to the flat CTAs longest-first by rows x chunks, each CTA's records in tile order.
void fill_merge(const PlanInput& in, const std::vector<Tile>& tiles, const Chunking& chunking,
                const std::vector<int64_t>& partial_base, const Geometry& g, Plan& plan) {
  const int ctas = g.cluster_size * g.grid_y;
  const int piece_rows = merge_piece_rows(in, tiles, chunking, ctas);
  plan.merge_piece_rows = piece_rows;
  size_t piece_count = 0;
  for (size_t t = 0; t < tiles.size(); ++t) {
    if (chunking.chunks_per_tile[t] >= 2) piece_count += (tiles[t].rows + piece_rows - 1) / piece_rows;
  }
  Scratch& scratch = thread_scratch();
  std::vector<MlaMergeRecord>& pieces = scratch.pieces;
  std::vector<int64_t>& costs = scratch.costs;
  // Sized up front and filled by index: push_back was a call a piece (not inlined).
  pieces.resize(piece_count);
  costs.resize(piece_count);
  size_t p = 0;
  for (size_t t = 0; t < tiles.size(); ++t) {
    const int chunks = chunking.chunks_per_tile[t];
    if (chunks < 2) continue;
    for (int32_t offset = 0; offset < tiles[t].rows; offset += piece_rows, ++p) {
      MlaMergeRecord& record = pieces[p];  // filled in place, as fill_item says
      record.q_token_base = in.qo_indptr[tiles[t].request];
      record.packed_q_start = tiles[t].packed_start + offset;
      record.num_rows = std::min(piece_rows, tiles[t].rows - offset);
      record.partial_row_base = static_cast<int32_t>(partial_base[t] + offset);
      record.num_chunks = chunks;
      record.partial_stride = g.tile_rows;
      costs[p] = int64_t{record.num_rows} * chunks;
    }
  }
  Assignment& assignment = scratch.pieces_assignment;
  assign_longest_first(costs, ctas, assignment, scratch.longest_first);
  std::vector<int>& order = scratch.order;
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
int64_t work_item_cost(const MlaWorkItem& item, int64_t item_overhead_tokens) {
  return int64_t{item.kv_end} - item.kv_start + item_overhead_tokens;
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
  plan.item_overhead_tokens = input.item_overhead_tokens;
  const Geometry g{plan.cluster_size, plan.grid_y, plan.tile_rows, input.kv_tile, input.item_overhead_tokens};

  Scratch& scratch = thread_scratch();
  std::vector<Tile>& tiles = scratch.tiles;
  build_tiles(input, plan.tile_rows, tiles);
  // Batch-invariant: the cut depends on the tile alone (full pieces from the request's start,
  // then the remainder); only where the pieces run is left to the balance.
  Candidate& chosen = scratch.chosen;
  if (input.fixed_chunk_tokens > 0) {
    cut_tiles(tiles, input.fixed_chunk_tokens, CutStyle::kRemainder, g, chosen);
  } else {
    choose_chunking(tiles, g, chosen);
  }
  plan.kv_chunk = chosen.chunking.max_len;
  std::vector<int64_t>& partial_base = scratch.partial_base;
  allocate_partial_rows(chosen.chunking, plan.tile_rows, partial_base, plan.partial_rows);
  fill_work(input, tiles, chosen, partial_base, g, plan);
  fill_merge(input, tiles, chosen.chunking, partial_base, g, plan);
  log_plan(input, plan);
  return plan;
}

}  // namespace mlajit::plan
