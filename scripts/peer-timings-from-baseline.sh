#!/usr/bin/env bash
# Writes the CLI's peer reference timings (tools/data/peer_timings_h200.csv, embedded into
# `mlajit bench`) from the newest table of shared/perf/baseline.md: the last section whose
# table is keyed by `shape` (H,B,L,page[,q_len,causal] or ragged:H,B,min,max,seed). Every row
# and column is kept; "—" (not measured) becomes an empty field.
#   scripts/peer-timings-from-baseline.sh [BASELINE.md] > tools/data/peer_timings_h200.csv
set -euo pipefail
cd "$(dirname "$0")/.."
baseline=${1:-../shared/perf/baseline.md}
[[ -f $baseline ]] || { echo "peer-timings: no $baseline" >&2; exit 1; }
awk '
  # Remember the last section heading and the rows of the last shape-keyed table under it.
  /^## / { heading = substr($0, 4) }
  /^\| *shape *\|/ { table_heading = heading; n = 0; header = $0; in_table = 1; next }
  in_table && /^\|[-| ]+\|$/ { next }
  in_table && /^\|/ { rows[++n] = $0; next }
  { in_table = 0 }
  function cells(line, out,    count, i, parts) {
    count = split(line, parts, "|")
    for (i = 2; i < count; ++i) {
      gsub(/^ +| +$/, "", parts[i])
      if (parts[i] == "—") parts[i] = ""
      out[i - 1] = parts[i]
    }
    return count - 2
  }
  function csv(line,    fields, count, i, text, name) {
    count = cells(line, fields)
    text = ""
    for (i = 1; i <= count; ++i) {
      name = fields[i]
      if (name ~ /[,"]/) { gsub(/"/, "\"\"", name); name = "\"" name "\"" }
      text = text (i > 1 ? "," : "") name
    }
    return text
  }
  END {
    if (n == 0) { print "peer-timings: no table keyed by shape found" > "/dev/stderr"; exit 1 }
    print "# FlashInfer FA2/FA3 and FlashMLA on one H200, median µs of 30 launches, from"
    print "# shared/perf/baseline.md, table \"" table_heading "\"."
    print "# Shapes: H,B,L,page[,q_len,causal], or ragged:H,B,min_kv,max_kv,seed (page 64, q_len 1)."
    print "# best TF/s, best GB/s: of the fastest of the three. An empty field was not measured."
    print "# Written by scripts/peer-timings-from-baseline.sh; embedded into the mlajit CLI."
    print csv(header)
    for (i = 1; i <= n; ++i) print csv(rows[i])
  }' "$baseline"
