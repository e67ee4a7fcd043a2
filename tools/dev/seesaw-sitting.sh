#!/usr/bin/env bash
# The seesaw schedule (built into this library) against main's hopper kernels (carry/gpu/old/
# kernels) on one GPU: verify and the GPU suite forced to hopper on the built-in kernels, then
# `mlajit bench --kernel hopper` on both, order rotated each round, then racecheck and
# synccheck. Prepare: scripts/prepare-gpu-sitting.sh carry/gpu (this tree); main's kernels in
# carry/gpu/old/kernels (git archive main kernels | tar -x -C carry/gpu/old); this file as
# carry/gpu/s.sh, tools/dev/bench_table.py beside it.
# Device call, carry ["carry/gpu"]: [SANITIZE=0] bash carry/gpu/s.sh ROUNDS.
# Writes $OUT/s.txt and $OUT/s.tgz.
cd "$(dirname "$0")"
source ./sitting-lib.sh  # step, kenv, begin_sitting, HOPPER_AB_SHAPES
begin_sitting s
rounds=${1:-2}
shapes=("${HOPPER_AB_SHAPES[@]}")
step verify_hopper 90 env $(kenv main) prefix/bin/mlajit verify --kernel hopper
tail -4 $L/verify_hopper.txt >> $log
grep -q "verify_hopper rc=0" $log || { echo "verify failed: stop" >> $log; exit 1; }
for r in $(seq 0 $((rounds - 1))); do
  for v in $( ((r % 2)) && echo "old main" || echo "main old"); do
    step bench_${v}_r$r 150 env $(kenv $v) prefix/bin/mlajit bench --kernel hopper "${shapes[@]}" --csv $C/s_${v}_r$r.csv
  done
  [[ $r == 0 ]] && python3 ./bench_table.py $C s_ | tee -a $log
done
python3 ./bench_table.py $C s_ | tee -a $log
step suite_hopper 200 env $(kenv main) MLAJIT_TEST_KERNEL=hopper ./mlajit_gpu_tests
grep -E "FAILED|with expansion" -A4 $L/suite_hopper.txt | head -40 >> $log
if [[ ${SANITIZE:-1} == 1 ]]; then
  step race_hopper 120 env $(kenv main) MLAJIT_TEST_KERNEL=hopper compute-sanitizer --tool racecheck ./mlajit_gpu_tests "[.sanitize]"
  step sync_hopper 120 env $(kenv main) MLAJIT_TEST_KERNEL=hopper compute-sanitizer --tool synccheck ./mlajit_gpu_tests "[.sanitize]"
fi
echo "--- $(date +%T) done" >> $log
