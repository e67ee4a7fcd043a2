# Sourced by the sitting scripts in tools/dev, from the folder they run in (carry/gpu, where
# scripts/prepare-gpu-sitting.sh copies this file): the step logger and variant environment
# they share.
# The caller sets $log (the summary file), $L (the folder of each step's full output) and, for
# kenv, $g (the sitting's folder).

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
