#!/usr/bin/env bash
# Issue 10/11: causal tiles' KV ends rounded up to whole kernel tiles in the planner, so that a
# speculative request's tiles cost the same and run side by side (reading its KV from L2
# together). Expected: q_len 2-4 causal at 128 heads 4-5% faster on both families (the q_len 2
# launch took 252-254 µs against 242.6 without the mask on the H100), every other shape level.
# Checks: verify and the GPU suite on both families (their causal cases plan through it).
# Prepare: tools/dev/prepare-causal-sitting.sh (old = f10fd63, the planner before); cp this file.
# Device call, carry ["carry/gpu"]: bash carry/gpu/causal-plan-sitting.sh. Writes $OUT/p.txt, $OUT/p.tgz.
cd "$(dirname "$0")"; source ./sitting-lib.sh; begin_sitting p
new=prefix/bin/mlajit old=old/prefix/bin/mlajit
for family in hopper portable; do
  step verify_$family 60 env MLAJIT_CACHE_DIR=$g/uc $new verify --kernel $family
  step suite_$family 150 env MLAJIT_TEST_KERNEL=$family MLAJIT_CACHE_DIR=$g/uc ./mlajit_gpu_tests
done
grep -hE "FAILED|with expansion|REQUIRE" -A3 $L/suite_*.txt 2>/dev/null | head -30 >> $log
H=(--shape 128,64,4096,64,2,1 --shape 128,64,4096,64,4,1 --shape 128,16,16384,64,2,1
   --shape 128,16,16384,64,4,1 --shape 128,64,4096,64,2,0 --shape 128,64,4097,64,2,1
   --shape 16,128,4096,64,2,1 --shape 128,64,16384,64)
P=(--shape 128,64,4096,64,2,1 --shape 128,64,4096,64,4,1 --shape 128,64,4096,64,2,0)
old_env="MLAJIT_CACHE_DIR=$g/uc-old LD_LIBRARY_PATH=$g/old/prefix/lib:/usr/local/cuda/lib64"
for r in 0 1; do
  for v in $( ((r % 2)) && echo "old new" || echo "new old"); do
    [[ $v == new ]] && e="MLAJIT_CACHE_DIR=$g/uc" b=$new || e=$old_env b=$old
    step bh_${v}_r$r 90 env $e $b bench --kernel hopper "${H[@]}" --csv $C/bh_${v}_r$r.csv
    step bp_${v}_r$r 90 env $e $b bench --kernel portable --tier 1 "${P[@]}" --csv $C/bp_${v}_r$r.csv
  done
done
for kind in bh bp; do python3 ./bench_table.py $C ${kind}_ new/old >> $log; done
echo "--- $(date +%T) p done" >> $log
