#!/usr/bin/env bash
# Issue 10: the hopper family's TMA path for pages smaller than a tile, a box per page (pages of
# 16 and 32 tokens; the first sitting timed 1-32: 1.29-6.6x slower than the gather at 1-8), the
# whole-tile path as lean as before (lane 0, constant bytes: the first form's box count and loop
# cost 5% at page 64), and the gather's page slots read a tile ahead (NextPages::slot: 5% at
# page 1 in the first sitting). Variant `ptrs` (carry/gpu/ptrs/kernels): the gather's whole row
# offsets a tile ahead (16 registers more in the producer; ptxas: no spills). Expected at 128
# heads B64 L4096 (H100): page 64 back at old's 128.4-128.9 µs, page 32 ~0.93x old, page 16
# ~0.985x, page 1 ~0.95x, page 8 ~0.97x (the slots); ptrs another 1-3% at pages 1 and 8.
# Checks first: the hopper page test over pages 1-128, verify, the GPU suite forced to hopper,
# racecheck and synccheck on the sanitize case (pages 16, 64 and 24); the page test on ptrs.
# Prepare: scripts/prepare-gpu-sitting.sh carry/gpu; the old build's install prefix (main before
# the change: a worktree, cmake -DMLAJIT_BUILD_TESTS=OFF, cmake --install) in
# carry/gpu/old/prefix; the ptrs kernels in carry/gpu/ptrs/kernels; this file and
# bench_table.py beside them.
# Device call, carry ["carry/gpu"]: bash carry/gpu/page-boxes-sitting.sh [ROUNDS] [FULL].
# Writes $OUT/p.txt, $OUT/p.tgz.
cd "$(dirname "$0")"; source ./sitting-lib.sh; begin_sitting p
rounds=${1:-2}; full=${2:-1}
new=(env MLAJIT_CACHE_DIR=$g/uc)
old=(env LD_LIBRARY_PATH=$g/old/prefix/lib:/usr/local/cuda/lib64 MLAJIT_CACHE_DIR=$g/uc-old)
ptrs=(env MLAJIT_CACHE_DIR=$g/uc-ptrs MLAJIT_KERNEL_DIR=$g/ptrs/kernels)
PT="the hopper family on compute capability 9.0: TMA pages and gathered pages"
step pages 150 env MLAJIT_TEST_KERNEL=hopper MLAJIT_CACHE_DIR=$g/uc ./mlajit_gpu_tests "$PT"
grep -E "kernel=hopper" $L/pages.txt | head -24 >> $log
step pages_ptrs 150 "${ptrs[@]}" MLAJIT_TEST_KERNEL=hopper ./mlajit_gpu_tests "$PT"
step verify 90 "${new[@]}" prefix/bin/mlajit verify --kernel hopper
S=(--shape 128,64,4096,1 --shape 128,64,4096,8 --shape 128,64,4096,16 --shape 128,64,4096,32
   --shape 128,64,4096,64 --shape 128,64,16384,64 --shape 128,128,1024,64
   --shape 128,64,4096,64,2,1 --shape 16,128,4096,1 --shape 16,128,16384,64)
bench() {  # new|old|ptrs round
  local -n cmd=$1; local bin=prefix/bin/mlajit; [[ $1 == old ]] && bin=old/prefix/bin/mlajit
  step b_$1_r$2 150 "${cmd[@]}" $bin bench --kernel hopper "${S[@]}" --csv $C/b_$1_r$2.csv
}
for ((r = 0; r < rounds; r++)); do
  case $((r % 3)) in 0) order="new old ptrs";; 1) order="ptrs new old";; 2) order="old ptrs new";; esac
  for v in $order; do bench $v $r; done
done
python3 ./bench_table.py $C b_ new/old ptrs/new >> $log 2>&1
if ((full)); then
  step suite 300 env MLAJIT_TEST_KERNEL=hopper MLAJIT_CACHE_DIR=$g/uc ./mlajit_gpu_tests
  step race 150 env MLAJIT_TEST_KERNEL=hopper MLAJIT_CACHE_DIR=$g/uc compute-sanitizer --tool racecheck ./mlajit_gpu_tests "[.sanitize]"
  step sync 150 env MLAJIT_TEST_KERNEL=hopper MLAJIT_CACHE_DIR=$g/uc compute-sanitizer --tool synccheck ./mlajit_gpu_tests "[.sanitize]"
fi
echo "--- $(date +%T) p done" >> $log
