#!/usr/bin/env bash
# The hopper family's cluster pairs (issue 10): at 128 heads the two 64-row CTAs of a query
# tile run as a cluster of 2 and each copies half of every KV tile into both (TMA multicast).
# One device call: the GPU suite on auto and forced to hopper, `mlajit verify --kernel hopper`,
# racecheck and synccheck on "[.sanitize]" forced to hopper (its cluster-pair rounds), then
# `mlajit bench --kernel hopper` at 128 heads, two rounds, each against main's kernels
# (MLAJIT_KERNEL_DIR=old-kernels: the same host, so the same cluster launch and plan, the
# old kernel copying alone), and ncu's memory view of both at H128 B64 L16384.
# Prepare: scripts/prepare-gpu-sitting.sh carry/gpu; git archive HEAD~N kernels | tar -x -C
# carry/gpu/old (main's kernels before the pair); cp this file to carry/gpu/p.sh.
# Device calls, carry ["carry/gpu"]: bash carry/gpu/p.sh 1 (verify, bench, suites), then 2
# (sanitizers, ncu). Writes $OUT/p<part>.txt and .tgz.
cd "$(dirname "$0")"; g=$PWD; part=${1:-1}
RES=${OUT:-$g/out}; L=$g/logs; mkdir -p "$RES" "$L" "$g/csv"; log=$RES/p$part.txt
trap 'tar -C $g -czf $RES/p$part.tgz logs csv 2>/dev/null' EXIT
export LD_LIBRARY_PATH=$g/prefix/lib:/usr/local/cuda/lib64 MLAJIT_CACHE_PATH=$g/cache MLAJIT_CACHE_DIR=$g/uc
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,temperature.gpu,power.draw --format=csv,noheader | tee -a $log
source ./sitting-lib.sh  # step()
shapes="128,64,16384,64 128,128,16384,64 128,128,1024,64 128,16,4096,64 128,1,1024,64 128,64,4096,64,2,1 128,64,4096,64,4,1"
args=(); for s in $shapes; do args+=(--shape "$s"); done
bench() {  # name [env...]
  local name=$1; shift
  step $name 150 env "$@" prefix/bin/mlajit bench --kernel hopper "${args[@]}" --csv $g/csv/$name.csv
  grep -E "^ *[0-9]+ +[0-9]+ " $L/$name.txt | sed "s/^/$name /" >> $log
}
if [[ $part == 1 ]]; then
  step verify_hopper 90 prefix/bin/mlajit verify --kernel hopper
  for round in 1 2; do
    bench pair_r$round
    bench alone_r$round MLAJIT_KERNEL_DIR=$g/old/kernels MLAJIT_CACHE_DIR=$g/uc-old
  done
  MLAJIT_TEST_KERNEL=hopper step suite_hopper 150 ./mlajit_gpu_tests
  step suite_auto 150 ./mlajit_gpu_tests
  grep -E "FAILED" -A3 $L/suite_auto.txt $L/suite_hopper.txt | head -20 >> $log
else
  MLAJIT_TEST_KERNEL=hopper step race 150 compute-sanitizer --tool racecheck ./mlajit_gpu_tests "[.sanitize]"
  grep -E "cluster pair" $L/race.txt | head -4 >> $log
  MLAJIT_TEST_KERNEL=hopper step sync 120 compute-sanitizer --tool synccheck ./mlajit_gpu_tests "[.sanitize]"
  MLAJIT_TEST_KERNEL=hopper step memcheck 120 compute-sanitizer --tool memcheck ./mlajit_gpu_tests "[.sanitize]"
  for side in pair alone; do
    extra=(); [[ $side == alone ]] && extra=(MLAJIT_KERNEL_DIR=$g/old/kernels MLAJIT_CACHE_DIR=$g/uc-old)
    step ncu_$side 150 env "${extra[@]}" ncu --clock-control none -k regex:mla_hopper --launch-skip 3 \
      --launch-count 1 --section SpeedOfLight --section MemoryWorkloadAnalysis \
      --section ComputeWorkloadAnalysis prefix/bin/mlajit bench --kernel hopper --shape 128,64,16384,64
    grep -E "Duration|DRAM Throughput|L2 Cache Throughput|L1/TEX Cache Throughput|Compute \(SM\)|Memory Throughput" \
      $L/ncu_$side.txt | sed "s/^/$side /" >> $log
  done
fi
echo "--- $(date +%T) done" >> $log
