#!/usr/bin/env bash
# Issue 10's "merge in the same launch or in a second launch overlapped by programmatic dependent
# launch, whichever measures faster" (and issue 11's fixed costs at B=1): the two-launch path's
# merge launch is now a programmatic dependent of the attention launch (sm_90+), scheduled as
# the attention's CTAs leave their SMs, waiting in the kernel for the attention's end.
# `mlajit bench --two-launch` against the cooperative launch (grid barrier), both families, on
# the shapes whose plans split; variant `notrigger` (carry/gpu/notrigger/kernels): the attention
# kernel without griddepcontrol.launch_dependents (the merge launch is then scheduled at the
# attention's exit). Expected: two-launch within +-1 us of cooperative (the barrier's 1.4-2.4 us
# against the second launch's scheduling), notrigger 0.5-2 us slower than two-launch.
# Checks first: the GPU suite on auto and forced to each family (the two-launch cases, the
# graph test on both paths), `mlajit verify`.
# Prepare: scripts/prepare-gpu-sitting.sh carry/gpu; carry/gpu/notrigger/kernels; this file and
# bench_table.py beside them.
# Device call, carry ["carry/gpu"]: bash carry/gpu/pdl-merge-sitting.sh [ROUNDS]. Writes $OUT/m.txt, $OUT/m.tgz.
cd "$(dirname "$0")"; source ./sitting-lib.sh; begin_sitting m
rounds=${1:-3}
B=prefix/bin/mlajit
U=$(kenv main)
step suite_auto 200 env $U ./mlajit_gpu_tests
step suite_hopper 200 env $U MLAJIT_TEST_KERNEL=hopper ./mlajit_gpu_tests
step suite_portable 200 env $U MLAJIT_TEST_KERNEL=portable ./mlajit_gpu_tests
grep -E "graph replay" $L/suite_auto.txt | head -4 >> $log
step verify 150 env $U $B verify
S=(--shape 128,1,1024,64 --shape 128,1,4096,64 --shape 128,1,16384,64 --shape 128,16,1024,64
   --shape 128,16,4096,64 --shape 16,16,4096,64 --shape 16,1,16384,64 --shape 128,2,2048,64,2,1)
for ((r = 0; r < rounds; r++)); do
  for k in hopper portable; do
    case $((r % 3)) in 0) order="coop two nt";; 1) order="two nt coop";; 2) order="nt coop two";; esac
    for v in $order; do
      case $v in
        coop) step b_${k}_coop_r$r 90 env $U $B bench --kernel $k "${S[@]}" --iterations 50 --csv $C/${k}_coop_r$r.csv;;
        two) step b_${k}_two_r$r 90 env $U $B bench --kernel $k "${S[@]}" --two-launch --iterations 50 --csv $C/${k}_two_r$r.csv;;
        nt) step b_${k}_nt_r$r 90 env $(kenv notrigger) $B bench --kernel $k "${S[@]}" --two-launch --iterations 50 --csv $C/${k}_nt_r$r.csv;;
      esac
    done
  done
done
for k in hopper portable; do
  echo "=== $k" >> $log
  python3 ./bench_table.py $C ${k}_ two/coop nt/two >> $log 2>&1
done
echo "--- $(date +%T) m done" >> $log
