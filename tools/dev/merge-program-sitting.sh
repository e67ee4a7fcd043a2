#!/usr/bin/env bash
# Issue 9's hopper compile and issue 10's merge: the hopper kernel without its in-launch merge
# (and grid barrier), split tiles merged by the merge program (kernels/merge/mla_merge_launch.cuh)
# in a second launch, a programmatic dependent of the attention launch. new = this tree's
# build, old = 7379a8e's (the in-launch merge behind a cooperative launch's grid barrier), each
# its own install. Expected: split shapes within +-2% (the two-launch path measured so on
# 2026-12-07d), the rest level (the attention loop is untouched; only the roles' trailing
# setmaxnreg went); cold compile of a hopper spec ~0.2 s shorter.
# Then the pages of each launch in pool order against the random permutation (the page-1 bar).
# Checks first: the GPU suite on auto and forced to hopper, `mlajit verify`, racecheck,
# synccheck and memcheck on the sanitize case forced to hopper (the merge path, pages 16/64/24).
# Prepare: scripts/prepare-gpu-sitting.sh carry/gpu; the old build's install prefix in
# carry/gpu/old/prefix; this file and bench_table.py beside them.
# Device call, carry ["carry/gpu"]: bash carry/gpu/merge-program-sitting.sh [ROUNDS].
# Writes $OUT/p.txt, $OUT/p.tgz.
cd "$(dirname "$0")"; source ./sitting-lib.sh; begin_sitting p
rounds=${1:-3}
new=(env MLAJIT_CACHE_DIR=$g/uc)
old=(env LD_LIBRARY_PATH=$g/old/prefix/lib:/usr/local/cuda/lib64 MLAJIT_CACHE_DIR=$g/uc-old)
H=(MLAJIT_TEST_KERNEL=hopper)
step suite_auto 200 "${new[@]}" ./mlajit_gpu_tests
step suite_hopper 200 "${new[@]}" "${H[@]}" ./mlajit_gpu_tests
grep -E "graph replay" $L/suite_hopper.txt | head -4 >> $log
step verify 150 "${new[@]}" prefix/bin/mlajit verify
for tool in racecheck synccheck memcheck; do
  step $tool 200 "${new[@]}" "${H[@]}" compute-sanitizer --tool $tool ./mlajit_gpu_tests "[.sanitize]"
done
S=(--shape 128,1,1024,64 --shape 128,1,4096,64 --shape 128,1,16384,64 --shape 128,16,1024,64
   --shape 128,16,4096,64 --shape 16,16,4096,64 --shape 16,1,16384,64 --shape 128,2,2048,64,2,1
   --shape 128,64,16384,64 --shape 128,128,1024,64 --shape 128,64,4096,1
   --shape 128,64,4096,64,2,1 --shape 16,128,16384,64)
E=(--shape 128,1,4096,64 --shape 128,64,16384,64)
bench() {  # new|old round
  local -n cmd=$1; local bin=prefix/bin/mlajit; [[ $1 == old ]] && bin=old/prefix/bin/mlajit
  step b_$1_r$2 150 "${cmd[@]}" $bin bench --kernel hopper "${S[@]}" --iterations 50 --csv $C/b_$1_r$2.csv
  step e_$1_r$2 90 "${cmd[@]}" $bin bench --kernel hopper --kv-dtype e4m3 "${E[@]}" --iterations 50 --csv $C/e_$1_r$2.csv
}
for ((r = 0; r < rounds; r++)); do
  for v in $( ((r % 2)) && echo "old new" || echo "new old"); do bench $v $r; done
done
python3 ./bench_table.py $C b_ new/old >> $log 2>&1
python3 ./bench_table.py $C e_ new/old >> $log 2>&1
# Issue 10's page-1 bar: pages in pool order (--contiguous-pages) against the random
# permutation, both families: what the DRAM's locality costs apart from the page handling.
P=(--shape 128,64,4096,1 --shape 128,64,4096,8 --shape 128,64,4096,16 --shape 128,64,4096,64
   --shape 16,128,4096,1 --shape 16,128,4096,64)
for r in 0 1; do
  for k in hopper portable; do
    step pg_${k}_rand_r$r 90 "${new[@]}" prefix/bin/mlajit bench --kernel $k "${P[@]}" --csv $C/pg_${k}_rand_r$r.csv
    step pg_${k}_cont_r$r 90 "${new[@]}" prefix/bin/mlajit bench --kernel $k "${P[@]}" --contiguous-pages --csv $C/pg_${k}_cont_r$r.csv
  done
done
for k in hopper portable; do
  echo "=== pages, $k" >> $log
  python3 ./bench_table.py $C pg_${k}_ cont/rand >> $log 2>&1
done
# On an H200 only: this tree's record with the peers' ratios (the issues' one-run checks).
on_h200 && record_tree "${new[@]}"
echo "--- $(date +%T) p done" >> $log
