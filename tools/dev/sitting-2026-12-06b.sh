#!/usr/bin/env bash
# Main's tree (the hopper e4m3-in-f16 kernel and DeepSeek-V3.2's per-token scales landed) on
# one GPU, in two calls. Part 1, the baseline (on an H200 if lent: the peers' ratios of issues
# 9-12): the GPU suite on auto and forced to hopper, `mlajit verify` on both, the host planning
# cost, the whole `mlajit bench` on auto, the e4m3 sweeps of issue 12 (hopper e4m3 / bf16 at
# 32-128 heads; portable bf16 / e4m3 / V3.2 rows at 16 heads). Part 2, where a 128-head tile's
# time goes: ncu (full set, one launch, clocks left alone) of the hopper kernel over bf16 and
# e4m3 at H128 B64 L16384, the clock64 trace (tools/dev/trace/hopper-trace.patch) of both, and
# synccheck on "[.sanitize-fp8]" forced to hopper.
# Prepare: scripts/prepare-gpu-sitting.sh carry/gpu; cp build/tests/plan_cost and the traced
# harness (tools/dev/trace/README.md) into carry/gpu; cp this file to carry/gpu/b.sh.
# Device call, carry ["carry/gpu"]: bash carry/gpu/b.sh 1|2|bench (part 1's timings only). Writes $OUT/b<part>.txt and
# $OUT/b<part>.tgz (logs, CSVs, ncu reports).
cd "$(dirname "$0")"; g=$PWD; part=${1:-1}
RES=${OUT:-$g/out}; L=$g/logs$part; mkdir -p "$RES" "$L" "$g/csv"; log=$RES/b$part.txt
trap 'tar -C $g -czf $RES/b$part.tgz logs$part csv 2>/dev/null' EXIT
export LD_LIBRARY_PATH=$g/prefix/lib:/usr/local/cuda/lib64 MLAJIT_CACHE_PATH=$g/cache MLAJIT_CACHE_DIR=$g/uc
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,temperature.gpu,power.draw --format=csv,noheader | tee -a $log
source ./sitting-lib.sh  # step()
sweep() {  # family kv-args... -- shapes...
  local fam=$1; shift; local kv=(); while [[ $1 != -- ]]; do kv+=("$1"); shift; done; shift
  local args=(); for s in "$@"; do args+=(--shape "$s"); done
  local name="bench_${fam}_${kv[*]}"; name=${name// /_}; name=${name//--/}
  step $name 120 prefix/bin/mlajit bench --kernel $fam --kv-dtype "${kv[@]}" "${args[@]}" --csv $g/csv/$name.csv
}
if [[ $part == 1 || $part == bench ]]; then  # bench: part 1 without the checks
  [[ $part == bench ]] || {
  step suite_auto 150 ./mlajit_gpu_tests
  MLAJIT_TEST_KERNEL=hopper step suite_hopper 150 ./mlajit_gpu_tests
  grep -E "FAILED" -A3 $L/suite_auto.txt $L/suite_hopper.txt | head -20 >> $log
  step verify_auto 90 prefix/bin/mlajit verify --kernel auto
  step verify_hopper 90 prefix/bin/mlajit verify --kernel hopper
  step plan_cost 60 ./plan_cost 300
  }
  step bench_auto 240 prefix/bin/mlajit bench --csv $g/csv/bench_auto.csv
  s128="128,1,1024,64 128,16,4096,64 128,64,4096,64 128,64,16384,64 128,128,1024,64 128,128,16384,64 128,64,4096,1 128,64,4096,64,2,1 64,64,16384,64 32,64,16384,64"
  s16="16,128,16384,64 16,64,16384,64 16,128,4096,64 16,16,16384,64 16,128,4096,1 16,128,4096,64,2,1"
  sweep hopper e4m3 -- $s128
  sweep hopper bf16 -- $s128
  sweep portable bf16 -- $s16
  sweep portable e4m3 -- $s16
  sweep portable e4m3 --kv-scales token128 -- $s16 128,64,16384,64 128,128,1024,64
  tail -45 $L/bench_auto.txt >> $log
  for f in $L/bench_*_*.txt; do echo "== $(basename $f)" >> $log; grep -E "^ *[0-9]+ +[0-9]+ " $f >> $log; done
  [[ -f $L/plan_cost.txt ]] && tail -25 $L/plan_cost.txt >> $log
else
  for kv in bf16 e4m3; do
    step ncu_$kv 150 ncu --clock-control none -k regex:mla_hopper --launch-skip 3 --launch-count 1 \
      --set full --import-source no -o $L/ncu_$kv prefix/bin/mlajit bench --kernel hopper \
      --kv-dtype $kv --shape 128,64,16384,64
    ncu --import $L/ncu_$kv.ncu-rep --page details > $L/ncu_${kv}_details.txt 2>&1
    ncu --import $L/ncu_$kv.ncu-rep --page raw --csv > $L/ncu_${kv}_raw.csv 2>&1
    grep -E "Compute \(SM\) Throughput|Memory Throughput|DRAM Throughput|Duration|Issue Slots Busy|Eligible Warps|No Eligible|Shared" $L/ncu_${kv}_details.txt | head -20 >> $log
  done
  for mode in --one --one8; do
    step trace$mode 60 ./harness_trace $mode 128 64 16384 64
    grep -iE "steady|role|tile|us" $L/trace$mode.txt | head -30 >> $log
  done
  MLAJIT_TEST_KERNEL=hopper step sync_fp8 100 compute-sanitizer --tool synccheck ./mlajit_gpu_tests "[.sanitize-fp8]"
fi
echo "--- $(date +%T) done" >> $log
