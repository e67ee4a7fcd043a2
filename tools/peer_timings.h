#pragma once
// The peer reference timings `mlajit bench` compares with: FlashInfer FA2, FA3 and FlashMLA on
// the H200, per baseline shape. They are data, tools/data/peer_timings_h200.csv (the newest
// table of shared/perf/baseline.md, by scripts/peer-timings-from-baseline.sh), embedded into
// the CLI at build time.
#include <optional>
#include <string>
#include <vector>

#include "check/mla_bench.h"

namespace mlajit::cli {

// µs; empty where the peer was not measured (FlashMLA has page size 64 only).
struct PeerTimings {
  std::optional<double> fa2_us, fa3_us, flashmla_us;
};

struct PeerRow {
  std::string shape_text;  // as in the table: "128,64,4096,64,2,1", "ragged:128,64,1,8192,20260601"
  MlaBenchShape shape;     // bf16, the kernel's own tile tier
  PeerTimings timings;
};

// The table's rows, in its order. Throws Error(kInternal) naming the line when the embedded
// data do not read as a peer table (a broken data file in the build).
const std::vector<PeerRow>& peer_rows();

// The timings of the row that times the same problem as `shape` (heads, page size, q_len,
// causal mask, KV lengths, bf16 q and KV, no forced tier), else none.
PeerTimings peer_timings_for(const MlaBenchShape& shape);

// The shape notation of the table (and of baseline.md), which `bench --shape` takes too:
// "H,B,L,page[,q_len,causal]" or "ragged:H,B,min_kv,max_kv,seed" (page 64, q_len 1, as
// baseline.md measured its ragged batch); also, with no peer timings, "topk:H,B,K,CACHE"
// (sparse decode: each request selects K tokens of its CACHE-token cache, page 1). Throws Error(kInvalidArgument) naming the text.
MlaBenchShape parse_bench_shape(const std::string& text);

}  // namespace mlajit::cli
