#!/usr/bin/env bash
# The hopper gather's cp.async with L2 hints (pages below 16 tokens and pages that neither hold
# nor divide a tile): `ef` an evict-first policy as the TMA copies have (the KV is read once; Q
# tiles and partial rows stay), `p256` a 256-byte L2 prefetch (a token's row is 1152 contiguous
# bytes at page 1: the next region's line comes with this one), `both`. Expected: 0-5% at page 1
# (DRAM 57% busy there, 2026-12-07), nothing at page 64 (TMA, unchanged).
# Prepare: scripts/prepare-gpu-sitting.sh carry/gpu; each variant's kernels in
# carry/gpu/{ef,p256,both}/kernels; this file and bench_table.py beside them.
# Device call, carry ["carry/gpu"]: bash carry/gpu/gather-hints-sitting.sh. Writes $OUT/g.txt, $OUT/g.tgz.
cd "$(dirname "$0")"; source ./sitting-lib.sh; begin_sitting g
B=prefix/bin/mlajit
PT="the hopper family on compute capability 9.0: TMA pages and gathered pages"
for v in ef p256 both; do
  step pages_$v 120 env $(kenv $v) MLAJIT_TEST_KERNEL=hopper ./mlajit_gpu_tests "$PT"
done
G=(--shape 128,64,4096,1 --shape 128,64,4096,8 --shape 128,64,4096,24 --shape 16,128,4096,1
   --shape 128,64,4096,64)
for r in 0 1; do
  for v in $( ((r % 2)) && echo "both p256 ef main" || echo "main ef p256 both"); do
    step b_${v}_r$r 90 env $(kenv $v) $B bench --kernel hopper "${G[@]}" --csv $C/b_${v}_r$r.csv
  done
done
python3 ./bench_table.py $C b_ ef/main p256/main both/main >> $log 2>&1
echo "--- $(date +%T) g done" >> $log
