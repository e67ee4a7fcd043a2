#!/usr/bin/env bash
# The plan's upload in one copy (merge records after the work items in one array, the merge
# indexes shifted by the item count): plan_cost of this tree against main's (old_plan_cost,
# built from the commit before), two rounds in rotated order; verify on both families; the
# GPU suite on auto and forced to each family (every split plan merges through the moved
# records).
# Prepare: scripts/prepare-gpu-sitting.sh carry/gpu; this file, build/tests/plan_cost and the
# older commit's plan_cost (as old_plan_cost) beside it.
# Device call, carry ["carry/gpu"]: bash carry/gpu/plan-upload-sitting.sh. Writes $OUT/u.txt
# and $OUT/u.tgz.
cd "$(dirname "$0")"
source ./sitting-lib.sh  # step, begin_sitting
begin_sitting u
for r in 0 1; do
  for v in $( ((r % 2)) && echo "old_plan_cost plan_cost" || echo "plan_cost old_plan_cost"); do
    step ${v}_r$r 60 ./$v 500
    tail -17 $L/${v}_r$r.txt | sed "s/^/$v r$r /" >> $log
  done
done
for family in hopper portable; do
  step verify_$family 90 env MLAJIT_CACHE_DIR=$g/uc prefix/bin/mlajit verify --kernel $family
done
step suite_auto 200 env MLAJIT_CACHE_DIR=$g/uc ./mlajit_gpu_tests
for family in hopper portable; do
  step suite_$family 150 env MLAJIT_TEST_KERNEL=$family MLAJIT_CACHE_DIR=$g/uc ./mlajit_gpu_tests
done
grep -hE "FAILED|with expansion|REQUIRE" -A3 $L/suite_*.txt | head -30 >> $log
echo "--- $(date +%T) done" >> $log
