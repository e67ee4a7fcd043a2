#!/usr/bin/env bash
# Issues 10 and 11: every kernel function asks for the largest shared-memory carveout
# (CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT), so that an SM need not switch its
# L1 / shared split between the attention launch (~223 KB of shared memory) and the merge
# launch behind it (a few KB, for which the driver may pick a small carveout), nor back
# before the next attention launch. new = the tree's install without it (prefix/), carve = with
# it (carve/prefix). Expected: split launches (B=1, B=16 at 128 heads; 16 heads B=1) 0.3-1.5 µs
# faster if the switch costs; unsplit launches (no merge) level.
# Prepare: scripts/prepare-gpu-sitting.sh carry/gpu; the variant's install in carry/gpu/carve/prefix;
# this file and bench_table.py beside them.
# Device call, carry ["carry/gpu"]: bash carry/gpu/carveout-sitting.sh [ROUNDS]. Writes $OUT/c.txt, $OUT/c.tgz.
cd "$(dirname "$0")"; source ./sitting-lib.sh; begin_sitting c
rounds=${1:-3}
new=(env MLAJIT_CACHE_DIR=$g/uc)
carve=(env LD_LIBRARY_PATH=$g/carve/prefix/lib:/usr/local/cuda/lib64 MLAJIT_CACHE_DIR=$g/uc)
step verify_carve 150 "${carve[@]}" carve/prefix/bin/mlajit verify
S=(--shape 128,1,1024,64 --shape 128,1,4096,64 --shape 128,1,16384,64 --shape 128,16,1024,64
   --shape 16,1,16384,64 --shape 128,2,2048,64,2,1 --shape 128,128,1024,64)
bench() {  # new|carve round
  local -n cmd=$1; local bin=prefix/bin/mlajit; [[ $1 == carve ]] && bin=carve/prefix/bin/mlajit
  for k in hopper portable; do
    step ${k}_$1_r$2 120 "${cmd[@]}" $bin bench --kernel $k "${S[@]}" --iterations 100 --csv $C/${k}_$1_r$2.csv
  done
}
for ((r = 0; r < rounds; r++)); do
  for v in $( ((r % 2)) && echo "carve new" || echo "new carve"); do bench $v $r; done
done
for k in hopper portable; do python3 ./bench_table.py $C ${k}_ carve/new >> $log 2>&1; done
echo "--- $(date +%T) c done" >> $log
