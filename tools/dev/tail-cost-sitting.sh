#!/usr/bin/env bash
# Issue 10: what makes the hopper kernel's q_len 2 causal launch 5.7% slower than the same
# launch without the mask (H100, 2026-12-07), with identical plans? Under the mask half the
# items end at kv_len - 1, in a partial last tile (its scores masked, its tail rows cleared).
# These shapes separate a partial last tile (kv_len 4095, no mask), a masked one with whole
# tiles (kv_len 4097 causal: the q0 items end at 4096) and the mask itself.
# Answer (2026-12-07): neither; the planner ran a request's tiles in different waves, fixed in
# b61bf09 (docs/PERF.md, "Speculative decode: a request's causal tiles side by side").
# Prepare: scripts/prepare-gpu-sitting.sh carry/gpu; cp this file and bench_table.py there.
# Device call, carry ["carry/gpu"]: bash carry/gpu/tail-cost-sitting.sh. Writes $OUT/t.txt, $OUT/t.tgz.
cd "$(dirname "$0")"; source ./sitting-lib.sh; begin_sitting t
S=(--shape 128,64,4096,64 --shape 128,64,4095,64 --shape 128,64,4032,64 --shape 128,64,4096,64,2,0
   --shape 128,64,4095,64,2,0 --shape 128,64,4096,64,2,1 --shape 128,64,4097,64,2,1
   --shape 128,64,4160,64,2,1 --shape 16,128,4095,64 --shape 16,128,4096,64)
for r in 0 1 2; do
  step bt_r$r 120 env MLAJIT_CACHE_DIR=$g/uc prefix/bin/mlajit bench --kernel hopper "${S[@]}" --csv $C/bt_r$r.csv
done
python3 ./bench_table.py $C bt_ >> $log
echo "--- $(date +%T) t done" >> $log
