#include "plan/longest_first.h"

#include <algorithm>
#include <functional>

namespace mlajit::plan {
namespace {

// Below this many jobs a comparison sort beats the radix sort's 256-entry count per pass; for
// plain values, whose comparisons mispredict, sooner.
constexpr size_t kRadixMinJobs = 64;
constexpr size_t kRadixMinValues = 32;

// Stable LSD radix sort of `items` by key(item) ascending, a byte a pass, as many passes as
// largest_key has bytes (none when all keys are equal). `buffer` is swapped with `items`.
template <typename T, typename Key>
void radix_sort(std::vector<T>& items, std::vector<T>& buffer, uint64_t largest_key, Key&& key) {
  if (largest_key == 0) return;  // all keys equal: already in order
  buffer.resize(items.size());
  if (largest_key < 64) {  // few distinct keys (merge pieces): one pass, a short count
    size_t count[65] = {};
    for (const T& item : items) ++count[key(item) + 1];
    for (uint64_t k = 0; k < largest_key; ++k) count[k + 1] += count[k];
    for (const T& item : items) buffer[count[key(item)]++] = item;
    items.swap(buffer);
    return;
  }
  // As many passes as bytes, their digits as narrow as those passes allow (KV chunk costs
  // span 13-14 bits: two passes of 7, whose counts are half as long to clear and sum).
  const int bits = 64 - __builtin_clzll(largest_key);
  const int passes = (bits + 7) / 8;
  const int digit_bits = (bits + passes - 1) / passes;
  const uint64_t mask = (uint64_t{1} << digit_bits) - 1;
  for (int shift = 0; shift < bits; shift += digit_bits) {
    size_t count[257];
    std::fill(count, count + mask + 2, size_t{0});
    for (const T& item : items) ++count[((key(item) >> shift) & mask) + 1];
    for (uint64_t digit = 0; digit < mask; ++digit) count[digit + 1] += count[digit];
    for (const T& item : items) buffer[count[(key(item) >> shift) & mask]++] = item;
    items.swap(buffer);
  }
}

}  // namespace

// Job indices by cost descending, ties by index ascending.
void order_longest_first(const std::vector<int64_t>& costs, LongestFirstScratch& scratch) {
  std::vector<int>& order = scratch.order;
  order.resize(costs.size());
  for (size_t job = 0; job < costs.size(); ++job) order[job] = static_cast<int>(job);
  if (costs.size() < kRadixMinJobs) {
    std::sort(order.begin(), order.end(), [&costs](int a, int b) {
      return costs[a] != costs[b] ? costs[a] > costs[b] : a < b;
    });
    return;
  }
  const auto [least, most] = std::minmax_element(costs.begin(), costs.end());
  const int64_t largest = *most;
  // Stable, and the input is in index order: equal costs keep it.
  radix_sort(order, scratch.order_buffer, static_cast<uint64_t>(largest - *least),
             [&costs, largest](int job) { return static_cast<uint64_t>(largest - costs[job]); });
}

namespace {

// The least-loaded bin, ties to the lowest, kept as loads grow: a tournament tree over the
// bins, padded to a power of two with bins that never win. Each node holds its subtree's
// winner and that winner's load, so replaying a leaf's path reads only the siblings, which
// the replay does not change: no load waits on the level below it.
class LeastLoaded {
 public:
  // Takes the bins' starting loads from scratch.loads[0, bins).
  LeastLoaded(int bins, LongestFirstScratch& scratch)
      : leaves_(leaves_for(bins)), load_(scratch.loads), bin_(scratch.winner) {
    load_.resize(2 * static_cast<size_t>(leaves_));
    bin_.resize(2 * static_cast<size_t>(leaves_));
    for (int leaf = leaves_ - 1; leaf >= 0; --leaf) {
      load_[leaves_ + leaf] = leaf < bins ? load_[leaf] : std::numeric_limits<int64_t>::max();
      bin_[leaves_ + leaf] = leaf;
    }
    for (int node = leaves_ - 1; node >= 1; --node) {
      // Every bin of a left subtree is below every bin of the right one: a tie goes left.
      const int winner = load_[2 * node + 1] < load_[2 * node] ? 2 * node + 1 : 2 * node;
      load_[node] = load_[winner];
      bin_[node] = bin_[winner];
    }
  }
  int least() const { return bin_[1]; }
  int64_t load(int bin) const { return load_[leaves_ + bin]; }
  void add(int bin, int64_t cost) {
    int node = leaves_ + bin;
    int64_t load = load_[node] += cost;
    for (; node > 1; node >>= 1) {
      // Selects rather than branches: at equal loads (round robin over equal jobs) the
      // outcome is a coin toss to the branch predictor.
      const int sibling = node ^ 1;
      const int64_t sibling_load = load_[sibling];
      const int sibling_bin = bin_[sibling];
      const bool sibling_wins = (sibling_load < load) | ((sibling_load == load) & (sibling_bin < bin));
      load = sibling_wins ? sibling_load : load;
      bin = sibling_wins ? sibling_bin : bin;
      load_[node >> 1] = load;
      bin_[node >> 1] = bin;
    }
  }

