#!/usr/bin/env bash
# One call that (a) A/Bs an L2 prefetch of the e4m3 producer's codes a tile before their loads
# (variant `pf`, carry/gpu/pf/kernels: hopper over e4m3 at 128 heads, where ncu had the producer
# waiting on its codes' loads; expected 0-10% at 128 heads, level at 64) and (b) records this
# tree's `mlajit verify` and `mlajit bench` on auto, per family, and e4m3 against bf16 at 16 and
# 128 heads: the issues' one-run checks where the card is an H200 (the CLI adds the peers'
# ratios there), the tree's record elsewhere.
# Prepare: scripts/prepare-gpu-sitting.sh carry/gpu; the variant's kernels in
# carry/gpu/pf/kernels; this file and bench_table.py beside them.
# Device call, carry ["carry/gpu"]: bash carry/gpu/confirm-sitting.sh. Writes $OUT/c.txt, $OUT/c.tgz.
cd "$(dirname "$0")"; source ./sitting-lib.sh; begin_sitting c
B=prefix/bin/mlajit
step fp8_pf 150 env $(kenv pf) MLAJIT_TEST_KERNEL=hopper ./mlajit_gpu_tests "[fp8]"
E=(--shape 128,64,16384,64 --shape 128,128,1024,64 --shape 64,64,16384,64 --shape 128,64,4096,1)
for r in 0 1 2; do
  for v in $( ((r % 2)) && echo "pf main" || echo "main pf"); do
    step e_${v}_r$r 90 env $(kenv $v) $B bench --kernel hopper --kv-dtype e4m3 "${E[@]}" --csv $C/e_${v}_r$r.csv
  done
  step e_bf16_r$r 90 env $(kenv main) $B bench --kernel hopper --kv-dtype bf16 "${E[@]}" --csv $C/e_bf16_r$r.csv
done
python3 ./bench_table.py $C e_ pf/main main/bf16 >> $log 2>&1
record_tree env $(kenv main)
echo "--- $(date +%T) c done" >> $log
