#!/usr/bin/env bash
# The hopper kernel's Q K^T issued from a loop over the 9 regions (4 wgmma an iteration, not
# unrolled: issue 9's compile time) against main's kernels: verify, the GPU suite forced to
# hopper and racecheck / synccheck on the variant (carry/gpu/kloop/kernels), then `mlajit bench
# --kernel hopper` over bf16 and e4m3 caches, main and the variant in rotated order.
# Prepare: scripts/prepare-gpu-sitting.sh carry/gpu (main's tree); the variant's kernels in
# carry/gpu/kloop/kernels (mkdir -p carry/gpu/kloop; git archive HEAD kernels | tar -x -C
# carry/gpu/kloop; patch -p1 -d carry/gpu/kloop <
# tools/dev/results/sitting-2026-12-06e/hopper-qk-region-loop.patch); this file as
# carry/gpu/k.sh, tools/dev/bench_table.py beside it.
# Device call, carry ["carry/gpu"]: bash carry/gpu/k.sh ROUNDS. Writes $OUT/k.txt, $OUT/k.tgz.
cd "$(dirname "$0")"
source ./sitting-lib.sh  # step, kenv, begin_sitting, HOPPER_AB_SHAPES
begin_sitting k
rounds=${1:-3}
shapes=("${HOPPER_AB_SHAPES[@]}")
fp8=(--shape 128,64,16384,64 --shape 128,128,1024,64 --shape 16,128,16384,64)
step verify_kloop 90 env $(kenv kloop) prefix/bin/mlajit verify --kernel hopper
grep -q "verify_kloop rc=0" $log || { tail -5 $L/verify_kloop.txt >> $log; echo "verify failed: stop" >> $log; exit 1; }
step suite_kloop 200 env $(kenv kloop) MLAJIT_TEST_KERNEL=hopper ./mlajit_gpu_tests
grep -E "FAILED|with expansion" -A4 $L/suite_kloop.txt | head -30 >> $log
step race_kloop 120 env $(kenv kloop) MLAJIT_TEST_KERNEL=hopper compute-sanitizer --tool racecheck ./mlajit_gpu_tests "[.sanitize]"
step sync_kloop 120 env $(kenv kloop) MLAJIT_TEST_KERNEL=hopper compute-sanitizer --tool synccheck ./mlajit_gpu_tests "[.sanitize]"
for r in $(seq 0 $((rounds - 1))); do
  for v in $( ((r % 2)) && echo "kloop main" || echo "main kloop"); do
    step bench_${v}_r$r 150 env $(kenv $v) prefix/bin/mlajit bench --kernel hopper "${shapes[@]}" --csv $C/b_${v}_r$r.csv
    step fp8_${v}_r$r 150 env $(kenv $v) prefix/bin/mlajit bench --kernel hopper --kv-dtype e4m3 "${fp8[@]}" --csv $C/f_${v}_r$r.csv
  done
done
python3 ./bench_table.py $C b_ | tee -a $log
python3 ./bench_table.py $C f_ | tee -a $log
echo "--- $(date +%T) done" >> $log
