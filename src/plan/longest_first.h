#pragma once
// Longest processing time first (LPT): jobs taken by cost descending, each onto the
// least-loaded bin. The planner places whole tiles, cut chunks and merge pieces this way, and
// scores candidate cuttings by it; these run on every plan, so the placement sorts by radix
// and finds the least-loaded bin in a tournament tree, and the score sorts only what it must.
#include <cstdint>
#include <limits>
#include <vector>

namespace mlajit::plan {

struct Assignment {
  std::vector<int> bin_of;    // per job
  std::vector<int64_t> load;  // per bin
};

// Buffers a caller keeps between calls, so that warm calls allocate nothing.
struct LongestFirstScratch {
  std::vector<int> order, order_buffer, winner;
  std::vector<int64_t> values_buffer, loads;
};

// What busiest_longest_first returns when the busiest bin passes the room it was given.
inline constexpr int64_t kBeyond = std::numeric_limits<int64_t>::max();

// Jobs by cost descending, ties by index (so the result is deterministic), each to the
// least-loaded bin, ties to the lowest; the first `bins` jobs go to the empty bins in order.
// Greedy-to-least-loaded keeps max - min load within one job's cost; taking the big jobs
// first leaves the small ones to fill the gaps. Costs are >= 0.
void assign_longest_first(const std::vector<int64_t>& costs, int bins, Assignment& result,
                          LongestFirstScratch& scratch);

// The order assign_longest_first takes the jobs in (cost descending, ties by index), into
// scratch.order; and the placement in an order already made, so that a caller who needs the
// order for more than one placement or score sorts once.
void order_longest_first(const std::vector<int64_t>& costs, LongestFirstScratch& scratch);
void assign_in_order(const std::vector<int64_t>& costs, const std::vector<int>& order, int bins,
                     Assignment& result, LongestFirstScratch& scratch);

// Costs sorted descending, in place.
void sort_descending(std::vector<int64_t>& costs, LongestFirstScratch& scratch);

// The busiest bin's load under assign_longest_first, or kBeyond as soon as a bin passes
// `room` (loads only grow). Reorders `costs`: which of two equal jobs goes first, or which of
// two equally loaded bins takes a job, moves no load, so the costs alone decide it.
int64_t busiest_longest_first(std::vector<int64_t>& costs, int bins, int64_t room,
                              LongestFirstScratch& scratch);

// busiest_longest_first of costs already sorted descending: the planner merges its candidates'
// costs from runs it sorted once rather than sorting each candidate's anew.
int64_t busiest_of_descending(const std::vector<int64_t>& costs, int bins, int64_t room,
                              LongestFirstScratch& scratch);

}  // namespace mlajit::plan
