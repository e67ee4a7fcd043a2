#!/usr/bin/env bash
# The hopper family's stage copies completing on one barrier per group of regions, so that the
# scores warpgroup starts a tile's QK on its first regions while the rest land: kCopyGroups 1
# (one barrier per stage, as before: the baseline), 3 and 9, on one GPU. Checks the GPU suite
# forced to hopper on 3 and 9, racecheck and synccheck on "[.sanitize]", then `mlajit bench
# --kernel hopper` (bf16; and e4m3 at two shapes) over the three, two rounds in turn.
# Prepare: scripts/prepare-gpu-sitting.sh carry/gpu (or install the tree there), the three
# kernel trees in carry/gpu/var/g{1,3,9}/kernels (kCopyGroups set), this file as
# carry/gpu/d.sh, tools/dev/bench_table.py beside it. Device call, carry ["carry/gpu"]:
# bash carry/gpu/d.sh. Writes $OUT/d.txt and $OUT/d.tgz.
cd "$(dirname "$0")"; g=$PWD
RES=${OUT:-$g/out}; L=$g/logsd; mkdir -p "$RES" "$L" "$g/csvd"; log=$RES/d.txt
trap 'tar -C $g -czf $RES/d.tgz logsd csvd 2>/dev/null' EXIT
export LD_LIBRARY_PATH=$g/prefix/lib:/usr/local/cuda/lib64
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,temperature.gpu,power.draw --format=csv,noheader | tee -a $log
source ./sitting-lib.sh  # step()
var() { local v=$1; shift; MLAJIT_KERNEL_DIR=$g/var/$v/kernels MLAJIT_CACHE_DIR=$g/uc-$v MLAJIT_TEST_KERNEL=hopper "$@"; }
shapes=("${HOPPER_AB_SHAPES[@]}")
bench() {  # variant round
  var $1 step bench_$1_r$2 90 prefix/bin/mlajit bench --kernel hopper "${shapes[@]}" --csv $g/csvd/s_$1_r$2.csv
  var $1 step bench8_$1_r$2 60 prefix/bin/mlajit bench --kernel hopper --kv-dtype e4m3 \
    --shape 128,64,16384,64 --shape 64,64,16384,64 --csv $g/csvd/e_$1_r$2.csv
}
var g3 step suite_g3 150 ./mlajit_gpu_tests
grep -E "FAILED" -A3 $L/suite_g3.txt | head -20 >> $log
for v in g1 g3 g9; do bench $v 1; done
python3 ./bench_table.py $g/csvd s_ | tee -a $log
var g3 step race_g3 100 compute-sanitizer --tool racecheck ./mlajit_gpu_tests "[.sanitize]"
var g9 step suite_g9 150 ./mlajit_gpu_tests
grep -E "FAILED" -A3 $L/suite_g9.txt | head -20 >> $log
for v in g9 g3 g1; do bench $v 2; done
python3 ./bench_table.py $g/csvd s_ | tee -a $log
python3 ./bench_table.py $g/csvd e_ | tee -a $log
var g3 step sync_g3 100 compute-sanitizer --tool synccheck ./mlajit_gpu_tests "[.sanitize]"
var g9 step race_g9 100 compute-sanitizer --tool racecheck ./mlajit_gpu_tests "[.sanitize]"
var g3 step verify_g3 60 prefix/bin/mlajit verify --kernel hopper
echo "--- $(date +%T) done" >> $log
