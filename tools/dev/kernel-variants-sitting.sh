#!/usr/bin/env bash
# Kernel variants against main's kernels in one device call, on one build: each variant is a
# copy of kernels/ (carry/gpu/<name>/kernels, loaded through MLAJIT_KERNEL_DIR, JIT-compiled
# there), "main" the kernels built into the library. Per variant: the GPU suite forced to
# hopper (correctness), then `mlajit bench --kernel hopper` rounds over the shapes, the
# variants taking turns within each round.
# Prepare: scripts/prepare-gpu-sitting.sh carry/gpu; one carry/gpu/<name>/kernels per variant;
# cp this file to carry/gpu/v.sh. Device call, carry ["carry/gpu"]:
#   [BENCH_EXTRA="--kv-dtype e4m3"] [SUITE=0] bash carry/gpu/v.sh ROUNDS NAME... [-- SHAPE...]
# Writes $OUT/v.txt and $OUT/v.tgz (logs, CSVs).
cd "$(dirname "$0")"; g=$PWD
RES=${OUT:-$g/out}; L=$g/logs; mkdir -p "$RES" "$L" "$g/csv"; log=$RES/v.txt
trap 'tar -C $g -czf $RES/v.tgz logs csv 2>/dev/null' EXIT
export LD_LIBRARY_PATH=$g/prefix/lib:/usr/local/cuda/lib64 MLAJIT_CACHE_PATH=$g/cache
rounds=$1; shift; names=(); while [[ $# -gt 0 && $1 != -- ]]; do names+=("$1"); shift; done; shift
shapes=("$@"); [[ ${#shapes[@]} -eq 0 ]] && shapes=(128,64,16384,64 128,128,1024,64 128,64,4096,64,2,1 128,64,4096,64,4,1 64,64,16384,64 16,128,16384,64)
args=(); for s in "${shapes[@]}"; do args+=(--shape "$s"); done
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,temperature.gpu --format=csv,noheader | tee -a $log
source ./sitting-lib.sh  # step(), kenv()
for n in "${names[@]}"; do
  [[ $n == main || ${SUITE:-1} == 0 ]] && continue
  step suite_$n 150 env $(kenv $n) MLAJIT_TEST_KERNEL=hopper ./mlajit_gpu_tests
  grep -E "FAILED" -A3 $L/suite_$n.txt | head -8 >> $log
done
for r in $(seq 1 $rounds); do
  for n in "${names[@]}"; do
    step bench_${n}_r$r 150 env $(kenv $n) prefix/bin/mlajit bench --kernel hopper ${BENCH_EXTRA:-} "${args[@]}" --csv $g/csv/${n}_r$r.csv
    grep -E "^ *[0-9]+ +[0-9]+ " $L/bench_${n}_r$r.txt | sed "s/^/$n r$r /" >> $log
  done
done
echo "--- $(date +%T) done" >> $log
