#!/usr/bin/env bash
# A/B/C timing of kernel variants with the order rotated each round (variant i first in round
# i), so that neither drift nor the variant before biases one of them. Each variant is
# `main` (the kernels built into the library) or a copy of kernels/ in carry/gpu/<name>/kernels.
# Prepare: scripts/prepare-gpu-sitting.sh carry/gpu; the variant folders; cp this file to
# carry/gpu/r.sh. Device call, carry ["carry/gpu"]:
#   [BENCH_EXTRA="--kernel hopper"] bash carry/gpu/r.sh ROUNDS NAME... -- SHAPE...
# Writes $OUT/r.txt (one line per variant, round and shape) and $OUT/r.tgz (logs).
cd "$(dirname "$0")"; g=$PWD
RES=${OUT:-$g/out}; L=$g/logs; mkdir -p "$RES" "$L"; log=$RES/r.txt
trap 'tar -C $g -czf $RES/r.tgz logs 2>/dev/null' EXIT
export LD_LIBRARY_PATH=$g/prefix/lib:/usr/local/cuda/lib64 MLAJIT_CACHE_PATH=$g/cache
rounds=$1; shift; names=(); while [[ $# -gt 0 && $1 != -- ]]; do names+=("$1"); shift; done; shift
args=(); for s in "$@"; do args+=(--shape "$s"); done
nvidia-smi --query-gpu=name,clocks.max.sm,temperature.gpu --format=csv,noheader | tee -a $log
source ./sitting-lib.sh  # step(), kenv()
n=${#names[@]}
for r in $(seq 0 $((rounds - 1))); do
  for i in $(seq 0 $((n - 1))); do
    v=${names[$(( (r + i) % n ))]}
    step ${v}_r$r 150 env $(kenv $v) prefix/bin/mlajit bench ${BENCH_EXTRA:---kernel hopper} "${args[@]}"
    grep -E "^ *[0-9]+ +[0-9]+ " $L/${v}_r$r.txt | sed "s/^/$v r$r /" >> $log
  done
done
echo "--- $(date +%T) done" >> $log
