#!/usr/bin/env bash
# Issue 12 on the small tiers: tier 3's narrow tiles over e4m3 read their codes from a ring of
# their own and expand each a tile ahead into one of two 16-bit tiles (NarrowCodes), beside the
# two-warp Q K^T, instead of in place with two more barriers a tile. Expected: tier 3 e4m3 at
# 16 heads from 0.77x to at least the bf16 speed (379 against 292 µs at B128 L4096 on the H100
# after NarrowRing); bf16 and every other cubin unchanged. Also plan_cost of this tree (the
# planner's cuts from one sort) against 3fa41f3's, two rounds in rotated order.
# Checks: the e4m3 GPU tests forced to portable, racecheck on the e4m3 sanitize shapes, verify.
# Prepare: scripts/prepare-gpu-sitting.sh carry/gpu; this file, bench_table.py,
# build/tests/plan_cost and the old commit's plan_cost (old_plan_cost) beside it; the kernels
# before NarrowCodes in carry/gpu/old/kernels.
# Device call, carry ["carry/gpu"]: bash carry/gpu/narrow-codes-sitting.sh. Writes $OUT/c.txt, $OUT/c.tgz.
# Rerun for the f16 expansion (old = 5eafd8c's kernels, NO_PLAN=1: no plan_cost rounds).
cd "$(dirname "$0")"; source ./sitting-lib.sh; begin_sitting c
B=prefix/bin/mlajit
step fp8 150 env MLAJIT_TEST_KERNEL=portable MLAJIT_CACHE_DIR=$g/uc ./mlajit_gpu_tests "[fp8]"
grep -hE "FAILED|FAIL|with expansion" -A3 $L/fp8.txt 2>/dev/null | head -30 >> $log
grep -hE "e4m3 narrow" $L/fp8.txt | head -40 > $RES/narrow-e4m3-cases.txt
step race_fp8 90 env MLAJIT_TEST_KERNEL=portable MLAJIT_CACHE_DIR=$g/uc compute-sanitizer --tool racecheck ./mlajit_gpu_tests "e4m3 KV: one small shape per tier and row layout"
step verify 60 env MLAJIT_CACHE_DIR=$g/uc $B verify --kernel portable
S=(--shape 16,128,16384,64 --shape 16,128,4096,64 --shape 16,128,4096,1 --shape 16,16,4096,64
   --shape 8,128,4096,64,2,1 --shape 16,1,1024,64)
for r in ${ROUNDS-0 1}; do
  for v in $( ((r % 2)) && echo "old main" || echo "main old"); do
    step b_${v}_e4m3_r$r 90 env $(kenv $v) $B bench --kernel portable --tier 3 --kv-dtype e4m3 "${S[@]}" --csv $C/b_e4m3_${v}_r$r.csv
  done
  step b_main_bf16_r$r 90 env $(kenv main) $B bench --kernel portable --tier 3 --kv-dtype bf16 "${S[@]}" --csv $C/b_e4m3_bf16_r$r.csv
  [[ -n ${NO_PLAN:-} ]] && continue
  for v in $( ((r % 2)) && echo "old_plan_cost plan_cost" || echo "plan_cost old_plan_cost"); do
    step ${v}_r$r 60 ./$v 500
    tail -17 $L/${v}_r$r.txt | sed "s/^/$v r$r /" >> $log
  done
done
python3 ./bench_table.py $C b_e4m3_ main/old main/bf16 >> $log
echo "--- $(date +%T) c done" >> $log
