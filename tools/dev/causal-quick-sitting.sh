#!/usr/bin/env bash
# The causal sitting cut to what about 4 minutes of device time holds: verify on both families
# (this tree), verify on the narrowall kernels, then one rotated round of new / old (f10fd63)
# on the hopper A/B shapes and new / narrow / old on portable tier 1. Prepare as
# causal-runtime-sitting.sh (tools/dev/prepare-causal-sitting.sh, which copies this file too).
# Device call, carry ["carry/gpu"]: bash carry/gpu/causal-quick-sitting.sh. Writes $OUT/q.txt,
# $OUT/q.tgz.
cd "$(dirname "$0")"
source ./sitting-lib.sh  # step, begin_sitting, HOPPER_AB_SHAPES
begin_sitting q
new=prefix/bin/mlajit
old_env="MLAJIT_CACHE_DIR=$g/uc-old LD_LIBRARY_PATH=$g/old/prefix/lib:/usr/local/cuda/lib64"
for family in hopper portable; do
  step verify_$family 60 env MLAJIT_CACHE_DIR=$g/uc $new verify --kernel $family
done
step verify_narrowall 60 env MLAJIT_CACHE_DIR=$g/uc-narrowall MLAJIT_KERNEL_DIR=$g/narrowall/kernels \
  $new verify --kernel portable
P1=(--shape 128,64,4096,64 --shape 128,64,4096,64,2,1 --shape 128,1,1024,64 --shape 16,128,4096,64)
step bh_new 60 env MLAJIT_CACHE_DIR=$g/uc $new bench --kernel hopper "${HOPPER_AB_SHAPES[@]}" --csv $C/bh_new.csv
step bh_old 60 env $old_env old/prefix/bin/mlajit bench --kernel hopper "${HOPPER_AB_SHAPES[@]}" --csv $C/bh_old.csv
step bp1_old 45 env $old_env old/prefix/bin/mlajit bench --kernel portable --tier 1 "${P1[@]}" --csv $C/bp1_old.csv
step bp1_narrow 45 env MLAJIT_CACHE_DIR=$g/uc-narrow MLAJIT_KERNEL_DIR=$g/narrow/kernels $new bench \
  --kernel portable --tier 1 "${P1[@]}" --csv $C/bp1_narrow.csv
step bp1_new 45 env MLAJIT_CACHE_DIR=$g/uc $new bench --kernel portable --tier 1 "${P1[@]}" --csv $C/bp1_new.csv
for kind in bh bp1; do python3 ./bench_table.py $C ${kind}_ new/old new/narrow >> $log; done
echo "--- $(date +%T) q done" >> $log
