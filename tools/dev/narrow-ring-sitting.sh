#!/usr/bin/env bash
# Issue 11/12: narrow tiles (<= 16 rows) keep extra KV stages in the rows of Q they leave empty
# (NarrowRing): tier 3 runs them with four stages instead of one, tier 2 with three instead of
# two; tier 1 and every wide tile keep their code (.text of those cubins byte-identical).
# Expected: tier 3 at 16 heads 1.5-1.8x faster over bf16 (435 µs at B128 L4096, tier 2's two
# stages of 32 tokens take 211) and over e4m3 faster than its bf16 (500 µs now, 0.87x bf16);
# tier 2 bf16 0-10% faster; tiers 2-3 e4m3 on tier 2 unchanged (the code streams, untouched).
# Checks: the GPU suite on the portable family (its narrow tiles forced on every tier, bf16,
# f16 and e4m3), `mlajit verify --kernel portable`, racecheck on the narrow sanitize shapes.
# Prepare: scripts/prepare-gpu-sitting.sh carry/gpu; cp tools/dev/narrow-ring-sitting.sh
# tools/dev/bench_table.py carry/gpu/; copy HEAD~'s kernels/ (before NarrowRing) to
# carry/gpu/old/kernels. Device call, carry ["carry/gpu"]:
#   CHECKS=1 ROUNDS= bash carry/gpu/narrow-ring-sitting.sh   (the checks; then, in a second
#   call, ROUNDS="0 1" for the two bench rounds in rotated order). Writes $OUT/n.txt, $OUT/n.tgz.
cd "$(dirname "$0")"; source ./sitting-lib.sh; begin_sitting n
B=prefix/bin/mlajit
if [[ -n ${CHECKS:-} ]]; then
  step suite 200 env MLAJIT_TEST_KERNEL=portable MLAJIT_CACHE_DIR=$g/uc ./mlajit_gpu_tests
  grep -hE "FAILED|FAIL|with expansion" -A3 $L/suite.txt 2>/dev/null | head -30 >> $log
  grep -hE "^narrow|^e4m3 narrow" $L/suite.txt | head -80 > $RES/narrow-cases.txt
  step verify 60 env MLAJIT_CACHE_DIR=$g/uc $B verify --kernel portable
  step race 110 env MLAJIT_TEST_KERNEL=portable MLAJIT_CACHE_DIR=$g/uc compute-sanitizer --tool racecheck ./mlajit_gpu_tests "one small shape per tier and launch path"
  step race_fp8 90 env MLAJIT_TEST_KERNEL=portable MLAJIT_CACHE_DIR=$g/uc compute-sanitizer --tool racecheck ./mlajit_gpu_tests "e4m3 KV: one small shape per tier and row layout"
fi
S=(--shape 16,128,16384,64 --shape 16,128,4096,64 --shape 16,128,4096,1 --shape 16,16,4096,64
   --shape 8,128,4096,64,2,1 --shape 16,1,1024,64)
for round in ${ROUNDS-0 1}; do
  for v in $( ((round % 2)) && echo "old main" || echo "main old"); do
    for t in 3 2; do
      for kv in bf16 e4m3; do
        step b_${v}_t${t}_${kv}_r$round 90 env $(kenv $v) $B bench --kernel portable --tier $t --kv-dtype $kv "${S[@]}" --csv $C/b_t${t}_${kv}_${v}_r$round.csv
      done
    done
  done
done
for t in 3 2; do for kv in bf16 e4m3; do python3 ./bench_table.py $C b_t${t}_${kv}_ main/old >> $log; done; done
echo "--- $(date +%T) n done" >> $log
