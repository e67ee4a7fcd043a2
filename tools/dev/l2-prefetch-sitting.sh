#!/usr/bin/env bash
# Issue 10: each KV tile's rows prefetched into L2 as soon as the producer knows their page ids,
# before it waits for the tile's stage (variant `pf`, carry/gpu/pf/kernels:
# cp.async.bulk.prefetch.tensor by the TMA lanes, prefetch.global.L2 by the gathering threads).
# With two stages a refill starts only once the stage is free, and then waits for DRAM; the
# prefetch goes out about a tile earlier. Expected (H100, 128 heads B64 L4096): page 1 3-10%
# faster (scores warpgroup waiting on `full`, DRAM 57% busy), page 64 0-4% (DRAM 76% busy at
# L16384: more bytes in flight), 16 heads level or slower (memory-bound: the prefetch adds L2
# requests, not bandwidth).
# Then, on an H200 only: this tree's `mlajit verify` and `mlajit bench` on auto, per family and
# e4m3 against bf16 (the issues' one-run checks with the peers' ratios).
# Prepare: scripts/prepare-gpu-sitting.sh carry/gpu; the variant's kernels in carry/gpu/pf/kernels;
# this file and bench_table.py beside them.
# Device call, carry ["carry/gpu"]: bash carry/gpu/l2-prefetch-sitting.sh [ROUNDS]. Writes
# $OUT/f.txt, $OUT/f.tgz.
cd "$(dirname "$0")"; source ./sitting-lib.sh; begin_sitting f
rounds=${1:-3}
B=prefix/bin/mlajit
PT="the hopper family on compute capability 9.0: TMA pages and gathered pages"
step pages_pf 150 env $(kenv pf) MLAJIT_TEST_KERNEL=hopper ./mlajit_gpu_tests "$PT"
step suite_pf 200 env $(kenv pf) MLAJIT_TEST_KERNEL=hopper ./mlajit_gpu_tests
S=(--shape 128,64,4096,1 --shape 128,64,4096,8 --shape 128,64,4096,32 --shape 128,64,4096,64
   --shape 128,64,16384,64 --shape 128,128,16384,64 --shape 128,128,1024,64 --shape 128,16,4096,64
   --shape 128,1,1024,64 --shape 128,64,4096,64,2,1 --shape 16,128,16384,64 --shape 16,128,4096,1)
for ((r = 0; r < rounds; r++)); do
  for v in $( ((r % 2)) && echo "pf main" || echo "main pf"); do
    step b_${v}_r$r 150 env $(kenv $v) $B bench --kernel hopper "${S[@]}" --csv $C/b_${v}_r$r.csv
  done
done
python3 ./bench_table.py $C b_ pf/main >> $log 2>&1
on_h200 && record_tree env $(kenv main)
echo "--- $(date +%T) f done" >> $log
