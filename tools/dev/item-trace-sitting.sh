#!/usr/bin/env bash
# Issue 10: where a short item's time goes in the hopper kernel. At 128 heads B=128 L=1024
# (two 16-tile items per CTA pair) a tile costs ~2.4 µs of the launch against ~1.84 at
# B=64 L=16384, and the shape runs at 0.87x FlashMLA on the H200: the clock trace of CTA (0,0)
# (tools/dev/trace/hopper_trace.py, the harness's even plan, no merge) shows each role's item
# start, its first tiles and the switch to the next item, against the steady state.
# Prepare: tools/dev/trace/hopper_trace.py DIR, then nvcc as tools/dev/trace/README.md says,
# the binary as carry/gpu/htrace/hopper_harness; this file beside sitting-lib.sh.
# Device call, carry ["carry/gpu"]: bash carry/gpu/item-trace-sitting.sh. Writes $OUT/t.txt, $OUT/t.tgz.
cd "$(dirname "$0")"; source ./sitting-lib.sh; begin_sitting t
for shape in "128 128 1024 64" "128 64 1024 64" "128 64 16384 64" "128 1 1024 64"; do
  step "trace_${shape// /_}" 60 ./htrace/hopper_harness --one $shape
  grep -E "^TIME|^CTAS|^mean" "$L/trace_${shape// /_}.txt" >> $log
done
echo "--- $(date +%T) t done" >> $log
