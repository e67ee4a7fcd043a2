# Sourced by the sitting scripts in tools/dev, from the folder they run in (carry/gpu, where
# scripts/prepare-gpu-sitting.sh copies this file): the step logger and variant environment
# they share.
# The caller sets $log (the summary file), $L (the folder of each step's full output) and, for
# kenv, $g (the sitting's folder); or calls begin_sitting, which sets them.

# step NAME SECONDS COMMAND...: runs COMMAND under a time limit into $L/NAME.txt and appends
# its exit status and summary line (Catch2, compute-sanitizer, mlajit verify, unittest) to $log.
step() {
  local name=$1 limit=$2; shift 2
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
