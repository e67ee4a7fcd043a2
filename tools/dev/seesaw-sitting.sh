#!/usr/bin/env bash
# The seesaw schedule (built into this library) against main's hopper kernels (carry/gpu/old/
# kernels) on one GPU: verify and the GPU suite forced to hopper on the built-in kernels, then
# `mlajit bench --kernel hopper` on both, order rotated each round, then racecheck and
# synccheck. Prepare: scripts/prepare-gpu-sitting.sh carry/gpu (this tree); main's kernels in
# carry/gpu/old/kernels (git archive main kernels | tar -x -C carry/gpu/old); this file as
# carry/gpu/s.sh, tools/dev/bench_table.py beside it.
# Device call, carry ["carry/gpu"]: [SANITIZE=0] bash carry/gpu/s.sh ROUNDS.
# Writes $OUT/s.txt and $OUT/s.tgz.
cd "$(dirname "$0")"; g=$PWD
RES=${OUT:-$g/out}; L=$g/logs; mkdir -p "$RES" "$L" "$g/csv"; log=$RES/s.txt
trap 'tar -C $g -czf $RES/s.tgz logs csv 2>/dev/null' EXIT
export LD_LIBRARY_PATH=$g/prefix/lib:/usr/local/cuda/lib64 MLAJIT_CACHE_PATH=$g/cache
nvidia-smi --query-gpu=name,clocks.max.sm,temperature.gpu --format=csv,noheader | tee -a $log
source ./sitting-lib.sh
rounds=${1:-2}
shapes=(--shape 128,64,16384,64 --shape 128,128,16384,64 --shape 128,128,1024,64 --shape 128,16,4096,64
        --shape 128,1,1024,64 --shape 128,64,4096,64,2,1 --shape 128,64,4096,1 --shape 64,64,16384,64
        --shape 16,128,16384,64 --shape 16,128,4096,64,2,1)
step verify_hopper 90 env $(kenv main) prefix/bin/mlajit verify --kernel hopper
tail -4 $L/verify_hopper.txt >> $log
grep -q "verify_hopper rc=0" $log || { echo "verify failed: stop" >> $log; exit 1; }
for r in $(seq 0 $((rounds - 1))); do
  for v in $( ((r % 2)) && echo "old main" || echo "main old"); do
    step bench_${v}_r$r 150 env $(kenv $v) prefix/bin/mlajit bench --kernel hopper "${shapes[@]}" --csv $g/csv/s_${v}_r$r.csv
  done
  [[ $r == 0 ]] && python3 ./bench_table.py $g/csv s_ | tee -a $log
done
python3 ./bench_table.py $g/csv s_ | tee -a $log
step suite_hopper 200 env $(kenv main) MLAJIT_TEST_KERNEL=hopper ./mlajit_gpu_tests
grep -E "FAILED|with expansion" -A4 $L/suite_hopper.txt | head -40 >> $log
if [[ ${SANITIZE:-1} == 1 ]]; then
  step race_hopper 120 env $(kenv main) MLAJIT_TEST_KERNEL=hopper compute-sanitizer --tool racecheck ./mlajit_gpu_tests "[.sanitize]"
  step sync_hopper 120 env $(kenv main) MLAJIT_TEST_KERNEL=hopper compute-sanitizer --tool synccheck ./mlajit_gpu_tests "[.sanitize]"
fi
echo "--- $(date +%T) done" >> $log
