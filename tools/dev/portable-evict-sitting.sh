#!/usr/bin/env bash
# The portable kernel's KV copies (copy_kv_row) evict-first in L2, as hopper's copies now are
# (its gather 3% faster for it, 2026-12-07c). Variant `pef` (carry/gpu/pef/kernels) against
# main's kernels, same build. Expected 0-3% on the long shapes, where the KV streams past
# the query tiles and partial rows. Checks: the decode test over heads and pages on pef.
# Prepare: scripts/prepare-gpu-sitting.sh carry/gpu; the variant's kernels in
# carry/gpu/pef/kernels; this file and bench_table.py beside them.
# Device call, carry ["carry/gpu"]: bash carry/gpu/portable-evict-sitting.sh. Writes $OUT/v.txt, $OUT/v.tgz.
cd "$(dirname "$0")"; source ./sitting-lib.sh; begin_sitting v
B=prefix/bin/mlajit
step decode_pef 120 env $(kenv pef) MLAJIT_TEST_KERNEL=portable ./mlajit_gpu_tests "decode matches the reference across heads and page sizes"
P=(--shape 16,128,16384,64 --shape 16,128,4096,64 --shape 16,128,4096,1 --shape 128,64,4096,64
   --shape 128,128,1024,64 --shape 128,1,1024,64)
for r in 0 1; do
  for v in $( ((r % 2)) && echo "pef main" || echo "main pef"); do
    step t1_${v}_r$r 90 env $(kenv $v) $B bench --kernel portable "${P[@]}" --csv $C/t1_${v}_r$r.csv
    step t2_${v}_r$r 90 env $(kenv $v) $B bench --kernel portable --tier 2 "${P[@]}" --csv $C/t2_${v}_r$r.csv
  done
done
python3 ./bench_table.py $C t1_ pef/main >> $log 2>&1
python3 ./bench_table.py $C t2_ pef/main >> $log 2>&1
echo "--- $(date +%T) v done" >> $log
