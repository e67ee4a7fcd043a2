#!/usr/bin/env bash
# Issue 9's compile cuts against main's kernels in one device call, on one build (the kernels
# built into the library are main's): `once` = the in-launch merge with one call site,
# `new` = that and one branch for both output warpgroups (the hopper output loop in the
# kernel once), its warpgroup index broadcast from lane 0 so that ptxas keeps the output
# loop's descriptors in uniform registers. `new`: the GPU suite forced to hopper and on auto,
# `mlajit verify`, racecheck and synccheck (the suite forced to portable with `once` ran in the
# sitting before). Then `mlajit bench --kernel hopper` and `--kernel portable` rounds, the
# variants taking turns. On an H200 it then runs the default `mlajit bench` (auto) and the
# 16-head e4m3/bf16 pair of issue 12 against the PERF.md tables.
# Prepare: scripts/prepare-gpu-sitting.sh carry/gpu; carry/gpu/{once,new}/kernels;
# cp this file to carry/gpu/c.sh. Device call, carry ["carry/gpu"]: bash carry/gpu/c.sh ROUNDS.
# Writes $OUT/c.txt and $OUT/c.tgz (logs, CSVs).
cd "$(dirname "$0")"; g=$PWD
RES=${OUT:-$g/out}; L=$g/logs; mkdir -p "$RES" "$L" "$g/csv"; log=$RES/c.txt
trap 'tar -C $g -czf $RES/c.tgz logs csv 2>/dev/null' EXIT
export LD_LIBRARY_PATH=$g/prefix/lib:/usr/local/cuda/lib64 MLAJIT_CACHE_PATH=$g/cache
rounds=${1:-2}
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,temperature.gpu --format=csv,noheader | tee -a $log
source ./sitting-lib.sh  # step(), kenv()
step verify_new 120 env $(kenv new) prefix/bin/mlajit verify
step suite_new_hopper 150 env $(kenv new) MLAJIT_TEST_KERNEL=hopper ./mlajit_gpu_tests
step suite_new_auto 150 env $(kenv new) ./mlajit_gpu_tests
step racecheck_fp8_new 150 env $(kenv new) MLAJIT_TEST_KERNEL=hopper compute-sanitizer --tool racecheck ./mlajit_gpu_tests "[.sanitize-fp8]"
for tool in racecheck synccheck; do
  step ${tool}_new 150 env $(kenv new) MLAJIT_TEST_KERNEL=hopper compute-sanitizer --tool $tool ./mlajit_gpu_tests "[.sanitize]"
done
grep -E "FAILED" -A3 $L/suite_*.txt | head -12 >> $log
hop=(--shape 128,128,16384,64 --shape 128,128,4096,64 --shape 128,128,1024,64 --shape 128,1,16384,64 --shape 128,16,4096,64 --shape 128,64,4096,1 --shape 128,64,4096,64,2,1 --shape 16,128,16384,64)
por=(--shape 128,1,16384,64 --shape 128,1,1024,64 --shape 128,16,4096,64 --shape 16,1,16384,64 --shape 16,16,4096,64)
for r in $(seq 1 $rounds); do
  for n in main once new; do
    step hopper_${n}_r$r 150 env $(kenv $n) prefix/bin/mlajit bench --kernel hopper "${hop[@]}" --csv $g/csv/hopper_${n}_r$r.csv
  done
  for n in main new; do
    step e4m3_${n}_r$r 150 env $(kenv $n) prefix/bin/mlajit bench --kernel hopper --kv-dtype e4m3 --shape 128,64,16384,64 --shape 128,128,1024,64 --shape 16,128,16384,64 --csv $g/csv/e4m3_${n}_r$r.csv
  done
  for n in main once; do
    step portable_${n}_r$r 150 env $(kenv $n) prefix/bin/mlajit bench --kernel portable "${por[@]}" --csv $g/csv/portable_${n}_r$r.csv
  done
done
for f in $L/hopper_*_r?.txt $L/e4m3_*_r?.txt $L/portable_*_r?.txt; do grep -E "^ *[0-9]+ +[0-9]+ " $f | sed "s/^/$(basename $f .txt) /" >> $log; done
if [[ $name == *H200* ]]; then
  step bench_auto 200 prefix/bin/mlajit bench --csv $g/csv/auto.csv
  step e4m3_16h 120 prefix/bin/mlajit bench --kv-dtype e4m3 --shape 16,128,16384,64 --shape 16,64,4096,64 --shape 16,128,4096,64,2,1 --csv $g/csv/e4m3_16h.csv
  step bf16_16h 120 prefix/bin/mlajit bench --shape 16,128,16384,64 --shape 16,64,4096,64 --shape 16,128,4096,64,2,1 --csv $g/csv/bf16_16h.csv
  for f in $L/bench_auto.txt $L/e4m3_16h.txt $L/bf16_16h.txt; do grep -E "^ *[0-9]+ +[0-9]+ " $f | sed "s/^/$(basename $f .txt) /" >> $log; done
fi
echo "--- $(date +%T) done" >> $log