 private:
  static int leaves_for(int bins) {
    int leaves = 1;
    while (leaves < bins) leaves *= 2;
    return leaves;
  }
  int leaves_;
  std::vector<int64_t>& load_;  // [2 * leaves]: node n's winner's load; leaf of bin b at leaves + b
  std::vector<int>& bin_;       // [2 * leaves]: node n's winner
};

}  // namespace

void assign_longest_first(const std::vector<int64_t>& costs, int bins, Assignment& result,
                          LongestFirstScratch& scratch) {
  order_longest_first(costs, scratch);
  assign_in_order(costs, scratch.order, bins, result, scratch);
}

void assign_in_order(const std::vector<int64_t>& costs, const std::vector<int>& order, int bins,
                     Assignment& result, LongestFirstScratch& scratch) {
  result.bin_of.resize(costs.size());
  result.load.assign(bins, 0);
  const size_t first = std::min(order.size(), static_cast<size_t>(bins));
  for (size_t bin = 0; bin < first; ++bin) {
    result.bin_of[order[bin]] = static_cast<int>(bin);
    result.load[bin] = costs[order[bin]];
  }
  if (first == order.size()) return;
  // The bins' loads now descend with the bin (each took the next job, costs descending), so
  // the least loaded are the last run of equal loads, and the lowest of them is the least.
  // The next jobs go to that run in order, each one that costs anything leaving its bin above
  // the rest of the run; no tree is needed until the run is used up (the merge pieces, many of
  // one cost, often end there).
  size_t next = first, run = static_cast<size_t>(bins) - 1;
  while (run > 0 && result.load[run - 1] == result.load[bins - 1]) --run;
  for (; next < order.size() && run < static_cast<size_t>(bins); ++next) {
    const int64_t cost = costs[order[next]];
    result.bin_of[order[next]] = static_cast<int>(run);
    result.load[run] += cost;
    run += cost > 0;
  }
  if (next == order.size()) return;
  scratch.loads.assign(result.load.begin(), result.load.end());
  LeastLoaded bins_by_load(bins, scratch);
  for (size_t k = next; k < order.size(); ++k) {
    const int bin = bins_by_load.least();
    result.bin_of[order[k]] = bin;
    bins_by_load.add(bin, costs[order[k]]);
  }
  for (int bin = 0; bin < bins; ++bin) result.load[bin] = bins_by_load.load(bin);
}

void sort_descending(std::vector<int64_t>& costs, LongestFirstScratch& scratch) {
  if (costs.size() < kRadixMinValues) {
    std::sort(costs.begin(), costs.end(), std::greater<int64_t>());
    return;
  }
  const auto [least, most] = std::minmax_element(costs.begin(), costs.end());
  const int64_t largest = *most;
  radix_sort(costs, scratch.values_buffer, static_cast<uint64_t>(largest - *least),
             [largest](int64_t cost) { return static_cast<uint64_t>(largest - cost); });
}

int64_t busiest_longest_first(std::vector<int64_t>& costs, int bins, int64_t room,
                              LongestFirstScratch& scratch) {
  if (costs.empty()) return room >= 0 ? 0 : kBeyond;
  int64_t largest = costs[0];
  size_t over_half = 0;  // jobs above half the room
  for (const int64_t cost : costs) {
    largest = std::max(largest, cost);
    over_half += cost > room / 2;
  }
  if (largest > room) return kBeyond;
  const size_t opened = static_cast<size_t>(bins);
  if (costs.size() <= opened) return largest;  // one job a bin
  // More than `bins` jobs above half the room: two of them share a bin (see below).
  if (over_half > opened) return kBeyond;
  sort_descending(costs, scratch);
  return busiest_of_descending(costs, bins, room, scratch);
}

int64_t busiest_of_descending(const std::vector<int64_t>& costs, int bins, int64_t room,
                              LongestFirstScratch& scratch) {
  if (costs.empty()) return room >= 0 ? 0 : kBeyond;
  const int64_t largest = costs[0];
  if (largest > room) return kBeyond;
  const size_t opened = static_cast<size_t>(bins);
  if (costs.size() <= opened) return largest;  // one job a bin
  // The next job after the bins' first joins the least loaded of them.
  if (costs[opened - 1] + costs[opened] > room) return kBeyond;
  // The bins' loads as a 4-ary min-heap (half the levels of a binary one, and a level's four
  // children compare side by side): the first jobs ascending are one already. Each job raises
  // the root, which then sinks; sentinels past the end spare the sift bounds checks on the
  // last children.
  std::vector<int64_t>& loads = scratch.loads;
  loads.assign(costs.rend() - opened, costs.rend());
  loads.resize(opened + 3, std::numeric_limits<int64_t>::max());
  int64_t busiest = largest;
  for (size_t job = opened; job < costs.size(); ++job) {
    const int64_t load = loads[0] + costs[job];
    if (load > room) return kBeyond;
    busiest = std::max(busiest, load);
    size_t hole = 0;
    for (size_t child = 1; child < opened; child = 4 * hole + 1) {
      // The least of the four, selected rather than branched on.
      const size_t left = child + (loads[child + 1] < loads[child]);
      const size_t right = child + 2 + (loads[child + 3] < loads[child + 2]);
      const size_t least = loads[right] < loads[left] ? right : left;
      if (loads[least] >= load) break;
      loads[hole] = loads[least];
      hole = least;
    }
    loads[hole] = load;
  }
  return busiest;
}

}  // namespace mlajit::plan
