# Sourced by the sitting scripts in tools/dev, from the folder they run in (carry/gpu, where
# scripts/prepare-gpu-sitting.sh copies this file): the step logger and variant environment
# they share.
# The caller sets $log (the summary file), $L (the folder of each step's full output) and, for
# kenv, $g (the sitting's folder); or calls begin_sitting, which sets them.

# step NAME SECONDS COMMAND...: runs COMMAND under a time limit into $L/NAME.txt and appends
# its exit status and summary line (Catch2, compute-sanitizer, mlajit verify, unittest) to $log.
# With SITTING_DEADLINE (epoch seconds) set, a step gets at most the time left before it, and
# none once it has passed: the sitting then ends in time to pack its logs, where the device
# call's own limit would kill it (and its EXIT trap) mid-step.
step() {
  local name=$1 limit=$2; shift 2
  if [[ -n ${SITTING_DEADLINE:-} ]]; then
    local left=$((SITTING_DEADLINE - $(date +%s)))
    if ((left < 5)); then echo "$name skipped: the sitting's deadline has passed" | tee -a $log; return; fi
    ((limit > left)) && limit=$left
  fi
  echo "--- $(date +%T) $name" >> $log
  timeout $limit "$@" > $L/$name.txt 2>&1
  echo "$name rc=$? $(grep -E 'test cases|ERROR SUMMARY|RACECHECK SUMMARY|cases passed|^Ran|^OK|FAILED \(' $L/$name.txt | tail -1)" | tee -a $log
}

# kenv NAME: the environment of kernel variant NAME, for `env $(kenv NAME) COMMAND`: `main`, the
# kernels built into the library, or the copy of kernels/ in $g/NAME/kernels; each its own
# user cache, so that no variant loads another's cubins.
kenv() { [[ $1 == main ]] && echo "MLAJIT_CACHE_DIR=$g/uc-main" || echo "MLAJIT_KERNEL_DIR=$g/$1/kernels MLAJIT_CACHE_DIR=$g/uc-$1"; }

# The shapes the hopper A/B sittings time (H,B,L,page[,q_len,causal]): 128 heads long and short,
# page 1, speculative decode, 64 heads, and 16 heads long and speculative.
HOPPER_AB_SHAPES=(--shape 128,64,16384,64 --shape 128,128,16384,64 --shape 128,128,1024,64
                  --shape 128,16,4096,64 --shape 128,1,1024,64 --shape 128,64,4096,64,2,1
                  --shape 128,64,4096,1 --shape 64,64,16384,64 --shape 16,128,16384,64
                  --shape 16,128,4096,64,2,1)

# begin_sitting TAG, from the sitting's folder: $g (that folder), $RES ($OUT, else $g/out),
# $L and $C (folders logsTAG and csvTAG for each step's output and CSVs), $log ($RES/TAG.txt),
# both folders packed into $RES/TAG.tgz on exit, the installed library's environment, and the
# GPU's name and clocks as the summary's first line.
begin_sitting() {
  g=$PWD; RES=${OUT:-$g/out}; L=$g/logs$1; C=$g/csv$1; log=$RES/$1.txt
  mkdir -p "$RES" "$L" "$C"
  trap "tar -C $g -czf $RES/$1.tgz logs$1 csv$1 2>/dev/null" EXIT
  export LD_LIBRARY_PATH=$g/prefix/lib:/usr/local/cuda/lib64 MLAJIT_CACHE_PATH=$g/cache
  nvidia-smi --query-gpu=name,clocks.max.sm,temperature.gpu --format=csv,noheader | tee -a $log
}

# record_tree COMMAND...: this tree's record, each step run under COMMAND (e.g. env
# MLAJIT_CACHE_DIR=DIR): `mlajit verify`, `mlajit bench` on auto and per family over the default
# shapes, and e4m3 against bf16 at 16 and 128 heads, with their tables in $log. On an H200 the CLI
# adds the peers' ratios (the issues' one-run checks). Run from the sitting's folder (prefix/).
record_tree() {
  local B=prefix/bin/mlajit kv
  step verify 150 "$@" $B verify
  step auto 200 "$@" $B bench --csv $C/auto.csv
  step portable 200 "$@" $B bench --kernel portable --csv $C/portable.csv
  step hopper 200 "$@" $B bench --kernel hopper --csv $C/hopper.csv
  local S16=(--shape 16,128,16384,64 --shape 16,64,16384,64 --shape 16,128,4096,64
             --shape 16,64,4096,64 --shape 16,16,16384,64 --shape 16,16,4096,64)
  local S128=(--shape 128,64,16384,64 --shape 128,128,16384,64 --shape 128,128,1024,64
              --shape 128,64,4096,64)
  for kv in bf16 e4m3; do
    step k16_$kv 120 "$@" $B bench --kv-dtype $kv "${S16[@]}" --csv $C/k16_$kv.csv
    step k128_$kv 120 "$@" $B bench --kv-dtype $kv "${S128[@]}" --csv $C/k128_$kv.csv
  done
  python3 ./bench_table.py $C k16_ e4m3/bf16 >> $log 2>&1
  python3 ./bench_table.py $C k128_ e4m3/bf16 >> $log 2>&1
  python3 - "$C" >> $log <<'PY'
import csv, sys
for name in ("auto", "portable", "hopper"):
    print("===", name)
    for r in csv.DictReader(open(sys.argv[1] + "/" + name + ".csv")):
        print(*(r.get(k, "") for k in ("heads", "batch", "kv_len", "page", "q_len", "causal", "variant",
                                       "median_us", "gbps", "tflops", "vs_fa2", "vs_fa3", "vs_flashmla")))
PY
}

# on_h200: true when the sitting's GPU is an H200 (where the peers' figures were measured).
on_h200() { nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; }
