#!/usr/bin/env bash
# Narrow tiles' Q K^T in four accumulator chains (NarrowRows::kQkChains): a QK warp of a narrow
# tile holds one n8 score block, so its 36 mmas each waited for the one before while the other
# warps waited at the barrier. Expected (before the run): tier 3's 16-token tiles (two QK warps)
# 15-25% faster over bf16 and e4m3, tier 2 10-20%, tier 1 5-10%; 64-row tiles unchanged. With
# NarrowCodes (tier 3 e4m3: codes expanded a tile ahead) and without it (variant nocodes).
# Checks: the GPU suite on the portable family, racecheck on both sanitize cases, verify.
# Prepare: scripts/prepare-gpu-sitting.sh carry/gpu; this file and bench_table.py beside it;
# carry/gpu/old/kernels = the kernels before both (c90e86b); carry/gpu/nocodes/kernels = this
# tree's with UsesNarrowCodes off.
# Device call, carry ["carry/gpu"]: bash carry/gpu/narrow-qk-sitting.sh. Writes $OUT/q.txt, $OUT/q.tgz.
cd "$(dirname "$0")"; source ./sitting-lib.sh; begin_sitting q
B=prefix/bin/mlajit
if [[ -z ${NO_CHECKS:-} ]]; then
  step suite 200 env MLAJIT_TEST_KERNEL=portable MLAJIT_CACHE_DIR=$g/uc ./mlajit_gpu_tests
  grep -hE "FAILED|FAIL|with expansion" -A3 $L/suite.txt 2>/dev/null | head -30 >> $log
  grep -hE "^narrow|^e4m3 narrow" $L/suite.txt | head -80 > $RES/narrow-cases.txt
  step race 110 env MLAJIT_TEST_KERNEL=portable MLAJIT_CACHE_DIR=$g/uc compute-sanitizer --tool racecheck ./mlajit_gpu_tests "one small shape per tier and launch path"
  step race_fp8 90 env MLAJIT_TEST_KERNEL=portable MLAJIT_CACHE_DIR=$g/uc compute-sanitizer --tool racecheck ./mlajit_gpu_tests "e4m3 KV: one small shape per tier and row layout"
  step verify 60 env MLAJIT_CACHE_DIR=$g/uc $B verify --kernel portable
fi
S=(--shape 16,128,16384,64 --shape 16,128,4096,64 --shape 16,128,4096,1 --shape 16,16,4096,64
   --shape 8,128,4096,64,2,1 --shape 16,1,1024,64)
for r in 0 1; do
  for v in $( ((r % 2)) && echo "old nocodes main" || echo "main nocodes old"); do
    for tk in 1_bf16 2_bf16 3_bf16 3_e4m3; do
      step b_${v}_t${tk}_r$r 90 env $(kenv $v) $B bench --kernel portable --tier ${tk%_*} --kv-dtype ${tk#*_} "${S[@]}" --csv $C/b_t${tk}_${v}_r$r.csv
    done
  done
done
for tk in 1_bf16 2_bf16 3_bf16 3_e4m3; do python3 ./bench_table.py $C b_t${tk}_ main/old nocodes/old >> $log; done
echo "--- $(date +%T) q done" >> $log
