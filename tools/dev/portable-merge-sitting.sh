#!/usr/bin/env bash
# Issues 9 and 11: the portable family from sm_90 merges split tiles as the hopper family does,
# in a launch of the merge program (mla_merge) that is a programmatic dependent of the attention
# launch; its kernel then holds no merge and no grid barrier (MlaConfig MERGES_ITSELF = false).
# Below sm_90 nothing changes. new = this tree's build, old = main's without the patch (the portable kernel's
# in-launch merge behind its grid barrier), each its own install. Expected: split shapes 0-5%
# faster (hopper's B=1 gained 3-5% so), the rest level; ~0.12 s less of each sm_90+ portable
# spec's cold compile.
# It times any change to that path against main: since 2026-12-07f the prepared one is
# tools/dev/results/sitting-2026-12-07f/portable-merge-program.patch (main's kernel unchanged,
# run as phase 1, with the merge program behind it; prepare-merge-program-sitting.sh).
# Checks first: the GPU suite forced to portable, `mlajit verify`, racecheck and memcheck on
# the sanitize case forced to portable (every tier, both paths).
# Then, on an H200 only, this tree's record (record_tree).
# Prepare: scripts/prepare-gpu-sitting.sh carry/gpu; the old build's install prefix in
# carry/gpu/old/prefix; this file and bench_table.py beside them.
# Device call, carry ["carry/gpu"]: bash carry/gpu/portable-merge-sitting.sh [ROUNDS].
# Writes $OUT/q.txt, $OUT/q.tgz.
cd "$(dirname "$0")"; source ./sitting-lib.sh; begin_sitting q
rounds=${1:-2}
new=(env MLAJIT_CACHE_DIR=$g/uc)
old=(env LD_LIBRARY_PATH=$g/old/prefix/lib:/usr/local/cuda/lib64 MLAJIT_CACHE_DIR=$g/uc-old)
P=(MLAJIT_TEST_KERNEL=portable)
step suite_portable 200 "${new[@]}" "${P[@]}" ./mlajit_gpu_tests
step verify 150 "${new[@]}" prefix/bin/mlajit verify
for tool in racecheck memcheck; do
  step $tool 200 "${new[@]}" "${P[@]}" compute-sanitizer --tool $tool ./mlajit_gpu_tests "[.sanitize]"
done
S=(--shape 128,1,1024,64 --shape 128,1,4096,64 --shape 128,1,16384,64 --shape 128,16,1024,64
   --shape 128,16,4096,64 --shape 16,16,4096,64 --shape 16,1,16384,64 --shape 128,2,2048,64,2,1
   --shape 128,64,16384,64 --shape 16,128,16384,64 --shape 16,128,4096,1)
T=(--shape 128,64,4096,64 --shape 16,128,4096,64)
bench() {  # new|old round
  local -n cmd=$1; local bin=prefix/bin/mlajit; [[ $1 == old ]] && bin=old/prefix/bin/mlajit
  step b_$1_r$2 150 "${cmd[@]}" $bin bench --kernel portable "${S[@]}" --iterations 50 --csv $C/b_$1_r$2.csv
  step t2_$1_r$2 90 "${cmd[@]}" $bin bench --kernel portable --tier 2 "${T[@]}" --csv $C/t2_$1_r$2.csv
  step t3_$1_r$2 90 "${cmd[@]}" $bin bench --kernel portable --tier 3 "${T[@]}" --csv $C/t3_$1_r$2.csv
  step e_$1_r$2 90 "${cmd[@]}" $bin bench --kernel portable --kv-dtype e4m3 --shape 16,128,16384,64 --shape 16,1,16384,64 --csv $C/e_$1_r$2.csv
}
for ((r = 0; r < rounds; r++)); do
  for v in $( ((r % 2)) && echo "old new" || echo "new old"); do bench $v $r; done
done
for t in b_ t2_ t3_ e_; do python3 ./bench_table.py $C $t new/old >> $log 2>&1; done
on_h200 && record_tree "${new[@]}"
echo "--- $(date +%T) q done" >> $log
