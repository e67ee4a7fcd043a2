#!/usr/bin/env bash
# The hopper family's scores warpgroup pipelined one tile deep (the next tile's QK issued
# before this tile's softmax) against main's kernels, on one GPU: the GPU suite forced to
# hopper on the variant, verify, racecheck and synccheck on "[.sanitize]", then `mlajit bench
# --kernel hopper` over a bf16 cache, main and the variant alternating for two rounds.
# Prepare: scripts/prepare-gpu-sitting.sh carry/gpu (main's tree), the variant's kernels in
# carry/gpu/var/pipe/kernels, this file as carry/gpu/c.sh, tools/dev/bench_table.py beside it.
# Device call, carry ["carry/gpu"]: bash carry/gpu/c.sh. Writes $OUT/c.txt and $OUT/c.tgz.
cd "$(dirname "$0")"; g=$PWD
RES=${OUT:-$g/out}; L=$g/logsc; mkdir -p "$RES" "$L" "$g/csvc"; log=$RES/c.txt
trap 'tar -C $g -czf $RES/c.tgz logsc csvc 2>/dev/null' EXIT
export LD_LIBRARY_PATH=$g/prefix/lib:/usr/local/cuda/lib64 MLAJIT_CACHE_PATH=$g/cache MLAJIT_CACHE_DIR=$g/uc
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,temperature.gpu,power.draw --format=csv,noheader | tee -a $log
source ./sitting-lib.sh  # step()
pipe() { MLAJIT_KERNEL_DIR=$g/var/pipe/kernels MLAJIT_CACHE_DIR=$g/uc-pipe MLAJIT_TEST_KERNEL=hopper "$@"; }
shapes=("${HOPPER_AB_SHAPES[@]}")
bench() {  # variant round
  local dir=""; [[ $1 == pipe ]] && dir=$g/var/pipe/kernels
  MLAJIT_KERNEL_DIR=$dir MLAJIT_CACHE_DIR=$g/uc-$1 step bench_$1_r$2 90 prefix/bin/mlajit bench \
    --kernel hopper "${shapes[@]}" --csv $g/csvc/s_$1_r$2.csv
}
pipe step suite_pipe 150 ./mlajit_gpu_tests
grep -E "FAILED" -A3 $L/suite_pipe.txt | head -20 >> $log
bench main 1; bench pipe 1
python3 ./bench_table.py $g/csvc s_ | tee -a $log
pipe step verify_pipe 60 prefix/bin/mlajit verify --kernel hopper
pipe step race_pipe 100 compute-sanitizer --tool racecheck ./mlajit_gpu_tests "[.sanitize]"
pipe step sync_pipe 100 compute-sanitizer --tool synccheck ./mlajit_gpu_tests "[.sanitize]"
bench pipe 2; bench main 2
python3 ./bench_table.py $g/csvc s_ | tee -a $log
echo "--- $(date +%T) done" >> $log
