#!/usr/bin/env bash
# The merge with one call site (kernels/common/mla_merge.cuh: one instance of its chunk loop for
# shared and unshared rows, no early exit in a batch) against main's merge, in one device call:
# the GPU suite on auto and forced to each family (the batch-invariance case among them),
# `mlajit verify`, then `mlajit bench --kernel hopper|portable` on merge-heavy shapes, new
# (built in) against main's kernels (MLAJIT_KERNEL_DIR=carry/gpu/var_old/kernels, JIT-compiled
# there), two rounds.
# Prepare: scripts/prepare-gpu-sitting.sh carry/gpu; git archive <old> kernels | tar -x -C
# carry/gpu/var_old; cp this file to carry/gpu/m.sh. Device call, carry ["carry/gpu"]:
# bash carry/gpu/m.sh. Writes $OUT/m.txt and $OUT/m.tgz.
cd "$(dirname "$0")"; g=$PWD
RES=${OUT:-$g/out}; L=$g/logs; mkdir -p "$RES" "$L"; log=$RES/m.txt
trap 'tar -C $g -czf $RES/m.tgz logs 2>/dev/null' EXIT
export LD_LIBRARY_PATH=$g/prefix/lib:/usr/local/cuda/lib64 MLAJIT_CACHE_PATH=$g/cache MLAJIT_CACHE_DIR=$g/uc
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee -a $log
source ./sitting-lib.sh  # step()
step verify 90 prefix/bin/mlajit verify
step suite_auto 150 ./mlajit_gpu_tests
step suite_hopper 150 env MLAJIT_TEST_KERNEL=hopper ./mlajit_gpu_tests
step suite_portable 150 env MLAJIT_TEST_KERNEL=portable ./mlajit_gpu_tests
grep -E "FAILED" -A3 $L/suite_*.txt | head -12 >> $log
shapes=(--shape 128,1,16384,64 --shape 128,1,1024,64 --shape 128,16,4096,64 --shape 16,1,16384,64 --shape 16,16,4096,64)
for r in 1 2; do
  for fam in hopper portable; do
    step ${fam}_new_r$r 120 prefix/bin/mlajit bench --kernel $fam "${shapes[@]}"
    step ${fam}_old_r$r 120 env MLAJIT_KERNEL_DIR=$g/var_old/kernels MLAJIT_CACHE_DIR=$g/uc-old prefix/bin/mlajit bench --kernel $fam "${shapes[@]}"
  done
done
for f in $L/*_r?.txt; do grep -E "^ *[0-9]+ +[0-9]+ " $f | sed "s/^/$(basename $f .txt) /" >> $log; done
echo "--- $(date +%T) done" >> $log
